//! The console given three servers of one cluster, against stand-in servers it follows
//! through its real background tasks (`net::follow`, `net::execute`): when the server it
//! follows dies it carries on with another at once, resumes the event stream where it
//! stopped (no reload), names the new leader as soon as the servers do, and never says the
//! connection is lost while a listed server answers. Workers are listed from every server.

mod support {
    pub mod console;
    #[allow(dead_code)]
    pub mod fake_cluster;
    #[allow(dead_code)]
    pub mod fake_servers;
    #[allow(dead_code)]
    pub mod screen;
}

use drover_tui::app::{App, Command, Connection};
use drover_tui::model::WorkerStatusLabel;
use drover_tui::ui::Theme;
use std::time::Duration;
use support::console::{Console, DEADLINE};
use support::fake_servers::FakeServers;
use support::screen::{keys, screen};

fn node_named(app: &App, name: &str) -> bool {
    app.cluster.nodes.values().any(|n| n.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_another_server_when_its_server_dies() {
    let mut cluster = FakeServers::start(3);
    let mut console = Console::start(&cluster.address());
    console
        .until("a load from the first server", DEADLINE, |app| {
            app.connection == Connection::Connected && app.cluster.info.leader_id == "1"
        })
        .await;
    assert_eq!(
        console.app.serving.as_deref(),
        Some(cluster.urls[0].as_str())
    );
    cluster.register_node("before", 10);
    console
        .until("the first event", DEADLINE, |app| node_named(app, "before"))
        .await;

    // The leader, which the console follows, dies; the others elect server 2 and the
    // cluster goes on.
    cluster.kill(0);
    cluster.elect("2");
    let header = console
        .until("the new leader in the header", DEADLINE, |app| {
            app.cluster.info.leader_id == "2"
        })
        .await;
    cluster.register_node("after", 11);
    console
        .until("the event after the failover", DEADLINE, |app| {
            node_named(app, "after")
        })
        .await;
    let text = screen(&mut console.app, Theme { color: false });
    eprintln!("the console named the new leader {header:?} after the election");
    assert!(
        header < Duration::from_secs(3),
        "the new leader took {header:?} to reach the header\n{text}"
    );
    assert!(console.lost.is_empty(), "said lost: {:?}", console.lost);
    assert_eq!(console.loads, 1, "the stream was resumed, not reloaded");
    assert_eq!(
        console.app.serving.as_deref(),
        Some(cluster.urls[1].as_str())
    );
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains("leader 2"), "{first}");
    let footer = text.lines().last().unwrap_or_default();
    assert!(
        footer.starts_with(&format!(" ● {} │", cluster.urls[1])),
        "{footer}"
    );
    assert!(text.contains("stopped answering: following"), "{text}");
    // Both events are there, once each.
    assert!(node_named(&console.app, "before") && node_named(&console.app, "after"));

    // The workers of the servers that answer; server 1's are gone with it.
    console
        .until("the surviving servers' workers", DEADLINE, |app| {
            let servers: Vec<&str> = app.cluster.workers.iter().map(|w| &*w.server_id).collect();
            servers == ["2", "2", "3", "3"]
        })
        .await;

    // A call that hangs (a follower passing it on to a leader that is gone) holds nothing
    // back: the next leader still reaches the header at once.
    cluster.stall_workers();
    cluster.elect("3");
    let header = console
        .until("the next leader in the header", DEADLINE, |app| {
            app.cluster.info.leader_id == "3"
        })
        .await;
    assert!(header < Duration::from_secs(3), "{header:?}");

    // With every server gone, the connection is lost, and said so.
    cluster.kill(1);
    cluster.kill(2);
    console
        .until("the connection lost", DEADLINE, |app| {
            matches!(app.connection, Connection::Lost { .. })
        })
        .await;
}

/// A paused pool of one server (as `operator workers pause -all` sent to it leaves it)
/// reads paused in the console whichever server the console follows, beside the other
/// servers' running workers; `:workers pause` then pauses every listed server's pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_of_every_listed_server_are_listed_and_paused() {
    let cluster = FakeServers::start(3);
    cluster.pause_pool("2");
    let mut console = Console::start(&cluster.address());
    let status = |app: &App, server: &str| -> Vec<WorkerStatusLabel> {
        let workers = app.cluster.workers.iter();
        workers
            .filter(|w| w.server_id == server)
            .map(|w| w.status)
            .collect()
    };
    console
        .until("every server's workers", DEADLINE, |app| {
            app.cluster.workers.len() == 6
        })
        .await;
    use WorkerStatusLabel::{Paused, Started};
    assert_eq!(status(&console.app, "1"), [Started, Started]);
    assert_eq!(status(&console.app, "2"), [Paused, Paused]);
    keys(&mut console.app, ":workers\n");
    let text = screen(&mut console.app, Theme { color: false });
    assert!(text.contains("2 of 6 workers paused"), "{text}");

    console.run(Command::PauseAllWorkers).await;
    let said = console
        .app
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert_eq!(said, "pausing 6 worker(s) on 3 of 3 server(s)");
    for server in ["1", "2", "3"] {
        assert_eq!(
            status(&console.app, server),
            [Paused, Paused],
            "server {server}"
        );
    }
}
