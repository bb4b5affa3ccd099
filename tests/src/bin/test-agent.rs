//! A real node agent as its own process, for end-to-end tests that must kill it with
//! SIGKILL or give it an environment of its own:
//! `test-agent [--config FILE] <data dir> <server address>...`. The config file (the
//! agent's HCL) is read first; the data dir and servers given here override it. Like
//! `drover agent`, it takes its join token from `DROVER_TOKEN`. Logs go to stderr
//! (`RUST_LOG`). Prints `node <id>` on stdout once registered, then runs until killed.
//! Without a config file, `raw_exec` is enabled, as on `drover dev`'s agent.
//!
//! It is also the task shim of the agents the end-to-end tests run in their own process
//! (`AgentConfig::shim`): like `drover`, it dispatches the shim before anything else.

use drover_agent::{Agent, AgentConfig};
use std::io::Write;
use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    if let Some(code) = drover_agent::isolation::dispatch() {
        return code;
    }
    tokio::runtime::Runtime::new()
        .expect("a tokio runtime")
        .block_on(run())
}

async fn run() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1).peekable();
    let mut config = AgentConfig::default();
    config.raw_exec.enabled = true;
    if args.peek().map(String::as_str) == Some("--config") {
        let path = args.nth(1).unwrap_or_default();
        config = match AgentConfig::from_hcl_file(&path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("test-agent: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
    }
    let Some(data_dir) = args.next() else {
        eprintln!("usage: test-agent [--config FILE] <data dir> <server address>...");
        return std::process::ExitCode::FAILURE;
    };
    let config = AgentConfig {
        data_dir: PathBuf::from(data_dir),
        servers: args.collect(),
        name: Some("test-agent".into()),
        token: std::env::var("DROVER_TOKEN").ok(),
        ..config
    };
    let agent = match Agent::start(config).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("test-agent: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("node {}", agent.node_id());
    let _ = std::io::stdout().flush();
    // Runs until the test kills it; a polite signal stops it leaving tasks running.
    let _ = tokio::signal::ctrl_c().await;
    agent.shutdown().await;
    std::process::ExitCode::SUCCESS
}
