//! A group's `Networks` (one host-mode network: its `ReservedPorts` are static, its
//! `DynamicPorts` picked by the scheduler), and the refusal of a task's `Resources.Networks`.

use super::keys::*;
use super::{Reader, kind};
use crate::types::{DEFAULT_HOST_NETWORK, GroupNetwork, PortAsk};
use serde_json::Value;

impl Reader<'_> {
    /// `Networks` at `path`: a list of at most one network.
    pub(super) fn networks(&mut self, path: &str, v: &Value) -> Option<GroupNetwork> {
        let Some(list) = v.as_array() else {
            self.err(
                path,
                format!("expected a list of networks, got {}", kind(v)),
            );
            return None;
        };
        if list.len() > 1 {
            self.err(path, "a group has at most one network");
        }
        let first = list.first()?;
        let path = format!("{path}[0]");
        let mut n = GroupNetwork::default();
        for (name, v) in self.fields(&path, first, NETWORK_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Mode" => {
                    let mode = self.string(&fp, v);
                    if !(mode.is_empty() || mode == "host") {
                        self.err(
                            &fp,
                            format!(
                                "network mode {mode:?} is not supported: drover runs host networking only (\"host\")"
                            ),
                        );
                    }
                }
                "ReservedPorts" => n.ports.extend(self.ports(&fp, v, true)),
                _ => n.ports.extend(self.ports(&fp, v, false)),
            }
        }
        Some(n)
    }

    fn ports(&mut self, path: &str, v: &Value, reserved: bool) -> Vec<PortAsk> {
        let Some(list) = v.as_array() else {
            self.err(path, format!("expected a list of ports, got {}", kind(v)));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in list.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let mut p = PortAsk::dynamic("");
            let mut value = 0u16;
            for (name, v) in self.fields(&at, item, PORT_KEYS) {
                let fp = format!("{at}.{name}");
                match name {
                    "Label" => p.label = self.string(&fp, v),
                    "Value" => value = self.port(&fp, v),
                    "To" => p.to = Some(self.port(&fp, v)).filter(|to| *to != 0),
                    _ => {
                        let net = self.string(&fp, v);
                        p.host_network = if net.is_empty() {
                            DEFAULT_HOST_NETWORK.into()
                        } else {
                            net
                        };
                    }
                }
            }
            // A reserved port is static even at 0, which validation then refuses; a value
            // on a dynamic port is what Nomad last assigned and means nothing here.
            if reserved {
                p.static_port = Some(value);
            }
            out.push(p);
        }
        out
    }

    fn port(&mut self, path: &str, v: &Value) -> u16 {
        match v.as_u64() {
            Some(n) => u16::try_from(n).unwrap_or_else(|_| {
                self.err(path, format!("{n} is not a port (1-65535)"));
                0
            }),
            None => {
                self.err(path, format!("expected a port number, got {}", kind(v)));
                0
            }
        }
    }
}
