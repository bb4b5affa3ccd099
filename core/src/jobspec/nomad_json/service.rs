//! `Services` of groups and tasks, with their `Checks` and `CheckRestart`: Nomad's native
//! provider only (an empty `Provider` is drover's catalog too, since there is no Consul).

use super::keys::*;
use super::{Reader, kind};
use crate::jobspec::service::{DEFAULT_CHECK_INTERVAL, DEFAULT_CHECK_TIMEOUT};
use crate::types::{AddressMode, CheckKind, CheckRestart, OnUpdate, Service, ServiceCheck};
use serde_json::Value;
use std::collections::BTreeMap;

impl Reader<'_> {
    /// `Services` at `path`: a list of services.
    pub(super) fn services(&mut self, path: &str, v: &Value) -> Vec<Service> {
        let Some(list) = v.as_array() else {
            self.err(
                path,
                format!("expected a list of services, got {}", kind(v)),
            );
            return Vec::new();
        };
        list.iter()
            .enumerate()
            .map(|(i, item)| self.service(&format!("{path}[{i}]"), item))
            .collect()
    }

    fn service(&mut self, path: &str, v: &Value) -> Service {
        let mut s = Service {
            name: String::new(),
            port_label: String::new(),
            tags: Vec::new(),
            meta: BTreeMap::new(),
            address_mode: AddressMode::Auto,
            checks: Vec::new(),
        };
        let mut shared_restart = None;
        let mut checks = None;
        for (name, v) in self.fields(path, v, SERVICE_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Name" => s.name = self.string(&fp, v),
                "PortLabel" => s.port_label = self.string(&fp, v),
                "Tags" => s.tags = self.strings(&fp, v),
                "Meta" => s.meta = self.string_map(&fp, v),
                "AddressMode" => {
                    s.address_mode = self
                        .choice(&fp, v, &AddressMode::NAMES, AddressMode::parse)
                        .unwrap_or_default();
                }
                "Provider" => {
                    let provider = self.string(&fp, v);
                    if provider == "consul" {
                        self.err(
                            &fp,
                            "provider \"consul\" is not supported: drover has no consul, its own catalog is provider \"nomad\"",
                        );
                    } else if provider != "nomad" {
                        self.err(&fp, format!("unknown value {provider:?} (one of nomad)"));
                    }
                }
                "CheckRestart" => shared_restart = Some(self.check_restart(&fp, v)),
                _ => checks = Some((fp, v)),
            }
        }
        if let Some((fp, v)) = checks {
            let Some(list) = v.as_array() else {
                self.err(&fp, format!("expected a list of checks, got {}", kind(v)));
                return s;
            };
            for (i, item) in list.iter().enumerate() {
                let mut c = self.check(&format!("{fp}[{i}]"), item);
                if c.check_restart.is_none() {
                    c.check_restart = shared_restart;
                }
                s.checks.push(c);
            }
        }
        s
    }

    fn check(&mut self, path: &str, v: &Value) -> ServiceCheck {
        let mut c = ServiceCheck {
            name: String::new(),
            kind: CheckKind::Tcp,
            interval: DEFAULT_CHECK_INTERVAL,
            timeout: DEFAULT_CHECK_TIMEOUT,
            on_update: OnUpdate::RequireHealthy,
            check_restart: None,
            task: None,
        };
        let (mut kind_name, mut http_path, mut method) =
            (String::new(), String::new(), String::new());
        let (mut headers, mut expected, mut command, mut args) =
            (BTreeMap::new(), None, String::new(), Vec::new());
        for (name, v) in self.fields(path, v, CHECK_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Name" => c.name = self.string(&fp, v),
                "Type" => kind_name = self.string(&fp, v),
                "Path" => http_path = self.string(&fp, v),
                "Method" => method = self.string(&fp, v),
                "Header" => headers = self.header(&fp, v),
                "ExpectedStatus" => expected = Some(self.whole(&fp, v)),
                "Command" => command = self.string(&fp, v),
                "Args" => args = self.strings(&fp, v),
                "TaskName" => c.task = Some(self.string(&fp, v)).filter(|t| !t.is_empty()),
                "Interval" => c.interval = self.duration(&fp, v),
                "Timeout" => c.timeout = self.duration(&fp, v),
                "OnUpdate" => {
                    c.on_update = self
                        .choice(&fp, v, &OnUpdate::NAMES, OnUpdate::parse)
                        .unwrap_or_default();
                }
                _ => c.check_restart = Some(self.check_restart(&fp, v)),
            }
        }
        c.kind = match kind_name.as_str() {
            "http" => CheckKind::Http {
                path: http_path,
                method: if method.is_empty() {
                    "GET".into()
                } else {
                    method
                },
                headers,
                expected_status: expected,
            },
            "script" => CheckKind::Script { command, args },
            "tcp" => CheckKind::Tcp,
            other => {
                self.err(
                    &format!("{path}.Type"),
                    format!("unknown value {other:?} (one of http, tcp, script)"),
                );
                CheckKind::Tcp
            }
        };
        c
    }

    fn header(&mut self, path: &str, v: &Value) -> BTreeMap<String, Vec<String>> {
        let Some(map) = v.as_object() else {
            self.err(
                path,
                format!("expected an object of string lists, got {}", kind(v)),
            );
            return BTreeMap::new();
        };
        map.iter()
            .map(|(k, item)| (k.clone(), self.strings(&format!("{path}[{k}]"), item)))
            .collect()
    }

    fn check_restart(&mut self, path: &str, v: &Value) -> CheckRestart {
        let mut r = CheckRestart::default();
        for (name, v) in self.fields(path, v, CHECK_RESTART_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Limit" => r.limit = self.whole(&fp, v),
                "Grace" => r.grace = self.duration(&fp, v),
                _ => r.ignore_warnings = self.bool(&fp, v),
            }
        }
        r
    }
}
