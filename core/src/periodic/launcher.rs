//! The leader's periodic launcher: which periodic jobs launch next, and the child jobs and
//! evals each launch registers.

use super::child::{self, PERIODIC_SUFFIX, periodic_launch_time};
use super::schedule::{Schedule, ScheduleError};
use crate::fsm::Command;
use crate::state::StateSnapshot;
use crate::types::*;
use crate::validate::Limits;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// One launch: the child job to register and its eval, for one `JobRegister` command.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// The periodic job launched.
    pub parent: JobKey,
    /// The cron slot launched, in whole seconds; the child's id carries it.
    pub launch_time: Timestamp,
    /// `<parent>/periodic-<unix seconds>`: a copy of the parent with `periodic` cleared and
    /// `parent_id` set, `submit_time` = the launch time.
    pub job: Job,
    /// Pending, [`TriggeredBy::PeriodicJob`], created at the tick's `now`.
    pub eval: Evaluation,
}

impl Launch {
    /// The command that registers the child and its eval in one Raft entry.
    pub fn into_command(self, now: Timestamp) -> Command {
        Command::JobRegister {
            job: self.job,
            eval: Some(self.eval),
            now,
        }
    }
}

/// A periodic job the launcher cannot schedule. The job stays registered but is not
/// tracked; the leader logs this and the operator fixes the spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("periodic job {job} cannot be scheduled: {source}")]
pub struct TrackError {
    pub job: JobKey,
    pub source: ScheduleError,
}

/// Tracks periodic jobs and launches their children on schedule. Run by the leader only:
/// built empty, filled by [`restore`](Self::restore) on gaining leadership and kept current
/// with [`track`](Self::track) / [`untrack`](Self::untrack) as registers and deregisters
/// commit; dropped or [`clear`](Self::clear)ed on losing it.
///
/// The runtime sleeps until [`next_deadline`](Self::next_deadline) (or a change), then calls
/// [`tick`](Self::tick) with its latest state and commits each [`Launch`] before the next
/// tick. That contract is what makes the overlap check sound: the snapshot given to `tick`
/// contains every change the launcher was told about and every launch it emitted before.
///
/// Invariants:
/// - every tracked job has exactly one entry in the due queue, at its `next` launch;
/// - a job launches at most once per cron slot, and slots only move forward: each launch's
///   slot is later than the job's previous one, and the next launch is strictly after the
///   `now` of the tick that launched;
/// - a tick that comes late (after several slots passed) launches once, at the latest slot
///   due, rather than once per slot; so does a new leader that finds launches were missed.
#[derive(Debug)]
pub struct PeriodicLauncher {
    max_id_len: usize,
    tracked: BTreeMap<JobKey, Tracked>,
    /// (next launch, job): the earliest first.
    due: BTreeSet<(Timestamp, JobKey)>,
}

#[derive(Debug)]
struct Tracked {
    /// The periodic block the schedule was built from, to tell a changed spec on re-track.
    config: PeriodicConfig,
    schedule: Schedule,
    next: Timestamp,
    /// The slot of the last launch this launcher emitted or found in state.
    last_launch: Option<Timestamp>,
    /// For jobs with `prohibit_overlap`: children that may still run. `None` until first
    /// needed (then seeded by one scan of the jobs), and always `None` for other jobs, so
    /// nothing grows with the number of launches. Pruned of dead children on every check,
    /// so it holds at most the few children alive at once.
    live_children: Option<BTreeSet<JobKey>>,
}

/// What one scan of the jobs found about one parent's periodic children.
#[derive(Default)]
struct ChildrenSeen {
    last_launch: Option<Timestamp>,
    live: BTreeSet<JobKey>,
}

impl Default for PeriodicLauncher {
    fn default() -> Self {
        Self::new(&Limits::default())
    }
}

impl PeriodicLauncher {
    /// An empty launcher whose child ids respect `limits.max_name_len` (see
    /// [`child::child_id`]).
    pub fn new(limits: &Limits) -> Self {
        Self {
            max_id_len: limits.max_name_len,
            tracked: BTreeMap::new(),
            due: BTreeSet::new(),
        }
    }

    /// Starts, updates or stops tracking `job` after a register of it committed. Returns its
    /// next launch, or `None` when it is not tracked: not periodic, periodic but disabled,
    /// stopped, or a spec that never fires again after `now`.
    ///
    /// Re-tracking a job whose cron and time zone did not change keeps its pending launch,
    /// even one already due, so a register between a slot and the tick that serves it does
    /// not lose that slot. A changed schedule starts over strictly after `now` (and after the
    /// job's last launch).
    pub fn track(&mut self, job: &Job, now: Timestamp) -> Result<Option<Timestamp>, TrackError> {
        let key = job.key();
        let previous = self.remove(&key);
        let Some(config) = launchable(job) else {
            return Ok(None);
        };
        let schedule = Schedule::new(config).map_err(|source| TrackError {
            job: key.clone(),
            source,
        })?;
        let (kept_next, last_launch, live_children) = match previous {
            Some(p) => {
                let same = p.config.cron == config.cron && p.config.time_zone == config.time_zone;
                let live = if config.prohibit_overlap {
                    p.live_children
                } else {
                    None
                };
                (same.then_some(p.next), p.last_launch, live)
            }
            None => (None, None, None),
        };
        // Never before the last launch, nor at or before the job was submitted, should this
        // server's clock be behind the one that launched or registered it.
        let after = now
            .max(last_launch.unwrap_or(Timestamp::ZERO))
            .max(job.submit_time);
        let Some(next) = kept_next.or_else(|| schedule.next_after(after)) else {
            return Ok(None);
        };
        self.insert(
            key,
            Tracked {
                config: config.clone(),
                schedule,
                next,
                last_launch,
                live_children,
            },
        );
        Ok(Some(next))
    }

    /// Stops tracking a job (deregistered or purged). Returns whether it was tracked.
    pub fn untrack(&mut self, key: &JobKey) -> bool {
        self.remove(key).is_some()
    }

    /// Forgets everything (leadership lost).
    pub fn clear(&mut self) {
        self.tracked.clear();
        self.due.clear();
    }

    /// Rebuilds the launcher from state on gaining leadership: tracks every launchable
    /// periodic job and returns the ones that cannot be scheduled.
    ///
    /// A job that missed launches while no leader ran (its latest slot at or before `now` is
    /// later than both its last child and its submit time) is due at once, and the next
    /// [`tick`](Self::tick) launches it once, not once per missed slot; the job's later
    /// launches follow its schedule. The last launch of a job is read from its children's ids
    /// (`…/periodic-<unix seconds>`): state keeps no separate launch table, so a child that
    /// was garbage-collected no longer counts (see the module docs).
    ///
    /// Cost: two passes over the jobs, once per leadership change.
    pub fn restore(&mut self, snapshot: &StateSnapshot, now: Timestamp) -> Vec<TrackError> {
        self.clear();
        let mut seen: BTreeMap<JobKey, ChildrenSeen> = BTreeMap::new();
        for job in snapshot.jobs() {
            let Some(parent) = &job.parent_id else {
                continue;
            };
            let Some(at) = periodic_launch_time(&job.id) else {
                continue;
            };
            let parent = JobKey {
                namespace: job.namespace.as_str().into(),
                id: parent.clone(),
            };
            let entry = seen.entry(parent).or_default();
            entry.last_launch = entry.last_launch.max(Some(at));
            if job.status != JobStatus::Dead {
                entry.live.insert(job.key());
            }
        }
        let mut errors = Vec::new();
        for job in snapshot.jobs() {
            let Some(config) = launchable(job) else {
                continue;
            };
            let key = job.key();
            let schedule = match Schedule::new(config) {
                Ok(s) => s,
                Err(source) => {
                    errors.push(TrackError { job: key, source });
                    continue;
                }
            };
            let children = seen.remove(&key).unwrap_or_default();
            let launched_by = children.last_launch.max(Some(job.submit_time));
            let missed = schedule
                .latest_at_or_before(now)
                .filter(|slot| Some(*slot) > launched_by);
            // A clock behind the previous leader's must not serve its last slot again, nor a
            // slot at or before the job was submitted.
            let after = launched_by.unwrap_or(Timestamp::ZERO).max(now);
            let Some(next) = missed.or_else(|| schedule.next_after(after)) else {
                continue;
            };
            let live_children = config.prohibit_overlap.then_some(children.live);
            self.insert(
                key,
                Tracked {
                    config: config.clone(),
                    schedule,
                    next,
                    last_launch: children.last_launch,
                    live_children,
                },
            );
        }
        errors
    }

    /// When the earliest tracked launch is due; `None` when nothing is tracked. A deadline at
    /// or before now means `tick` has work.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.due.first().map(|(at, _)| *at)
    }

    /// The next launch of one job, if it is tracked.
    pub fn next_launch(&self, key: &JobKey) -> Option<Timestamp> {
        self.tracked.get(key).map(|t| t.next)
    }

    /// How many jobs are tracked.
    pub fn len(&self) -> usize {
        self.tracked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracked.is_empty()
    }

    /// Launches every job due at `now`, in order of due time then job, and schedules each
    /// one's next launch strictly after `now`.
    ///
    /// The parent is read from `snapshot`, the committed truth: a parent gone from it,
    /// stopped or no longer periodic is untracked and not launched, and the child is
    /// derived from the snapshot's (newest) spec. A parent with `prohibit_overlap` whose
    /// earlier child is not dead in the snapshot skips this slot (Nomad skips rather than
    /// delays); it launches again at the first slot after that child is dead.
    ///
    /// Each launch draws 16 bytes from `rng` for its eval id.
    pub fn tick(
        &mut self,
        now: Timestamp,
        snapshot: &StateSnapshot,
        rng: &mut impl Rng,
    ) -> Vec<Launch> {
        let mut launches = Vec::new();
        while let Some((at, key)) = self.due.first().cloned() {
            if at > now {
                break;
            }
            let Some(mut t) = self.remove(&key) else {
                continue;
            };
            let Some(parent) = snapshot.job(&key) else {
                continue;
            };
            let Some(config) = launchable(parent) else {
                continue;
            };
            // A late tick serves the latest slot passed, once.
            let slot = t
                .schedule
                .latest_at_or_before(now)
                .filter(|s| *s >= at)
                .unwrap_or(at);
            if !config.prohibit_overlap {
                t.live_children = None;
            } else if t.live_children.is_none() {
                t.live_children = Some(live_children_of(&key, snapshot));
            }
            // Already ensured by how `next` is chosen; checked again because a launch twice
            // in one slot is the one thing the launcher must never do.
            let fresh = t.last_launch.is_none_or(|last| slot > last);
            if fresh && !has_live_child(&mut t.live_children, snapshot) {
                let launch = self.launch(parent, slot, now, rng);
                if let Some(live) = &mut t.live_children {
                    live.insert(launch.job.key());
                }
                t.last_launch = Some(slot);
                launches.push(launch);
            }
            // `next_after` is strictly later, so this loop always ends; the filter keeps it
            // so even if that promise broke.
            let next = t.schedule.next_after(now.max(slot)).filter(|n| *n > now);
            if let Some(next) = next {
                t.next = next;
                self.insert(key, t);
            }
        }
        launches
    }

    fn launch(&self, parent: &Job, slot: Timestamp, now: Timestamp, rng: &mut impl Rng) -> Launch {
        launch_at(parent, slot, now, rng, self.max_id_len)
    }

    fn insert(&mut self, key: JobKey, t: Tracked) {
        self.due.insert((t.next, key.clone()));
        self.tracked.insert(key, t);
    }

    fn remove(&mut self, key: &JobKey) -> Option<Tracked> {
        let t = self.tracked.remove(key)?;
        self.due.remove(&(t.next, key.clone()));
        Some(t)
    }
}

/// The launch of `parent`'s child for the cron slot `slot` (whole seconds), registered at
/// `now`; the child's id is at most `max_id_len` bytes (see [`child::child_id`]).
pub(super) fn launch_at(
    parent: &Job,
    slot: Timestamp,
    now: Timestamp,
    rng: &mut impl Rng,
    max_id_len: usize,
) -> Launch {
    let suffix = format!("{PERIODIC_SUFFIX}{}", slot.as_millis() / 1000);
    let id = child::child_id(&parent.id, &suffix, max_id_len);
    let job = child::derive(parent, id, slot);
    let eval = Evaluation::new(
        EvalId::from_bytes(rng.random()),
        &job,
        TriggeredBy::PeriodicJob,
        now,
    );
    Launch {
        parent: parent.key(),
        launch_time: slot,
        job,
        eval,
    }
}

/// The periodic block of a job the launcher should launch: periodic and enabled, not
/// stopped, and not itself a child (children never carry `periodic`, but a stored job is
/// not trusted to).
pub(super) fn launchable(job: &Job) -> Option<&PeriodicConfig> {
    job.periodic
        .as_ref()
        .filter(|p| p.enabled && !job.stop && job.parent_id.is_none())
}

/// The periodic children of `parent` that are not dead in `snapshot`, by one scan of the
/// jobs: children are linked by `parent_id`, and state has no by-parent index. Done once per
/// tracked job with `prohibit_overlap` (when first needed), after which the launcher keeps
/// the set itself.
fn live_children_of(parent: &JobKey, snapshot: &StateSnapshot) -> BTreeSet<JobKey> {
    snapshot
        .jobs()
        .filter(|j| {
            j.status != JobStatus::Dead
                && j.parent_id.as_ref() == Some(&parent.id)
                && *j.namespace == *parent.namespace
                && periodic_launch_time(&j.id).is_some()
        })
        .map(|j| j.key())
        .collect()
}

/// Whether a child in `live` is still not dead in `snapshot`, pruning the dead ones so the
/// set stays as small as the number of children alive at once. A child missing from the
/// snapshot was purged or garbage-collected: it no longer runs. `None` (no overlap check
/// wanted) never blocks.
fn has_live_child(live: &mut Option<BTreeSet<JobKey>>, snapshot: &StateSnapshot) -> bool {
    let Some(live) = live else {
        return false;
    };
    live.retain(|k| snapshot.job(k).is_some_and(|j| j.status != JobStatus::Dead));
    !live.is_empty()
}
