//! Issue 30's `network` block: host-mode ports (static, dynamic, mapped, on a host network),
//! every mode but host refused by name, and the task-level form of older files refused with
//! the way to the group form.

use super::{Expect, check_all, job};
use drover_core::types::{Job, PortAsk};

fn ports(job: &Job) -> &[PortAsk] {
    &job.groups[0].network.as_ref().expect("a network").ports
}

#[test]
fn network_blocks_parse_and_their_mistakes_are_named_where_they_are() {
    let net = |body: &str| job(&format!("    network {{\n{body}    }}\n"), "");
    let cases: Vec<(String, Expect)> = vec![
        (
            net(
                "      mode = \"host\"\n      port \"http\" {}\n      port \"admin\" {\n        static       = 8080\n        to           = 80\n        host_network = \"public\"\n      }\n",
            ),
            Expect::Job(|j| {
                let p = ports(j);
                assert_eq!(p.len(), 2);
                assert_eq!(p[0], PortAsk::dynamic("http"));
                assert_eq!(
                    (p[1].label.as_str(), p[1].static_port, p[1].to),
                    ("admin", Some(8080), Some(80))
                );
                assert_eq!(p[1].host_network, "public");
            }),
        ),
        (
            net("      port \"http\" {}\n"),
            Expect::Job(|j| assert_eq!(ports(j)[0].host_network, "default")),
        ),
        (
            net("      mode = \"bridge\"\n      port \"http\" {}\n"),
            Expect::Err(
                "t.hcl:4:14: mode: network mode \"bridge\" is not supported: drover runs host networking only (mode = \"host\")",
            ),
        ),
        (
            net("      mode = \"cni/mynet\"\n"),
            Expect::Err(
                "t.hcl:4:14: mode: network mode \"cni/mynet\" is not supported: drover runs host networking only (mode = \"host\")",
            ),
        ),
        (
            net("      port \"http\" {\n        static = 70000\n      }\n"),
            Expect::Err("t.hcl:5:18: static: 70000 is not a port (1-65535)"),
        ),
        (
            net("      port \"http\" {\n        static = -1\n      }\n"),
            Expect::Err("t.hcl:5:18: static: -1 is invalid: it must not be negative"),
        ),
        (
            net(&(0..12_002)
                .map(|i| format!("      port \"p{i}\" {{}}\n"))
                .collect::<String>()),
            Expect::Err(
                "t.hcl:3:5: groups[g].network.ports: 12002 dynamic ports are more than a node's dynamic range (20000-32000) holds: 12001",
            ),
        ),
        (
            net("      port \"http\" {\n        static = 0\n      }\n"),
            Expect::Err(
                "t.hcl:5:18: groups[g].network.ports[0].static: static port 0 is not a port (1-65535): leave static out for a dynamic port",
            ),
        ),
        (
            net("      port \"http\" {}\n      port \"http\" {}\n"),
            Expect::Err(
                "t.hcl:5:12: groups[g].network.ports[1].label: port label \"http\" is already used by ports[0]",
            ),
        ),
        (
            net("      port \"my-port\" {}\n"),
            Expect::Err(
                "t.hcl:4:12: groups[g].network.ports[0].label: port label \"my-port\" cannot name an environment variable (NOMAD_PORT_<label>): use letters, digits and _, not starting with a digit",
            ),
        ),
        (
            net(
                "      port \"a\" {\n        static = 80\n      }\n      port \"b\" {\n        static = 80\n      }\n",
            ),
            Expect::Err(
                "t.hcl:8:18: groups[g].network.ports[1].static: static port 80 is already asked for by port \"a\"",
            ),
        ),
        (
            net("      port \"http\" {\n        statik = 80\n      }\n"),
            Expect::Err(
                "t.hcl:5:9: unknown attribute \"statik\" in port \"http\"; did you mean \"static\"?",
            ),
        ),
        (
            net("      mbits = 10\n"),
            Expect::Err(
                "t.hcl:4:7: \"mbits\" in network is a Nomad feature drover does not support",
            ),
        ),
        (
            job(
                "",
                "      resources {\n        network {\n          port \"http\" {}\n        }\n      }\n",
            ),
            Expect::Err(
                "t.hcl:7:9: network in the resources of task \"t\" is the form Nomad 1.x deprecates: move it to the group as `network { port \"http\" {} }` (the task reads NOMAD_PORT_http)",
            ),
        ),
    ];
    check_all(cases);
}
