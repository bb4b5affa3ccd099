//! Counters of the tracker, kept incrementally so reading them is O(classes).

use super::tracked::{BlockedKind, Tracked};
use std::collections::BTreeMap;

/// Gauges of the blocked-eval tracker.
///
/// Invariant: equal to a recount over the tracked evals at every public method's return.
///
/// `by_class` counts, per node class, the blocked evals that marked that class eligible:
/// they found it feasible but full, so it is where capacity is wanted. Evals carry no
/// resource totals (a group's failure metric counts placements, not sizes), and asking the
/// caller for them would tie the tracker to job specs; a count per class answers the
/// operator's question "which class should grow" without that coupling.
#[derive(Clone, PartialEq, Eq, Default, Debug)]
pub struct BlockedStats {
    /// Every blocked eval, of all kinds.
    pub total_blocked: usize,
    /// Captured by class (neither escaped nor per-node system).
    pub total_captured: usize,
    pub total_escaped: usize,
    /// Per-node system and sysbatch evals.
    pub total_system: usize,
    /// Blocked after running out of plan attempts; retried by the failed sweep.
    pub total_failed: usize,
    /// Duplicates waiting for the leader to cancel them.
    pub duplicates: usize,
    /// Node class -> blocked evals that marked it eligible. Classes at zero are absent.
    pub by_class: BTreeMap<String, usize>,
}

impl BlockedStats {
    pub(super) fn add(&mut self, t: &Tracked) {
        self.total_blocked += 1;
        *self.kind_counter(t.kind) += 1;
        if t.is_failed() {
            self.total_failed += 1;
        }
        for class in eligible_classes(t) {
            *self.by_class.entry(class.to_owned()).or_default() += 1;
        }
    }

    pub(super) fn remove(&mut self, t: &Tracked) {
        self.total_blocked -= 1;
        *self.kind_counter(t.kind) -= 1;
        if t.is_failed() {
            self.total_failed -= 1;
        }
        for class in eligible_classes(t) {
            if let Some(n) = self.by_class.get_mut(class) {
                *n -= 1;
                if *n == 0 {
                    self.by_class.remove(class);
                }
            }
        }
    }

    fn kind_counter(&mut self, kind: BlockedKind) -> &mut usize {
        match kind {
            BlockedKind::Captured => &mut self.total_captured,
            BlockedKind::Escaped => &mut self.total_escaped,
            BlockedKind::System { .. } => &mut self.total_system,
        }
    }
}

fn eligible_classes(t: &Tracked) -> impl Iterator<Item = &str> {
    t.eval
        .class_eligibility
        .iter()
        .filter(|(_, ok)| **ok)
        .map(|(class, _)| class.as_str())
}
