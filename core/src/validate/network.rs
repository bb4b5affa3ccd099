//! The checks of a group's `network` block: labels that can name environment variables,
//! each once; static ports that are ports, each asked once per host network; and no more
//! dynamic ports than a node's dynamic range can hold.
//!
//! Ports are addressed by index (`network.ports[1].static`): a label may be the very thing
//! that is wrong.

use super::{Report, show};
use crate::types::{DEFAULT_MAX_DYNAMIC_PORT, DEFAULT_MIN_DYNAMIC_PORT, GroupNetwork};
use std::collections::HashMap;

/// Whether `name` can follow `NOMAD_PORT_` in an environment variable: ASCII letters,
/// digits and `_`, not starting with a digit.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn check_network(r: &mut Report<'_>, group: &str, n: &GroupNetwork) {
    let p = format!("{group}.network");
    let mut labels: HashMap<&str, usize> = HashMap::new();
    let mut statics: HashMap<(&str, u16), &str> = HashMap::new();
    for (i, port) in n.ports.iter().enumerate() {
        let at = format!("{p}.ports[{i}]");
        if r.ident(&at, "label", "port label", &port.label) {
            if !is_env_name(&port.label) {
                r.err(
                    &at,
                    "label",
                    format!(
                        "port label {} cannot name an environment variable (NOMAD_PORT_<label>): use letters, digits and _, not starting with a digit",
                        show(&port.label)
                    ),
                );
            } else if let Some(first) = labels.insert(&port.label, i) {
                r.err(
                    &at,
                    "label",
                    format!(
                        "port label {} is already used by ports[{first}]",
                        show(&port.label)
                    ),
                );
            }
        }
        r.ident(&at, "host_network", "host_network", &port.host_network);
        match port.static_port {
            Some(0) => r.err(
                &at,
                "static",
                "static port 0 is not a port (1-65535): leave static out for a dynamic port",
            ),
            Some(value) => {
                if let Some(other) = statics.insert((&port.host_network, value), &port.label) {
                    r.err(
                        &at,
                        "static",
                        format!(
                            "static port {value} is already asked for by port {}",
                            show(other)
                        ),
                    );
                }
            }
            None => {}
        }
        if port.to == Some(0) {
            r.err(
                &at,
                "to",
                "to 0 is not a port (1-65535): leave to out to bind the host port",
            );
        }
    }
    let dynamic = n.dynamic_count();
    let holds = usize::from(DEFAULT_MAX_DYNAMIC_PORT - DEFAULT_MIN_DYNAMIC_PORT) + 1;
    if dynamic > holds {
        r.err(
            &p,
            "ports",
            format!(
                "{dynamic} dynamic ports are more than a node's dynamic range ({DEFAULT_MIN_DYNAMIC_PORT}-{DEFAULT_MAX_DYNAMIC_PORT}) holds: {holds}"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::is_env_name;

    #[test]
    fn env_names_are_letters_digits_and_underscores() {
        for (name, want) in [
            ("http", true),
            ("HTTP_2", true),
            ("_x", true),
            ("2http", false),
            ("my-port", false),
            ("a.b", false),
            ("", false),
            ("é", false),
        ] {
            assert_eq!(is_env_name(name), want, "{name:?}");
        }
    }
}
