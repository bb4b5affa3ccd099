//! The secure setup from the binary, as the README shows it: a server with `--acl`,
//! `drover acl bootstrap`, a policy, a read-only token for the console, and an agent that
//! joins with an introduction token.

use crate::cli_support;

use cli_support::{code, drover_at, spawn, stderr, stdout};
use drover_tests::{DEADLINE, eventually};

/// The value of `Key = value` line `key` in `text`.
fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {key:?} in {text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn acl_bootstrap_policies_and_tokens_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let _server = spawn(
        &address,
        &[
            "server",
            "--acl",
            "--data-dir",
            &format!("{d}/data"),
            "--bind",
            &address,
            "--raft-addr",
            "127.0.0.1:0",
            "--no-metrics",
        ],
    );
    let run = |args: Vec<String>| {
        let address = address.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            drover_at(&address, &args).await
        }
    };
    let argv = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let boot = eventually("bootstrap", DEADLINE, || async {
        let out = run(argv(&["acl", "bootstrap"])).await;
        (code(&out) == 0).then_some(out)
    })
    .await;
    let root = field(&stdout(&boot), "Secret ID");
    let again = run(argv(&["acl", "bootstrap"])).await;
    assert_eq!(code(&again), 1, "a second bootstrap is refused");
    assert!(stderr(&again).contains("already"), "{}", stderr(&again));

    let refused = run(argv(&["job", "status"])).await;
    assert_eq!(code(&refused), 1);
    assert!(
        stderr(&refused).contains("missing acl token"),
        "{}",
        stderr(&refused)
    );

    let rules = dir.path().join("read-only.hcl");
    std::fs::write(
        &rules,
        "namespace \"*\" { policy = \"read\" }\nnode { policy = \"read\" }\noperator { policy = \"read\" }\n",
    )
    .unwrap();
    let agent_rules = dir.path().join("agent.hcl");
    std::fs::write(&agent_rules, "agent { policy = \"write\" }\n").unwrap();
    for (name, file) in [("read-only", &rules), ("agent", &agent_rules)] {
        let out = run(argv(&[
            "acl",
            "policy",
            "apply",
            name,
            file.to_str().unwrap(),
            "--token",
            &root,
        ]))
        .await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let token = |policy: &'static str| {
        let root = root.clone();
        let run = &run;
        async move {
            let out = run(argv(&[
                "acl", "token", "create", "--name", policy, "--policy", policy, "--token", &root,
            ]))
            .await;
            assert_eq!(code(&out), 0, "{}", stderr(&out));
            field(&stdout(&out), "Secret ID")
        }
    };
    let reader = token("read-only").await;
    let join = token("agent").await;

    // A real agent joins with the introduction token.
    let _agent = spawn(
        &address,
        &[
            "agent",
            "--raw-exec",
            "--servers",
            &address,
            "--data-dir",
            &format!("{d}/agent"),
            "--token",
            &join,
        ],
    );
    let node_id = eventually("the agent's node", DEADLINE, || async {
        let out = run(argv(&["node", "status", "-json", "--token", &reader])).await;
        let nodes: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        nodes.as_array()?.first()?["node"]["id"]
            .as_str()
            .map(String::from)
    })
    .await;

    // Simulated nodes need the join credential too; with it they all register.
    let refused = run(argv(&["agent", "--simulate", "2", "--servers", &address])).await;
    assert_eq!(
        code(&refused),
        1,
        "a simulator without a token cannot register"
    );
    assert!(
        stderr(&refused).contains("acl token"),
        "{}",
        stderr(&refused)
    );
    let _sim = spawn(
        &address,
        &[
            "agent",
            "--raw-exec",
            "--simulate",
            "3",
            "--servers",
            &address,
            "--token",
            &join,
        ],
    );
    eventually("the simulated nodes", DEADLINE, || async {
        let out = run(argv(&["node", "status", "-json", "--token", &reader])).await;
        let nodes: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        (nodes.as_array()?.len() == 4).then_some(())
    })
    .await;

    // The reader reads but cannot act: the server refuses, naming what is missing.
    let out = run(argv(&["node", "offline", &node_id, "--token", &reader])).await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("write-node"), "{}", stderr(&out));
    let me = run(argv(&["acl", "token", "self", "--token", &reader])).await;
    assert_eq!(code(&me), 0, "{}", stderr(&me));
    assert_eq!(field(&stdout(&me), "Node"), "read");
    let listed = run(argv(&["acl", "token", "list", "--token", &root])).await;
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    assert!(
        !stdout(&listed).contains(&reader),
        "lists never show secrets"
    );
    let out = run(argv(&["node", "offline", &node_id, "--token", &root])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}
