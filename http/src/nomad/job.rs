//! Nomad's `Job` as its API module writes it, from drover's job. Reading one back in is
//! core's job (`drover_core::jobspec::decode_nomad_job`), so the keys written here are
//! the keys that reader takes: a job read from the API registers again unchanged.

use super::{ns, time_ns};
use drover_core::types::{
    Constraint, DelayFunction, Job, MigrateStrategy, PayloadRequirement, ReconcileStrategy,
    RestartMode, RestartPolicy, Task, TaskGroup, UpdateStrategy,
};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadJob {
    pub region: &'static str,
    pub namespace: String,
    #[serde(rename = "ID")]
    pub id: String,
    pub name: String,
    #[serde(rename = "Type")]
    pub job_type: &'static str,
    pub priority: u8,
    pub datacenters: Vec<String>,
    pub constraints: Vec<NomadConstraint>,
    pub task_groups: Vec<NomadGroup>,
    pub update: NomadUpdate,
    pub periodic: Option<NomadPeriodic>,
    pub parameterized_job: Option<NomadParameterized>,
    pub meta: BTreeMap<String, String>,
    pub stop: bool,
    #[serde(rename = "ParentID")]
    pub parent_id: Option<String>,
    pub dispatched: bool,
    pub status: &'static str,
    pub status_description: &'static str,
    pub stable: bool,
    pub version: u64,
    pub submit_time: u64,
    pub create_index: u64,
    pub modify_index: u64,
    pub job_modify_index: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadConstraint {
    #[serde(rename = "LTarget")]
    pub l_target: String,
    #[serde(rename = "RTarget")]
    pub r_target: String,
    pub operand: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadUpdate {
    pub max_parallel: u32,
    pub stagger: u64,
    /// Written only for a rollout that is a deployment: core's reader takes any of these
    /// keys as the sign of one.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<NomadDeploymentStrategy>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadDeploymentStrategy {
    pub health_check: &'static str,
    pub min_healthy_time: u64,
    pub healthy_deadline: u64,
    pub progress_deadline: u64,
    pub canary: u32,
    pub auto_promote: bool,
    pub auto_revert: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadPeriodic {
    pub enabled: bool,
    pub spec: String,
    pub spec_type: &'static str,
    pub prohibit_overlap: bool,
    pub time_zone: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadParameterized {
    /// Left out while it is the default, which core's reader takes only when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<&'static str>,
    pub meta_required: Vec<String>,
    pub meta_optional: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadGroup {
    pub name: String,
    pub count: u32,
    pub constraints: Vec<NomadConstraint>,
    pub tasks: Vec<NomadTask>,
    pub restart_policy: NomadRestart,
    pub reschedule_policy: NomadReschedule,
    pub disconnect: Option<NomadDisconnect>,
    pub stop_after_client_disconnect: Option<u64>,
    pub update: Option<NomadUpdate>,
    pub ephemeral_disk: Option<NomadEphemeralDisk>,
    pub migrate: NomadMigrate,
    /// Nomad lists a group's networks; drover's groups have at most one.
    pub networks: Vec<NomadNetwork>,
    pub meta: BTreeMap<String, String>,
    pub services: Vec<super::service::NomadService>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadNetwork {
    pub mode: &'static str,
    /// Static ports (`Value` is the host port).
    pub reserved_ports: Vec<NomadPort>,
    /// Ports the scheduler picks (`Value` 0 in a job).
    pub dynamic_ports: Vec<NomadPort>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadPort {
    pub label: String,
    pub value: u16,
    pub to: u16,
    pub host_network: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadEphemeralDisk {
    pub sticky: bool,
    #[serde(rename = "SizeMB")]
    pub size_mb: u64,
    pub migrate: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadMigrate {
    pub max_parallel: u32,
    pub health_check: &'static str,
    pub min_healthy_time: u64,
    pub healthy_deadline: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadLifecycle {
    pub hook: &'static str,
    pub sidecar: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadRestart {
    pub attempts: u32,
    pub interval: u64,
    pub delay: u64,
    pub mode: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadReschedule {
    pub attempts: u32,
    pub interval: u64,
    pub delay: u64,
    pub delay_function: &'static str,
    pub max_delay: u64,
    pub unlimited: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadDisconnect {
    pub lost_after: u64,
    pub replace: bool,
    pub reconcile: &'static str,
    pub stop_on_client_after: Option<u64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadTask {
    pub name: String,
    pub driver: String,
    pub config: BTreeMap<String, serde_json::Value>,
    pub env: BTreeMap<String, String>,
    pub resources: NomadResources,
    pub kill_timeout: u64,
    pub kill_signal: String,
    pub user: String,
    pub restart_policy: Option<NomadRestart>,
    pub lifecycle: Option<NomadLifecycle>,
    pub meta: BTreeMap<String, String>,
    pub services: Vec<super::service::NomadService>,
    /// drover: the artifact whose warm nodes the task prefers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct NomadResources {
    #[serde(rename = "CPU")]
    pub cpu: u64,
    #[serde(rename = "MemoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "DiskMB")]
    pub disk_mb: u64,
}

impl From<&Job> for NomadJob {
    fn from(j: &Job) -> Self {
        NomadJob {
            region: "global",
            namespace: j.namespace.clone(),
            id: j.id.to_string(),
            name: j.name.clone(),
            job_type: j.job_type.as_str(),
            priority: j.priority,
            datacenters: j.datacenters.clone(),
            constraints: j.constraints.iter().map(constraint).collect(),
            task_groups: j.groups.iter().map(group).collect(),
            update: update(&j.update),
            periodic: j.periodic.as_ref().map(|p| NomadPeriodic {
                enabled: p.enabled,
                spec: p.cron.clone(),
                spec_type: "cron",
                prohibit_overlap: p.prohibit_overlap,
                time_zone: p.time_zone.clone(),
            }),
            parameterized_job: j.parameterized.as_ref().map(|p| NomadParameterized {
                payload: match p.payload {
                    PayloadRequirement::Optional => None,
                    PayloadRequirement::Required => Some("required"),
                    PayloadRequirement::Forbidden => Some("forbidden"),
                },
                meta_required: p.meta_required.clone(),
                meta_optional: p.meta_optional.clone(),
            }),
            meta: j.meta.clone(),
            stop: j.stop,
            parent_id: j.parent_id.as_ref().map(ToString::to_string),
            dispatched: j.parent_id.is_some() && j.periodic.is_none() && !j.payload.is_empty(),
            status: j.status.as_str(),
            status_description: "",
            stable: false,
            version: j.version,
            submit_time: time_ns(j.submit_time.as_millis()),
            create_index: j.create_index,
            modify_index: j.modify_index,
            job_modify_index: j.job_modify_index,
        }
    }
}

pub fn constraint(c: &Constraint) -> NomadConstraint {
    NomadConstraint {
        l_target: c.l_target.clone(),
        r_target: c.r_target.clone(),
        operand: c.operator.as_str(),
    }
}

fn update(u: &UpdateStrategy) -> NomadUpdate {
    NomadUpdate {
        max_parallel: u.max_parallel,
        stagger: ns(u.stagger),
        deployment: u.deployment.as_ref().map(|d| NomadDeploymentStrategy {
            health_check: d.health_check.as_str(),
            min_healthy_time: ns(d.min_healthy_time),
            healthy_deadline: ns(d.healthy_deadline),
            progress_deadline: ns(d.progress_deadline),
            canary: d.canary,
            auto_promote: d.auto_promote,
            auto_revert: d.auto_revert,
        }),
    }
}

fn group(g: &TaskGroup) -> NomadGroup {
    NomadGroup {
        name: g.name.clone(),
        count: g.count,
        constraints: g.constraints.iter().map(constraint).collect(),
        tasks: g.tasks.iter().map(task).collect(),
        restart_policy: restart(&g.restart),
        reschedule_policy: NomadReschedule {
            attempts: g.reschedule.attempts,
            interval: ns(g.reschedule.interval),
            delay: ns(g.reschedule.delay),
            delay_function: match g.reschedule.delay_function {
                DelayFunction::Constant => "constant",
                DelayFunction::Exponential => "exponential",
                DelayFunction::Fibonacci => "fibonacci",
            },
            max_delay: ns(g.reschedule.max_delay),
            unlimited: g.reschedule.unlimited,
        },
        disconnect: g.disconnect.as_ref().map(|d| NomadDisconnect {
            lost_after: d.lost_after.map_or(0, ns),
            replace: d.replace,
            reconcile: match d.reconcile {
                ReconcileStrategy::BestScore => "best_score",
                ReconcileStrategy::KeepOriginal => "keep_original",
                ReconcileStrategy::KeepReplacement => "keep_replacement",
                ReconcileStrategy::LongestRunning => "longest_running",
            },
            stop_on_client_after: d.stop_on_client_after.map(ns),
        }),
        stop_after_client_disconnect: g.stop_after_client_disconnect.map(ns),
        update: g.update.as_ref().map(update),
        ephemeral_disk: g.ephemeral_disk.map(|d| NomadEphemeralDisk {
            sticky: false,
            size_mb: d.size_mb,
            migrate: false,
        }),
        migrate: migrate(&g.migrate),
        networks: g.network.iter().map(network).collect(),
        meta: g.meta.clone(),
        services: super::service::services(&g.services),
    }
}

fn network(n: &drover_core::types::GroupNetwork) -> NomadNetwork {
    let port = |p: &drover_core::types::PortAsk| NomadPort {
        label: p.label.clone(),
        value: p.static_port.unwrap_or(0),
        to: p.to.unwrap_or(0),
        host_network: p.host_network.clone(),
    };
    NomadNetwork {
        mode: "host",
        reserved_ports: n
            .ports
            .iter()
            .filter(|p| p.static_port.is_some())
            .map(port)
            .collect(),
        dynamic_ports: n
            .ports
            .iter()
            .filter(|p| p.static_port.is_none())
            .map(port)
            .collect(),
    }
}

fn restart(r: &RestartPolicy) -> NomadRestart {
    NomadRestart {
        attempts: r.attempts,
        interval: ns(r.interval),
        delay: ns(r.delay),
        mode: match r.mode {
            RestartMode::Fail => "fail",
            RestartMode::Delay => "delay",
        },
    }
}

fn migrate(m: &MigrateStrategy) -> NomadMigrate {
    NomadMigrate {
        max_parallel: m.max_parallel,
        health_check: m.health_check.as_str(),
        min_healthy_time: ns(m.min_healthy_time),
        healthy_deadline: ns(m.healthy_deadline),
    }
}

fn task(t: &Task) -> NomadTask {
    let mut config: BTreeMap<String, serde_json::Value> = t
        .config
        .extra
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    if !t.config.command.is_empty() {
        config.insert("command".into(), t.config.command.clone().into());
    }
    if !t.config.args.is_empty() {
        config.insert("args".into(), t.config.args.clone().into());
    }
    if !t.config.ports.is_empty() {
        config.insert("ports".into(), t.config.ports.clone().into());
    }
    NomadTask {
        name: t.name.clone(),
        driver: t.driver.clone(),
        config,
        env: t.env.clone(),
        resources: NomadResources {
            cpu: t.resources.cpu_mhz,
            memory_mb: t.resources.memory_mb,
            disk_mb: t.resources.disk_mb,
        },
        kill_timeout: ns(t.kill_timeout),
        kill_signal: t.kill_signal.clone().unwrap_or_default(),
        user: t.user.clone().unwrap_or_default(),
        restart_policy: t.restart.as_ref().map(restart),
        lifecycle: t.lifecycle.as_ref().map(|l| NomadLifecycle {
            hook: l.hook.as_str(),
            sidecar: l.sidecar,
        }),
        meta: t.meta.clone(),
        services: super::service::services(&t.services),
        snapshot: t.snapshot.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::NomadJob;

    /// Every example job file, written as Nomad's JSON and read back by core's reader, is
    /// the job it was: what the API answers registers again unchanged.
    #[test]
    fn jobs_round_trip_through_nomads_json() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("examples") {
            let path = entry.expect("entry").path();
            let name = path.display().to_string();
            if !name.ends_with(".hcl") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let job = drover_core::jobspec::parse_hcl(&text, &name).expect("example parses");
            let json = serde_json::to_value(NomadJob::from(&job)).expect("encodes");
            let back = drover_core::jobspec::decode_nomad_job(&json, &name)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{json:#}"));
            assert_eq!(back, job, "{name}");
            seen += 1;
        }
        assert!(seen >= 3, "only {seen} examples found in {dir}");
    }
}
