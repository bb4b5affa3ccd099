//! Issue 33's `service` and `check` blocks: group and task services on the group's ports,
//! http, tcp and script checks with `check_restart`, and the mistakes named where they are
//! written (an unknown port label, a check interval under a second or a timeout above it,
//! an http path without `/`, a name that is no DNS label once interpolated, Consul).

use super::{Expect, check_all, job};
use drover_core::types::{AddressMode, CheckKind, CheckRestart, HealthCheck, OnUpdate, Service};
use std::time::Duration;

/// A group with an `http` port, with `service` spliced into the group.
fn group_service(service: &str) -> String {
    job(
        &format!("    network {{\n      port \"http\" {{}}\n    }}\n{service}"),
        "",
    )
}

fn first(job: &drover_core::types::Job) -> &Service {
    &job.groups[0].services[0]
}

#[test]
fn services_and_checks_parse_and_their_mistakes_are_named_where_they_are() {
    let cases: Vec<(String, Expect)> = vec![
        (
            group_service(
                "    service {\n      name = \"${NOMAD_JOB_NAME}-web\"\n      port = \"http\"\n      provider = \"nomad\"\n      tags = [\"a\", \"b\"]\n      meta { version = \"1\" }\n      address_mode = \"host\"\n      check {\n        type = \"http\"\n        path = \"/health\"\n        method = \"POST\"\n        header { X-Probe = [\"1\"] }\n        expected_status = 204\n        interval = \"5s\"\n        timeout = \"1s\"\n        on_update = \"require_healthy\"\n        check_restart {\n          limit = 3\n          grace = \"10s\"\n          ignore_warnings = true\n        }\n      }\n    }\n",
            ),
            Expect::Job(|j| {
                let s = first(j);
                assert_eq!(s.name, "${NOMAD_JOB_NAME}-web");
                assert_eq!(
                    s.resolved_name(
                        &j.name,
                        "g",
                        None,
                        drover_core::types::MetaLayers([&Default::default(); 3])
                    ),
                    "t-web"
                );
                assert_eq!(s.port_label, "http");
                assert_eq!(s.tags, ["a", "b"]);
                assert_eq!(s.meta["version"], "1");
                assert_eq!(s.address_mode, AddressMode::Host);
                let c = &s.checks[0];
                assert_eq!(
                    c.kind,
                    CheckKind::Http {
                        path: "/health".into(),
                        method: "POST".into(),
                        headers: [("X-Probe".to_owned(), vec!["1".to_owned()])].into(),
                        expected_status: Some(204),
                    }
                );
                assert_eq!(
                    (c.interval, c.timeout),
                    (Duration::from_secs(5), Duration::from_secs(1))
                );
                assert_eq!(c.on_update, OnUpdate::RequireHealthy);
                assert_eq!(
                    c.check_restart,
                    Some(CheckRestart {
                        limit: 3,
                        grace: Duration::from_secs(10),
                        ignore_warnings: true
                    })
                );
            }),
        ),
        (
            // A service's check_restart is each check's default; a task's script check
            // runs in the task.
            job(
                "",
                "      service {\n        check_restart { limit = 2 }\n        check {\n          type = \"script\"\n          command = \"/bin/true\"\n          args = [\"-x\"]\n        }\n      }\n",
            ),
            Expect::Job(|j| {
                let s = &j.groups[0].tasks[0].services[0];
                assert_eq!(
                    s.resolved_name(
                        &j.name,
                        "g",
                        Some("t"),
                        drover_core::types::MetaLayers([&Default::default(); 3])
                    ),
                    "t-g-t"
                );
                let c = &s.checks[0];
                assert_eq!(
                    c.kind,
                    CheckKind::Script {
                        command: "/bin/true".into(),
                        args: vec!["-x".into()]
                    }
                );
                assert_eq!(c.check_restart.map(|r| r.limit), Some(2));
            }),
        ),
        (
            // Checks gate deployments (`health_check = "checks"`, the default), each as
            // its `on_update` says.
            group_service(
                "    update {\n      health_check = \"checks\"\n    }\n    service {\n      port = \"http\"\n      check {\n        type = \"tcp\"\n        on_update = \"ignore\"\n      }\n      check {\n        type = \"tcp\"\n        on_update = \"ignore_warnings\"\n      }\n    }\n",
            ),
            Expect::Job(|j| {
                let update = j.groups[0].update.as_ref().expect("group update");
                let rollout = update.deployment.as_ref().expect("a deployment");
                assert_eq!(rollout.health_check, HealthCheck::Checks);
                let on_update: Vec<OnUpdate> =
                    first(j).checks.iter().map(|c| c.on_update).collect();
                assert_eq!(on_update, [OnUpdate::Ignore, OnUpdate::IgnoreWarnings]);
            }),
        ),
        (
            // Accepted and ignored would be worse than refused: groups have no address of
            // their own.
            group_service(
                "    service {\n      port = \"http\"\n      address_mode = \"alloc\"\n    }\n",
            ),
            Expect::Err(
                "t.hcl:8:22: groups[g].services[0].address_mode: address_mode \"alloc\" needs an allocation address of its own, which only bridge networking gives and drover does not support: use \"auto\" or \"host\"",
            ),
        ),
        (
            group_service("    service {\n      port = \"web\"\n    }\n"),
            Expect::Err(
                "t.hcl:7:14: groups[g].services[0].port: port \"web\" is not a label of the group's network ports (http)",
            ),
        ),
        (
            group_service(
                "    service {\n      port = \"http\"\n      check {\n        type = \"tcp\"\n        interval = \"500ms\"\n        timeout = \"100ms\"\n      }\n    }\n",
            ),
            Expect::Err(
                "t.hcl:10:20: groups[g].services[0].checks[0].interval: interval 500ms is below the minimum of 1s",
            ),
        ),
        (
            group_service(
                "    service {\n      port = \"http\"\n      check {\n        type = \"tcp\"\n        interval = \"2s\"\n        timeout = \"3s\"\n      }\n    }\n",
            ),
            Expect::Err(
                "t.hcl:11:19: groups[g].services[0].checks[0].timeout: timeout 3s is above the interval 2s: a check must give up before the next one starts",
            ),
        ),
        (
            group_service(
                "    service {\n      port = \"http\"\n      check {\n        type = \"http\"\n        path = \"health\"\n      }\n    }\n",
            ),
            Expect::Err(
                "t.hcl:10:16: groups[g].services[0].checks[0].path: path \"health\" must start with /",
            ),
        ),
        (
            // `${NOMAD_META_<key>}` reads the group's meta over the job's.
            group_service(
                "    meta {\n      tier = \"gold\"\n    }\n    service {\n      name = \"db-${NOMAD_META_tier}\"\n    }\n",
            ),
            Expect::Job(|j| {
                let s = first(j);
                let meta = drover_core::types::MetaLayers([
                    &j.meta,
                    &j.groups[0].meta,
                    &Default::default(),
                ]);
                assert_eq!(s.resolved_name(&j.name, "g", None, meta), "db-gold");
            }),
        ),
        (
            group_service("    service {\n      name = \"db-${NOMAD_META_tier}\"\n    }\n"),
            Expect::Err(
                "t.hcl:7:14: groups[g].services[0].name: service name \"db-${NOMAD_META_tier}\" reads meta key \"tier\" that neither the job, the group nor the task sets",
            ),
        ),
        (
            group_service("    service {\n      name = \"${NOMAD_GROUP_NAME}_api\"\n    }\n"),
            Expect::Err(
                "t.hcl:7:14: groups[g].services[0].name: service name \"g_api\" is not a valid DNS label: 1 to 63 letters, digits and -, not starting or ending with -",
            ),
        ),
        (
            group_service("    service {\n      provider = \"consul\"\n    }\n"),
            Expect::Err(
                "t.hcl:7:18: provider: provider \"consul\" is not supported: drover has no consul, its own catalog is provider = \"nomad\"",
            ),
        ),
        (
            group_service(
                "    service {\n      port = \"http\"\n      check {\n        type = \"grpc\"\n      }\n    }\n",
            ),
            Expect::Err("t.hcl:9:16: type: unknown value \"grpc\" (one of http, tcp, script)"),
        ),
        (
            group_service(
                "    service {\n      port = \"http\"\n      check {\n        type = \"tcp\"\n        path = \"/\"\n      }\n    }\n",
            ),
            Expect::Err("t.hcl:10:9: path does not apply to a tcp check"),
        ),
        (
            group_service("    service {\n      check {\n        type = \"tcp\"\n      }\n    }\n"),
            Expect::Err(
                "t.hcl:8:16: groups[g].services[0].checks[0].type: a tcp check reaches the service through its port: set the service's port",
            ),
        ),
        (
            group_service(
                "    service {\n      check {\n        type = \"script\"\n        command = \"/bin/true\"\n      }\n    }\n",
            ),
            Expect::Err(
                "t.hcl:7:7: groups[g].services[0].checks[0].task: a group service's script check needs the task it runs in (task = \"…\")",
            ),
        ),
        (
            job("", "      service {\n        port = \"http\"\n      }\n"),
            Expect::Err(
                "t.hcl:7:16: groups[g].tasks[t].services[0].port: port \"http\" is not a label of the group's network ports (the group's network has no ports)",
            ),
        ),
    ];
    check_all(cases);
}
