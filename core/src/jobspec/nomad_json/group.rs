//! Task groups, their policies, and their tasks.

use super::keys::*;
use super::{Reader, kind};
use crate::jobspec::group::GroupDefaults;
use crate::types::{
    Constraint, DelayFunction, DisconnectPolicy, ReconcileStrategy, ReschedulePolicy, RestartMode,
    RestartPolicy, Task, TaskConfig, TaskGroup,
};
use serde_json::Value;

impl Reader<'_> {
    pub(super) fn group(&mut self, path: &str, v: &Value, defaults: &GroupDefaults) -> TaskGroup {
        let mut g = TaskGroup::new("", 1, Vec::new());
        g.restart = defaults.restart.clone();
        g.reschedule = defaults.reschedule.clone();
        let mut max_client_disconnect = None;
        for (name, v) in self.fields(path, v, GROUP_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Name" => g.name = self.string(&fp, v),
                "Count" => g.count = self.whole(&fp, v),
                "Constraints" => g.constraints.extend(self.constraints(&fp, v)),
                "RestartPolicy" => g.restart = self.restart(&fp, v, g.restart.clone()),
                "ReschedulePolicy" => g.reschedule = self.reschedule(&fp, v, g.reschedule.clone()),
                "Disconnect" => g.disconnect = Some(self.disconnect(&fp, v)),
                "MaxClientDisconnect" => max_client_disconnect = self.window(&fp, v),
                "StopAfterClientDisconnect" => g.stop_after_client_disconnect = self.window(&fp, v),
                "Meta" => g.meta = self.string_map(&fp, v),
                "Update" => g.update = Some(self.update(&fp, v, defaults.update.clone())),
                "Networks" => g.network = self.networks(&fp, v),
                _ => match v.as_array() {
                    Some(tasks) => {
                        for (i, t) in tasks.iter().enumerate() {
                            let task = self.task(&format!("{fp}[{i}]"), t, &mut g.constraints);
                            g.tasks.push(task);
                        }
                    }
                    None => self.err(&fp, format!("expected a list of tasks, got {}", kind(v))),
                },
            }
        }
        if let Some(window) = max_client_disconnect {
            if g.disconnect.is_some() {
                self.err(
                    &format!("{path}.MaxClientDisconnect"),
                    "cannot be used with Disconnect (set Disconnect.LostAfter instead)",
                );
            } else {
                g.disconnect = Some(DisconnectPolicy {
                    lost_after: Some(window),
                    ..DisconnectPolicy::default()
                });
            }
        }
        g
    }

    fn restart(&mut self, path: &str, v: &Value, mut r: RestartPolicy) -> RestartPolicy {
        for (name, v) in self.fields(path, v, RESTART_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Attempts" => r.attempts = self.whole(&fp, v),
                "Interval" => r.interval = self.duration(&fp, v),
                "Delay" => r.delay = self.duration(&fp, v),
                _ => {
                    let parse = |s: &str| match s {
                        "fail" => Some(RestartMode::Fail),
                        "delay" => Some(RestartMode::Delay),
                        _ => None,
                    };
                    r.mode = self
                        .choice(&fp, v, &["fail", "delay"], parse)
                        .unwrap_or(r.mode);
                }
            }
        }
        r
    }

    fn reschedule(&mut self, path: &str, v: &Value, mut r: ReschedulePolicy) -> ReschedulePolicy {
        for (name, v) in self.fields(path, v, RESCHEDULE_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Attempts" => r.attempts = self.whole(&fp, v),
                "Interval" => r.interval = self.duration(&fp, v),
                "Delay" => r.delay = self.duration(&fp, v),
                "MaxDelay" => r.max_delay = self.duration(&fp, v),
                "Unlimited" => r.unlimited = self.bool(&fp, v),
                _ => {
                    let names = ["constant", "exponential", "fibonacci"];
                    r.delay_function = self
                        .choice(&fp, v, &names, DelayFunction::parse)
                        .unwrap_or(r.delay_function);
                }
            }
        }
        r
    }

    fn disconnect(&mut self, path: &str, v: &Value) -> DisconnectPolicy {
        let mut d = DisconnectPolicy::default();
        for (name, v) in self.fields(path, v, DISCONNECT_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "LostAfter" => d.lost_after = self.window(&fp, v),
                "StopOnClientAfter" => d.stop_on_client_after = self.window(&fp, v),
                "Replace" => d.replace = self.bool(&fp, v),
                _ => {
                    let names = [
                        "best_score",
                        "keep_original",
                        "keep_replacement",
                        "longest_running",
                    ];
                    d.reconcile = self
                        .choice(&fp, v, &names, ReconcileStrategy::parse)
                        .unwrap_or(d.reconcile);
                }
            }
        }
        d
    }

    /// A task; its constraints join the group's, as in the HCL reader.
    fn task(&mut self, path: &str, v: &Value, group_constraints: &mut Vec<Constraint>) -> Task {
        let mut t = Task::raw_exec("", "");
        t.driver = String::new();
        for (name, v) in self.fields(path, v, TASK_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Name" => t.name = self.string(&fp, v),
                "Driver" => t.driver = self.string(&fp, v),
                "Config" => t.config = self.config(&fp, v),
                "Env" => t.env = self.string_map(&fp, v),
                "Meta" => t.meta = self.string_map(&fp, v),
                "KillTimeout" => t.kill_timeout = self.duration(&fp, v),
                "Constraints" => group_constraints.extend(self.constraints(&fp, v)),
                _ => {
                    for (name, v) in self.fields(&fp, v, RESOURCES_KEYS) {
                        let rp = format!("{fp}.{name}");
                        match name {
                            "CPU" => t.resources.cpu_mhz = self.whole(&rp, v),
                            "MemoryMB" => t.resources.memory_mb = self.whole(&rp, v),
                            "DiskMB" => t.resources.disk_mb = self.whole(&rp, v),
                            _ if super::is_empty(v) => {}
                            _ => self.err(
                                &rp,
                                "ports in a task's resources are the form Nomad 1.x deprecates: move them to the group's Networks",
                            ),
                        }
                    }
                }
            }
        }
        t
    }

    /// Driver config keeps Nomad's lowercase keys: `command`, `args`, and other drivers'
    /// scalar settings in `extra`.
    fn config(&mut self, path: &str, v: &Value) -> TaskConfig {
        let mut config = TaskConfig::default();
        let Some(map) = v.as_object() else {
            self.err(path, format!("expected an object, got {}", kind(v)));
            return config;
        };
        for (key, v) in map {
            let fp = format!("{path}.{key}");
            match key.as_str() {
                "command" => config.command = self.string(&fp, v),
                "args" => config.args = self.strings(&fp, v),
                _ => {
                    let value = self.string(&fp, v);
                    config.extra.insert(key.clone(), value);
                }
            }
        }
        config
    }
}
