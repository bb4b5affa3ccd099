//! The file and its `job` block: job-level attributes, `update`, `periodic`,
//! `parameterized` and `constraint` blocks. Groups and tasks are in [`super::group`].

use super::decoder::Decoder;
use super::group::{self, GroupDefaults};
use super::reader::{Item, Shape, closest_of, walk};
use crate::types::{
    Constraint, HealthCheck, Job, JobType, Operator, ParameterizedConfig, PayloadRequirement,
    PeriodicConfig, UpdateStrategy,
};
use hcl::edit::structure::{Block, Body};

/// Drover runs one region; Nomad's default region name is accepted so Nomad files parse.
const ONLY_REGION: &str = "global";

const FILE_FIELDS: &[(&str, Shape)] = &[
    ("job", Shape::Labeled),
    // Read before the job by `super::variables`.
    ("variable", Shape::Labeled),
    ("variables", Shape::Blocks),
    ("locals", Shape::Blocks),
];

const JOB_FIELDS: &[(&str, Shape)] = &[
    ("name", Shape::Attr),
    ("namespace", Shape::Attr),
    ("region", Shape::Attr),
    ("datacenters", Shape::Attr),
    ("type", Shape::Attr),
    ("priority", Shape::Attr),
    ("meta", Shape::Map),
    ("constraint", Shape::Blocks),
    ("update", Shape::Block),
    ("reschedule", Shape::Block),
    ("periodic", Shape::Block),
    ("parameterized", Shape::Block),
    ("group", Shape::Labeled),
    ("all_at_once", Shape::Unsupported),
    ("node_pool", Shape::Unsupported),
    ("affinity", Shape::Unsupported),
    ("spread", Shape::Unsupported),
    ("migrate", Shape::Unsupported),
    ("multiregion", Shape::Unsupported),
    ("vault", Shape::Unsupported),
    ("vault_token", Shape::Unsupported),
    ("consul", Shape::Unsupported),
    ("consul_token", Shape::Unsupported),
    ("ui", Shape::Unsupported),
];

const UPDATE_FIELDS: &[(&str, Shape)] = &[
    ("max_parallel", Shape::Attr),
    ("stagger", Shape::Attr),
    ("health_check", Shape::Attr),
    ("min_healthy_time", Shape::Attr),
    ("healthy_deadline", Shape::Attr),
    ("progress_deadline", Shape::Attr),
    ("auto_revert", Shape::Attr),
    ("auto_promote", Shape::Attr),
    ("canary", Shape::Attr),
];

const PERIODIC_FIELDS: &[(&str, Shape)] = &[
    ("cron", Shape::Attr),
    ("prohibit_overlap", Shape::Attr),
    ("time_zone", Shape::Attr),
    ("enabled", Shape::Attr),
    ("crons", Shape::Unsupported),
];

const PARAMETERIZED_FIELDS: &[(&str, Shape)] = &[
    ("payload", Shape::Attr),
    ("meta_required", Shape::Attr),
    ("meta_optional", Shape::Attr),
];

/// The long form plus the operators Nomad lets a constraint name as attributes of their
/// own (`regexp = "…"`, `distinct_hosts = true`).
const CONSTRAINT_FIELDS: &[(&str, Shape)] = &[
    ("attribute", Shape::Attr),
    ("operator", Shape::Attr),
    ("value", Shape::Attr),
    ("version", Shape::Attr),
    ("semver", Shape::Attr),
    ("regexp", Shape::Attr),
    ("set_contains", Shape::Attr),
    ("set_contains_any", Shape::Attr),
    ("distinct_hosts", Shape::Attr),
    ("distinct_property", Shape::Attr),
];

/// Decodes the whole file: exactly one `job` block. Returns `None` when there is none.
pub(super) fn decode_file(d: &mut Decoder<'_>, body: &Body) -> Option<Job> {
    let items = walk(d, body, "the job file", FILE_FIELDS);
    let mut jobs = items.iter().filter_map(|(name, item)| match item {
        Item::Block(b) if *name == "job" => Some(*b),
        _ => None,
    });
    let Some(first) = jobs.next() else {
        if d.problems.is_empty() {
            d.problems.push(super::Problem {
                position: None,
                message: "no job block found: a job file holds one `job \"<id>\" { … }`".into(),
            });
        }
        return None;
    };
    for extra in jobs {
        let first_at = d.problems.lines.position(Item::Block(first).at());
        d.problems.at(
            Item::Block(extra).at(),
            format!("a job file holds one job block (the first is at {first_at})"),
        );
    }
    Some(decode_job(d, first))
}

fn decode_job(d: &mut Decoder<'_>, block: &Block) -> Job {
    d.mark(String::new(), Item::Block(block).at());
    let id = block.labels.first().map_or("", |l| l.as_str());
    if let Some(label) = block.labels.first() {
        d.mark("id".into(), label_at(label));
    }
    let items = walk(d, &block.body, &format!("job {id:?}"), JOB_FIELDS);
    let mut job = Job::new(id, JobType::Service, Vec::new());
    // Empty unless the file names one: whoever submits the job decides then (the CLI's
    // -namespace, else the servers' default).
    job.namespace.clear();

    // The type and a job-level reschedule block set the defaults every group starts from, so
    // they are read before the groups whatever order the file has them in.
    for (name, item) in &items {
        if let (&"type", Item::Attr(a)) = (name, item) {
            if let Some(t) = d.read("", a, job_type) {
                job.job_type = t;
            }
        }
    }
    let mut defaults = GroupDefaults::for_type(job.job_type);
    for (name, item) in &items {
        if let (&"reschedule", Item::Block(b)) = (name, item) {
            defaults.reschedule =
                group::reschedule(d, "reschedule", b, defaults.reschedule.clone());
        }
    }
    // The job's update block is the base of every group's own.
    for (name, item) in &items {
        if let (&"update", Item::Block(b)) = (name, item) {
            job.update = update(d, "update", b, job.update.clone());
        }
    }
    defaults.update = job.update.clone();

    for (name, item) in items {
        match (name, item) {
            ("type" | "reschedule" | "update", _) => {}
            ("name", Item::Attr(a)) => {
                if let Some(v) = d.read("", a, |v, f| v.string(f)) {
                    job.name = v;
                }
            }
            ("namespace", Item::Attr(a)) => {
                if let Some(v) = d.read("", a, |v, f| v.string(f)) {
                    job.namespace = v;
                }
            }
            ("region", Item::Attr(a)) => {
                d.read("", a, |v, f| {
                    let region = v.string(f)?;
                    if region == ONLY_REGION {
                        Ok(())
                    } else {
                        Err((v.at, format!("region {region:?} is not supported: drover runs one region, {ONLY_REGION:?}")))
                    }
                });
            }
            ("datacenters", Item::Attr(a)) => {
                if let Some(v) = d.read("", a, |v, f| v.strings(f)) {
                    job.datacenters = v;
                }
            }
            ("priority", Item::Attr(a)) => {
                if let Some(v) = d.read("", a, |v, f| v.whole::<u8>(f)) {
                    job.priority = v;
                }
            }
            ("meta", item) => job.meta = d.map("", "meta", item),
            ("constraint", Item::Block(b)) => {
                let path = format!("constraints[{}]", job.constraints.len());
                if let Some(c) = constraint(d, &path, b) {
                    job.constraints.push(c);
                }
            }
            ("periodic", Item::Block(b)) => job.periodic = Some(periodic(d, b)),
            ("parameterized", Item::Block(b)) => job.parameterized = Some(parameterized(d, b)),
            ("group", Item::Block(b)) => {
                let index = job.groups.len();
                job.groups.push(group::decode_group(d, index, b, &defaults));
            }
            _ => {}
        }
    }
    job
}

/// Where a block's label is written.
pub(super) fn label_at(label: &hcl::edit::structure::BlockLabel) -> usize {
    use hcl::edit::Span as _;
    label.span().map_or(0, |s| s.start)
}

fn job_type(v: &super::value::Value, field: &str) -> Result<JobType, super::value::Fault> {
    let text = v.string(field)?;
    JobType::parse(&text).ok_or_else(|| {
        let names = JobType::ALL.map(JobType::as_str);
        (v.at, one_of(field, &text, &names))
    })
}

/// `field: unknown value "x" (one of a, b, c); did you mean "y"?`
pub(super) fn one_of(field: &str, text: &str, names: &[&str]) -> String {
    let hint = closest_of(text, names.iter().copied())
        .map(|c| format!("; did you mean {c:?}?"))
        .unwrap_or_default();
    format!(
        "{field}: unknown value {text:?} (one of {}){hint}",
        names.join(", ")
    )
}

pub(super) fn update(
    d: &mut Decoder<'_>,
    path: &str,
    block: &Block,
    mut u: UpdateStrategy,
) -> UpdateStrategy {
    d.mark(path.to_owned(), Item::Block(block).at());
    // Writing the block makes the rollout a deployment (Nomad's model), starting from
    // what the job's block set, else Nomad's defaults.
    let mut rollout = u.deployment.take().unwrap_or_default();
    for (name, item) in walk(d, &block.body, "update", UPDATE_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "max_parallel" => {
                if let Some(v) = d.read(path, a, |v, f| v.whole(f)) {
                    u.max_parallel = v;
                }
            }
            "stagger" => {
                if let Some(v) = d.read(path, a, |v, f| v.duration(f)) {
                    u.stagger = v;
                }
            }
            "health_check" => {
                let check = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    HealthCheck::parse(&text)
                        .ok_or_else(|| (v.at, one_of(f, &text, &["checks", "task_states"])))
                });
                rollout.health_check = check.unwrap_or(rollout.health_check);
            }
            "min_healthy_time" => {
                if let Some(v) = d.read(path, a, |v, f| v.duration(f)) {
                    rollout.min_healthy_time = v;
                }
            }
            "healthy_deadline" => {
                if let Some(v) = d.read(path, a, |v, f| v.duration(f)) {
                    rollout.healthy_deadline = v;
                }
            }
            "progress_deadline" => {
                if let Some(v) = d.read(path, a, |v, f| v.duration(f)) {
                    rollout.progress_deadline = v;
                }
            }
            "canary" => {
                if let Some(v) = d.read(path, a, |v, f| v.whole(f)) {
                    rollout.canary = v;
                }
            }
            "auto_promote" => {
                if let Some(v) = d.read(path, a, |v, f| v.bool(f)) {
                    rollout.auto_promote = v;
                }
            }
            "auto_revert" => {
                if let Some(v) = d.read(path, a, |v, f| v.bool(f)) {
                    rollout.auto_revert = v;
                }
            }
            _ => {}
        }
    }
    u.deployment = Some(rollout);
    u
}

fn periodic(d: &mut Decoder<'_>, block: &Block) -> PeriodicConfig {
    let path = "periodic";
    d.mark(path.into(), Item::Block(block).at());
    let mut p = PeriodicConfig {
        cron: String::new(),
        prohibit_overlap: false,
        time_zone: String::new(),
        enabled: true,
    };
    for (name, item) in walk(d, &block.body, "periodic", PERIODIC_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "cron" => p.cron = d.read(path, a, |v, f| v.string(f)).unwrap_or_default(),
            "time_zone" => p.time_zone = d.read(path, a, |v, f| v.string(f)).unwrap_or_default(),
            "prohibit_overlap" => {
                p.prohibit_overlap = d.read(path, a, |v, f| v.bool(f)).unwrap_or_default()
            }
            "enabled" => p.enabled = d.read(path, a, |v, f| v.bool(f)).unwrap_or(true),
            _ => {}
        }
    }
    p
}

fn parameterized(d: &mut Decoder<'_>, block: &Block) -> ParameterizedConfig {
    let path = "parameterized";
    d.mark(path.into(), Item::Block(block).at());
    let mut p = ParameterizedConfig::default();
    for (name, item) in walk(d, &block.body, "parameterized", PARAMETERIZED_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "payload" => {
                let payload = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    match text.as_str() {
                        "optional" => Ok(PayloadRequirement::Optional),
                        "required" => Ok(PayloadRequirement::Required),
                        "forbidden" => Ok(PayloadRequirement::Forbidden),
                        _ => Err((
                            v.at,
                            one_of(f, &text, &["optional", "required", "forbidden"]),
                        )),
                    }
                });
                if let Some(payload) = payload {
                    p.payload = payload;
                }
            }
            "meta_required" => {
                p.meta_required = d.read(path, a, |v, f| v.strings(f)).unwrap_or_default()
            }
            "meta_optional" => {
                p.meta_optional = d.read(path, a, |v, f| v.strings(f)).unwrap_or_default()
            }
            _ => {}
        }
    }
    p
}

/// A `constraint` block at `path` (`constraints[2]`, `groups[0].constraints[1]`), in
/// Nomad's long form (`attribute`, `operator`, `value`) or with an operator shorthand.
pub(super) fn constraint(d: &mut Decoder<'_>, path: &str, block: &Block) -> Option<Constraint> {
    d.mark(path.to_owned(), Item::Block(block).at());
    let mut l_target = String::new();
    let mut r_target = String::new();
    let mut operator: Option<(Operator, &'static str)> = None;
    let mut ok = true;
    for (name, item) in walk(d, &block.body, "constraint", CONSTRAINT_FIELDS) {
        let Item::Attr(a) = item else { continue };
        let chosen = match name {
            "attribute" => {
                l_target = d.read(path, a, |v, f| v.string(f)).unwrap_or_default();
                None
            }
            "value" => {
                r_target = d.read(path, a, |v, f| v.string(f)).unwrap_or_default();
                None
            }
            "operator" => {
                let parsed = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    Operator::parse(&text).ok_or_else(|| {
                        let names = Operator::ALL.map(|(_, s)| s);
                        (v.at, one_of(f, &text, &names))
                    })
                });
                ok &= parsed.is_some();
                parsed.map(|op| (op, "operator"))
            }
            "distinct_hosts" => {
                let on = d.read(path, a, |v, f| v.bool(f));
                ok &= on.is_some();
                // `false` is kept as the constraint's value: written, so never dropped.
                if on == Some(false) {
                    r_target = "false".into();
                }
                Some((Operator::DistinctHosts, "distinct_hosts"))
            }
            "distinct_property" => {
                l_target = d.read(path, a, |v, f| v.string(f)).unwrap_or_default();
                Some((Operator::DistinctProperty, "distinct_property"))
            }
            shorthand => {
                r_target = d.read(path, a, |v, f| v.string(f)).unwrap_or_default();
                Operator::parse(shorthand).map(|op| (op, shorthand))
            }
        };
        if let Some((op, spelled)) = chosen {
            if let Some((_, earlier)) = operator {
                d.problems.at(
                    Item::Attr(a).at(),
                    format!("constraint sets both {earlier:?} and {spelled:?}: a constraint has one operator"),
                );
                ok = false;
            }
            operator = Some((op, spelled));
        }
    }
    ok.then(|| {
        Constraint::new(
            l_target,
            operator.map_or(Operator::Equal, |(op, _)| op),
            r_target,
        )
    })
}
