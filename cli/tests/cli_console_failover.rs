//! The console against three real `drover server` processes, given all three addresses
//! as an operator gives them (`DROVER_ADDR`): it follows the leader, the leader is killed
//! (SIGKILL), and the console names the new leader within 3 s of `drover server members`,
//! never saying the connection is lost, and goes on with the event stream. Its workers
//! view reads what `operator workers list` reads. The console's state and its real
//! background tasks are driven without a terminal.

use crate::cli_support;

use cli_support::{Three, drover_at, leader_seen_by, stdout};
use drover_tests::DEADLINE;
use drover_tui::app::{App, Connection, Input, Update};
use drover_tui::model::WorkerStatusLabel;
use drover_tui::net::{Servers, follow};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const SECRET: &str = "test-cluster-secret-0123";

/// The console's state, fed by its follower, with every lost connection it was told of.
struct Console {
    app: App,
    updates: mpsc::Receiver<Update>,
    lost: Vec<String>,
}

impl Console {
    /// Applies what has arrived, waiting at most `wait` for the first of it.
    async fn pump(&mut self, wait: Duration) {
        if let Ok(Some(update)) = tokio::time::timeout(wait, self.updates.recv()).await {
            self.take(update);
            while let Ok(update) = self.updates.try_recv() {
                self.take(update);
            }
        }
    }

    fn take(&mut self, update: Update) {
        if let Update::Connection(Connection::Lost { reason, .. }) = &update {
            self.lost.push(reason.clone());
        }
        self.app.handle(Input::Update(update));
    }

    async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        let started = Instant::now();
        while !done(&self.app) {
            assert!(
                started.elapsed() < DEADLINE,
                "no {what}: {:?}",
                self.app.cluster.info
            );
            self.pump(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_names_the_new_leader_as_soon_as_the_cli() {
    let mut cluster = Three::start(SECRET).await;
    let (url, leader, leader_at) = (
        cluster.url.clone(),
        cluster.leader.clone(),
        cluster.leader_at(),
    );
    let survivor = &url[(leader_at + 1) % 3];

    // The leader first in the list: the console follows it.
    let mut listed = vec![url[leader_at].clone()];
    listed.extend((0..3).filter(|i| *i != leader_at).map(|i| url[i].clone()));
    let address = listed.join(",");
    let link = Servers::new(&address, &Default::default(), None).expect("valid addresses");
    let (tx, updates) = mpsc::channel(1_024);
    let follower = tokio::spawn(follow(link.clone(), tx));
    let mut console = Console {
        app: App::new(link.address(), false, drover_tui::fixtures::now()),
        updates,
        lost: Vec::new(),
    };
    console
        .until("the leader in the header", |app| {
            app.connection == Connection::Connected && app.cluster.info.leader_id == leader
        })
        .await;
    assert_eq!(
        console.app.serving.as_deref(),
        Some(url[leader_at].as_str())
    );

    // Its workers read as `operator workers list` on the same server reads them.
    let out = drover_at(survivor, &["operator", "workers", "pause", "-all"]).await;
    assert!(out.status.success(), "{}", stdout(&out));
    let survivor_id = ((leader_at + 1) % 3 + 1).to_string();
    console
        .until("the paused workers the CLI paused", |app| {
            let theirs = app
                .cluster
                .workers
                .iter()
                .filter(|w| w.server_id == survivor_id);
            let statuses: Vec<_> = theirs.map(|w| w.status).collect();
            !statuses.is_empty() && statuses.iter().all(|s| *s == WorkerStatusLabel::Paused)
        })
        .await;
    let out = drover_at(survivor, &["operator", "workers", "resume", "-all"]).await;
    assert!(out.status.success(), "{}", stdout(&out));

    drop(cluster.servers[leader_at].take());
    let killed = Instant::now();
    // The CLI's view and the console's, side by side.
    let (mut cli, mut shown) = (None, None);
    while cli.is_none() || shown.is_none() {
        assert!(
            killed.elapsed() < DEADLINE,
            "no new leader: cli {cli:?}, console {shown:?}"
        );
        if cli.is_none()
            && let Some(seen) = leader_seen_by(survivor).await
            && seen != leader
        {
            cli = Some(killed.elapsed());
        }
        console.pump(Duration::from_millis(50)).await;
        let header = &console.app.cluster.info.leader_id;
        if shown.is_none() && !header.is_empty() && *header != leader {
            shown = Some(killed.elapsed());
        }
    }
    let (cli, shown) = (cli.unwrap_or_default(), shown.unwrap_or_default());
    eprintln!("new leader named by the CLI after {cli:?}, by the console after {shown:?}");
    assert!(
        shown <= cli + Duration::from_secs(3),
        "the console named the new leader {shown:?} after the kill, the CLI {cli:?}"
    );
    assert!(console.lost.is_empty(), "said lost: {:?}", console.lost);
    assert_ne!(
        console.app.serving.as_deref(),
        Some(url[leader_at].as_str())
    );

    // The event stream goes on: a job registered now shows.
    let dir = tempfile::tempdir().unwrap();
    let file = cli_support::write_job(dir.path(), "after-failover", 1);
    let out = drover_at(survivor, &["job", "run", "-detach", file.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", stdout(&out));
    console
        .until("the job registered after the failover", |app| {
            app.cluster
                .jobs
                .keys()
                .any(|k| k.id.as_str() == "after-failover")
        })
        .await;
    assert!(console.lost.is_empty(), "said lost: {:?}", console.lost);
    follower.abort();
    drop(cluster);
}
