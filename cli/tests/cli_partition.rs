//! A partitioned leader, from the binary (issue 29, item 0): three `drover server`
//! processes, each in its own network namespace behind a bridge; simulated nodes and a
//! client in the root namespace reach all three. The leader's links to both followers drop
//! every packet for 20 s. No node may be marked down, the old leader must stop answering
//! as leader, and every acknowledged write must be on all three servers once it heals.
//!
//! Needs root and iproute2/iptables (CI installs them): without them the test fails,
//! saying so, rather than passing without running.

use crate::cli_support;

use cli_support::{Running, drover_at, leader_seen_by, spawn, stdout};
use drover_tests::{DEADLINE, eventually};
use std::process::Command;
use std::time::{Duration, Instant};

const SECRET: &str = "test-cluster-secret-0123";

/// Runs `cmd` (a program and its arguments), failing the test with its output if it fails.
fn run(cmd: &[&str]) {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .unwrap_or_else(|e| {
            panic!("{cmd:?} does not run ({e}): this test needs root, iproute2 and iptables")
        });
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}\nthis test needs root, iproute2 and iptables",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Three network namespaces on one bridge: server `i` (1..=3) at `10.<net>.0.<i>`, the
/// root namespace at `.254`. Removed on drop.
struct Hosts {
    tag: String,
    net: u8,
}

impl Hosts {
    fn new() -> Hosts {
        let pid = std::process::id();
        let tag = format!("dp{}", pid % 100_000);
        let net = 100 + (pid % 100) as u8;
        let hosts = Hosts { tag, net };
        let br = hosts.bridge();
        run(&["ip", "link", "add", &br, "type", "bridge"]);
        run(&[
            "ip",
            "addr",
            "add",
            &format!("10.{net}.0.254/24"),
            "dev",
            &br,
        ]);
        run(&["ip", "link", "set", &br, "up"]);
        // Bridged packets pass the root namespace's FORWARD chain when br_netfilter is
        // loaded, where a container engine's rules may drop them: let this bridge's pass.
        run(&[
            "iptables", "-I", "FORWARD", "-i", &br, "-o", &br, "-j", "ACCEPT",
        ]);
        for i in 1..=3 {
            let ns = hosts.ns(i);
            let (outer, inner) = (format!("{}o{i}", hosts.tag), format!("{}i{i}", hosts.tag));
            run(&["ip", "netns", "add", &ns]);
            run(&[
                "ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ]);
            run(&["ip", "link", "set", &inner, "netns", &ns]);
            run(&["ip", "link", "set", &outer, "master", &br, "up"]);
            run(&[
                "ip",
                "netns",
                "exec",
                &ns,
                "ip",
                "addr",
                "add",
                &format!("{}/24", hosts.ip(i)),
                "dev",
                &inner,
            ]);
            run(&[
                "ip", "netns", "exec", &ns, "ip", "link", "set", &inner, "up",
            ]);
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        }
        hosts
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.tag)
    }

    fn ip(&self, i: usize) -> String {
        format!("10.{}.0.{i}", self.net)
    }

    /// Drops every packet between server `i` and the other servers (both ways); clients
    /// in the root namespace still reach it.
    fn cut(&self, i: usize) {
        let ns = self.ns(i);
        for j in (1..=3).filter(|j| *j != i) {
            let peer = self.ip(j);
            run(&[
                "ip", "netns", "exec", &ns, "iptables", "-A", "INPUT", "-s", &peer, "-j", "DROP",
            ]);
            run(&[
                "ip", "netns", "exec", &ns, "iptables", "-A", "OUTPUT", "-d", &peer, "-j", "DROP",
            ]);
        }
    }

    fn heal(&self, i: usize) {
        run(&["ip", "netns", "exec", &self.ns(i), "iptables", "-F"]);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 1..=3 {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(i)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .status();
    }
}

/// Whether server `url` answers a leader-only call (the broker's numbers) as leader.
async fn acts_as_leader(url: &str) -> bool {
    use drover_proto::v1::eval_service_client::EvalServiceClient;
    let Ok(mut client) = EvalServiceClient::connect(url.to_string()).await else {
        return false;
    };
    let call = client.broker_stats(drover_proto::v1::BrokerStatsRequest {});
    matches!(
        tokio::time::timeout(Duration::from_secs(2), call).await,
        Ok(Ok(_))
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partitioned_leader_stops_leading_and_no_node_is_marked_down() {
    let hosts = Hosts::new();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let url: Vec<String> = (1..=3)
        .map(|i| format!("http://{}:4647", hosts.ip(i)))
        .collect();
    let peers: Vec<String> = (1..=3)
        .map(|i| format!("{i}={}:4648", hosts.ip(i)))
        .collect();
    let bin = env!("CARGO_BIN_EXE_drover");
    let _servers: Vec<Running> = (1..=3)
        .map(|i| {
            let id = i.to_string();
            let bind = format!("{}:4647", hosts.ip(i));
            let raft = format!("{}:4648", hosts.ip(i));
            let dir = dirs[i - 1].path().to_str().unwrap().to_string();
            let ns = hosts.ns(i);
            let mut args = vec![
                "netns",
                "exec",
                ns.as_str(),
                bin,
                "server",
                "--server-id",
                &id,
                "--bind",
                &bind,
                "--raft-addr",
                &raft,
                "--data-dir",
                &dir,
                "--cluster-secret",
                SECRET,
                "--no-metrics",
            ];
            for p in &peers {
                args.extend(["--peer", p.as_str()]);
            }
            let mut child = Command::new("ip");
            child
                .args(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            cli_support::running(child.spawn().expect("ip netns exec runs"))
        })
        .collect();
    let all = url.join(",");
    let leader = eventually("a leader", DEADLINE, || leader_seen_by(&url[0])).await;
    let _nodes = spawn(&all, &["agent", "--simulate", "30", "--servers", &all]);
    eventually("30 healthy nodes", DEADLINE, || async {
        let out = drover_at(&all, &["node", "status", "-json"]).await;
        let nodes: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        let ready = nodes
            .as_array()?
            .iter()
            .filter(|n| n["node"]["status"] == "Ready")
            .count();
        (ready == 30).then_some(())
    })
    .await;

    // Writes through every server, before, during and after the cut.
    let dir = tempfile::tempdir().unwrap();
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (acked, writing, all) = (acked.clone(), writing.clone(), all.clone());
        let dir = dir.path().to_path_buf();
        tokio::spawn(async move {
            let mut n = 0;
            while writing.load(std::sync::atomic::Ordering::SeqCst) {
                let id = format!("job-{n}");
                n += 1;
                let file = cli_support::write_mock_job(&dir, &id);
                let out = drover_at(&all, &["job", "run", "-detach", file.to_str().unwrap()]).await;
                if out.status.success() {
                    acked.lock().unwrap().push(id);
                }
            }
        })
    };

    let at: usize = leader.parse().expect("a numeric id");
    let cut_at = Instant::now();
    hosts.cut(at);
    let others: Vec<&String> = (1..=3).filter(|i| *i != at).map(|i| &url[i - 1]).collect();
    let new_leader = eventually("a new leader", DEADLINE, || async {
        let seen = leader_seen_by(others[0]).await?;
        (seen != leader).then_some(seen)
    })
    .await;
    let elected_after = cut_at.elapsed();
    // The old leader answers leader-only calls no more (it cannot reach a quorum), and
    // does so within a few seconds of the cut.
    eventually("the old leader to stop acting", DEADLINE, || async {
        (!acts_as_leader(&url[at - 1]).await).then_some(())
    })
    .await;
    let stopped_after = cut_at.elapsed();
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(cut_at.elapsed())).await;
    let status = drover_at(others[0], &["node", "status", "-json"]).await;
    let nodes: serde_json::Value = serde_json::from_str(&stdout(&status)).expect("node list");
    let down: Vec<String> = nodes
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["node"]["status"] != "Ready")
        .map(|n| n["node"]["name"].to_string())
        .collect();
    hosts.heal(at);
    writing.store(false, std::sync::atomic::Ordering::SeqCst);
    writer.await.expect("the writer ends");
    assert!(
        down.is_empty(),
        "nodes not ready after 20 s of a partitioned leader: {down:?}"
    );
    assert!(
        elected_after < Duration::from_secs(5),
        "a new leader after {elected_after:?}"
    );
    assert!(
        stopped_after < Duration::from_secs(5),
        "the old leader acted as leader for {stopped_after:?} after the cut"
    );
    assert_ne!(new_leader, leader);

    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 10, "only {} writes acknowledged", acked.len());
    for u in &url {
        eventually(
            "every acknowledged write on every server",
            DEADLINE,
            || async {
                let out = drover_at(u, &["job", "status", "-json"]).await;
                let jobs: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
                let have: std::collections::BTreeSet<String> = jobs
                    .as_array()?
                    .iter()
                    .filter_map(|j| j["id"].as_str().map(str::to_string))
                    .collect();
                acked.iter().all(|id| have.contains(id)).then_some(())
            },
        )
        .await;
    }
}
