//! An [`App`] fed by the console's real background tasks (`net::follow`, `net::execute`)
//! as the runtime feeds it, without a terminal: what the tests against stand-in servers
//! drive and read.

use super::screen::screen;
use drover_proto::tls::TlsFiles;
use drover_tui::app::{App, Command, Connection, Input, Update};
use drover_tui::net::{Servers, execute, follow};
use drover_tui::ui::Theme;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Long enough for anything that works to happen on a busy machine.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// An app fed by the follower, counting what it was told.
pub struct Console {
    pub app: App,
    updates: mpsc::Receiver<Update>,
    follower: tokio::task::JoinHandle<()>,
    servers: Servers,
    /// Every `Connection::Lost` the follower sent.
    pub lost: Vec<String>,
    /// Full loads applied.
    pub loads: usize,
}

impl Console {
    /// Follows the servers of `address` in plain gRPC.
    pub fn start(address: &str) -> Self {
        Self::start_with(address, &TlsFiles::default())
    }

    /// Follows the servers of `address`, with `tls`.
    pub fn start_with(address: &str, tls: &TlsFiles) -> Self {
        let servers = Servers::new(address, tls, None).expect("valid addresses");
        let (tx, updates) = mpsc::channel(1_024);
        let follower = tokio::spawn(follow(servers.clone(), tx));
        let mut app = App::new(servers.address(), false, drover_tui::fixtures::now());
        app.handle(Input::Resize {
            width: 120,
            height: 30,
        });
        Console {
            app,
            updates,
            follower,
            servers,
            lost: Vec::new(),
            loads: 0,
        }
    }

    fn take(&mut self, update: Update) {
        match &update {
            Update::Connection(Connection::Lost { reason, .. }) => self.lost.push(reason.clone()),
            Update::Snapshot(_) => self.loads += 1,
            _ => {}
        }
        self.app.handle(Input::Update(update));
    }

    /// Applies updates until `done` holds, failing after `within`; returns how long it took.
    pub async fn until(
        &mut self,
        what: &str,
        within: Duration,
        done: impl Fn(&App) -> bool,
    ) -> Duration {
        let started = Instant::now();
        while !done(&self.app) {
            let left = within.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, self.updates.recv()).await {
                Ok(Some(update)) => self.take(update),
                Ok(None) => panic!("the follower ended before {what}"),
                Err(_) => panic!(
                    "no {what} within {within:?}; lost: {:?}\n{}",
                    self.lost,
                    screen(&mut self.app, Theme { color: false })
                ),
            }
        }
        started.elapsed()
    }

    /// Carries out `command` as the console's command task does.
    pub async fn run(&mut self, command: Command) {
        for update in execute(&self.servers, command).await {
            self.take(update);
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.follower.abort();
    }
}
