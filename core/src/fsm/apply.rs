//! Applying a command to the store: deterministic, and all-or-nothing (a command that is
//! refused leaves the store as it was).

use super::command::*;
use super::event::{Event, EventPayload, EventType, Topic};
use crate::state::{AllocChange, LentIndexes, StateStore};
use crate::types::*;
use std::collections::BTreeSet;
use std::sync::Arc;

mod deployment;

use deployment::mark_health;

/// Why a command was refused. The store is unchanged when this is returned. Serializable,
/// because the Raft layer hands it back to the writer as the entry's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ApplyError {
    #[error("node {0} not found")]
    NodeNotFound(NodeId),
    #[error("job {0} not found")]
    JobNotFound(JobKey),
    #[error("scheduler config changed: expected modify index {expected}, found {actual}")]
    CasMismatch { expected: Index, actual: Index },
    /// A check-and-set registration found the job at another modify index (0: absent).
    #[error("job {job} is at modify index {actual}, not the enforced index {expected}")]
    JobIndexMismatch {
        job: JobKey,
        expected: Index,
        actual: Index,
    },
    #[error("allocation {0} not found")]
    AllocNotFound(AllocId),
    #[error("acl bootstrap already done (at index {0})")]
    AclAlreadyBootstrapped(Index),
    #[error("acl policy {0:?} not found")]
    AclPolicyNotFound(String),
    #[error("acl token {0} not found")]
    AclTokenNotFound(AccessorId),
    #[error("acl token secret is already in use by token {0}")]
    AclSecretInUse(AccessorId),
    /// Two live nodes may not share a name: operators and the console address nodes by
    /// name, and an agent's TLS certificate names its node.
    #[error(
        "node name {name:?} is taken by live node {existing} (status {status}): give this agent another name, or wait until that node is down"
    )]
    NodeNameInUse {
        name: String,
        existing: NodeId,
        status: String,
    },
    #[error("deployment {0} not found")]
    DeploymentNotFound(DeploymentId),
    #[error("deployment {id} is {status}: only a running or paused deployment changes")]
    DeploymentNotActive { id: DeploymentId, status: String },
    #[error("deployment {0} has no canaries to promote")]
    DeploymentWithoutCanaries(DeploymentId),
    #[error("deployment {id} has no group {group:?}")]
    DeploymentGroupUnknown { id: DeploymentId, group: String },
    #[error(
        "deployment {id} group {group:?} has {healthy} healthy canaries of {desired}: promote once every canary is healthy"
    )]
    CanariesNotHealthy {
        id: DeploymentId,
        group: String,
        healthy: u32,
        desired: u32,
    },
}

/// Applies `cmd` at Raft index `index` and returns the events it produced, in order.
/// The command is taken by value: the log hands each entry over freshly decoded, so what
/// it carries (a plan's allocations, a report's task states) moves into the store rather
/// than being copied and then dropped with the entry.
pub fn apply(store: &mut StateStore, index: Index, cmd: Command) -> Result<Vec<Event>, ApplyError> {
    Applier::new(store).apply(index, cmd)
}

/// Applies a run of entries, in order, as [`apply`] would one by one. The allocation
/// indexes (`state::alloc_index`: by node and by job) may still be written on the helper
/// thread, one entry's batch after another's, while the next entries apply, as long as
/// they are plans, client reports or eval writes, which do not read them; any other entry
/// waits for them first. The store is whole again when the applier is dropped, and only
/// then can it be read.
#[derive(Debug)]
pub struct Applier<'a> {
    store: &'a mut StateStore,
    lent: Option<LentIndexes>,
}

impl<'a> Applier<'a> {
    pub fn new(store: &'a mut StateStore) -> Self {
        Applier { store, lent: None }
    }

    /// Applies `cmd` at Raft index `index` and returns the events it produced, in order.
    pub fn apply(&mut self, index: Index, cmd: Command) -> Result<Vec<Event>, ApplyError> {
        let mut fsm = Apply {
            store: &mut *self.store,
            index,
            events: Vec::new(),
            touched_jobs: BTreeSet::new(),
            last_touched: None,
            last_shared: None,
            unindexed: None,
            lent: self.lent.take(),
        };
        if !overlaps_lent_indexes(&cmd) {
            fsm.land_indexes();
        }
        let applied = fsm.command(cmd);
        fsm.end_deferred_indexing();
        let applied = applied.map(|()| {
            fsm.settle_services();
            fsm.refresh_job_statuses();
        });
        self.lent = fsm.lent.take();
        applied.map(|()| fsm.events)
    }
}

impl Drop for Applier<'_> {
    fn drop(&mut self) {
        // Unwinding, the store is being abandoned, and a panic in the helper's half would
        // be a second one.
        if let Some(lent) = self.lent.take()
            && !std::thread::panicking()
        {
            self.store.land_indexes(lent);
        }
    }
}

/// The commands that may run while an earlier entry's allocation indexes are lent to the
/// helper: they write allocations, summaries and evals, and read neither the by-node
/// index, node usage, the tainted nodes nor the by-job index (the store asserts it in
/// debug builds).
fn overlaps_lent_indexes(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::ApplyPlan { .. }
            | Command::AllocClientUpdate { .. }
            | Command::AllocClientUpdates { .. }
            | Command::EvalUpsert { .. }
    )
}

struct Apply<'a> {
    store: &'a mut StateStore,
    index: Index,
    events: Vec<Event>,
    touched_jobs: BTreeSet<JobKey>,
    /// The key `touch_job` recorded last (also in `touched_jobs`).
    last_touched: Option<JobKey>,
    /// The store's shared key `share_job_key` found last.
    last_shared: Option<JobKey>,
    /// While a command writes many allocations: those written to the by-id table whose
    /// other indexes change in one batch (`state::alloc_index`). Meanwhile only by-id
    /// reads of allocations are true, so only the loops of plan and client-report
    /// writes defer, and they index what waits before writing anything else.
    unindexed: Option<Vec<AllocChange>>,
    /// The allocation indexes, while the helper still writes the batches lent to it.
    lent: Option<LentIndexes>,
}

impl Apply<'_> {
    fn command(&mut self, cmd: Command) -> Result<(), ApplyError> {
        match cmd {
            Command::NodeRegister { node, now } => self.node_register(&node, now),
            Command::NodeStatus {
                node_id,
                status,
                description,
                now,
                evals,
            } => self.node_change(node_id, EventType::NodeStatus, now, &evals, |n| {
                if n.status == status && n.status_description == description {
                    return None;
                }
                n.status = status;
                n.status_description = description;
                n.status_updated_at = now;
                Some(format!("node status is now {}", status.as_str()))
            }),
            Command::NodeEligibility {
                node_id,
                eligibility,
                now,
                evals,
            } => self.node_change(node_id, EventType::NodeEligibility, now, &evals, |n| {
                (n.eligibility != eligibility).then(|| {
                    n.eligibility = eligibility;
                    format!("node marked {}", eligibility.as_str())
                })
            }),
            Command::NodeDrain {
                node_id,
                drain,
                now,
                evals,
            } => {
                self.node_change(node_id, EventType::NodeDrain, now, &evals, |n| {
                    if n.drain == drain {
                        return None;
                    }
                    // A drain makes the node ineligible; ending it makes it eligible again,
                    // as `nomad node drain -disable` does without `-keep-ineligible`.
                    let message = match &drain {
                        Some(_) => {
                            n.eligibility = Eligibility::Ineligible;
                            "node drain started".to_string()
                        }
                        None => {
                            n.eligibility = Eligibility::Eligible;
                            "node drain ended".to_string()
                        }
                    };
                    n.drain = drain;
                    Some(message)
                })
            }
            Command::NodeOffline {
                node_id,
                now,
                evals,
            } => self.node_change(node_id, EventType::NodeHealth, now, &evals, |n| {
                (n.health != NodeHealth::Offlined).then(|| {
                    n.health = NodeHealth::Offlined;
                    n.health_since = now;
                    "node offlined by operator".to_string()
                })
            }),
            Command::NodeOnline {
                node_id,
                now,
                evals,
            } => self.node_change(node_id, EventType::NodeHealth, now, &evals, |n| {
                (n.health == NodeHealth::Offlined).then(|| {
                    n.health = if n.status == NodeStatus::Ready {
                        NodeHealth::Healthy
                    } else {
                        NodeHealth::Suspended(SuspendReason::New)
                    };
                    n.health_since = now;
                    "node onlined by operator".to_string()
                })
            }),
            Command::NodeHealth {
                node_id,
                health,
                now,
                evals,
            } => self.node_health(node_id, health, None, now, &evals),
            acl @ (Command::AclBootstrap { .. }
            | Command::AclPolicyUpsert { .. }
            | Command::AclPolicyDelete { .. }
            | Command::AclTokenUpsert { .. }
            | Command::AclTokenDelete { .. }) => {
                super::apply_acl::apply(self.store, self.index, &acl)
            }
            Command::NodeHealthExplained {
                node_id,
                health,
                reason,
                now,
                evals,
            } => self.node_health(node_id, health, Some(&reason), now, &evals),
            Command::AllocStop {
                alloc_id,
                eval,
                now,
            } => self.alloc_stop(alloc_id, &eval, now),
            Command::AllocsMigrate { allocs, evals, now } => {
                self.allocs_migrate(&allocs, &evals, now);
                Ok(())
            }
            Command::NodeDrainComplete { node_id, now } => {
                self.node_change(node_id, EventType::NodeDrain, now, &[], |n| {
                    n.drain.take().map(|_| {
                        n.eligibility = Eligibility::Ineligible;
                        "node drain complete: nothing left to move (the node stays ineligible)"
                            .to_string()
                    })
                })
            }
            Command::NodeSnapshot {
                node_id,
                snapshot,
                now,
            } => self.node_change(node_id, EventType::NodeSnapshot, now, &[], |n| {
                (n.last_snapshot != snapshot).then(|| {
                    n.last_snapshot = snapshot;
                    String::new()
                })
            }),
            Command::NodeDeregister { node_ids, .. } => {
                for id in &node_ids {
                    if let Some(n) = self.store.remove_node(self.index, id) {
                        self.push(
                            Topic::Node,
                            EventType::NodeDeregistration,
                            n.id.to_string(),
                            EventPayload::Node(n),
                        );
                    }
                }
                Ok(())
            }
            Command::JobRegister { job, eval, now } => self.job_register(job, eval, now),
            Command::JobRegisterChecked {
                job,
                eval,
                now,
                enforce_index,
            } => {
                let key = job.key();
                let actual = self.store.job(&key).map_or(0, |j| j.job_modify_index);
                if actual != enforce_index {
                    return Err(ApplyError::JobIndexMismatch {
                        job: key,
                        expected: enforce_index,
                        actual,
                    });
                }
                self.job_register(job, eval, now)
            }
            Command::JobDeregister {
                job,
                purge,
                eval,
                now,
            } => self.job_deregister(&job, purge, eval, now),
            Command::EvalUpsert { evals } => {
                self.upsert_evals(&evals);
                Ok(())
            }
            Command::EvalCancel {
                eval_ids,
                reason,
                now,
            } => {
                for id in &eval_ids {
                    let Some(e) = self.store.eval(id).filter(|e| !e.is_terminal()) else {
                        continue;
                    };
                    let mut e = (**e).clone();
                    e.status = EvalStatus::Canceled;
                    e.status_description = reason.clone();
                    e.modify_time = now;
                    self.put_eval(e);
                }
                Ok(())
            }
            Command::EvalDelete {
                eval_ids,
                alloc_ids,
            } => {
                for id in eval_ids {
                    if let Some(e) = self.store.remove_eval(self.index, &id) {
                        self.touched_jobs.insert(e.job_key());
                        self.push(
                            Topic::Evaluation,
                            EventType::EvaluationDeleted,
                            id.to_string(),
                            EventPayload::EvalId(id),
                        );
                    }
                }
                for id in alloc_ids {
                    if let Some(a) = self.store.remove_alloc(self.index, &id) {
                        self.touched_jobs.insert(JobKey {
                            namespace: a.namespace.clone(),
                            id: a.job_id.clone(),
                        });
                        self.push(
                            Topic::Allocation,
                            EventType::AllocationDeleted,
                            id.to_string(),
                            EventPayload::AllocId(id),
                        );
                    }
                }
                Ok(())
            }
            Command::AllocClientUpdate {
                node_id,
                updates,
                evals,
                now,
            } => {
                self.defer_indexing();
                self.alloc_client_update(node_id, updates, &evals, &[], now)
            }
            Command::AllocClientUpdates { nodes, now } => {
                self.defer_indexing();
                for part in nodes {
                    // Only a vanished node refuses its part; the others still apply.
                    let node_id = part.node_id;
                    if let Err(error) = self.alloc_client_update(
                        node_id,
                        part.updates,
                        &part.evals,
                        &part.services,
                        now,
                    ) {
                        tracing::debug!(%node_id, %error, "client updates of a gone node skipped");
                    }
                }
                Ok(())
            }
            Command::ApplyPlan { plan, now } => {
                self.apply_plan(plan, now);
                Ok(())
            }
            Command::DeploymentStatus {
                updates,
                revert,
                evals,
                now,
            } => self.deployment_status(&updates, revert, &evals, now),
            Command::DeploymentPromote {
                deployment_id,
                groups,
                eval,
                now: _,
            } => self.deployment_promote(deployment_id, &groups, &eval),
            Command::SchedulerConfig { config, cas_index } => {
                let actual = self.store.scheduler_config().modify_index;
                if let Some(expected) = cas_index
                    && expected != actual
                {
                    return Err(ApplyError::CasMismatch { expected, actual });
                }
                self.store.set_scheduler_config(self.index, config);
                let cfg = self.store.scheduler_config().clone();
                self.push(
                    Topic::Operator,
                    EventType::SchedulerConfigUpdated,
                    "scheduler".into(),
                    EventPayload::SchedulerConfig(cfg),
                );
                Ok(())
            }
        }
    }

    fn push(&mut self, topic: Topic, event_type: EventType, key: String, payload: EventPayload) {
        self.events.push(Event {
            topic,
            event_type,
            key,
            index: self.index,
            payload,
        });
    }

    fn node_register(&mut self, node: &Node, now: Timestamp) -> Result<(), ApplyError> {
        if let Some(taken) = self
            .store
            .nodes_named(&node.name)
            .find(|other| other.id != node.id && other.status != NodeStatus::Down)
        {
            return Err(ApplyError::NodeNameInUse {
                name: node.name.clone(),
                existing: taken.id,
                status: taken.status.as_str().to_string(),
            });
        }
        let mut n = node.clone();
        let message = match self.store.node(&node.id) {
            Some(old) => {
                // Re-registration (an agent restart): operator decisions and history survive.
                n.create_index = old.create_index;
                n.eligibility = old.eligibility;
                n.drain = old.drain.clone();
                if old.health == NodeHealth::Offlined {
                    n.health = NodeHealth::Offlined;
                }
                n.health_since = if n.health == old.health {
                    old.health_since
                } else {
                    now
                };
                n.last_snapshot = n.last_snapshot.or_else(|| old.last_snapshot.clone());
                n.events = old.events.clone();
                "node re-registered"
            }
            None => {
                n.create_index = self.index;
                n.health_since = now;
                n.events.clear();
                "node registered"
            }
        };
        n.modify_index = self.index;
        n.status_updated_at = now;
        n.push_event(NodeEvent {
            time: now,
            subsystem: "cluster".into(),
            message: message.into(),
        });
        let n = self.store.put_node(self.index, n);
        self.events
            .push(Event::node(self.index, EventType::NodeRegistration, &n));
        Ok(())
    }

    /// A health change decided by the leader, with the reason the node's event gives.
    fn node_health(
        &mut self,
        node_id: NodeId,
        health: NodeHealth,
        reason: Option<&String>,
        now: Timestamp,
        evals: &[Evaluation],
    ) -> Result<(), ApplyError> {
        self.node_change(node_id, EventType::NodeHealth, now, evals, |n| {
            (n.health != health).then(|| {
                n.health = health;
                n.health_since = now;
                if health == NodeHealth::Suspended(SuspendReason::Flaky) {
                    // A flaky node's warm snapshot is not trusted when it comes back.
                    n.last_snapshot = None;
                }
                match reason {
                    Some(why) => format!("node health is now {}: {why}", health.as_str()),
                    None => format!("node health is now {}", health.as_str()),
                }
            })
        })
    }

    /// Changes one node with `f`, which returns the node event message, or `None` for no
    /// change (idempotent operations emit nothing). The evals are written either way.
    fn node_change(
        &mut self,
        node_id: NodeId,
        event_type: EventType,
        now: Timestamp,
        evals: &[Evaluation],
        f: impl FnOnce(&mut Node) -> Option<String>,
    ) -> Result<(), ApplyError> {
        let old = self
            .store
            .node(&node_id)
            .ok_or(ApplyError::NodeNotFound(node_id))?;
        let mut n = (**old).clone();
        if let Some(message) = f(&mut n) {
            if !message.is_empty() {
                n.push_event(NodeEvent {
                    time: now,
                    subsystem: "cluster".into(),
                    message,
                });
            }
            n.modify_index = self.index;
            let n = self.store.put_node(self.index, n);
            self.events.push(Event::node(self.index, event_type, &n));
        }
        self.upsert_evals(evals);
        Ok(())
    }

    fn job_register(
        &mut self,
        mut j: Job,
        eval: Option<Evaluation>,
        now: Timestamp,
    ) -> Result<(), ApplyError> {
        match self.store.job(&j.key()) {
            Some(old) => {
                j.create_index = old.create_index;
                if old.spec_differs(&j) {
                    j.version = old.version + 1;
                    j.job_modify_index = self.index;
                    j.submit_time = now;
                    j.stable = false;
                } else {
                    j.stable = old.stable;
                    j.version = old.version;
                    j.job_modify_index = old.job_modify_index;
                    j.submit_time = old.submit_time;
                }
                j.status = old.status;
            }
            None => {
                j.create_index = self.index;
                j.stable = false;
                j.version = 0;
                j.job_modify_index = self.index;
                j.submit_time = now;
                j.status = JobStatus::Pending;
            }
        }
        j.modify_index = self.index;
        let key = j.key();
        let j = self.store.put_job(self.index, j);
        self.events
            .push(Event::job(self.index, EventType::JobRegistered, &j));
        self.touched_jobs.insert(key);
        if let Some(mut e) = eval {
            e.job_modify_index = j.job_modify_index;
            self.put_eval(e);
        }
        Ok(())
    }

    fn job_deregister(
        &mut self,
        key: &JobKey,
        purge: bool,
        eval: Option<Evaluation>,
        now: Timestamp,
    ) -> Result<(), ApplyError> {
        let old = self
            .store
            .job(key)
            .ok_or_else(|| ApplyError::JobNotFound(key.clone()))?
            .clone();
        let stopping: Vec<DeploymentStatusUpdate> = self
            .store
            .deployments_by_job(key)
            .iter()
            .filter(|d| d.is_active())
            .map(|d| DeploymentStatusUpdate {
                deployment_id: d.id,
                status: DeploymentStatus::Cancelled,
                description: deployment_describe::STOPPED_JOB.into(),
            })
            .collect();
        self.set_statuses(&stopping, now);
        if purge {
            self.store.remove_job(self.index, key);
            self.store.remove_deployments_of(self.index, key);
            self.push(
                Topic::Job,
                EventType::JobDeregistered,
                key.id.to_string(),
                EventPayload::JobKey(key.clone()),
            );
        } else if !old.stop {
            let mut j = (*old).clone();
            j.stop = true;
            j.version += 1;
            j.job_modify_index = self.index;
            j.modify_index = self.index;
            j.submit_time = now;
            let j = self.store.put_job(self.index, j);
            self.events
                .push(Event::job(self.index, EventType::JobDeregistered, &j));
        }
        self.touched_jobs.insert(key.clone());
        self.cancel_blocked_evals(key, now);
        if let Some(mut e) = eval {
            e.job_modify_index = self.index;
            self.put_eval(e);
        }
        Ok(())
    }

    /// Cancels every blocked eval of a job being stopped or purged, in the deregistering
    /// entry itself: no capacity change can make them useful, the leader's blocked tracker
    /// drops them on the same entry's job event, and an open eval would keep the job from
    /// reaching `dead` (or outlive a purged job).
    fn cancel_blocked_evals(&mut self, key: &JobKey, now: Timestamp) {
        let blocked: Vec<Evaluation> = self
            .store
            .evals_by_job(key)
            .filter(|e| e.status == EvalStatus::Blocked)
            .map(|e| (**e).clone())
            .collect();
        for mut e in blocked {
            e.status = EvalStatus::Canceled;
            e.status_description = "job deregistered".into();
            e.modify_time = now;
            self.put_eval(e);
        }
    }

    /// Writes evals. A blocked eval of a job that is stopped or gone by the time it is
    /// applied (a worker scheduled from a snapshot taken before the stop) is written
    /// canceled: nothing could unblock it, and the stop already canceled its job's
    /// blocked evals in its own entry.
    fn upsert_evals(&mut self, evals: &[Evaluation]) {
        for e in evals {
            let mut e = e.clone();
            if e.status == EvalStatus::Blocked
                && self.store.job(&e.job_key()).is_none_or(|j| j.stop)
            {
                e.status = EvalStatus::Canceled;
                e.status_description = "job stopped before the eval was blocked".into();
            }
            self.put_eval(e);
        }
    }

    /// Writes an eval, keeping its create index if it exists, and stamping the modify index.
    fn put_eval(&mut self, mut e: Evaluation) {
        e.create_index = self
            .store
            .eval(&e.id)
            .map_or(self.index, |old| old.create_index);
        e.modify_index = self.index;
        self.touched_jobs.insert(e.job_key());
        let e = self.store.put_eval(self.index, e);
        self.events.push(Event::eval(self.index, &e));
    }

    fn alloc_client_update(
        &mut self,
        node_id: NodeId,
        updates: Vec<AllocClientUpdate>,
        evals: &[Evaluation],
        services: &[AllocServices],
        now: Timestamp,
    ) -> Result<(), ApplyError> {
        if self.store.node(&node_id).is_none() {
            return Err(ApplyError::NodeNotFound(node_id));
        }
        let mut relisted = Vec::new();
        for u in updates {
            // A failure the agent reported before its verdict still fails the allocation's
            // deployment (an allocation that failed never turns healthy).
            let verdict = u
                .deployment_health
                .or((u.client_status == ClientStatus::Failed).then_some(false));
            let mut verdict_recorded = None;
            let index = self.index;
            // A node updates only its own allocations, and terminal client states are final.
            let revised = self.store.revise_alloc(index, &u.alloc_id, |old| {
                if old.node_id != node_id || old.client_status.is_terminal() {
                    return None;
                }
                let mut a =
                    old.with_client_report(u.client_status, u.client_description, u.task_states);
                if let Some(healthy) = verdict {
                    verdict_recorded = mark_health(&mut a, healthy, now);
                }
                a.modify_index = index;
                a.modify_time = now;
                Some(a)
            });
            let Some(change) = revised else {
                continue;
            };
            if let (Some(deployment), Some(healthy)) = (verdict_recorded, verdict) {
                self.count_health(deployment, &change.new.task_group, healthy, now);
            }
            self.touch_job(&change.new.namespace, &change.new.job_id);
            let listed = crate::state::alloc_listed;
            if change
                .old
                .as_deref()
                .is_some_and(|old| listed(old) != listed(&change.new))
            {
                relisted.push(change.new.id);
            }
            let a = self.index_or_defer(change);
            self.events.push(Event::alloc(
                self.index,
                EventType::AllocationClientUpdated,
                &a,
            ));
        }
        for id in relisted {
            self.store.touch_alloc_services(self.index, id);
        }
        for s in services {
            self.alloc_services(node_id, s);
        }
        if !evals.is_empty() {
            // An eval's write changes its job's summary, which waiting writes change too.
            self.index_deferred_allocs();
            self.upsert_evals(evals);
        }
        Ok(())
    }

    /// Replaces an allocation's registrations with what its node reports. A node writes
    /// only its own live allocations' registrations, under their ids (which start with the
    /// allocation's): anything else in the report is ignored. Where a registration is, and
    /// whose it is, is the allocation's, whatever the report says; its checks' results are
    /// kept only within their bounds.
    fn alloc_services(&mut self, node_id: NodeId, s: &AllocServices) {
        let Some(a) = self.store.alloc(&s.alloc_id).cloned() else {
            return;
        };
        if a.node_id != node_id || a.client_terminal() {
            return;
        }
        let prefix = a.id.to_string();
        let regs = s
            .registrations
            .iter()
            .filter(|r| r.id.starts_with(&prefix))
            .map(|r| ServiceRegistration {
                id: r.id.clone(),
                service_name: r.service_name.clone(),
                namespace: a.namespace.to_string(),
                job_id: a.job_id.to_string(),
                alloc_id: a.id,
                node_id,
                task: r.task.clone(),
                address: r.address,
                port: r.port,
                tags: r.tags.clone(),
                health: r.health,
                checks: CheckState::bound_all(r.checks.clone()),
                create_index: r.create_index,
                modify_index: r.modify_index,
            })
            .collect();
        let changes = self.store.set_alloc_services(self.index, a.id, regs);
        self.service_events(changes);
    }

    fn service_events(&mut self, changes: crate::state::ServiceChanges) {
        for r in &changes.removed {
            self.events.push(Event::service(
                self.index,
                EventType::ServiceDeregistered,
                r,
            ));
        }
        for r in &changes.upserted {
            self.events
                .push(Event::service(self.index, EventType::ServiceRegistered, r));
        }
    }

    /// Removes the registrations of the allocations this entry ended on their client,
    /// deleted or moved to another node, and marks the catalog changed where an
    /// allocation's registrations stopped (or started) being listed by a server-side change
    /// (a stop, a lost node).
    fn settle_services(&mut self) {
        if self.store.service_count() == 0 {
            return;
        }
        let mut ended = Vec::new();
        let mut relisted = Vec::new();
        for e in &self.events {
            let id = match &e.payload {
                EventPayload::Allocation(a) => a.id,
                EventPayload::AllocId(id) => *id,
                _ => continue,
            };
            match self.store.alloc(&id) {
                // An allocation written onto another node leaves its old node's
                // registrations behind: only the node that runs it may list it.
                Some(a)
                    if !a.client_terminal()
                        && self
                            .store
                            .alloc_services(id)
                            .all(|r| r.node_id == a.node_id) =>
                {
                    if e.event_type != EventType::AllocationClientUpdated {
                        relisted.push(id);
                    }
                }
                _ => ended.push(id),
            }
        }
        for id in ended {
            let changes = self.store.set_alloc_services(self.index, id, Vec::new());
            self.service_events(changes);
        }
        for id in relisted {
            self.store.touch_alloc_services(self.index, id);
        }
    }

    /// Marks the allocation to stop (unless it already is) and writes the eval that
    /// replaces it.
    fn alloc_stop(
        &mut self,
        alloc_id: AllocId,
        eval: &Evaluation,
        now: Timestamp,
    ) -> Result<(), ApplyError> {
        if self.store.alloc(&alloc_id).is_none() {
            return Err(ApplyError::AllocNotFound(alloc_id));
        }
        let stopped = self.revise(&alloc_id, now, |old| {
            (old.desired_status == DesiredStatus::Run).then(|| {
                let mut a = old.clone();
                a.desired_status = DesiredStatus::Stop;
                a.desired_description = "alloc stopped by operator".into();
                a
            })
        });
        if let Some(a) = stopped {
            self.events
                .push(Event::alloc(self.index, EventType::AllocationUpdated, &a));
        }
        self.put_eval(eval.clone());
        Ok(())
    }

    fn allocs_migrate(&mut self, allocs: &[AllocId], evals: &[Evaluation], now: Timestamp) {
        for id in allocs {
            let marked = self.revise(id, now, |old| {
                (!old.is_terminal() && !old.links.get().migrate).then(|| {
                    let mut a = old.clone();
                    a.links.update(|l| l.migrate = true);
                    a
                })
            });
            if let Some(a) = marked {
                self.events
                    .push(Event::alloc(self.index, EventType::AllocationUpdated, &a));
            }
        }
        self.upsert_evals(evals);
    }

    fn apply_plan(&mut self, plan: PlanApply, now: Timestamp) {
        self.set_statuses(&plan.deployment_updates, now);
        if let Some(d) = &plan.deployment {
            self.plan_deployment(d, now);
        }
        self.defer_indexing();
        for t in plan
            .node_update
            .values()
            .chain(plan.node_preemptions.values())
            .flatten()
        {
            self.transition(t, now);
        }
        // A plan decoded from the log owns its allocations, and each moves into the store.
        // One still shared (the plan applier's overlay applies a copy of the command it
        // has in flight) has its allocations copied.
        match Arc::try_unwrap(plan.node_allocation) {
            Ok(owned) => owned
                .into_values()
                .flatten()
                .for_each(|a| self.place(a, now)),
            Err(shared) => shared
                .values()
                .flatten()
                .for_each(|a| self.place(a.clone(), now)),
        }
        self.end_deferred_indexing();
        self.upsert_evals(&plan.evals);
    }

    fn transition(&mut self, t: &AllocTransition, now: Timestamp) {
        let moved = self.revise(&t.alloc_id, now, |old| {
            let mut a = old.clone();
            a.desired_status = t.desired_status;
            a.desired_description = t.desired_description.as_str().into();
            if let Some(status) = t.client_status {
                a.record_client_status(status, now);
            }
            if t.follow_up_eval_id.is_some() {
                a.links
                    .update(|l| l.follow_up_eval_id = t.follow_up_eval_id);
            }
            if t.preempted_by.is_some() {
                a.links.update(|l| l.preempted_by = t.preempted_by);
            }
            Some(a)
        });
        if let Some(a) = moved {
            self.events
                .push(Event::alloc(self.index, EventType::PlanResult, &a));
        }
    }

    fn place(&mut self, alloc: Arc<Allocation>, now: Timestamp) {
        let mut a = Arc::unwrap_or_clone(alloc);
        // Most of a plan is new allocations that replace none: each is written in the one
        // walk of the by-id table that finds its id free. Any other goes the general way.
        if a.links.get().previous_allocation.is_none() {
            match self.place_new(a, now) {
                Ok(()) => return,
                Err(taken) => a = Arc::unwrap_or_clone(taken),
            }
        }
        let old = self.store.alloc(&a.id).cloned();
        match &old {
            Some(old) => {
                // In-place update: the client's view is newer than the scheduler's snapshot.
                a.create_index = old.create_index;
                a.create_time = old.create_time;
                a.task_states = old.task_states.clone();
                if !matches!(a.client_status, ClientStatus::Lost | ClientStatus::Unknown) {
                    a.client_status = old.client_status;
                    a.client_description = old.client_description.clone();
                }
            }
            None => {
                a.create_index = self.index;
                a.create_time = now;
                if let Some(prev) = a.links.get().previous_allocation {
                    let id = a.id;
                    let linked = self.revise(&prev, now, |p| {
                        let mut p = p.clone();
                        p.links.update(|l| l.next_allocation = Some(id));
                        Some(p)
                    });
                    if let Some(p) = linked {
                        self.events
                            .push(Event::alloc(self.index, EventType::PlanResult, &p));
                    }
                }
            }
        }
        self.count_placement(&a, old.as_deref(), now);
        self.stamp_and_put(a, old.as_deref(), now);
    }

    /// Places `a` as a new allocation, as [`Self::place`] would with no stored allocation
    /// under its id; hands it back if its id is taken.
    fn place_new(&mut self, mut a: Allocation, now: Timestamp) -> Result<(), Arc<Allocation>> {
        a.create_index = self.index;
        a.create_time = now;
        stamp(&mut a, self.index, now);
        self.share_job_key(&mut a);
        let change = self.store.insert_new_alloc(self.index, a)?;
        let a = self.index_or_defer(change);
        self.count_placement(&a, None, now);
        self.touch_job(&a.namespace, &a.job_id);
        self.events
            .push(Event::alloc(self.index, EventType::PlanResult, &a));
        Ok(())
    }

    /// Writes the next version of stored allocation `id`, which `next` makes from it
    /// (`None`: no write), stamped as the servers' change: one walk of the by-id table
    /// ([`StateStore::revise_alloc`]), its job touched, its indexes changed now or with
    /// the batch. Returns the written version.
    fn revise(
        &mut self,
        id: &AllocId,
        now: Timestamp,
        next: impl FnOnce(&Allocation) -> Option<Allocation>,
    ) -> Option<Arc<Allocation>> {
        let index = self.index;
        let change = self.store.revise_alloc(index, id, |old| {
            let mut a = next(old)?;
            stamp(&mut a, index, now);
            Some(a)
        })?;
        self.touch_job(&change.new.namespace, &change.new.job_id);
        Some(self.index_or_defer(change))
    }

    /// Stamps and stores `a`, which replaces `old` (the stored allocation with its id, if
    /// any; the caller has already looked it up).
    fn stamp_and_put(&mut self, mut a: Allocation, old: Option<&Allocation>, now: Timestamp) {
        stamp(&mut a, self.index, now);
        self.share_job_key(&mut a);
        if let Some(old) = old {
            self.touch_job(&old.namespace, &old.job_id);
        }
        self.touch_job(&a.namespace, &a.job_id);
        let a = self.put_alloc(a);
        self.events
            .push(Event::alloc(self.index, EventType::PlanResult, &a));
    }

    /// Records that a job's status may need refreshing. A plan's allocations all belong to
    /// one job, and a node's report names few, so the last job recorded is checked first
    /// (no key copy, no set search).
    fn touch_job(&mut self, namespace: &Arc<str>, id: &JobId) {
        let same = |k: &JobKey| k.id == *id && k.namespace == *namespace;
        if self.last_touched.as_ref().is_some_and(same) {
            return;
        }
        let key = JobKey {
            namespace: namespace.clone(),
            id: id.clone(),
        };
        self.touched_jobs.insert(key.clone());
        self.last_touched = Some(key);
    }

    /// Points a plan's allocation's namespace and job id at the strings the store shares
    /// for its job ([`StateStore::shared_job_key`]). A plan's allocations are one job's,
    /// so after the first each settles on a compare of two short strings instead of a walk
    /// of the summaries. (Versions made from a stored allocation share them already.)
    fn share_job_key(&mut self, a: &mut Allocation) {
        let same = |k: &JobKey| k.id == a.job_id && k.namespace == a.namespace;
        if !self.last_shared.as_ref().is_some_and(same) {
            self.last_shared = self.store.shared_job_key(&a.job_key()).cloned();
        }
        if let Some(k) = &self.last_shared {
            a.namespace = k.namespace.clone();
            a.job_id = k.id.clone();
        }
    }

    /// Allocation writes from here on wait for [`Self::index_deferred_allocs`].
    fn defer_indexing(&mut self) {
        self.unindexed.get_or_insert_with(Vec::new);
    }

    /// Brings the indexes in step with the allocations written since the last call;
    /// writes go on waiting.
    fn index_deferred_allocs(&mut self) {
        if let Some(waiting) = self.unindexed.as_mut().filter(|w| !w.is_empty()) {
            let changes = std::mem::take(waiting);
            self.lent = self
                .store
                .index_alloc_changes(self.index, changes, self.lent.take());
        }
    }

    /// Waits for the lent allocation indexes, if any, and puts them back.
    fn land_indexes(&mut self) {
        if let Some(lent) = self.lent.take() {
            self.store.land_indexes(lent);
        }
    }

    /// Indexes what waits, and writes allocations one by one again.
    fn end_deferred_indexing(&mut self) {
        self.index_deferred_allocs();
        self.unindexed = None;
    }

    /// Stores an allocation, its indexes now or with the batch being deferred.
    fn put_alloc(&mut self, a: Allocation) -> Arc<Allocation> {
        let change = self.store.insert_alloc(self.index, a);
        self.index_or_defer(change)
    }

    /// Brings the other indexes in step with a by-id write now, or with the batch when
    /// indexing is deferred; returns the written allocation.
    fn index_or_defer(&mut self, change: AllocChange) -> Arc<Allocation> {
        let new = change.new.clone();
        match &mut self.unindexed {
            Some(waiting) => waiting.push(change),
            None => {
                self.land_indexes();
                self.store.index_alloc_change(self.index, &change);
            }
        }
        new
    }

    fn refresh_job_statuses(&mut self) {
        for key in std::mem::take(&mut self.touched_jobs) {
            if let Some(j) = self.store.refresh_job_status(self.index, &key) {
                self.events
                    .push(Event::job(self.index, EventType::JobStatusChanged, &j));
            }
        }
    }
}

/// Marks `a` as changed by the servers at `index` (not by its node's report, which leaves
/// `alloc_modify_index` alone).
fn stamp(a: &mut Allocation, index: Index, now: Timestamp) {
    a.modify_index = index;
    a.alloc_modify_index = index;
    a.modify_time = now;
}
