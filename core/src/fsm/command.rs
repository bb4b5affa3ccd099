//! Every change to drover's state, as a command appended to the Raft log.
//!
//! Commands carry everything the FSM needs (times, ids, follow-up evals) so that applying
//! the same log always yields the same state: the FSM never reads a clock or draws ids.

use crate::acl::{AclPolicy, AclToken};
use crate::types::*;
use serde::{Deserialize, Serialize};

/// One client-side change to an allocation, as an agent reports it.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct AllocClientUpdate {
    pub alloc_id: AllocId,
    pub client_status: ClientStatus,
    pub client_description: compact_str::CompactString,
    /// Replaces the allocation's task states when non-empty.
    pub task_states: TaskStates,
    /// The agent's verdict on the allocation's health for its deployment (see
    /// [`AllocDeployment::health`]); recorded once, the first verdict stands.
    pub deployment_health: Option<bool>,
}

/// The committed part of a plan, as the plan applier writes it. Allocations are the plan's
/// own `Arc`s and the maps are shared with the applier's `PlanResult`; both serialize as
/// the plain values, so the log format is unchanged.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct PlanApply {
    pub eval_id: EvalId,
    pub job: Option<JobKey>,
    pub node_allocation: CommittedByNode<std::sync::Arc<Allocation>>,
    pub node_update: CommittedByNode<AllocTransition>,
    pub node_preemptions: CommittedByNode<AllocTransition>,
    pub evals: Vec<Evaluation>,
    /// The deployment the plan creates (or changes: canaries placed); its counts are the
    /// FSM's, not the scheduler's, so only the groups' settings and the status are taken.
    pub deployment: Option<Deployment>,
    /// Older deployments of the job the plan cancels (a newer version supersedes them).
    pub deployment_updates: Vec<DeploymentStatusUpdate>,
}

// Commands are built one at a time and moved straight into the log, never stored in bulk, so
// the size of the largest variant costs nothing that boxing would save.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Command {
    /// Registers a node or re-registers it (same id); keeps create index and health history.
    NodeRegister {
        node: Node,
        now: Timestamp,
    },
    /// Status change (heartbeat missed, node back, ...), with the evals it triggers.
    NodeStatus {
        node_id: NodeId,
        status: NodeStatus,
        description: String,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    NodeEligibility {
        node_id: NodeId,
        eligibility: Eligibility,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    /// Starts (`Some`) or ends (`None`) a drain.
    NodeDrain {
        node_id: NodeId,
        drain: Option<DrainStrategy>,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    /// Operator offline: no new placements; the lost sweep does not delete it.
    NodeOffline {
        node_id: NodeId,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    /// Operator online: back to suspended-new until readiness passes (or healthy if ready).
    NodeOnline {
        node_id: NodeId,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    /// A health transition decided by the leader's node-health machine.
    NodeHealth {
        node_id: NodeId,
        health: NodeHealth,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    /// The snapshot (artifact) the node last ran.
    NodeSnapshot {
        node_id: NodeId,
        snapshot: Option<String>,
        now: Timestamp,
    },
    NodeDeregister {
        node_ids: Vec<NodeId>,
        now: Timestamp,
    },
    /// A job and its evaluation, in one entry so no scheduler sees one without the other.
    JobRegister {
        job: Job,
        eval: Option<Evaluation>,
        now: Timestamp,
    },
    /// Stops the job (or removes it with `purge`), with the eval that stops its allocations.
    JobDeregister {
        job: JobKey,
        purge: bool,
        eval: Option<Evaluation>,
        now: Timestamp,
    },
    EvalUpsert {
        evals: Vec<Evaluation>,
    },
    /// Cancels evals in one batch (broker collapse, duplicate blocked evals).
    EvalCancel {
        eval_ids: Vec<EvalId>,
        reason: String,
        now: Timestamp,
    },
    /// Garbage collection of terminal evals and allocations.
    EvalDelete {
        eval_ids: Vec<EvalId>,
        alloc_ids: Vec<AllocId>,
    },
    /// Client status of allocations on one node, with evals for failures to reschedule.
    AllocClientUpdate {
        node_id: NodeId,
        updates: Vec<AllocClientUpdate>,
        evals: Vec<Evaluation>,
        now: Timestamp,
    },
    ApplyPlan {
        plan: PlanApply,
        now: Timestamp,
    },
    /// Sets the scheduler config; with `cas_index`, only if it is still at that index.
    SchedulerConfig {
        config: SchedulerConfig,
        cas_index: Option<Index>,
    },
    /// A check-and-set registration: [`Command::JobRegister`], applied only while the job's
    /// modify index is still `enforce_index` (0: the job must not exist). The check runs
    /// here, in the FSM, so of concurrent writers expecting the same index exactly one wins.
    ///
    /// A variant of its own, appended after the format-1 variants, so logs written before it
    /// decode unchanged (postcard tags variants by position and has no optional fields).
    JobRegisterChecked {
        job: Job,
        eval: Option<Evaluation>,
        now: Timestamp,
        enforce_index: Index,
    },
    /// [`Command::NodeHealth`] with the reason operators read in the node's events: the
    /// infrastructure failures that made it flaky, or the operator's override. Appended
    /// like `JobRegisterChecked`, so older logs decode unchanged.
    NodeHealthExplained {
        node_id: NodeId,
        health: NodeHealth,
        reason: String,
        now: Timestamp,
        evals: Vec<Evaluation>,
    },
    /// The cluster's first management token; refused once the cluster is bootstrapped, so
    /// of two concurrent bootstraps exactly one wins.
    AclBootstrap {
        token: AclToken,
    },
    /// Creates or replaces policies (their rules already parsed and checked).
    AclPolicyUpsert {
        policies: Vec<AclPolicy>,
    },
    AclPolicyDelete {
        names: Vec<String>,
    },
    /// Creates or replaces tokens; every policy they name must exist.
    AclTokenUpsert {
        tokens: Vec<AclToken>,
    },
    AclTokenDelete {
        accessor_ids: Vec<AccessorId>,
    },
    /// An operator stops one allocation (`alloc stop`): it is marked to stop and `eval`
    /// has the scheduler replace it, since its job still wants the slot. Appended like
    /// `JobRegisterChecked`, so older logs decode unchanged.
    AllocStop {
        alloc_id: AllocId,
        eval: Evaluation,
        now: Timestamp,
    },
    /// Several nodes' client updates in one entry, as the server's write coalescer groups
    /// the reports that arrive while a write is in flight: each part applies exactly as
    /// its own `AllocClientUpdate` would, and a part whose node is gone is skipped without
    /// refusing the others. Appended, so older logs decode unchanged.
    AllocClientUpdates {
        nodes: Vec<NodeAllocUpdates>,
        now: Timestamp,
    },
    /// The drainer marks allocations on draining nodes to move (their desired transition),
    /// with the evals that have their jobs' schedulers move them. Allocations already
    /// terminal or gone are skipped. Appended, so older logs decode unchanged.
    AllocsMigrate {
        allocs: Vec<AllocId>,
        evals: Vec<Evaluation>,
        now: Timestamp,
    },
    /// A drain that has nothing left to move ends by itself: the node's drain is cleared
    /// and it stays ineligible (`nomad node drain` does the same). Appended.
    NodeDrainComplete {
        node_id: NodeId,
        now: Timestamp,
    },
    /// Deployments change status (the watcher fails or completes them, an operator pauses,
    /// resumes or fails one), with the job registered again when a failure reverts it
    /// (`auto_revert`) and the evals that act on the change. A success marks the job
    /// version stable. Refused whole when a deployment is gone or already finished.
    DeploymentStatus {
        updates: Vec<DeploymentStatusUpdate>,
        revert: Option<Job>,
        evals: Vec<Evaluation>,
        now: Timestamp,
    },
    /// Promotes the canaries of `groups` (empty: every group with canaries), refused unless
    /// the deployment is active and each such group's canaries are placed and healthy; the
    /// eval rolls out the rest.
    DeploymentPromote {
        deployment_id: DeploymentId,
        groups: Vec<String>,
        eval: Evaluation,
        now: Timestamp,
    },
}

/// One node's part of [`Command::AllocClientUpdates`].
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct NodeAllocUpdates {
    pub node_id: NodeId,
    pub updates: Vec<AllocClientUpdate>,
    pub evals: Vec<Evaluation>,
    /// The service registrations of some of the node's allocations, each replacing what
    /// the catalog holds for it. Applied only to the node's own live allocations.
    #[serde(default)]
    pub services: Vec<AllocServices>,
}

/// Every service registration of one allocation, as the agent running it reports them.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct AllocServices {
    pub alloc_id: AllocId,
    pub registrations: Vec<ServiceRegistration>,
}

impl Command {
    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::NodeRegister { .. } => "node_register",
            Command::NodeStatus { .. } => "node_status",
            Command::NodeEligibility { .. } => "node_eligibility",
            Command::NodeDrain { .. } => "node_drain",
            Command::NodeOffline { .. } => "node_offline",
            Command::NodeOnline { .. } => "node_online",
            Command::NodeHealth { .. } => "node_health",
            Command::NodeSnapshot { .. } => "node_snapshot",
            Command::NodeDeregister { .. } => "node_deregister",
            Command::JobRegister { .. } => "job_register",
            Command::JobDeregister { .. } => "job_deregister",
            Command::EvalUpsert { .. } => "eval_upsert",
            Command::EvalCancel { .. } => "eval_cancel",
            Command::EvalDelete { .. } => "eval_delete",
            Command::AllocClientUpdate { .. } => "alloc_client_update",
            Command::AllocClientUpdates { .. } => "alloc_client_updates",
            Command::ApplyPlan { .. } => "apply_plan",
            Command::SchedulerConfig { .. } => "scheduler_config",
            Command::JobRegisterChecked { .. } => "job_register_checked",
            Command::AllocStop { .. } => "alloc_stop",
            Command::NodeHealthExplained { .. } => "node_health_explained",
            Command::AclBootstrap { .. } => "acl_bootstrap",
            Command::AclPolicyUpsert { .. } => "acl_policy_upsert",
            Command::AclPolicyDelete { .. } => "acl_policy_delete",
            Command::AclTokenUpsert { .. } => "acl_token_upsert",
            Command::AclTokenDelete { .. } => "acl_token_delete",
            Command::AllocsMigrate { .. } => "allocs_migrate",
            Command::NodeDrainComplete { .. } => "node_drain_complete",
            Command::DeploymentStatus { .. } => "deployment_status",
            Command::DeploymentPromote { .. } => "deployment_promote",
        }
    }
}

impl Command {
    /// The node-update evals a node command carries, if it is one that carries them.
    pub fn node_evals_mut(&mut self) -> Option<&mut Vec<Evaluation>> {
        match self {
            Command::NodeStatus { evals, .. }
            | Command::NodeEligibility { evals, .. }
            | Command::NodeDrain { evals, .. }
            | Command::NodeOffline { evals, .. }
            | Command::NodeOnline { evals, .. }
            | Command::NodeHealth { evals, .. }
            | Command::NodeHealthExplained { evals, .. } => Some(evals),
            _ => None,
        }
    }
}

/// Makes the writes of one node event (a heartbeat that brings a node `ready` and
/// `healthy` writes its status and its health) carry at most one eval per job: the evals
/// move to the last of them, once that write has made every change the schedulers must
/// see, and a job's later duplicates are dropped. Without it, a node that comes back
/// `ready` and `healthy` made two evals for every job it runs. (System and sysbatch jobs
/// get no evals here at all: the leader coalesces theirs per job, `leader/coalesce.rs`.)
pub fn one_eval_per_job(commands: &mut [Command]) {
    let Some(last) = commands
        .iter_mut()
        .rposition(|c| c.node_evals_mut().is_some_and(|e| !e.is_empty()))
    else {
        return;
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut merged = Vec::new();
    for cmd in commands[..=last].iter_mut() {
        if let Some(evals) = cmd.node_evals_mut() {
            merged.extend(
                evals
                    .drain(..)
                    .filter(|e| seen.insert((e.namespace.clone(), e.job_id.clone()))),
            );
        }
    }
    if let Some(evals) = commands[last].node_evals_mut() {
        *evals = merged;
    }
}
