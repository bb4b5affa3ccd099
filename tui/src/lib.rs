//! drover's operator console: a live view of nodes by health, evaluations and why they are
//! pending, blocked evaluations, scheduler workers, jobs and their allocations, and the
//! event stream, with the operator's actions a key away.
//!
//! The parts, from the outside in:
//! - [`run`] takes over the terminal and wires the rest together;
//! - [`net`] holds the background tasks that talk gRPC to the servers and send
//!   [`app::Update`]s, failing over among the servers given;
//! - [`app::App`] is the whole state, changed only by [`app::App::handle`], which is pure;
//! - [`views`] are the components (one per view), [`ui`] draws a frame from the state.

pub mod app;
pub mod fixtures;
pub mod kinds;
pub mod model;
pub mod ui;
pub mod views;

pub mod net;

mod error;
mod terminal;

pub use drover_core as core;
pub use error::ConsoleError;

use app::{Action, App, Command, Input, Update};
use drover_core::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// At most this many frames per second are drawn, and only when something changed.
const FRAME_INTERVAL: Duration = Duration::from_millis(33);
/// Ages and time-left columns move on at this pace.
const CLOCK_INTERVAL: Duration = Duration::from_secs(1);
/// A view's rows are re-sorted from scratch for data changes at most this often (filter,
/// sort and keys apply at once; a few changed rows are re-placed every frame): under a
/// flood of events touching a large share of the rows, re-sorting 10,000 rows every frame
/// would use a core by itself, while a quarter second is still live to the eye.
const DATA_REFRESH: Duration = Duration::from_millis(250);
/// Updates applied between two frames at most, so a flood of events cannot starve keys.
const UPDATE_BATCH: usize = 512;

/// How to start the console.
#[derive(Clone, Debug)]
pub struct ConsoleOptions {
    /// A server's gRPC address, `host:port` or a URL; several servers of one cluster
    /// comma-separated, which the console fails over among.
    pub address: String,
    /// Hide and refuse every action: for watching a cluster without the risk of a stray key.
    pub read_only: bool,
    /// TLS towards the server (a CA turns it on; a certificate for servers that verify).
    pub tls: drover_proto::tls::TlsFiles,
    /// Capture the mouse (click rows and titles, scroll). Off by default: a captured mouse
    /// takes the terminal's own text selection, which operators use to copy ids and
    /// messages.
    pub mouse: bool,
    /// The ACL token's secret, sent with every call. A token that may do none of the
    /// console's actions makes the console read-only.
    pub token: Option<String>,
}

/// The wall clock, read only at the runtime's edges (ticks, arriving events).
fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    Timestamp::from_millis(ms)
}

/// Runs the console until `q` or ctrl-c. Takes over the terminal (alternate screen, raw
/// mode, the mouse if asked) and gives it back however this returns, panics included. A server that is
/// down or goes away is not an error: the console follows another listed server, or says
/// no server answers and reconnects by itself.
pub async fn run(options: ConsoleOptions) -> Result<(), ConsoleError> {
    let servers = net::Servers::new(&options.address, &options.tls, options.token.as_deref())?;
    let permissions = net::token_permissions(&servers.current().1.unary, [])
        .await
        .unwrap_or_default();
    let read_only = options.read_only || permissions.none();
    let mut session = terminal::Session::start(options.mouse)?;

    let (update_tx, mut updates) = mpsc::channel::<Update>(1_024);
    let (command_tx, mut commands) = mpsc::unbounded_channel::<Command>();
    let (input_tx, mut inputs) = mpsc::channel::<Input>(256);
    let stop_input = Arc::new(AtomicBool::new(false));
    let input_thread = terminal::spawn_input(input_tx, stop_input.clone());

    let follower = tokio::spawn(net::follow(servers.clone(), update_tx.clone()));
    let log_updates = update_tx.clone();
    let mut log_stream: Option<tokio::task::JoinHandle<()>> = None;
    let commander = {
        let servers = servers.clone();
        tokio::spawn(async move {
            while let Some(command) = commands.recv().await {
                let tx = update_tx.clone();
                let servers = servers.clone();
                tokio::spawn(async move {
                    for update in net::execute(&servers, command).await {
                        if tx.send(update).await.is_err() {
                            return;
                        }
                    }
                });
            }
        })
    };

    let mut app = App::new(servers.address(), read_only, now());
    app.permissions = permissions;
    app.clock_offset = chrono::Local::now().offset().local_minus_utc();
    let size = session.terminal.size()?;
    app.handle(Input::Resize {
        width: size.width,
        height: size.height,
    });
    let theme = ui::Theme::from_env();
    let mut frames = tokio::time::interval(FRAME_INTERVAL);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut clock = tokio::time::interval(CLOCK_INTERVAL);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let mut last_refresh = Instant::now();
    let result = loop {
        let action = tokio::select! {
            input = inputs.recv() => match input {
                Some(input) => app.handle(input),
                // The input thread ended: the terminal is gone.
                None => break Ok(()),
            },
            Some(update) = updates.recv() => {
                app.handle(Input::Update(update));
                for _ in 0..UPDATE_BATCH {
                    match updates.try_recv() {
                        Ok(update) => { app.handle(Input::Update(update)); }
                        Err(_) => break,
                    }
                }
                Action::None
            }
            _ = clock.tick() => app.handle(Input::Tick(now())),
            _ = frames.tick() => {
                let rebuild = app.needs_full_rebuild();
                if app.dirty && (!rebuild || last_refresh.elapsed() >= DATA_REFRESH) {
                    if rebuild {
                        last_refresh = Instant::now();
                    }
                    app.prepare_frame();
                    if let Err(e) = session.terminal.draw(|frame| ui::draw(frame, &app, &theme)) {
                        break Err(ConsoleError::Terminal(e));
                    }
                    app.dirty = false;
                }
                Action::None
            }
        };
        match action {
            Action::None => {}
            Action::Quit => break Ok(()),
            Action::Run(command) => {
                if command_tx.send(command).is_err() {
                    tracing::warn!("command task ended; command dropped");
                }
            }
            Action::Copy(text) => {
                if let Err(error) = session.copy(&text) {
                    tracing::warn!(%error, "copying to the clipboard failed");
                }
            }
            Action::StreamLogs(target) => {
                if let Some(old) = log_stream.take() {
                    old.abort();
                }
                let stream = net::logs::stream(servers.clone(), target, log_updates.clone());
                log_stream = Some(tokio::spawn(stream));
            }
            Action::StopLogs => {
                if let Some(old) = log_stream.take() {
                    old.abort();
                }
            }
        }
    };
    if let Some(stream) = log_stream {
        stream.abort();
    }

    follower.abort();
    commander.abort();
    stop_input.store(true, Ordering::Relaxed);
    drop(inputs);
    drop(session);
    if input_thread.join().is_err() {
        tracing::warn!("the terminal input thread panicked");
    }
    result
}
