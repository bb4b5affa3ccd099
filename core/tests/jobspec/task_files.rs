//! Issue 32's file blocks and the docker driver's config: `artifact`, `template`,
//! `dispatch_payload` parse, and their mistakes (and what docker cannot honour yet) are
//! named where they are written; docker's `ports` name the group's network ports.

use super::{Expect, check_all, job};
use drover_core::types::{ArtifactMode, ChangeMode, Job};

fn only_task(job: &Job) -> &drover_core::types::Task {
    &job.groups[0].tasks[0]
}

/// A job with one docker task whose `config` holds `config` (task lines from line 6).
fn docker(config: &str) -> String {
    format!(
        "job \"t\" {{\n  group \"g\" {{\n    task \"t\" {{\n      driver = \"docker\"\n      config {{\n{config}      }}\n    }}\n  }}\n}}\n"
    )
}

/// A job whose group has ports `http` (mapped to 80) and `admin`, with one docker task
/// (image `x`) whose `config` continues with `config` (from line 13).
fn docker_with_network(config: &str) -> String {
    format!(
        "job \"t\" {{\n  group \"g\" {{\n    network {{\n      port \"http\" {{\n        to = 80\n      }}\n      port \"admin\" {{}}\n    }}\n    task \"t\" {{\n      driver = \"docker\"\n      config {{\n        image = \"x\"\n{config}      }}\n    }}\n  }}\n}}\n"
    )
}

#[test]
fn file_blocks_parse_and_their_mistakes_are_named_where_they_are() {
    let sha = "a".repeat(64);
    let cases: Vec<(String, Expect)> = vec![
        (
            job(
                "",
                &format!(
                    "      artifact {{\n        source = \"https://example.invalid/app.tar.gz\"\n        destination = \"local/app\"\n        options {{\n          checksum = \"sha256:{sha}\"\n        }}\n      }}\n      artifact {{\n        source = \"file:///srv/x\"\n        mode = \"file\"\n        destination = \"local/x\"\n      }}\n      template {{\n        data = \"port={{{{ env \\\"NOMAD_ALLOC_ID\\\" }}}}\"\n        destination = \"secrets/app.env\"\n        env = true\n        change_mode = \"signal\"\n        change_signal = \"SIGHUP\"\n        perms = \"0600\"\n      }}\n      dispatch_payload {{\n        file = \"input.txt\"\n      }}\n"
                ),
            ),
            Expect::Job(|j| {
                let t = only_task(j);
                assert_eq!(t.artifacts.len(), 2);
                assert_eq!(t.artifacts[0].destination, "local/app");
                assert_eq!(t.artifacts[0].mode, ArtifactMode::Any);
                assert!(t.artifacts[0].options["checksum"].starts_with("sha256:"));
                assert_eq!(t.artifacts[1].mode, ArtifactMode::File);
                let tp = &t.templates[0];
                assert_eq!(
                    tp.data.as_deref(),
                    Some("port={{ env \"NOMAD_ALLOC_ID\" }}")
                );
                assert!(tp.env);
                assert_eq!(tp.change_mode, ChangeMode::Signal);
                assert_eq!(tp.change_signal.as_deref(), Some("SIGHUP"));
                assert_eq!(
                    (tp.perms.as_str(), tp.left_delimiter.as_str()),
                    ("0600", "{{")
                );
                assert_eq!(t.dispatch_payload.as_deref(), Some("input.txt"));
            }),
        ),
        (
            job(
                "",
                "      artifact {\n        destination = \"local/\"\n      }\n",
            ),
            Expect::Err("t.hcl:6:7: artifact needs a source"),
        ),
        (
            job(
                "",
                "      artifact {\n        source = \"http://h/x\"\n        options {\n          checksum = \"sha256:abc\"\n        }\n      }\n",
            ),
            Expect::Err(
                "t.hcl:9:22: groups[g].tasks[t].artifacts[0].options.checksum: checksum \"sha256:abc\" needs 64 hex digits for sha256",
            ),
        ),
        (
            job(
                "",
                "      artifact {\n        source = \"http://h/x\"\n        destination = \"../../state\"\n      }\n",
            ),
            Expect::Err(
                "t.hcl:8:23: groups[g].tasks[t].artifacts[0].destination: destination must stay inside the task's directory (no leading ..)",
            ),
        ),
        (
            job(
                "",
                "      template {\n        data = \"x\"\n        destination = \"local/x\"\n        change_mode = \"signal\"\n      }\n",
            ),
            Expect::Err(
                "t.hcl:6:7: groups[g].tasks[t].templates[0].change_signal: change_mode \"signal\" needs a change_signal",
            ),
        ),
        (
            job(
                "",
                "      template {\n        data = \"x{{ if true }}\"\n        destination = \"local/x\"\n      }\n",
            ),
            Expect::Err(
                "t.hcl:7:16: groups[g].tasks[t].templates[0].data: template does not parse: 1:2: if has no {{end}}",
            ),
        ),
        (
            job(
                "",
                "      template {\n        destination = \"local/x\"\n        change_mode = \"reload\"\n      }\n",
            ),
            Expect::Err(
                "t.hcl:8:23: change_mode: unknown value \"reload\" (one of restart, signal, noop)",
            ),
        ),
        (
            docker("        image = \"busybox:1\"\n        args  = [\"-c\", \"true\"]\n"),
            Expect::Job(|j| {
                let t = only_task(j);
                assert_eq!(t.config.extra["image"], "busybox:1");
                assert_eq!(t.config.args, ["-c", "true"]);
            }),
        ),
        (
            docker("        command = \"sh\"\n"),
            Expect::Err(
                "t.hcl:5:7: groups[g].tasks[t].config.image: image is required by the docker driver",
            ),
        ),
        (
            docker_with_network("        ports = [\"http\", \"admin\"]\n"),
            Expect::Job(|j| assert_eq!(only_task(j).config.ports, ["http", "admin"])),
        ),
        (
            docker_with_network("        ports = [\"http\", \"metrics\"]\n"),
            Expect::Err(
                "t.hcl:13:17: groups[g].tasks[t].config.ports: port \"metrics\" is not a port of the group's network block",
            ),
        ),
        (
            docker_with_network("        ports = [\"http\", \"http\"]\n"),
            Expect::Err(
                "t.hcl:13:17: groups[g].tasks[t].config.ports: port \"http\" is listed twice",
            ),
        ),
        (
            docker_with_network("        network_mode = \"host\"\n        ports = [\"http\"]\n"),
            Expect::Err(
                "t.hcl:14:17: groups[g].tasks[t].config.ports: ports cannot be published with network_mode \"host\": use the default bridge",
            ),
        ),
        (
            docker("        image = \"x\"\n        ports = [\"http\"]\n"),
            Expect::Err(
                "t.hcl:7:17: groups[g].tasks[t].config.ports: port \"http\" is not a port of the group's network block",
            ),
        ),
        (
            docker("        image = \"x\"\n        volumes = [\"/a:/b\"]\n"),
            Expect::Err(
                "t.hcl:7:9: volumes in a docker task's config need host volumes, which drover does not have yet",
            ),
        ),
        (
            docker(
                "        image = \"x\"\n        auth {\n          username = \"u\"\n        }\n",
            ),
            Expect::Err(
                "t.hcl:7:9: auth in a docker task's config is not supported: the agent pulls only public or local images",
            ),
        ),
    ];
    check_all(cases);
}
