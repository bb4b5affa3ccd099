//! `group` blocks and their policies: `restart`, `reschedule`, `disconnect` (and the older
//! `max_client_disconnect` and `stop_after_client_disconnect` attributes); its `network`
//! block is read by [`super::network`].

use super::decoder::{Decoder, join};
use super::job::{constraint, label_at, one_of, update};
use super::reader::{Item, Shape, walk};
use super::task::decode_task;
use crate::types::{
    DelayFunction, DisconnectPolicy, JobType, ReconcileStrategy, ReschedulePolicy, RestartMode,
    RestartPolicy, TaskGroup, UpdateStrategy,
};
use hcl::edit::structure::Block;
use std::time::Duration;

const GROUP_FIELDS: &[(&str, Shape)] = &[
    ("count", Shape::Attr),
    ("constraint", Shape::Blocks),
    ("restart", Shape::Block),
    ("reschedule", Shape::Block),
    ("disconnect", Shape::Block),
    ("max_client_disconnect", Shape::Attr),
    ("stop_after_client_disconnect", Shape::Attr),
    ("meta", Shape::Map),
    ("update", Shape::Block),
    ("task", Shape::Labeled),
    ("network", Shape::Block),
    ("service", Shape::Blocks),
    ("volume", Shape::Unsupported),
    ("ephemeral_disk", Shape::Block),
    ("affinity", Shape::Unsupported),
    ("spread", Shape::Unsupported),
    ("scaling", Shape::Unsupported),
    ("migrate", Shape::Block),
    ("consul", Shape::Unsupported),
    ("vault", Shape::Unsupported),
    ("shutdown_delay", Shape::Unsupported),
    ("prevent_reschedule_on_lost", Shape::Unsupported),
];

const RESTART_FIELDS: &[(&str, Shape)] = &[
    ("attempts", Shape::Attr),
    ("interval", Shape::Attr),
    ("delay", Shape::Attr),
    ("mode", Shape::Attr),
    ("render_templates", Shape::Unsupported),
];

const RESCHEDULE_FIELDS: &[(&str, Shape)] = &[
    ("attempts", Shape::Attr),
    ("interval", Shape::Attr),
    ("delay", Shape::Attr),
    ("delay_function", Shape::Attr),
    ("max_delay", Shape::Attr),
    ("unlimited", Shape::Attr),
];

const DISCONNECT_FIELDS: &[(&str, Shape)] = &[
    ("lost_after", Shape::Attr),
    ("replace", Shape::Attr),
    ("reconcile", Shape::Attr),
    ("stop_on_client_after", Shape::Attr),
];

/// What a group starts from before its own blocks apply: Nomad's defaults for the job's
/// type, with the job-level `reschedule` and `update` blocks merged in.
#[derive(Clone, Debug)]
pub(super) struct GroupDefaults {
    pub(super) restart: RestartPolicy,
    pub(super) reschedule: ReschedulePolicy,
    pub(super) update: UpdateStrategy,
}

impl GroupDefaults {
    pub(super) fn for_type(job_type: JobType) -> Self {
        let (restart, reschedule) = match job_type {
            JobType::Service => (
                RestartPolicy::default(),
                ReschedulePolicy::service_default(),
            ),
            // Nomad's batch restart default: 3 attempts in 24 h, 15 s apart.
            JobType::Batch => (batch_restart(), ReschedulePolicy::batch_default()),
            JobType::System => (RestartPolicy::default(), ReschedulePolicy::disabled()),
            JobType::SysBatch => (batch_restart(), ReschedulePolicy::disabled()),
        };
        Self {
            restart,
            reschedule,
            update: UpdateStrategy::default(),
        }
    }
}

fn batch_restart() -> RestartPolicy {
    RestartPolicy {
        attempts: 3,
        interval: Duration::from_secs(24 * 3600),
        delay: Duration::from_secs(15),
        mode: RestartMode::Fail,
    }
}

pub(super) fn decode_group(
    d: &mut Decoder<'_>,
    index: usize,
    block: &Block,
    defaults: &GroupDefaults,
) -> TaskGroup {
    let path = format!("groups[{index}]");
    d.mark(path.clone(), Item::Block(block).at());
    let name = block.labels.first().map_or("", |l| l.as_str());
    if let Some(label) = block.labels.first() {
        d.mark(join(&path, "name"), label_at(label));
    }
    let mut g = TaskGroup::new(name, 1, Vec::new());
    g.restart = defaults.restart.clone();
    g.reschedule = defaults.reschedule.clone();
    // (where written, value) of the older disconnect attributes, checked against the block.
    let mut max_client_disconnect: Option<(usize, Duration)> = None;
    let mut stop_after: Option<usize> = None;
    let mut disconnect_at: Option<usize> = None;

    for (field, item) in walk(d, &block.body, &format!("group {name:?}"), GROUP_FIELDS) {
        match (field, item) {
            ("count", Item::Attr(a)) => {
                if let Some(v) = d.read(&path, a, |v, f| v.whole(f)) {
                    g.count = v;
                }
            }
            ("constraint", Item::Block(b)) => {
                let at = format!("{path}.constraints[{}]", g.constraints.len());
                if let Some(c) = constraint(d, &at, b) {
                    g.constraints.push(c);
                }
            }
            ("restart", Item::Block(b)) => {
                g.restart = restart(d, &join(&path, "restart"), b, g.restart.clone());
            }
            ("reschedule", Item::Block(b)) => {
                g.reschedule = reschedule(d, &join(&path, "reschedule"), b, g.reschedule.clone());
            }
            ("disconnect", Item::Block(b)) => {
                disconnect_at = Some(item.at());
                g.disconnect = Some(disconnect(d, &join(&path, "disconnect"), b));
            }
            ("max_client_disconnect", Item::Attr(a)) => {
                if let Some(v) = d.read(&path, a, |v, f| v.duration(f)) {
                    max_client_disconnect = Some((item.at(), v));
                }
            }
            ("stop_after_client_disconnect", Item::Attr(a)) => {
                stop_after = Some(item.at());
                g.stop_after_client_disconnect = d.read(&path, a, |v, f| v.duration(f));
            }
            ("meta", item) => g.meta = d.map(&path, "meta", item),
            ("network", Item::Block(b)) => g.network = Some(super::network::network(d, &path, b)),
            ("ephemeral_disk", Item::Block(b)) => {
                g.ephemeral_disk = Some(super::task_blocks::ephemeral_disk(d, &path, b));
            }
            ("update", Item::Block(b)) => {
                g.update = Some(update(
                    d,
                    &join(&path, "update"),
                    b,
                    defaults.update.clone(),
                ));
            }
            ("migrate", Item::Block(b)) => {
                g.migrate =
                    super::migrate::migrate(d, &join(&path, "migrate"), b, g.migrate.clone());
            }
            ("service", Item::Block(b)) => {
                let index = g.services.len();
                g.services.push(super::service::service(d, &path, index, b));
            }
            ("task", Item::Block(b)) => {
                let task_index = g.tasks.len();
                let task = decode_task(
                    d,
                    &path,
                    task_index,
                    b,
                    &mut g.constraints,
                    &defaults.restart,
                );
                g.tasks.push(task);
            }
            _ => {}
        }
    }

    if let Some((at, window)) = max_client_disconnect {
        if disconnect_at.is_some() {
            d.problems.at(
                at,
                "max_client_disconnect cannot be used with a disconnect block (set disconnect { lost_after } instead)",
            );
        } else {
            // The older spelling of a disconnect window, with the block's other defaults.
            g.disconnect = Some(DisconnectPolicy {
                lost_after: Some(window),
                ..DisconnectPolicy::default()
            });
            d.mark(join(&path, "disconnect.lost_after"), at);
        }
    }
    if let (Some(at), Some(_)) = (stop_after, disconnect_at) {
        d.problems.at(
            at,
            "stop_after_client_disconnect cannot be used with a disconnect block (set disconnect { stop_on_client_after } instead)",
        );
    }
    g
}

pub(super) fn restart(
    d: &mut Decoder<'_>,
    path: &str,
    block: &Block,
    mut r: RestartPolicy,
) -> RestartPolicy {
    d.mark(path.to_owned(), Item::Block(block).at());
    for (name, item) in walk(d, &block.body, "restart", RESTART_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "attempts" => r.attempts = d.read(path, a, |v, f| v.whole(f)).unwrap_or(r.attempts),
            "interval" => r.interval = d.read(path, a, |v, f| v.duration(f)).unwrap_or(r.interval),
            "delay" => r.delay = d.read(path, a, |v, f| v.duration(f)).unwrap_or(r.delay),
            "mode" => {
                let mode = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    match text.as_str() {
                        "fail" => Ok(RestartMode::Fail),
                        "delay" => Ok(RestartMode::Delay),
                        _ => Err((v.at, one_of(f, &text, &["fail", "delay"]))),
                    }
                });
                r.mode = mode.unwrap_or(r.mode);
            }
            _ => {}
        }
    }
    r
}

pub(super) fn reschedule(
    d: &mut Decoder<'_>,
    path: &str,
    block: &Block,
    mut r: ReschedulePolicy,
) -> ReschedulePolicy {
    d.mark(path.to_owned(), Item::Block(block).at());
    for (name, item) in walk(d, &block.body, "reschedule", RESCHEDULE_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "attempts" => r.attempts = d.read(path, a, |v, f| v.whole(f)).unwrap_or(r.attempts),
            "interval" => r.interval = d.read(path, a, |v, f| v.duration(f)).unwrap_or(r.interval),
            "delay" => r.delay = d.read(path, a, |v, f| v.duration(f)).unwrap_or(r.delay),
            "max_delay" => {
                r.max_delay = d.read(path, a, |v, f| v.duration(f)).unwrap_or(r.max_delay)
            }
            "unlimited" => r.unlimited = d.read(path, a, |v, f| v.bool(f)).unwrap_or(r.unlimited),
            "delay_function" => {
                let function = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    DelayFunction::parse(&text).ok_or_else(|| {
                        (
                            v.at,
                            one_of(f, &text, &["constant", "exponential", "fibonacci"]),
                        )
                    })
                });
                r.delay_function = function.unwrap_or(r.delay_function);
            }
            _ => {}
        }
    }
    r
}

fn disconnect(d: &mut Decoder<'_>, path: &str, block: &Block) -> DisconnectPolicy {
    d.mark(path.to_owned(), Item::Block(block).at());
    let mut p = DisconnectPolicy::default();
    for (name, item) in walk(d, &block.body, "disconnect", DISCONNECT_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "lost_after" => p.lost_after = d.read(path, a, |v, f| v.duration(f)),
            "stop_on_client_after" => {
                p.stop_on_client_after = d.read(path, a, |v, f| v.duration(f))
            }
            "replace" => p.replace = d.read(path, a, |v, f| v.bool(f)).unwrap_or(p.replace),
            "reconcile" => {
                let strategy = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    ReconcileStrategy::parse(&text).ok_or_else(|| {
                        let names = [
                            "best_score",
                            "keep_original",
                            "keep_replacement",
                            "longest_running",
                        ];
                        (v.at, one_of(f, &text, &names))
                    })
                });
                p.reconcile = strategy.unwrap_or(p.reconcile);
            }
            _ => {}
        }
    }
    p
}
