//! Worker pool settings and worker selection. Workers live in the server, not in core, so
//! these decode into small types of their own rather than core ones.

use super::{ConvertError, Problem, Result, WireEnum, Within, required};
use crate::v1 as pb;
use drover_core::SchedulerType;
use std::collections::BTreeSet;

/// A server's worker pool settings, decoded.
///
/// Invariant: `enabled` contains [`SchedulerType::Core`] (core maintenance evals must
/// always be served), which decoding adds if the client left it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerPoolConfig {
    pub count: u32,
    pub enabled: BTreeSet<SchedulerType>,
}

impl From<&WorkerPoolConfig> for pb::WorkerConfig {
    fn from(c: &WorkerPoolConfig) -> Self {
        pb::WorkerConfig {
            count: c.count,
            enabled_schedulers: c.enabled.iter().map(|t| t.to_wire()).collect(),
        }
    }
}

fn pool_config(p: pb::WorkerConfig) -> Result<WorkerPoolConfig> {
    let mut enabled = BTreeSet::from([SchedulerType::Core]);
    for (i, v) in p.enabled_schedulers.into_iter().enumerate() {
        enabled.insert(SchedulerType::from_wire(
            &format!("enabled_schedulers[{i}]"),
            v,
        )?);
    }
    Ok(WorkerPoolConfig {
        count: p.count,
        enabled,
    })
}

super::rooted_try_from!(pb::WorkerConfig => WorkerPoolConfig, "config", pool_config);

/// A decoded `WorkerService.SetConfig` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerConfigUpdate {
    /// The server whose pool to change; `None`: the one receiving the call.
    pub server_id: Option<String>,
    pub config: WorkerPoolConfig,
}

impl TryFrom<pb::SetWorkerConfigRequest> for WorkerConfigUpdate {
    type Error = ConvertError;
    fn try_from(p: pb::SetWorkerConfigRequest) -> std::result::Result<Self, ConvertError> {
        let config = pool_config(required("config", p.config)?).within("config")?;
        Ok(WorkerConfigUpdate {
            server_id: (!p.server_id.is_empty()).then_some(p.server_id),
            config,
        })
    }
}

/// Which workers a pause or resume acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerTarget {
    /// One worker, by id, optionally on a named server.
    One {
        server_id: Option<String>,
        worker_id: String,
    },
    /// Every worker of one server, or of every server when `server_id` is `None`.
    All { server_id: Option<String> },
}

fn selector(p: pb::WorkerSelector) -> Result<WorkerTarget> {
    let server_id = (!p.server_id.is_empty()).then_some(p.server_id);
    match p.target {
        None => Err(ConvertError::new(
            "target",
            Problem::Invalid("set worker_id or all"),
        )),
        Some(pb::worker_selector::Target::WorkerId(id)) if id.is_empty() => {
            Err(ConvertError::new("worker_id", Problem::Missing))
        }
        Some(pb::worker_selector::Target::WorkerId(worker_id)) => Ok(WorkerTarget::One {
            server_id,
            worker_id,
        }),
        // `all: false` selects nothing, which is never what a caller means.
        Some(pb::worker_selector::Target::All(false)) => Err(ConvertError::new(
            "all",
            Problem::Invalid("must be true when set"),
        )),
        Some(pb::worker_selector::Target::All(true)) => Ok(WorkerTarget::All { server_id }),
    }
}

super::rooted_try_from!(pb::WorkerSelector => WorkerTarget, "workers", selector);

impl TryFrom<pb::PauseWorkersRequest> for WorkerTarget {
    type Error = ConvertError;
    fn try_from(p: pb::PauseWorkersRequest) -> std::result::Result<Self, ConvertError> {
        selector(required("workers", p.workers)?).within("workers")
    }
}

impl TryFrom<pb::ResumeWorkersRequest> for WorkerTarget {
    type Error = ConvertError;
    fn try_from(p: pb::ResumeWorkersRequest) -> std::result::Result<Self, ConvertError> {
        selector(required("workers", p.workers)?).within("workers")
    }
}
