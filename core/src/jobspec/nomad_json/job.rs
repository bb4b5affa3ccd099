//! The job object and its job-level parts: constraints, update, periodic, parameterized.

use super::keys::*;
use super::{Reader, kind};
use crate::jobspec::group::GroupDefaults;
use crate::types::{
    Constraint, DeploymentStrategy, HealthCheck, Job, JobId, JobType, Operator,
    ParameterizedConfig, PayloadRequirement, PeriodicConfig, UpdateStrategy,
};
use serde_json::Value;

impl Reader<'_> {
    pub(super) fn job(&mut self, value: &Value) -> Job {
        let p = "Job";
        let fields = self.fields(p, value, JOB_KEYS);
        let mut job = Job::new("", JobType::Service, Vec::new());
        // Empty unless the job names one, as in an HCL file.
        job.namespace.clear();
        job.name = String::new();
        let get = |name: &str| fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        if let Some(v) = get("Type") {
            let names = JobType::ALL.map(JobType::as_str);
            job.job_type = self
                .choice("Job.Type", v, &names, JobType::parse)
                .unwrap_or(JobType::Service);
        }
        if let Some(v) = get("Update") {
            job.update = self.update("Job.Update", v, job.update.clone());
        }
        let mut defaults = GroupDefaults::for_type(job.job_type);
        defaults.update = job.update.clone();
        for &(name, v) in &fields {
            let path = format!("{p}.{name}");
            match name {
                "ID" => job.id = JobId::new(self.string(&path, v)),
                "Name" => job.name = self.string(&path, v),
                "Namespace" => job.namespace = self.string(&path, v),
                "Region" => {
                    let region = self.string(&path, v);
                    if region != "global" {
                        self.err(&path, format!("region {region:?} is not supported: drover runs one region, \"global\""));
                    }
                }
                "Priority" => job.priority = self.whole(&path, v),
                "Datacenters" => job.datacenters = self.strings(&path, v),
                "Meta" => job.meta = self.string_map(&path, v),
                "Constraints" => job.constraints = self.constraints(&path, v),
                "Periodic" => job.periodic = Some(self.periodic(&path, v)),
                "ParameterizedJob" => job.parameterized = Some(self.parameterized(&path, v)),
                "TaskGroups" => {
                    for (i, g) in v
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .enumerate()
                    {
                        let group = self.group(&format!("{path}[{i}]"), g, &defaults);
                        job.groups.push(group);
                    }
                    if !v.is_array() {
                        self.err(
                            &path,
                            format!("expected a list of task groups, got {}", kind(v)),
                        );
                    }
                }
                // Type and Update were read above; the rest are the server's to set.
                _ => {}
            }
        }
        if job.name.is_empty() {
            job.name = job.id.to_string();
        }
        job
    }

    pub(super) fn constraints(&mut self, path: &str, v: &Value) -> Vec<Constraint> {
        let Some(items) = v.as_array() else {
            self.err(
                path,
                format!("expected a list of constraints, got {}", kind(v)),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let mut c = Constraint::new("", Operator::Equal, "");
            for (name, v) in self.fields(&p, item, CONSTRAINT_KEYS) {
                let fp = format!("{p}.{name}");
                match name {
                    "LTarget" => c.l_target = self.string(&fp, v),
                    "RTarget" => c.r_target = self.string(&fp, v),
                    _ => {
                        let names = Operator::ALL.map(|(_, s)| s);
                        c.operator = self
                            .choice(&fp, v, &names, Operator::parse)
                            .unwrap_or(Operator::Equal);
                    }
                }
            }
            out.push(c);
        }
        out
    }

    pub(super) fn update(
        &mut self,
        path: &str,
        v: &Value,
        mut u: UpdateStrategy,
    ) -> UpdateStrategy {
        if v.is_null() {
            return u;
        }
        // Any of the health keys makes the rollout a deployment (Nomad always writes them);
        // `MaxParallel` and `Stagger` alone are the plain rolling update.
        let mut rollout = u.deployment.take();
        for (name, v) in self.fields(path, v, UPDATE_KEYS) {
            let fp = format!("{path}.{name}");
            if !matches!(name, "MaxParallel" | "Stagger") && rollout.is_none() {
                rollout = Some(DeploymentStrategy::default());
            }
            let Some(rollout) = rollout
                .as_mut()
                .filter(|_| !matches!(name, "MaxParallel" | "Stagger"))
            else {
                match name {
                    "MaxParallel" => u.max_parallel = self.whole(&fp, v),
                    _ => u.stagger = self.duration(&fp, v),
                }
                continue;
            };
            match name {
                "MinHealthyTime" => rollout.min_healthy_time = self.duration(&fp, v),
                "HealthyDeadline" => rollout.healthy_deadline = self.duration(&fp, v),
                "ProgressDeadline" => rollout.progress_deadline = self.duration(&fp, v),
                "Canary" => rollout.canary = self.whole(&fp, v),
                "AutoRevert" => rollout.auto_revert = self.bool(&fp, v),
                "AutoPromote" => rollout.auto_promote = self.bool(&fp, v),
                _ => {
                    // Nomad writes `""` for the default.
                    if v.as_str().is_some_and(|s| !s.is_empty()) {
                        let names = ["checks", "task_states"];
                        rollout.health_check = self
                            .choice(&fp, v, &names, HealthCheck::parse)
                            .unwrap_or(rollout.health_check);
                    }
                }
            }
        }
        u.deployment = rollout;
        u
    }

    fn periodic(&mut self, path: &str, v: &Value) -> PeriodicConfig {
        let mut p = PeriodicConfig {
            cron: String::new(),
            prohibit_overlap: false,
            time_zone: String::new(),
            enabled: true,
        };
        for (name, v) in self.fields(path, v, PERIODIC_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Enabled" => p.enabled = self.bool(&fp, v),
                "Spec" => p.cron = self.string(&fp, v),
                "ProhibitOverlap" => p.prohibit_overlap = self.bool(&fp, v),
                "TimeZone" => p.time_zone = self.string(&fp, v),
                _ => {
                    self.choice(&fp, v, &["cron"], |s| (s == "cron").then_some(()));
                }
            }
        }
        p
    }

    fn parameterized(&mut self, path: &str, v: &Value) -> ParameterizedConfig {
        let mut p = ParameterizedConfig::default();
        for (name, v) in self.fields(path, v, PARAMETERIZED_KEYS) {
            let fp = format!("{path}.{name}");
            match name {
                "Payload" => {
                    let names = ["optional", "required", "forbidden"];
                    p.payload = self
                        .choice(&fp, v, &names, |s| match s {
                            "optional" => Some(PayloadRequirement::Optional),
                            "required" => Some(PayloadRequirement::Required),
                            "forbidden" => Some(PayloadRequirement::Forbidden),
                            _ => None,
                        })
                        .unwrap_or_default();
                }
                "MetaRequired" => p.meta_required = self.strings(&fp, v),
                _ => p.meta_optional = self.strings(&fp, v),
            }
        }
        p
    }
}
