//! `drover server --peer ... --cluster-secret ...`: three real server processes form one
//! cluster over their Raft listeners, and a write on the leader is read on every server.

mod cli_support;

use cli_support::{Three, drover_at, stdout};
use drover_tests::{DEADLINE, eventually};

const SECRET: &str = "test-cluster-secret-0123";

#[tokio::test(flavor = "multi_thread")]
async fn three_server_processes_form_a_cluster() {
    let cluster = Three::start(SECRET).await;
    let api = &cluster.url;

    // Every server lists all three, one of them the leader.
    for address in api {
        eventually("three members with a leader", DEADLINE, || async {
            let out = drover_at(address, &["server", "members"]).await;
            let text = stdout(&out);
            let rows = text.lines().skip(1).count();
            let leaders = text.lines().filter(|l| l.contains("leader")).count();
            (out.status.success() && rows == 3 && leaders == 1).then_some(())
        })
        .await;
    }

    // A write goes through on whichever server leads, and every server reads it.
    eventually("a write on the leader", DEADLINE, || async {
        for address in api {
            let out = drover_at(
                address,
                &[
                    "operator",
                    "scheduler",
                    "set-config",
                    "-scheduler-algorithm=spread",
                ],
            )
            .await;
            if out.status.success() {
                return Some(());
            }
        }
        None
    })
    .await;
    for address in api {
        eventually("the write replicated", DEADLINE, || async {
            let out = drover_at(address, &["operator", "scheduler", "get-config", "-json"]).await;
            stdout(&out).contains("\"Spread\"").then_some(())
        })
        .await;
    }
}
