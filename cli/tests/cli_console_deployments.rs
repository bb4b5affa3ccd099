//! The console's deployments against a real server and a real agent: they load with the
//! cluster, the next version's deployment and its canary arrive on the event stream, and
//! the console's promote, pause, resume and fail go through `DeploymentService`, the
//! server's refusal of an early promotion told in the status line. The console's state
//! and its real background tasks are driven without a terminal.

use crate::cli_support;

use cli_support::{Running, assert_code, drover, stdout};
use drover_core::{Deployment, DeploymentStatus, JobKey};
use drover_tests::{DEADLINE, TestServer, eventually};
use drover_tui::app::{App, Command, Input, Update};
use drover_tui::net::{Servers, execute, follow};
use drover_tui::views::Tone;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The console's state, fed by its follower.
struct Console {
    app: App,
    servers: Servers,
    updates: mpsc::Receiver<Update>,
}

impl Console {
    async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        let started = Instant::now();
        while !done(&self.app) {
            assert!(started.elapsed() < DEADLINE, "no {what}");
            if let Ok(Some(update)) =
                tokio::time::timeout(Duration::from_millis(100), self.updates.recv()).await
            {
                self.app.handle(Input::Update(update));
            }
        }
    }

    /// Carries out `command` as the runtime does, and returns its outcome.
    async fn run(&mut self, command: Command) -> Result<String, String> {
        let mut outcome = None;
        for update in execute(&self.servers, command).await {
            if let Update::CommandDone(done) = &update {
                outcome = Some(done.clone());
            }
            self.app.handle(Input::Update(update));
        }
        outcome.expect("every command reports its outcome")
    }

    fn deployment(&self, version: u64) -> Option<&Deployment> {
        self.app
            .cluster
            .deployments
            .iter()
            .find(|d| d.job_id.as_str() == "web" && d.job_version == version)
    }
}

/// Two raw_exec tasks rolled out one canary at a time, healthy after `min_healthy`.
fn job(min_healthy: &str, seconds: u32) -> String {
    format!(
        r#"job "web" {{
  datacenters = ["dc1"]
  update {{
    max_parallel      = 1
    canary            = 1
    health_check      = "task_states"
    min_healthy_time  = "{min_healthy}"
    healthy_deadline  = "5m"
    progress_deadline = "10m"
  }}
  group "web" {{
    count = 2
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["{seconds}"]
      }}
      resources {{
        cpu    = 50
        memory = 32
      }}
    }}
  }}
}}
"#
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("job file");
    path.to_str().expect("utf-8").to_owned()
}

async fn agent(server: &TestServer, data: &Path) -> Running {
    let agent = cli_support::agent_with_config(server, data, "raw_exec {\n  enabled = true\n}\n");
    eventually("the agent's node to take work", DEADLINE, || async {
        let snap = server.handle().snapshot();
        snap.nodes().any(|n| n.is_schedulable()).then_some(())
    })
    .await;
    agent
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_follows_deployments_and_acts_on_them() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent")).await;
    let v0 = write(dir.path(), "v0.hcl", &job("1s", 600));
    let run = drover(&server, &["job", "run", &v0]).await;
    assert_code(&run, 0);
    assert!(stdout(&run).contains("successful"), "{}", stdout(&run));

    let servers = Servers::new(&server.url(), &Default::default(), None).expect("an address");
    let (tx, updates) = mpsc::channel(1_024);
    let follower = tokio::spawn(follow(servers.clone(), tx));
    let mut console = Console {
        app: App::new(servers.address(), false, drover_tui::fixtures::now()),
        servers,
        updates,
    };
    console
        .until("version 0's deployment in the load", |app| {
            app.cluster
                .deployments
                .iter()
                .any(|d| d.status == DeploymentStatus::Successful)
        })
        .await;

    // Version 1 waits a minute before its canary counts as healthy: long enough for
    // every action below to find it unhealthy.
    let v1 = write(dir.path(), "v1.hcl", &job("1m", 601));
    assert_code(&drover(&server, &["job", "run", "-detach", &v1]).await, 0);
    console
        .until("version 1's canary on the stream", |app| {
            app.cluster.deployments.iter().any(|d| {
                d.job_version == 1
                    && d.groups
                        .get("web")
                        .is_some_and(|g| g.placed_canaries.len() == 1)
                    && app.cluster.deployments.allocs_of(&d.id).count() == 1
            })
        })
        .await;
    let d = console
        .deployment(1)
        .cloned()
        .expect("version 1's deployment");
    let job = JobKey::default_ns("web");
    assert_eq!(
        console
            .app
            .cluster
            .deployments
            .latest_of(&job)
            .map(|l| l.id),
        Some(d.id),
        "the job detail shows the newest"
    );

    // The server refuses to promote a canary that is not healthy yet; the console says
    // why, as for any refused action.
    let refused = console
        .run(Command::PromoteDeployment(d.id))
        .await
        .expect_err("the canary is not healthy yet");
    assert!(
        refused.starts_with(&format!("promote deployment {} failed: ", d.id.short()))
            && refused.contains("healthy canaries"),
        "{refused}"
    );
    let notice = console.app.notice.clone().expect("told");
    assert_eq!((notice.text, notice.tone), (refused, Tone::Bad));

    for (command, status) in [
        (
            Command::PauseDeployment {
                id: d.id,
                pause: true,
            },
            DeploymentStatus::Paused,
        ),
        (
            Command::PauseDeployment {
                id: d.id,
                pause: false,
            },
            DeploymentStatus::Running,
        ),
        (Command::FailDeployment(d.id), DeploymentStatus::Failed),
    ] {
        let said = console.run(command.clone()).await;
        assert!(said.is_ok(), "{command:?}: {said:?}");
        console
            .until(&format!("the deployment {}", status.as_str()), |app| {
                app.cluster
                    .deployments
                    .get(&d.id)
                    .is_some_and(|now| now.status == status)
            })
            .await;
    }
    follower.abort();
    // The agent leaves its tasks running when it stops, as a node's agent does: stop them.
    assert_code(&drover(&server, &["job", "stop", "web"]).await, 0);
    eventually("the job's tasks to stop", DEADLINE, || async {
        let snap = server.handle().snapshot();
        snap.allocs_by_job(&job)
            .all(|a| a.client_status.is_terminal())
            .then_some(())
    })
    .await;
    server.stop().await;
}
