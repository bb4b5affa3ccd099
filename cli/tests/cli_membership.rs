//! Changing the cluster while it serves: three real server processes form a cluster with
//! `--bootstrap-expect 3 --join ...`; a fourth joins with `--join` and becomes a voter;
//! leadership is handed to it and a server is removed; a server killed (SIGKILL) while
//! the others write past a snapshot restarts and catches up from the leader's snapshot,
//! since the entries it lacks are gone from every log. Registrations go on throughout and
//! every acknowledged job is on every server at the end.

use crate::cli_support;

use cli_support::{Running, drover_at, free_ports, json, spawn, stderr, stdout, write_job};
use drover_tests::{DEADLINE, eventually};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const SECRET: &str = "test-cluster-secret-0123";

/// Small snapshots and short kept logs, so a server down for a few dozen writes can only
/// catch up from a snapshot.
const CONFIG: &str = "raft {\n  snapshot_every = 20\n  logs_kept_after_snapshot = 5\n}\n";

struct Cluster {
    api: Vec<String>,
    raft: Vec<String>,
    dirs: Vec<tempfile::TempDir>,
    config: std::path::PathBuf,
}

impl Cluster {
    fn url(&self, i: usize) -> String {
        format!("http://{}", self.api[i])
    }

    /// Starts server `i` (id `i + 1`) with `extra` flags (how it finds the cluster).
    fn start(&self, i: usize, extra: &[String]) -> Running {
        let id = (i + 1).to_string();
        let name = format!("s{id}");
        let dir = self.dirs[i].path().to_str().unwrap().to_string();
        let config = self.config.to_str().unwrap().to_string();
        let mut args: Vec<&str> = vec![
            "server",
            "--config",
            &config,
            "--server-id",
            &id,
            "--name",
            &name,
            "--data-dir",
            &dir,
            "--bind",
            &self.api[i],
            "--raft-addr",
            &self.raft[i],
            "--cluster-secret",
            SECRET,
            "--no-metrics",
        ];
        args.extend(extra.iter().map(String::as_str));
        spawn(&self.api[i], &args)
    }
}

/// `operator raft list-peers` as the server at `url` answers it (through the leader).
async fn peers(url: &str) -> Option<Vec<serde_json::Value>> {
    let out = drover_at(url, &["operator", "raft", "list-peers", "-json"]).await;
    out.status.success().then_some(())?;
    serde_json::from_str::<serde_json::Value>(&stdout(&out))
        .ok()?
        .as_array()
        .cloned()
}

/// The voters' ids and the leader's id, once every listed peer is reachable.
async fn voters_and_leader(url: &str) -> Option<(Vec<u64>, u64)> {
    let peers = peers(url).await?;
    peers.iter().all(|p| p["reachable"] == true).then_some(())?;
    let voters = peers
        .iter()
        .filter(|p| p["voter"] == true)
        .filter_map(|p| p["id"].as_u64())
        .collect();
    let leader = peers
        .iter()
        .find(|p| p["state"] == "leader")?
        .get("id")?
        .as_u64()?;
    Some((voters, leader))
}

/// `operator raft state` of the server at `url` itself.
async fn raft_state(url: &str) -> Option<serde_json::Value> {
    let out = drover_at(url, &["operator", "raft", "state", "-json"]).await;
    out.status.success().then_some(())?;
    serde_json::from_str(&stdout(&out)).ok()
}

async fn index(url: &str, field: &str) -> Option<u64> {
    raft_state(url).await?[field].as_u64()
}

/// Job registrations through `target` (each acknowledged id recorded) until stopped.
fn keep_registering(
    target: Arc<Mutex<String>>,
    dir: &Path,
) -> (
    Arc<Mutex<Vec<String>>>,
    Arc<AtomicBool>,
    tokio::task::JoinHandle<()>,
) {
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let task = {
        let (acked, stop, dir) = (acked.clone(), stop.clone(), dir.to_path_buf());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let id = format!("job-{n}");
                let file = write_job(&dir, &id, 1);
                let url = target.lock().unwrap().clone();
                let out = drover_at(&url, &["job", "run", "-detach", file.to_str().unwrap()]).await;
                if out.status.success() {
                    acked.lock().unwrap().push(id);
                    n += 1;
                }
            }
        })
    };
    (acked, stop, task)
}

async fn acked_grows(acked: &Arc<Mutex<Vec<String>>>, by: usize, what: &str) {
    let before = acked.lock().unwrap().len();
    eventually(what, DEADLINE, || async {
        (acked.lock().unwrap().len() >= before + by).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_join_leave_and_catch_up_while_the_cluster_serves() {
    let ports = free_ports(8);
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("server.hcl");
    std::fs::write(&config, CONFIG).unwrap();
    let cluster = Cluster {
        api: (0..4).map(|i| format!("127.0.0.1:{}", ports[i])).collect(),
        raft: (0..4)
            .map(|i| format!("127.0.0.1:{}", ports[4 + i]))
            .collect(),
        dirs: (0..4).map(|_| tempfile::tempdir().unwrap()).collect(),
        config,
    };
    let join_others = |i: usize| -> Vec<String> {
        let mut flags = vec!["--bootstrap-expect".to_string(), "3".to_string()];
        for (j, addr) in cluster.raft.iter().take(3).enumerate() {
            if j != i {
                flags.extend(["--join".to_string(), addr.clone()]);
            }
        }
        flags
    };

    // Three servers find each other and form one cluster; the lowest id forms it.
    let mut servers: Vec<Option<Running>> = (0..3)
        .map(|i| Some(cluster.start(i, &join_others(i))))
        .collect();
    let (voters, _) = eventually("three voters", DEADLINE, || async {
        voters_and_leader(&cluster.url(2))
            .await
            .filter(|(v, _)| v.len() == 3)
    })
    .await;
    assert_eq!(voters, vec![1, 2, 3]);

    let jobs_dir = tempfile::tempdir().unwrap();
    let target = Arc::new(Mutex::new(cluster.url(2)));
    let (acked, stop, register) = keep_registering(target.clone(), jobs_dir.path());
    acked_grows(&acked, 3, "registrations on the new cluster").await;

    // A fourth server joins through server 2 and becomes a voter.
    servers.push(Some(
        cluster.start(3, &["--join".to_string(), cluster.raft[1].clone()]),
    ));
    eventually("four voters", DEADLINE, || async {
        voters_and_leader(&cluster.url(0))
            .await
            .filter(|(v, _)| v == &[1, 2, 3, 4])
    })
    .await;
    acked_grows(&acked, 3, "registrations after the fourth joined").await;

    // Leadership goes to server 4; then server 1 leaves.
    let out = drover_at(
        &cluster.url(0),
        &["operator", "raft", "transfer-leadership", "--peer-id", "4"],
    )
    .await;
    assert!(
        out.status.success(),
        "transfer: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let (_, leader) = voters_and_leader(&cluster.url(1)).await.expect("peers");
    assert_eq!(leader, 4, "after the transfer");
    let out = drover_at(
        &cluster.url(3),
        &["operator", "raft", "remove-peer", "--peer-id", "1"],
    )
    .await;
    assert!(
        out.status.success(),
        "remove: {}{}",
        stdout(&out),
        stderr(&out)
    );
    eventually("server 1 gone", DEADLINE, || async {
        voters_and_leader(&cluster.url(1))
            .await
            .filter(|(v, _)| v == &[2, 3, 4])
    })
    .await;
    drop(servers[0].take());
    acked_grows(&acked, 3, "registrations after server 1 left").await;

    // A client that knows several servers moves past the one that is gone.
    let several = format!("{},{}", cluster.url(0), cluster.url(1));
    let out = drover_at(&several, &["operator", "raft", "list-peers", "-json"]).await;
    let listed = json(&out);
    assert_eq!(listed.as_array().map(Vec::len), Some(3), "{listed}");

    // Server 3 is killed; the others write on until their logs no longer hold what it
    // lacks, so only a snapshot can bring it back.
    let last_before_kill = index(&cluster.url(2), "last_log_index")
        .await
        .expect("server 3's raft state");
    drop(servers[2].take());
    *target.lock().unwrap() = cluster.url(1);
    let leader_url = cluster.url(3);
    let purged = eventually(
        "the leader's log purged past server 3",
        DEADLINE,
        || async {
            let purged = index(&leader_url, "purged_index").await?;
            (purged > last_before_kill + 5).then_some(purged)
        },
    )
    .await;
    servers[2] = Some(cluster.start(2, &join_others(2)));
    let leader_applied = index(&leader_url, "applied_index")
        .await
        .expect("leader state");
    let caught_up = eventually("server 3 caught up from a snapshot", DEADLINE, || async {
        let state = raft_state(&cluster.url(2)).await?;
        let applied = state["applied_index"].as_u64()?;
        let snapshot = state["snapshot_index"].as_u64()?;
        (applied >= leader_applied && snapshot >= purged).then_some(state)
    })
    .await;
    eprintln!(
        "server 3 was at {last_before_kill}, the leader purged to {purged}; it restarted and caught up: {caught_up}"
    );
    acked_grows(&acked, 2, "registrations after server 3 came back").await;
    stop.store(true, Ordering::SeqCst);
    register.await.unwrap();

    // Every acknowledged job is on every remaining server, read from its own state.
    let acked = acked.lock().unwrap().clone();
    for i in 1..4 {
        let url = cluster.url(i);
        let last = acked.last().unwrap().clone();
        eventually("the last job replicated", DEADLINE, || async {
            let out = drover_at(&url, &["job", "status", "-json"]).await;
            let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
            listed
                .as_array()?
                .iter()
                .any(|j| j["id"] == last.as_str())
                .then_some(())
        })
        .await;
        let listed = json(&drover_at(&url, &["job", "status", "-json"]).await);
        let ids: Vec<&str> = listed
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|j| j["id"].as_str())
            .collect();
        for id in &acked {
            assert!(ids.contains(&id.as_str()), "server {} lacks {id}", i + 1);
        }
    }
    drop(servers);
}
