//! What a task brings into its directory, from the binary with a real agent
//! (`drover agent`): an artifact fetched from an HTTP server started here (checked, unpacked)
//! and templates (node and task values, an `env = true` one, a `source` one re-rendered on
//! change, which restarts the task) feed a task; a wrong checksum and a template that does
//! not parse fail the allocation with what is wrong and leave the node healthy; a
//! dispatched job's meta and payload reach its task (`NOMAD_META_*`, `dispatch_payload`).

use crate::cli_support;

use cli_support::{Running, assert_code, drover, stdout};
use drover_core::{ClientStatus, JobKey};
use drover_tests::{DEADLINE, TestServer, eventually};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A `drover agent` running `raw_exec` tasks, with `meta.rack = "r7"`.
fn agent(server: &TestServer, data: &Path) -> Running {
    let config = "client {\n  meta { rack = \"r7\" }\n}\nraw_exec {\n  enabled = true\n}\n";
    cli_support::agent_with_config(server, data, config)
}

/// Serves `files` (path → body) over HTTP/1.0 on 127.0.0.1 from a thread; its base URL.
fn serve(files: Vec<(&'static str, Vec<u8>)>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&request);
            let path = text.split(' ').nth(1).unwrap_or("/");
            let reply = match files.iter().find(|(p, _)| *p == path) {
                Some((_, body)) => {
                    let mut r =
                        format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                            .into_bytes();
                    r.extend_from_slice(body);
                    r
                }
                None => b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
            };
            let _ = conn.write_all(&reply);
        }
    });
    base
}

/// A `.tar.gz` of `files` (relative path → text), made with the system's `tar`.
fn tar_gz(files: &[(&str, &str)]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dirs");
        std::fs::write(&p, text).expect("file");
    }
    let out = dir.path().join("out.tar.gz");
    let names: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    let status = Command::new("tar")
        .arg("-C")
        .arg(dir.path())
        .arg("-czf")
        .arg(&out)
        .args(&names)
        .status()
        .expect("tar runs");
    assert!(status.success(), "tar failed");
    std::fs::read(out).expect("archive")
}

fn sha256(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(bytes)
        .expect("write");
    let out = child.wait_with_output().expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string()
}

fn write_job(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(format!("{name}.nomad.hcl"));
    std::fs::write(&path, text).expect("job file");
    path
}

/// The job's failed allocation's event of `kind`, once it failed.
async fn failure(server: &TestServer, job: &str, task: &str, kind: &str) -> String {
    eventually(&format!("{job} failed with {kind}"), DEADLINE, || async {
        let snap = server.handle().snapshot();
        let alloc = snap
            .allocs_by_job(&JobKey::default_ns(job))
            .find(|a| a.client_status == ClientStatus::Failed)?
            .clone();
        let event = alloc
            .task_states
            .get(task)?
            .events
            .iter()
            .find(|e| e.kind() == kind)?
            .clone();
        assert!(!event.infra_failure(), "{event:?}");
        Some(event.message().to_string())
    })
    .await
}

const APP: &str = r#"job "app" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      artifact {
        source      = "BASE/tool.tar.gz"
        destination = "local/tool"
        options {
          checksum = "sha256:DIGEST"
        }
      }
      template {
        data        = "node={{ env \"node.unique.name\" }} rack={{ env \"meta.rack\" }} alloc={{ env \"NOMAD_ALLOC_ID\" }}\n"
        destination = "local/app.conf"
      }
      template {
        data        = "GREETING=hello-{{ env \"NOMAD_TASK_NAME\" | toUpper }}\n"
        destination = "secrets/app.env"
        env         = true
      }
      template {
        source      = "local/tool/watched.tpl"
        destination = "local/watched.txt"
        change_mode = "restart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "cat $NOMAD_TASK_DIR/app.conf; echo greeting=$GREETING; sh $NOMAD_TASK_DIR/tool/bin/greet; cat $NOMAD_TASK_DIR/watched.txt; exec sleep 300"]
      }
      kill_timeout = "1s"
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_artifact_and_templates_feed_a_task_and_a_changed_template_restarts_it() {
    let tool = tar_gz(&[
        ("bin/greet", "echo greet from the artifact\n"),
        ("watched.tpl", "watched={{ \"v1\" }}\n"),
    ]);
    let base = serve(vec![("/tool.tar.gz", tool.clone())]);
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let _agent = agent(&server, &data);

    let text = APP.replace("BASE", &base).replace("DIGEST", &sha256(&tool));
    let job = write_job(dir.path(), "app", &text);
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", job.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let (alloc, _) = eventually("the task running", DEADLINE, || async {
        cli_support::running_alloc(&server, "app", "app")
    })
    .await;
    let node_name = server
        .handle()
        .snapshot()
        .nodes()
        .next()
        .expect("the agent's node")
        .name
        .clone();
    let logs = eventually("the task's output", DEADLINE, || async {
        let out = drover(&server, &["alloc", "logs", &alloc]).await;
        let text = stdout(&out);
        text.contains("watched=").then_some(text)
    })
    .await;
    assert_eq!(
        logs.lines().collect::<Vec<_>>(),
        [
            format!("node={node_name} rack=r7 alloc={alloc}").as_str(),
            "greeting=hello-APP",
            "greet from the artifact",
            "watched=v1",
        ],
        "{logs}"
    );

    // The template's source changes: it is rendered again and the task restarts with it.
    let source = data.join(format!("allocs/{alloc}/app/local/tool/watched.tpl"));
    std::fs::write(&source, "watched={{ \"v2\" | toUpper }}\n").expect("source changes");
    eventually("the task restarted by its template", DEADLINE, || async {
        cli_support::running_alloc(&server, "app", "app")
            .filter(|(id, restarts)| *id == alloc && *restarts == 1)
    })
    .await;
    eventually("the new render in the task's output", DEADLINE, || async {
        let out = drover(&server, &["alloc", "logs", &alloc]).await;
        stdout(&out).contains("watched=V2").then_some(())
    })
    .await;
    let status = stdout(&drover(&server, &["alloc", "status", &alloc]).await);
    assert!(
        status.contains("template local/watched.txt changed (change_mode restart)"),
        "{status}"
    );
    assert!(status.contains("Downloading Artifacts"), "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_artifacts_and_templates_fail_the_allocation_not_the_node() {
    let tool = tar_gz(&[("bin/greet", "echo hi\n"), ("bad.tpl", "x\n  {{ nope }}\n")]);
    let base = serve(vec![("/tool.tar.gz", tool)]);
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let _agent = agent(&server, &data);

    let no_restarts = "    restart {\n      attempts = 0\n      mode = \"fail\"\n    }\n    reschedule {\n      attempts = 0\n      unlimited = false\n    }\n";
    let task = |name: &str, block: &str| {
        format!(
            "job \"{name}\" {{\n  group \"g\" {{\n{no_restarts}    task \"t\" {{\n      driver = \"raw_exec\"\n{block}      config {{\n        command = \"/bin/true\"\n      }}\n    }}\n  }}\n}}\n"
        )
    };
    let wrong_sum = task(
        "wrongsum",
        &format!(
            "      artifact {{\n        source = \"{base}/tool.tar.gz\"\n        options {{\n          checksum = \"sha256:{}\"\n        }}\n      }}\n",
            "0".repeat(64)
        ),
    );
    let missing = task(
        "missing",
        &format!("      artifact {{\n        source = \"{base}/nope.tar.gz\"\n      }}\n"),
    );
    // A template file that does not parse (from the artifact): it is only read on the node.
    let bad_source = task(
        "badsource",
        &format!(
            "      artifact {{\n        source = \"{base}/tool.tar.gz\"\n      }}\n      template {{\n        source = \"local/bad.tpl\"\n        destination = \"local/out\"\n      }}\n"
        ),
    );
    for (name, text) in [
        ("wrongsum", &wrong_sum),
        ("missing", &missing),
        ("badsource", &bad_source),
    ] {
        let job = write_job(dir.path(), name, text);
        assert_code(
            &drover(
                &server,
                &["job", "run", "-detach", job.to_str().expect("utf-8")],
            )
            .await,
            0,
        );
    }
    let message = failure(&server, "wrongsum", "t", "Failed Artifact Download").await;
    assert!(
        message.contains("checksum mismatch: want sha256:0000"),
        "{message}"
    );
    let message = failure(&server, "missing", "t", "Failed Artifact Download").await;
    assert!(message.contains("404 Not Found"), "{message}");
    let message = failure(&server, "badsource", "t", "Failed Template").await;
    assert_eq!(
        message,
        "template local/out: 2:6: function \"nope\" is not defined (known: env, envOrDefault, \
         toUpper, toLower, trimSpace, eq, ne, not, and, or, printf, nomadService)"
    );

    // An inline template that does not parse is refused when the job is submitted.
    let inline = task(
        "inline",
        "      template {\n        data = \"ok\\n{{ if true }}\"\n        destination = \"local/out\"\n      }\n",
    );
    let job = write_job(dir.path(), "inline", &inline);
    let out = drover(&server, &["job", "run", job.to_str().expect("utf-8")]).await;
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("template does not parse: 2:1: if has no {{end}}"),
        "{text}"
    );

    let node = server
        .handle()
        .snapshot()
        .nodes()
        .next()
        .expect("node")
        .clone();
    assert_eq!(node.health.as_str(), "healthy", "{node:?}");
}

const TRANSCODE: &str = r#"job "transcode" {
  type = "batch"
  meta {
    owner = "ops"
    tier  = "job"
  }
  parameterized {
    payload       = "required"
    meta_required = ["input"]
  }
  group "g" {
    meta {
      tier = "group"
    }
    task "t" {
      driver = "raw_exec"
      meta {
        quality = "high"
      }
      dispatch_payload {
        file = "in/payload.txt"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo meta=$NOMAD_META_owner/$NOMAD_META_TIER/$NOMAD_META_input/$NOMAD_META_QUALITY; cat $NOMAD_TASK_DIR/in/payload.txt"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_dispatched_jobs_meta_and_payload_reach_its_task() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let _agent = agent(&server, &dir.path().join("agent"));
    let job = write_job(dir.path(), "transcode", TRANSCODE);
    assert_code(
        &drover(&server, &["job", "run", job.to_str().expect("utf-8")]).await,
        0,
    );
    let payload = dir.path().join("payload.txt");
    std::fs::write(&payload, "frames 1-100\n").expect("payload");
    let out = drover(
        &server,
        &[
            "job",
            "dispatch",
            "-meta",
            "input=clip.mp4",
            "-detach",
            "transcode",
            payload.to_str().expect("utf-8"),
        ],
    )
    .await;
    assert_code(&out, 0);
    let alloc = eventually("the dispatched child complete", DEADLINE, || async {
        let snap = server.handle().snapshot();
        let child = snap
            .jobs()
            .find(|j| j.parent_id.as_ref().map(|p| p.as_str()) == Some("transcode"))?
            .id
            .to_string();
        let alloc = snap
            .allocs_by_job(&JobKey::default_ns(&child))
            .find(|a| a.client_status == ClientStatus::Complete)?
            .id
            .to_string();
        Some(alloc)
    })
    .await;
    let logs = stdout(&drover(&server, &["alloc", "logs", &alloc]).await);
    assert_eq!(
        logs, "meta=ops/group/clip.mp4/high\nframes 1-100\n",
        "the group's meta overrides the job's; keys come as written and upper-cased"
    );
}

const RELOADER: &str = r#"job "reloader" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      artifact {
        source      = "BASE/conf.tpl"
        mode        = "file"
        destination = "local/conf.tpl"
      }
      template {
        source        = "local/conf.tpl"
        destination   = "local/conf.txt"
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo reloaded: $(cat $NOMAD_TASK_DIR/conf.txt)' HUP; echo first: $(cat $NOMAD_TASK_DIR/conf.txt); while true; do sleep 0.2; done"]
      }
      kill_timeout = "1s"
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_signal_template_signals_its_task_without_a_restart() {
    let base = serve(vec![("/conf.tpl", b"level={{ \"info\" }}".to_vec())]);
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("agent");
    let _agent = agent(&server, &data);
    let job = write_job(dir.path(), "reloader", &RELOADER.replace("BASE", &base));
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", job.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let (alloc, _) = eventually("the task running", DEADLINE, || async {
        cli_support::running_alloc(&server, "reloader", "t")
    })
    .await;
    eventually("the first render in the output", DEADLINE, || async {
        let out = drover(&server, &["alloc", "logs", &alloc]).await;
        stdout(&out).contains("first: level=info").then_some(())
    })
    .await;

    let source = data.join(format!("allocs/{alloc}/t/local/conf.tpl"));
    std::fs::write(&source, "level={{ \"debug\" | toUpper }}").expect("source changes");
    let logs = eventually("the task told by SIGHUP", DEADLINE, || async {
        let out = drover(&server, &["alloc", "logs", &alloc]).await;
        let text = stdout(&out);
        text.contains("reloaded:").then_some(text)
    })
    .await;
    assert_eq!(logs, "first: level=info\nreloaded: level=DEBUG\n");
    assert_eq!(
        cli_support::running_alloc(&server, "reloader", "t"),
        Some((alloc.clone(), 0)),
        "a signal template never restarts its task"
    );
    eventually("the signal among the task's events", DEADLINE, || async {
        let status = stdout(&drover(&server, &["alloc", "status", &alloc]).await);
        status
            .contains("template local/conf.txt changed; sent SIGHUP")
            .then_some(())
    })
    .await;
}
