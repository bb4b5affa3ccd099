//! A group's `network` block: host mode, its `port "label" { static to host_network }`
//! blocks; and the refusals around it (any other mode, by name; the task-level
//! `resources { network }` of older job files, with the way to the group form).

use super::decoder::{Decoder, join};
use super::job::label_at;
use super::reader::{Item, Shape, walk};
use crate::types::{DEFAULT_HOST_NETWORK, GroupNetwork, PortAsk};
use hcl::edit::structure::Block;

const NETWORK_FIELDS: &[(&str, Shape)] = &[
    ("mode", Shape::Attr),
    ("port", Shape::Labeled),
    ("mbits", Shape::Unsupported),
    ("dns", Shape::Unsupported),
    ("hostname", Shape::Unsupported),
    ("cni", Shape::Unsupported),
];

const PORT_FIELDS: &[(&str, Shape)] = &[
    ("static", Shape::Attr),
    ("to", Shape::Attr),
    ("host_network", Shape::Attr),
];

/// The group's `network` block at `group_path.network`.
pub(super) fn network(d: &mut Decoder<'_>, group_path: &str, block: &Block) -> GroupNetwork {
    let path = join(group_path, "network");
    d.mark(path.clone(), Item::Block(block).at());
    let mut n = GroupNetwork::default();
    for (name, item) in walk(d, &block.body, "network", NETWORK_FIELDS) {
        match (name, item) {
            ("mode", Item::Attr(a)) => {
                // Host networking is all drover runs: anything else is refused by name
                // rather than run as host networking.
                d.read(&path, a, |v, f| {
                    let mode = v.string(f)?;
                    if mode == "host" {
                        Ok(())
                    } else {
                        Err((
                            v.at,
                            format!(
                                "{f}: network mode {mode:?} is not supported: drover runs host networking only (mode = \"host\")"
                            ),
                        ))
                    }
                });
            }
            ("port", Item::Block(b)) => {
                let at = format!("{path}.ports[{}]", n.ports.len());
                n.ports.push(port(d, &at, b));
            }
            _ => {}
        }
    }
    n
}

fn port(d: &mut Decoder<'_>, path: &str, block: &Block) -> PortAsk {
    d.mark(path.to_owned(), Item::Block(block).at());
    let label = block.labels.first().map_or("", |l| l.as_str());
    if let Some(l) = block.labels.first() {
        d.mark(join(path, "label"), label_at(l));
    }
    let mut p = PortAsk {
        label: label.to_owned(),
        static_port: None,
        to: None,
        host_network: DEFAULT_HOST_NETWORK.into(),
    };
    for (name, item) in walk(d, &block.body, &format!("port {label:?}"), PORT_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "static" => p.static_port = d.read(path, a, port_number),
            "to" => p.to = d.read(path, a, port_number),
            "host_network" => {
                if let Some(name) = d.read(path, a, |v, f| v.string(f)) {
                    p.host_network = name;
                }
            }
            _ => {}
        }
    }
    p
}

/// A port number; 0 is left to validation, which says how to ask for a dynamic port.
fn port_number(v: &super::value::Value, field: &str) -> Result<u16, super::value::Fault> {
    let n: u64 = v.whole(field)?;
    u16::try_from(n).map_err(|_| (v.at, format!("{field}: {n} is not a port (1-65535)")))
}

/// Nomad 0.x put ports in a task's `resources`; Nomad 1.x deprecates that for the group's
/// `network` block, which is all drover reads. Refused with the way over.
pub(super) fn refuse_task_network(d: &mut Decoder<'_>, task: &str, block: &Block) {
    d.problems.at(
        Item::Block(block).at(),
        format!(
            "network in the resources of task {task:?} is the form Nomad 1.x deprecates: move it to the group as `network {{ port \"http\" {{}} }}` (the task reads NOMAD_PORT_http)"
        ),
    );
}
