//! The reconciler of the service and batch schedulers: desired state (the job) against actual
//! state (its allocations and their nodes), producing what to place, stop, mark and update.
//!
//! It decides *what*, never *where*: placements carry a name and the allocation they replace;
//! the scheduler picks nodes. Every allocation of the job is looked at once per eval, so the
//! cost is linear in the job's allocations and nothing else.
//!
//! Invariants: each slot `job.group[i]` for `i < count` ends with at most one live holder;
//! a replacement keeps the name of what it replaces; a reconnect is decided only while the
//! allocation's newest state entry is the disconnect, and the decision records a new entry
//! (or stops it), so it is never decided twice.

mod classify;
mod deployment;
mod follow_ups;
mod nodes;
pub mod reschedule;
mod slots;
pub mod update;

#[cfg(test)]
mod tests;

pub use classify::Replace;
pub(crate) use follow_ups::disconnect_follow_ups;

use crate::state::{JobAlloc, StateSnapshot};
use crate::types::*;
use classify::{Class, Context};
use deployment::{GroupRollout, JobRollout};
use follow_ups::FollowUps;
use nodes::NodeView;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a placement is made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PlacementKind {
    /// A slot nobody holds.
    New,
    /// Stands in for `previous` (see [`Replace`]).
    Replacement(Replace),
    /// The new version of `previous`, replaced as part of a rolling update.
    Destructive,
    /// A new-version allocation placed beside the old ones until its deployment is
    /// promoted; it replaces nothing.
    Canary,
}

/// One allocation to place.
#[derive(Clone, Debug)]
pub struct Placement {
    pub group: String,
    pub name: compact_str::CompactString,
    pub previous: Option<Arc<Allocation>>,
    pub kind: PlacementKind,
    /// The deployment the new allocation joins.
    pub deployment: Option<AllocDeployment>,
}

impl Placement {
    /// A reschedule avoids the node the failed allocation ran on.
    pub fn penalty_node(&self) -> Option<NodeId> {
        match self.kind {
            PlacementKind::Replacement(Replace::Reschedule { .. }) => {
                self.previous.as_ref().map(|p| p.node_id)
            }
            _ => None,
        }
    }
}

/// What the reconciler decided for one eval of one job.
#[derive(Clone, Debug, Default)]
pub struct Reconciled {
    pub place: Vec<Placement>,
    /// Status changes of existing allocations: stops, lost and unknown marks, reconnect
    /// records, follow-up eval ids.
    pub updates: Vec<(NodeId, AllocTransition)>,
    /// In-place updates: the allocation as it is to be stored.
    pub in_place: Vec<Allocation>,
    /// Follow-up evals (delayed reschedules, disconnect windows, rolling update rounds).
    pub evals: Vec<Evaluation>,
    pub desired: BTreeMap<String, DesiredUpdates>,
    /// The deployment this pass creates for the job's new version.
    pub deployment: Option<Deployment>,
    /// Older deployments this pass cancels.
    pub deployment_updates: Vec<DeploymentStatusUpdate>,
}

impl Reconciled {
    pub fn is_empty(&self) -> bool {
        self.place.is_empty()
            && self.updates.is_empty()
            && self.in_place.is_empty()
            && self.evals.is_empty()
            && self.deployment.is_none()
            && self.deployment_updates.is_empty()
    }
}

pub(crate) mod describe {
    pub const STOPPED: &str = "alloc not needed as job is stopped";
    pub const NOT_NEEDED: &str = "alloc not needed due to job update";
    pub const LOST: &str = "alloc is lost since its node is down";
    pub const MIGRATING: &str = "alloc is being migrated";
    pub const RESCHEDULED: &str = "alloc was rescheduled because it failed";
    pub const UPDATING: &str = "alloc is being updated due to job update";
    pub const UNKNOWN: &str = "alloc is unknown since its node is disconnected";
    pub const RECONNECTED: &str = "alloc reconnected";
    pub const RECONNECT_LOSER: &str = "alloc not needed due to reconnect";
    pub const PROMOTED: &str = "alloc not needed as its canary was promoted";
}

/// Reconciles the job `key` as of `snapshot` for `eval`. Ids for follow-up evals come from
/// `rng`.
pub fn reconcile(
    snapshot: &StateSnapshot,
    key: &JobKey,
    eval: &Evaluation,
    now: Timestamp,
    rng: &mut impl rand::Rng,
) -> Reconciled {
    let mut out = Reconciled::default();
    let job = snapshot.job(key).filter(|j| !j.stop);
    let Some(job) = job else {
        for e in snapshot.job_allocs(key).filter(|e| e.uses_resources()) {
            out.stop_entry(e, describe::STOPPED, None);
            out.desired.entry(e.group.to_string()).or_default().stop += 1;
        }
        return out;
    };
    // One pass over the index entries (see [`JobAlloc`]), never the allocations: each goes
    // to its group's list.
    let mut by_group: BTreeMap<&str, Vec<&JobAlloc>> = BTreeMap::new();
    // Allocations of one group mostly come in runs (most jobs have one group): the run's
    // list is reused without searching the map.
    let mut run: Option<(&str, Vec<&JobAlloc>)> = None;
    for existing in snapshot.job_allocs(key) {
        let group = existing.group.as_str();
        match &mut run {
            Some((name, list)) if same_name(name, group) => list.push(existing),
            _ => {
                if let Some((name, list)) = run.take() {
                    by_group.insert(name, list);
                }
                let mut list = by_group.remove(group).unwrap_or_default();
                list.push(existing);
                run = Some((group, list));
            }
        }
    }
    if let Some((name, list)) = run {
        by_group.insert(name, list);
    }
    for (name, group_allocs) in &by_group {
        if job.group(name).is_none() {
            for e in group_allocs.iter().filter(|e| e.uses_resources()) {
                out.stop_entry(e, describe::NOT_NEEDED, None);
                out.desired.entry(name.to_string()).or_default().stop += 1;
            }
        }
    }
    let mut later = FollowUps::default();
    let rollout = JobRollout::prepare(snapshot, job, rng, &mut out.deployment_updates);
    let sort_canaries = rollout.is_some() || snapshot.has_deployments(key);
    let mut groups = BTreeMap::new();
    let mut touched = false;
    for group in &job.groups {
        let existing = by_group.remove(group.name.as_str()).unwrap_or_default();
        let group_rollout = rollout
            .as_ref()
            .and_then(|r| GroupRollout::new(job, group, r));
        let done = GroupReconciler {
            snapshot,
            job,
            group,
            eval,
            now,
            out: &mut out,
            later: &mut later,
            rollout: group_rollout,
            touched: false,
        }
        .run(existing, sort_canaries);
        if let Some((state, changed)) = done {
            touched |= changed;
            groups.insert(group.name.clone(), state);
        }
    }
    if let Some(r) = rollout.filter(|r| r.existing.is_none() && touched) {
        out.deployment = Some(deployment::new_deployment(job, r.id, groups, now));
    }
    later.write(job, eval, now, rng, &mut out);
    out
}

impl Reconciled {
    fn stop(&mut self, a: &Allocation, why: &str, client_status: Option<ClientStatus>) {
        self.stop_at(a.id, a.node_id, why, client_status);
    }

    /// [`Reconciled::stop`] from the per-job index entry alone: a stop names the
    /// allocation and its node, which the entry holds.
    fn stop_entry(&mut self, e: &JobAlloc, why: &str, client_status: Option<ClientStatus>) {
        self.stop_at(e.id, e.node_id, why, client_status);
    }

    fn stop_at(&mut self, id: AllocId, node: NodeId, why: &str, cs: Option<ClientStatus>) {
        let mut t = AllocTransition::stop(id, why);
        t.client_status = cs;
        self.updates.push((node, t));
    }

    fn mark(
        &mut self,
        a: &Allocation,
        why: &str,
        client_status: ClientStatus,
        follow_up: Option<EvalId>,
    ) {
        let t = AllocTransition {
            alloc_id: a.id,
            desired_status: DesiredStatus::Run,
            desired_description: why.to_string(),
            client_status: Some(client_status),
            follow_up_eval_id: follow_up,
            preempted_by: None,
        };
        self.updates.push((a.node_id, t));
    }
}

/// One group's pass.
struct GroupReconciler<'a, 'o> {
    snapshot: &'a StateSnapshot,
    job: &'a Job,
    group: &'a TaskGroup,
    eval: &'a Evaluation,
    now: Timestamp,
    out: &'o mut Reconciled,
    later: &'o mut FollowUps,
    rollout: Option<GroupRollout>,
    /// Something of the job's current version is placed or updated in this pass.
    touched: bool,
}

impl<'a> GroupReconciler<'a, '_> {
    /// Returns the group's deployment state (with the canaries it wants) and whether the
    /// pass placed or updated anything of the current version, when it rolls out as a
    /// deployment.
    fn run(
        mut self,
        existing: Vec<&'a JobAlloc>,
        sort_canaries: bool,
    ) -> Option<(DeploymentGroup, bool)> {
        let (existing, canaries) = if sort_canaries {
            let sorted = deployment::sort(self.snapshot, self.rollout.as_ref(), self.job, existing);
            for (a, why) in sorted.stop {
                self.out.stop_entry(a, why, None);
                self.desired().stop += 1;
            }
            (sorted.rest, sorted.canaries)
        } else {
            (existing, Vec::new())
        };
        let mut slots = slots::Slots::new(
            self.snapshot,
            self.group.count,
            self.job.id.as_str(),
            &self.group.name,
        );
        let mut reconnecting = Vec::new();
        let mut unknown_replaceable = Vec::new();
        let replace_unknown = self.group.disconnect.as_ref().is_some_and(|d| d.replace);
        for a in existing {
            let cx = Context {
                state: self.snapshot,
                job: self.job,
                group: self.group,
                node: NodeView::lookup(self.snapshot, &a.node_id),
                now: self.now,
                eval: self.eval.id,
            };
            if let Some(r) = &self.rollout
                && r.holds_failed(self.snapshot, a)
            {
                // Unhealthy for its deployment, never replaced while it runs; a failed
                // canary holds no slot.
                let canary = self
                    .snapshot
                    .job_alloc(a)
                    .and_then(|a| a.links.get().deployment.as_ref().map(|d| d.canary))
                    .unwrap_or(false);
                if !canary {
                    slots.hold(a);
                }
                continue;
            }
            match classify::classify(a, &cx) {
                Class::Ignore => {}
                Class::Keep => slots.hold(a),
                Class::MarkUnknown => {
                    let window = self.group.disconnect_window().unwrap_or_default();
                    if let Some(alloc) = self.snapshot.job_alloc(a) {
                        self.later
                            .unknown
                            .push((alloc.clone(), self.now.saturating_add(window)));
                    }
                    self.desired().disconnect += 1;
                    if replace_unknown {
                        slots.replace(a, Replace::Disconnect);
                    } else {
                        slots.hold(a);
                    }
                }
                Class::Later {
                    due,
                    existing,
                    lost,
                } => {
                    if existing.is_none()
                        && let Some(alloc) = self.snapshot.job_alloc(a)
                    {
                        let trigger = if lost {
                            TriggeredBy::MaxDisconnectTimeout
                        } else {
                            TriggeredBy::RetryFailedAlloc
                        };
                        self.later
                            .due
                            .entry((trigger, due))
                            .or_default()
                            .push(alloc.clone());
                    }
                    if !lost {
                        self.desired().reschedule_later += 1;
                    }
                    slots.hold(a);
                }
                Class::Unknown => {
                    if replace_unknown {
                        unknown_replaceable.push(a);
                    } else {
                        slots.hold(a);
                    }
                }
                Class::Reconnecting => reconnecting.push(a),
                Class::Replace(why) => slots.replace(a, why),
            }
        }
        for a in reconnecting {
            self.reconnect(a, &mut slots);
        }
        for a in unknown_replaceable {
            if !slots.is_held(a) {
                slots.replace(a, Replace::StandIn);
            }
        }
        let decided = slots.decide();
        for a in decided.excess {
            self.out.stop_entry(a, describe::NOT_NEEDED, None);
            self.desired().stop += 1;
        }
        for (a, why, place) in decided.replaced {
            self.replace(a, why, place);
        }
        // An operator's `alloc stop` asks for a replacement: it follows the stopped one.
        let stopped = self
            .eval
            .related_alloc
            .filter(|_| self.eval.triggered_by == TriggeredBy::AllocStop)
            .and_then(|id| self.snapshot.alloc(&id))
            .filter(|a| a.task_group == self.group.name);
        for name in decided.free {
            let previous = stopped.filter(|a| a.name == name).cloned();
            let deployment = self.link(false);
            self.out.place.push(Placement {
                group: self.group.name.clone(),
                name,
                previous,
                kind: PlacementKind::New,
                deployment,
            });
            self.desired().place += 1;
        }
        let mut live_of_version: Vec<&'a JobAlloc> = decided.held.clone();
        live_of_version.extend(canaries.iter().copied());
        self.update_versions(decided.held, &canaries, &live_of_version);
        let touched = self.touched;
        self.rollout.map(|r| (r.state, touched))
    }

    /// The deployment link of a placement made now, and notes that the pass placed
    /// something of the current version.
    fn link(&mut self, canary: bool) -> Option<AllocDeployment> {
        self.touched = true;
        self.rollout.as_ref().and_then(|r| r.link(canary))
    }

    fn desired(&mut self) -> &mut DesiredUpdates {
        self.out.desired.entry(self.group.name.clone()).or_default()
    }

    fn replace(&mut self, entry: &'a JobAlloc, why: Replace, place: bool) {
        let Some(a) = self.snapshot.job_alloc(entry) else {
            return;
        };
        match why {
            Replace::Lost => {
                self.out.stop(a, describe::LOST, Some(ClientStatus::Lost));
                self.desired().stop += 1;
            }
            Replace::Migrate => {
                self.out.stop(a, describe::MIGRATING, None);
                self.desired().migrate += 1;
            }
            Replace::Reschedule { .. } => {
                if place {
                    self.out.stop(a, describe::RESCHEDULED, None);
                    self.desired().reschedule_now += 1;
                }
            }
            Replace::Disconnect | Replace::StandIn => {}
        }
        if place {
            let name = a.name.clone();
            let deployment = self.link(false);
            self.out.place.push(Placement {
                group: self.group.name.clone(),
                name,
                previous: Some(a.clone()),
                kind: PlacementKind::Replacement(why),
                deployment,
            });
            if !matches!(why, Replace::Migrate | Replace::Reschedule { .. }) {
                self.desired().place += 1;
            }
        }
    }

    /// Decides between a reconnected allocation and whatever stood in for it (same name).
    fn reconnect(&mut self, entry: &'a JobAlloc, slots: &mut slots::Slots<'a>) {
        let Some(original) = self.snapshot.job_alloc(entry) else {
            return;
        };
        let stand_ins = slots.take_holders_named(&original.name);
        let keep_original = match (&stand_ins[..], self.reconcile_strategy()) {
            ([], _) => true,
            (_, ReconcileStrategy::KeepOriginal) => true,
            (_, ReconcileStrategy::KeepReplacement) => false,
            ([first, ..], ReconcileStrategy::LongestRunning) => self
                .snapshot
                .job_alloc(first)
                .is_none_or(|first| started(original) <= started(first)),
            ([first, ..], ReconcileStrategy::BestScore) => {
                original.job_version == self.job.version || first.job_version != self.job.version
            }
        };
        self.desired().reconnect += 1;
        if keep_original {
            self.out.mark(
                original,
                describe::RECONNECTED,
                original.client_status,
                None,
            );
            for s in stand_ins {
                self.out.stop_entry(s, describe::RECONNECT_LOSER, None);
                self.desired().stop += 1;
            }
            slots.hold(entry);
        } else {
            self.out.stop(original, describe::RECONNECT_LOSER, None);
            self.desired().stop += 1;
            for s in stand_ins {
                slots.hold(s);
            }
        }
    }

    fn reconcile_strategy(&self) -> ReconcileStrategy {
        self.group
            .disconnect
            .as_ref()
            .map_or(ReconcileStrategy::BestScore, |d| d.reconcile)
    }

    /// Moves held allocations of an older job version to this one: in place when only
    /// non-destructive fields changed, else replaced `max_parallel` at a time (under a
    /// deployment: canaries first, then as the deployment's allocations turn healthy).
    fn update_versions(
        &mut self,
        held: Vec<&'a JobAlloc>,
        canaries: &[&'a JobAlloc],
        live: &[&'a JobAlloc],
    ) {
        let stale: Vec<&Arc<Allocation>> = held
            .iter()
            .filter(|a| a.job_version != self.job.version && a.uses_resources())
            .filter_map(|a| self.snapshot.job_alloc(a))
            .collect();
        if stale.is_empty() {
            return;
        }
        let key = self.job.key();
        let fits = crate::scheduler::feasible::NodeMatch::new(self.job);
        let mut destructive = Vec::new();
        for a in stale {
            let old = self
                .snapshot
                .job_version(&key, a.job_version)
                .and_then(|j| j.group(&self.group.name).cloned());
            let node = self.snapshot.node(&a.node_id);
            if update::in_place(a, old.as_ref(), self.group, node.map(|n| &**n), &fits) {
                let mut updated = (**a).clone();
                updated.job_version = self.job.version;
                updated.resources = self.group.resources();
                if let Some(link) = self.link(false) {
                    updated.links.update(|l| l.deployment = Some(link));
                }
                self.out.in_place.push(updated);
                self.desired().in_place_update += 1;
            } else {
                destructive.push(a);
            }
        }
        destructive.sort_by_key(|a| (a.name_index().unwrap_or(u32::MAX), a.id));
        let budget = match &self.rollout {
            Some(_) => {
                if destructive.is_empty() {
                    return;
                }
                self.touched = true;
                if let Some(r) = self.rollout.as_mut().filter(|r| r.creating) {
                    r.state.desired_canaries = r.strategy.canary;
                }
                let Some(r) = &self.rollout else { return };
                if r.halted {
                    0
                } else if r.canarying() {
                    self.place_canaries(&destructive, canaries);
                    0
                } else {
                    r.budget(self.snapshot, live)
                }
            }
            None => {
                let width = update::max_parallel(self.job, self.group) as usize;
                let starting = held
                    .iter()
                    .filter(|a| {
                        a.job_version == self.job.version
                            && a.client_status == ClientStatus::Pending
                    })
                    .count();
                if width == 0 {
                    destructive.len()
                } else {
                    width.saturating_sub(starting)
                }
            }
        };
        let rest = destructive.split_off(budget.min(destructive.len()));
        for a in destructive {
            self.out.stop(a, describe::UPDATING, None);
            let name = a.name.clone();
            let deployment = self.link(false);
            self.out.place.push(Placement {
                group: self.group.name.clone(),
                name,
                previous: Some(a.clone()),
                kind: PlacementKind::Destructive,
                deployment,
            });
            self.desired().destructive_update += 1;
        }
        if !rest.is_empty() {
            self.desired().ignore += rest.len() as u32;
            if self.rollout.is_none() {
                let stagger = self
                    .group
                    .update
                    .as_ref()
                    .unwrap_or(&self.job.update)
                    .stagger;
                self.later.rolling = Some(self.later.rolling.map_or(stagger, |s| s.min(stagger)));
            }
        }
    }

    /// Places the canaries still missing beside the old allocations, named after the old
    /// allocations they will stand for (in slot order, skipping names a canary has).
    fn place_canaries(&mut self, destructive: &[&Arc<Allocation>], canaries: &[&'a JobAlloc]) {
        let Some(r) = &self.rollout else { return };
        let placed = r.state.placed_canaries.len().max(canaries.len());
        let missing = (r.state.desired_canaries as usize).saturating_sub(placed);
        let taken: std::collections::BTreeSet<&str> = canaries
            .iter()
            .filter_map(|c| self.snapshot.job_alloc(c))
            .map(|c| c.name.as_str())
            .collect();
        // Beyond the old allocations' names (more canaries than count, which Nomad
        // allows), the slots past the count: a promotion stops those as surplus.
        let beyond = (self.group.count..)
            .map(|i| Allocation::name_for(self.job.id.as_str(), &self.group.name, i));
        let names: Vec<compact_str::CompactString> = destructive
            .iter()
            .map(|a| a.name.clone())
            .chain(beyond)
            .filter(|n| !taken.contains(n.as_str()))
            .take(missing)
            .collect();
        for name in names {
            let deployment = self.link(true);
            self.out.place.push(Placement {
                group: self.group.name.clone(),
                name,
                previous: None,
                kind: PlacementKind::Canary,
                deployment,
            });
            self.desired().canary += 1;
        }
    }
}

/// String equality without a library call: group names are short, and this runs once per
/// allocation.
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

fn started(a: &Allocation) -> Timestamp {
    a.task_states
        .values()
        .filter_map(|t| t.started_at)
        .min()
        .unwrap_or(a.create_time)
}
