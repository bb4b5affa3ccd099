//! The docker driver from the binary, against a real Docker Engine and a real agent
//! (`drover agent`): a container serving HTTP runs, logs, restarts in place, survives an
//! agent restart and stops; an image that cannot be pulled fails the allocation with the
//! engine's message and leaves the node healthy; a container over its memory is reported
//! `OOM Killed`, never as the node's fault; a node without an engine gets no docker
//! task (the placement failure names the missing driver); two copies of a container that
//! listen on one port inside are reached on the host ports `alloc status` prints.
//!
//! The image is built here from a root filesystem tarball (busybox-static and a page to
//! serve), with `docker import`: no registry is reachable. Without an engine these tests
//! fail, saying how to get one; `.ci/run` installs and starts it.

use crate::cli_support;

use cli_support::printed_address;

use cli_support::{Running, assert_code, drover, free_ports, stdout};
use drover_core::{ClientStatus, JobKey};
use drover_tests::{DEADLINE, TestServer, eventually};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The image the tests run, imported once per test binary.
const IMAGE: &str = "drover-test/busybox-http:1";

/// What a developer without an engine is told.
const GET_AN_ENGINE: &str = "the docker tests need a running Docker Engine: \
    `apt-get install -y docker.io busybox-static`, then start `dockerd` \
    (.ci/run does both)";

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `docker {}`: {e}; {GET_AN_ENGINE}",
                args.join(" ")
            )
        })
}

/// Builds [`IMAGE`]: busybox-static's applets and `/www/index.html`.
fn image() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let info = docker(&["info", "--format", "{{.ServerVersion}}"]);
        assert!(
            info.status.success(),
            "{GET_AN_ENGINE}: {}",
            String::from_utf8_lossy(&info.stderr)
        );
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| panic!("no busybox binary; {GET_AN_ENGINE}"));
        let root = tempfile::tempdir().expect("temp dir");
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::create_dir_all(root.path().join("www")).expect("www");
        std::fs::copy(busybox, bin.join("busybox")).expect("copy busybox");
        for applet in ["sh", "httpd", "echo", "sleep", "cat", "trap", "dd", "tr"] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).expect("applet link");
        }
        std::fs::write(
            root.path().join("www/index.html"),
            "hello from a container\n",
        )
        .expect("page");
        let tar = root.path().join("rootfs.tar");
        let packed = Command::new("tar")
            .arg("-C")
            .arg(root.path())
            .args(["-cf"])
            .arg(&tar)
            .args(["bin", "www"])
            .status()
            .expect("tar runs");
        assert!(packed.success(), "tar failed");
        let imported = docker(&["import", tar.to_str().expect("utf-8"), IMAGE]);
        assert!(
            imported.status.success(),
            "docker import failed: {}",
            String::from_utf8_lossy(&imported.stderr)
        );
    });
    IMAGE
}

/// A `drover agent` on `data` with `config` (HCL) against `server`.
fn agent(server: &TestServer, data: &Path, config: &str) -> Running {
    cli_support::agent_with_config(server, data, config)
}

/// The one node's attribute `key`, once the node has registered.
async fn node_attribute(server: &TestServer, key: &str) -> String {
    eventually("the agent's node registered", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let node = snap.nodes().next()?.clone();
        node.attributes.get(key).cloned()
    })
    .await
}

/// A job whose `http` task serves `/www` on 127.0.0.1:`port` from `image`.
fn job_file(dir: &Path, id: &str, image: &str, port: u16) -> std::path::PathBuf {
    let script = format!("echo serving on {port}; exec httpd -f -p 127.0.0.1:{port} -h /www");
    job_running(dir, id, image, &script)
}

/// A job whose `http` task runs `sh -c SCRIPT` in `image` (no restarts, no reschedules).
fn job_running(dir: &Path, id: &str, image: &str, script: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{id}.nomad.hcl"));
    let text = format!(
        r#"job "{id}" {{
  group "web" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts  = 0
      unlimited = false
    }}
    task "http" {{
      driver = "docker"
      config {{
        image        = "{image}"
        command      = "sh"
        args         = ["-c", "{script}"]
        network_mode = "host"
      }}
      kill_timeout = "2s"
      resources {{
        cpu    = 100
        memory = 32
      }}
    }}
  }}
}}
"#
    );
    std::fs::write(&path, text).expect("job file");
    path
}

/// The body of `GET /` on 127.0.0.1:`port`, if something answers.
fn get(port: u16) -> Option<String> {
    get_at(SocketAddr::from(([127, 0, 0, 1], port)))
}

/// The body of `GET /` at `addr`, if something answers.
fn get_at(addr: SocketAddr) -> Option<String> {
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .ok()?;
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// The job's allocation that should run, by its eight-character prefix, with its `http`
/// task's restart count, once running.
fn running(server: &TestServer, job: &str) -> Option<(String, u32)> {
    cli_support::running_alloc(server, job, "http")
        .map(|(id, restarts)| (id[..8].to_string(), restarts))
}

/// Whether the engine has a container of `alloc`'s `http` task (any state).
fn container_exists(alloc_prefix: &str) -> bool {
    let out = docker(&["ps", "-a", "--format", "{{.Names}}"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|name| name.starts_with(&format!("http-{alloc_prefix}")))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_docker_job_serves_logs_restarts_survives_the_agent_and_stops() {
    let image = image();
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let mut first = agent(&server, &data, "");
    let health = node_attribute(&server, "driver.docker.health").await;
    let ready = node_attribute(&server, "driver.docker.healthy").await;
    assert_eq!(ready, "true", "{GET_AN_ENGINE}: the agent says {health:?}");

    let port = free_ports(1)[0];
    let job = job_file(dir.path(), "web", image, port);
    let out = drover(
        &server,
        &["job", "run", "-detach", job.to_str().expect("utf-8")],
    )
    .await;
    assert_code(&out, 0);
    let (alloc, _) = eventually("the container running", DEADLINE, || async {
        running(&server, "web")
    })
    .await;
    let body = eventually("the container answering HTTP", DEADLINE, || async {
        get(port)
    })
    .await;
    assert_eq!(body, "hello from a container\n");

    let logs = eventually("the container's output in its logs", DEADLINE, || async {
        let out = drover(&server, &["alloc", "logs", &alloc]).await;
        stdout(&out).contains("serving on").then_some(stdout(&out))
    })
    .await;
    assert_eq!(logs.trim(), format!("serving on {port}"));

    // Usage comes from the engine's stats: a sample reaches the servers.
    let usage = eventually("a usage sample from the engine", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let a = snap
            .allocs_by_job(&JobKey::default_ns("web"))
            .find(|a| a.id.to_string().starts_with(&alloc))?
            .clone();
        a.task_states.get("http")?.usage
    })
    .await;
    assert!(usage.memory_mb <= 32, "{usage:?}");
    let status = stdout(&drover(&server, &["alloc", "status", &alloc]).await);
    assert!(
        status.contains("task started as container http-"),
        "{status}"
    );

    // Restart in place: a new container, the same allocation, serving again.
    assert_code(&drover(&server, &["alloc", "restart", &alloc]).await, 0);
    eventually("the task restarted in place", DEADLINE, || async {
        running(&server, "web").filter(|(id, restarts)| *id == alloc && *restarts == 1)
    })
    .await;
    eventually("HTTP again after the restart", DEADLINE, || async {
        get(port)
    })
    .await;

    // The agent dies; its container lives on, and the next agent re-attaches to it.
    first.child.kill().expect("kill the agent");
    let _ = first.child.wait();
    assert_eq!(get(port).as_deref(), Some("hello from a container\n"));
    let _second = agent(&server, &data, "");
    let status = eventually("the agent re-attached", DEADLINE, || async {
        let out = drover(&server, &["alloc", "status", &alloc]).await;
        let text = stdout(&out);
        text.contains("Re-attached").then_some(text)
    })
    .await;
    assert!(
        status.contains(&format!("re-attached to container http-{alloc}")),
        "{status}"
    );
    assert_eq!(
        running(&server, "web").map(|(id, _)| id),
        Some(alloc.clone())
    );

    // Stop: the container ends and is removed.
    assert_code(
        &drover(&server, &["job", "stop", "-detach", "web"]).await,
        0,
    );
    eventually("the container gone", DEADLINE, || async {
        (get(port).is_none() && !container_exists(&alloc)).then_some(())
    })
    .await;

    // An image no registry serves (a registry on a closed loopback port, so nothing
    // leaves the machine): the task fails with the engine's words, the node stays healthy.
    let missing = job_file(
        dir.path(),
        "ghost",
        "127.0.0.1:1/drover/no-such-image:1",
        port,
    );
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", missing.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let failed = cli_support::failed_alloc(&server, "ghost").await;
    let events = &failed.task_states.get("http").expect("task state").events;
    let failure = events
        .iter()
        .find(|e| e.kind() == "Driver Failure")
        .unwrap_or_else(|| panic!("no driver failure in {events:?}"));
    assert!(
        failure.message().contains("127.0.0.1:1") && !failure.infra_failure(),
        "{failure:?}"
    );
    let out = drover(&server, &["node", "status", "-json"]).await;
    let text = stdout(&out);
    assert!(
        text.contains("\"health\": \"Healthy\""),
        "the node stays healthy: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_without_an_engine_gets_no_docker_task() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let _agent = agent(
        &server,
        &data,
        "docker {\n  endpoint = \"unix:///nonexistent/docker.sock\"\n}\n",
    );
    let health = node_attribute(&server, "driver.docker.health").await;
    assert!(health.contains("/nonexistent/docker.sock"), "{health}");
    assert_eq!(
        node_attribute(&server, "driver.docker.detected").await,
        "false"
    );
    // Placement reads ready nodes only: wait until this one is.
    eventually("the node healthy", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let node = snap.nodes().next()?;
        (node.health.as_str() == "healthy").then_some(())
    })
    .await;

    let job = job_file(dir.path(), "web", IMAGE, free_ports(1)[0]);
    let out = drover(&server, &["job", "run", job.to_str().expect("utf-8")]).await;
    let text = stdout(&out);
    assert!(text.contains("Missing driver docker on 1 nodes"), "{text}");
    let snap = server.handle().snapshot();
    assert_eq!(snap.allocs_by_job(&JobKey::default_ns("web")).count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_over_its_memory_is_reported_oom_killed_and_the_node_stays_healthy() {
    let image = image();
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent"), "");
    assert_eq!(
        node_attribute(&server, "driver.docker.healthy").await,
        "true"
    );
    // 96 MB held in a shell variable, three times the task's 32 MB.
    let hog = job_running(
        dir.path(),
        "hog",
        image,
        "x=$(dd if=/dev/zero bs=1048576 count=96 2>/dev/null | tr '\\\\0' a); echo survived",
    );
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", hog.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let failed = cli_support::failed_alloc(&server, "hog").await;
    let events = &failed.task_states.get("http").expect("task state").events;
    let oom = events
        .iter()
        .find(|e| e.kind() == "OOM Killed")
        .unwrap_or_else(|| panic!("no OOM Killed event in {events:?}"));
    assert!(
        oom.message().contains("32 MB") && !oom.infra_failure(),
        "{oom:?}"
    );
    let terminated = events
        .iter()
        .find(|e| e.kind() == "Terminated")
        .expect("terminated");
    assert_eq!(terminated.exit_code(), Some(137), "{terminated:?}");
    let status = stdout(&drover(&server, &["alloc", "status", &failed.id.to_string()]).await);
    assert!(
        status.contains("was OOM killed (exit code 137)"),
        "{status}"
    );
    let snap = server.handle().snapshot();
    let node = snap.nodes().next().expect("node");
    assert_eq!(node.health.as_str(), "healthy", "{node:?}");
}

/// A job of `count` copies of a container serving `/www` on port 8080 inside, published
/// from the group's `http` port (`to = 8080`); each says which ports its environment gives.
fn published_job(dir: &Path, id: &str, image: &str, count: u32) -> std::path::PathBuf {
    let path = dir.join(format!("{id}.nomad.hcl"));
    let text = format!(
        r#"job "{id}" {{
  group "web" {{
    count = {count}
    network {{
      port "http" {{
        to = 8080
      }}
    }}
    task "http" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "sh"
        args    = ["-c", "echo inside=$NOMAD_PORT_http host=$NOMAD_HOST_PORT_http; exec httpd -f -p 8080 -h /www"]
        ports   = ["http"]
      }}
      kill_timeout = "2s"
      resources {{
        cpu    = 100
        memory = 32
      }}
    }}
  }}
}}
"#
    );
    std::fs::write(&path, text).expect("job file");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn two_containers_on_one_inside_port_answer_on_the_host_ports_alloc_status_prints() {
    let image = image();
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent"), "");
    assert_eq!(
        node_attribute(&server, "driver.docker.healthy").await,
        "true",
        "{GET_AN_ENGINE}"
    );

    let job = published_job(dir.path(), "published", image, 2);
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", job.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let allocs: Vec<String> = eventually("both copies running", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let running: Vec<String> = snap
            .allocs_by_job(&JobKey::default_ns("published"))
            .filter(|a| a.client_status == ClientStatus::Running)
            .map(|a| a.id.to_string())
            .collect();
        (running.len() == 2).then_some(running)
    })
    .await;

    let mut addresses = Vec::new();
    for id in &allocs {
        let status = stdout(&drover(&server, &["alloc", "status", id]).await);
        let addr = printed_address(&status, "http")
            .unwrap_or_else(|| panic!("alloc status {id} prints no address for http:\n{status}"));
        assert_ne!(
            addr.port(),
            8080,
            "the host port is the node's pick: {addr}"
        );
        // The container may still be starting its server when the allocation runs.
        let body = eventually(&format!("{addr} to answer"), DEADLINE, || async move {
            tokio::task::spawn_blocking(move || get_at(addr))
                .await
                .expect("the request thread finishes")
        })
        .await;
        assert_eq!(body, "hello from a container\n", "GET / at {addr}");
        // Inside, the task binds the mapped port; the host port is where it is reached.
        let logs = eventually("the container's ports in its logs", DEADLINE, || async {
            let text = stdout(&drover(&server, &["alloc", "logs", id]).await);
            text.contains("inside=").then_some(text)
        })
        .await;
        assert_eq!(
            logs.trim(),
            format!("inside=8080 host={}", addr.port()),
            "alloc {id}"
        );
        addresses.push(addr);
    }
    assert_ne!(
        addresses[0], addresses[1],
        "each copy has its own host port"
    );

    assert_code(
        &drover(&server, &["job", "stop", "-detach", "published"]).await,
        0,
    );
    eventually("the published ports closed", DEADLINE, || async {
        let open = addresses.iter().any(|a| get_at(*a).is_some());
        let left = allocs.iter().any(|id| container_exists(&id[..8]));
        (!open && !left).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_docker_port_the_group_lacks_is_refused_at_submission_by_name() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let job = published_job(dir.path(), "unpublished", IMAGE, 1);
    let text = std::fs::read_to_string(&job)
        .expect("job file")
        .replace(r#"ports   = ["http"]"#, r#"ports   = ["http", "metrics"]"#);
    std::fs::write(&job, text).expect("job file");
    let out = drover(&server, &["job", "run", job.to_str().expect("utf-8")]).await;
    assert_ne!(cli_support::code(&out), 0, "{}", stdout(&out));
    let said = format!("{}{}", stdout(&out), cli_support::stderr(&out));
    assert!(
        said.contains("port \"metrics\" is not a port of the group's network block"),
        "{said}"
    );
    let snap = server.handle().snapshot();
    assert_eq!(
        snap.allocs_by_job(&JobKey::default_ns("unpublished"))
            .count(),
        0
    );
}
