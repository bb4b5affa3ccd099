//! Task groups, their policies, and their tasks.

use super::keys::*;
use super::{Reader, kind};
use crate::jobspec::group::GroupDefaults;
use crate::types::{
    Constraint, DelayFunction, DisconnectPolicy, EphemeralDisk, HealthCheck, Lifecycle,
    LifecycleHook, MigrateStrategy, ReconcileStrategy, ReschedulePolicy, RestartMode,
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
                "EphemeralDisk" => g.ephemeral_disk = Some(self.ephemeral_disk(&fp, v)),
                "Migrate" => g.migrate = self.migrate(&fp, v, g.migrate.clone()),
                "Networks" => g.network = self.networks(&fp, v),
                "Services" => g.services = self.services(&fp, v),
                _ => match v.as_array() {
                    Some(tasks) => {
                        for (i, t) in tasks.iter().enumerate() {
                            let at = format!("{fp}[{i}]");
                            let task = self.task(&at, t, &mut g.constraints, &defaults.restart);
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

    fn ephemeral_disk(&mut self, path: &str, v: &Value) -> EphemeralDisk {
        let mut disk = EphemeralDisk {
            size_mb: EphemeralDisk::DEFAULT_SIZE_MB,
        };
        for (name, v) in self.fields(path, v, EPHEMERAL_DISK_KEYS) {
            if name == "SizeMB" {
                disk.size_mb = self.whole(&format!("{path}.{name}"), v);
            }
        }
        disk
    }

    fn migrate(&mut self, path: &str, v: &Value, mut m: MigrateStrategy) -> MigrateStrategy {
        for (name, v) in self.fields(path, v, MIGRATE_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "MaxParallel" => m.max_parallel = self.whole(&fp, v),
                "MinHealthyTime" => m.min_healthy_time = self.duration(&fp, v),
                "HealthyDeadline" => m.healthy_deadline = self.duration(&fp, v),
                _ => {
                    let names = ["checks", "task_states"];
                    m.health_check = self
                        .choice(&fp, v, &names, HealthCheck::parse)
                        .unwrap_or(m.health_check);
                }
            }
        }
        m
    }

    /// Nomad writes `"Hook": ""` for a task without a lifecycle.
    fn lifecycle(&mut self, path: &str, v: &Value) -> Option<Lifecycle> {
        let mut hook = None;
        let mut sidecar = false;
        for (name, v) in self.fields(path, v, LIFECYCLE_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Hook" if v.as_str() == Some("") => {}
                "Hook" => {
                    let names = LifecycleHook::ALL.map(LifecycleHook::as_str);
                    hook = self.choice(&fp, v, &names, LifecycleHook::parse);
                }
                _ => sidecar = self.bool(&fp, v),
            }
        }
        Some(Lifecycle {
            hook: hook?,
            sidecar,
        })
    }

    /// A task; its constraints join the group's, as in the HCL reader. Its own restart
    /// policy starts from the job type's defaults, as in the HCL reader.
    fn task(
        &mut self,
        path: &str,
        v: &Value,
        group_constraints: &mut Vec<Constraint>,
        default_restart: &RestartPolicy,
    ) -> Task {
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
                "Services" => t.services = self.services(&fp, v),
                "KillTimeout" => t.kill_timeout = self.duration(&fp, v),
                "Constraints" => group_constraints.extend(self.constraints(&fp, v)),
                "Snapshot" => t.snapshot = Some(self.string(&fp, v)),
                "User" => t.user = Some(self.string(&fp, v)).filter(|u| !u.is_empty()),
                "KillSignal" => t.kill_signal = Some(self.string(&fp, v)).filter(|s| !s.is_empty()),
                "RestartPolicy" => t.restart = Some(self.restart(&fp, v, default_restart.clone())),
                "Lifecycle" => t.lifecycle = self.lifecycle(&fp, v),
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

    /// Driver config keeps Nomad's lowercase keys: `command`, `args`, docker's `ports`, and
    /// other drivers' scalar settings in `extra`.
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
                "ports" => config.ports = self.strings(&fp, v),
                _ => {
                    let value = self.string(&fp, v);
                    config.extra.insert(key.clone(), value);
                }
            }
        }
        config
    }
}
