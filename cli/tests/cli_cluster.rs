//! `drover server --peer ... --cluster-secret ...`: three real server processes form one
//! cluster over their Raft listeners, and a write on the leader is read on every server.

use crate::cli_support;

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
    // Started without names, each goes by its own: drover-<id>.
    let members = eventually("every member's name", DEADLINE, || async {
        let out = drover_at(&api[0], &["server", "members", "-json"]).await;
        let members: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        let mut names: Vec<String> = members
            .as_array()?
            .iter()
            .filter_map(|m| m["name"].as_str().map(String::from))
            .filter(|n| !n.is_empty())
            .collect();
        names.sort();
        (names.len() == 3).then_some(names)
    })
    .await;
    assert_eq!(members, ["drover-1", "drover-2", "drover-3"]);

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

/// Worker commands reach every server whichever one answers: `pause -all` sent to one
/// server pauses every server's workers, and `list -server-id N` sent to another server
/// answers N's workers.
#[tokio::test(flavor = "multi_thread")]
async fn worker_commands_reach_every_server() {
    let cluster = Three::start(SECRET).await;
    let api = &cluster.url;
    let list = |address: String, extra: Vec<&'static str>| async move {
        let mut args = vec!["operator", "workers", "list", "-json"];
        args.extend(extra);
        let out = drover_at(&address, &args).await;
        let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        Some(
            rows.as_array()?
                .iter()
                .map(|w| {
                    (
                        w["server_id"].as_str().unwrap_or_default().to_string(),
                        w["status"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect::<Vec<_>>(),
        )
    };
    // Every server's workers, from any server, once all three serve their API.
    eventually("all three servers' workers listed", DEADLINE, || async {
        let rows = list(api[0].clone(), vec![]).await?;
        let servers: std::collections::BTreeSet<_> = rows.iter().map(|(s, _)| s.clone()).collect();
        (servers.len() == 3).then_some(())
    })
    .await;
    let only_two = list(api[0].clone(), vec!["-server-id", "2"])
        .await
        .expect("a list");
    assert!(
        !only_two.is_empty() && only_two.iter().all(|(s, _)| s == "2"),
        "{only_two:?}"
    );

    let paused = drover_at(&api[0], &["operator", "workers", "pause", "-all"]).await;
    assert!(paused.status.success(), "{}", stdout(&paused));
    eventually("every server's workers paused", DEADLINE, || async {
        let rows = list(api[1].clone(), vec![]).await?;
        (rows.len() >= 3 && rows.iter().all(|(_, status)| status == "paused")).then_some(())
    })
    .await;
    let resumed = drover_at(&api[2], &["operator", "workers", "resume", "-all"]).await;
    assert!(resumed.status.success(), "{}", stdout(&resumed));
    eventually("every server's workers running again", DEADLINE, || async {
        let rows = list(api[0].clone(), vec![]).await?;
        (rows.len() >= 3 && rows.iter().all(|(_, status)| status == "started")).then_some(())
    })
    .await;
}

/// A c1m-shaped run against three servers (smaller, the same shape: many jobs of many
/// allocations at once, nodes heartbeating through it) ends with the leader it started
/// with, in the same term: the load never starves the leader's heartbeats to followers.
#[tokio::test(flavor = "multi_thread")]
async fn placements_under_load_keep_the_leader() {
    let cluster = Three::start(SECRET).await;
    let all = cluster.url.join(",");
    let term = |address: String| async move {
        let out = drover_at(&address, &["operator", "raft", "state", "-json"]).await;
        let state: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        state["term"].as_u64()
    };
    let leader_url = cluster.url[cluster.leader_at()].clone();
    // The run starts once the cluster has settled: every server follows the leader in one
    // term (three processes started together may still hold a second election at start).
    let term_before = eventually("every server on the leader's term", DEADLINE, || async {
        let mut terms = Vec::new();
        for address in &cluster.url {
            if cli_support::leader_seen_by(address).await.as_deref()
                != Some(cluster.leader.as_str())
            {
                return None;
            }
            terms.push(term(address.clone()).await?);
        }
        terms.windows(2).all(|w| w[0] == w[1]).then(|| terms[0])
    })
    .await;

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .env_remove("DROVER_ADDR")
        .args([
            "bench",
            "--address",
            &all,
            "--nodes",
            "200",
            "--jobs",
            "40",
            "--count",
            "50",
            "--json",
        ])
        .output()
        .await
        .expect("drover bench runs");
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["placed"], 2_000, "{report:#}");

    for address in &cluster.url {
        let seen = cli_support::leader_seen_by(address).await;
        assert_eq!(
            seen.as_deref(),
            Some(cluster.leader.as_str()),
            "at {address}"
        );
    }
    let term_after = term(leader_url).await.expect("the leader's term");
    assert_eq!(
        term_before, term_after,
        "an election happened during the run"
    );
}
