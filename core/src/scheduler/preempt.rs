//! Preemption: which lower-priority allocations to evict so that a placement fits a node.
//!
//! Only allocations of jobs at least [`PRIORITY_DELTA`] below the placing job's priority may
//! be evicted (Nomad's rule: near-equal priorities never preempt each other). Among those,
//! [`choose_evictions`] picks a set that frees enough in every dimension that is short,
//! preferring, in order:
//!
//! 1. the lowest priorities: the highest priority evicted is as low as possible;
//! 2. the fewest allocations;
//! 3. the lowest sum of priorities, then the least capacity freed (evict no more than
//!    needed).
//!
//! Up to [`EXACT_LIMIT`] candidates the choice is exact (subsets are searched by size);
//! beyond that a greedy cover followed by pruning gives a set from which no allocation can
//! be dropped.

use crate::types::*;

/// How far below the placing job's priority a job must be for its allocations to be
/// preempted.
pub const PRIORITY_DELTA: u8 = 10;

/// Up to this many candidate allocations (after the priority cut) the fewest-allocations
/// search is exhaustive (at most 2^12 subsets); above it, greedy.
pub const EXACT_LIMIT: usize = 12;

/// Whether an allocation of a job with priority `victim` may be evicted for a job with
/// priority `placing`.
pub fn may_preempt(placing: u8, victim: u8) -> bool {
    u16::from(placing) >= u16::from(victim) + u16::from(PRIORITY_DELTA)
}

/// An allocation that could be evicted: its job's priority and what it holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Evictable {
    pub priority: u8,
    pub resources: Resources,
}

/// What must be freed on a node for `need` (everything on it after the plan, plus the new
/// allocation) to fit `allocatable`: the excess in each dimension.
pub fn shortfall(allocatable: &Resources, need: &Resources) -> Resources {
    need.saturating_sub(allocatable)
}

/// Picks the allocations (indexes into `candidates`) to evict so that together they free at
/// least `short` in every dimension, by the preferences in the module docs; `None` when even
/// evicting all of them is not enough. Callers pass only allocations [`may_preempt`] allows.
/// The result is sorted by index.
pub fn choose_evictions(short: &Resources, candidates: &[Evictable]) -> Option<Vec<usize>> {
    if short.is_zero() {
        return Some(Vec::new());
    }
    let helps = |r: &Resources| {
        (short.cpu_mhz > 0 && r.cpu_mhz > 0)
            || (short.memory_mb > 0 && r.memory_mb > 0)
            || (short.disk_mb > 0 && r.disk_mb > 0)
    };
    let mut order: Vec<usize> = (0..candidates.len())
        .filter(|&i| helps(&candidates[i].resources))
        .collect();
    order.sort_by_key(|&i| (candidates[i].priority, i));

    // The lowest priority threshold at which evicting everything up to it is enough. Every
    // set that suffices then contains an allocation of exactly that priority.
    let mut freed = Resources::ZERO;
    let mut cut = None;
    for (pos, &i) in order.iter().enumerate() {
        freed += candidates[i].resources;
        let last_of_priority = order
            .get(pos + 1)
            .is_none_or(|&j| candidates[j].priority != candidates[i].priority);
        if last_of_priority && freed.covers(short) {
            cut = Some(pos + 1);
            break;
        }
    }
    let pool = &order[..cut?];
    let mut chosen = if pool.len() <= EXACT_LIMIT {
        fewest_exact(short, candidates, pool)
    } else {
        fewest_greedy(short, candidates, pool)
    };
    chosen.sort_unstable();
    Some(chosen)
}

fn sum_of(candidates: &[Evictable], set: impl Iterator<Item = usize>) -> Resources {
    set.map(|i| candidates[i].resources).sum()
}

/// Ties between sets of one size: lower priority sum, then less freed, then first found.
fn tie_key(candidates: &[Evictable], set: &[usize]) -> (u32, u64) {
    let prio: u32 = set.iter().map(|&i| u32::from(candidates[i].priority)).sum();
    let r = sum_of(candidates, set.iter().copied());
    (prio, r.cpu_mhz + r.memory_mb + r.disk_mb)
}

/// Tries sets of size 1, 2, … of `pool` (which as a whole suffices) and returns the best of
/// the first size that has any.
fn fewest_exact(short: &Resources, candidates: &[Evictable], pool: &[usize]) -> Vec<usize> {
    let n = pool.len();
    for k in 1..=n {
        let mut best: Option<((u32, u64), Vec<usize>)> = None;
        // Positions into `pool`, advanced as lexicographic combinations.
        let mut pos: Vec<usize> = (0..k).collect();
        loop {
            if sum_of(candidates, pos.iter().map(|&p| pool[p])).covers(short) {
                let set: Vec<usize> = pos.iter().map(|&p| pool[p]).collect();
                let key = tie_key(candidates, &set);
                if best.as_ref().is_none_or(|(b, _)| key < *b) {
                    best = Some((key, set));
                }
            }
            // Next combination: bump the rightmost position that can move.
            let Some(i) = (0..k).rev().find(|&i| pos[i] < n - k + i) else {
                break;
            };
            pos[i] += 1;
            for j in i + 1..k {
                pos[j] = pos[j - 1] + 1;
            }
        }
        if let Some((_, set)) = best {
            return set;
        }
    }
    pool.to_vec()
}

/// Greedy cover (most of the remaining shortfall first, lower priority on ties), then drops
/// any allocation not needed, highest priority first.
fn fewest_greedy(short: &Resources, candidates: &[Evictable], pool: &[usize]) -> Vec<usize> {
    let coverage = |r: &Resources, left: &Resources| {
        let part = |have: u64, want: u64| {
            if want == 0 {
                0.0
            } else {
                have.min(want) as f64 / want as f64
            }
        };
        part(r.cpu_mhz, left.cpu_mhz)
            + part(r.memory_mb, left.memory_mb)
            + part(r.disk_mb, left.disk_mb)
    };
    let mut chosen: Vec<usize> = Vec::new();
    let mut left = *short;
    while !left.is_zero() {
        let next = pool
            .iter()
            .copied()
            .filter(|i| !chosen.contains(i))
            .map(|i| (coverage(&candidates[i].resources, &left), i))
            .max_by(|a, b| {
                a.0.total_cmp(&b.0)
                    .then(candidates[b.1].priority.cmp(&candidates[a.1].priority))
                    .then(b.1.cmp(&a.1))
            });
        let Some((_, i)) = next else { break };
        chosen.push(i);
        left = left.saturating_sub(&candidates[i].resources);
    }
    let mut by_priority = chosen.clone();
    by_priority.sort_by_key(|&i| std::cmp::Reverse((candidates[i].priority, i)));
    for i in by_priority {
        let without = sum_of(candidates, chosen.iter().copied().filter(|&j| j != i));
        if without.covers(short) {
            chosen.retain(|&j| j != i);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(priority: u8, cpu: u64, mem: u64) -> Evictable {
        Evictable {
            priority,
            resources: Resources::new(cpu, mem, 0),
        }
    }

    #[test]
    fn priority_delta_is_ten() {
        assert!(may_preempt(50, 40));
        assert!(!may_preempt(50, 41));
        assert!(!may_preempt(50, 50));
        assert!(!may_preempt(5, 0));
        assert!(may_preempt(10, 0));
        assert!(may_preempt(100, 90));
        assert!(!may_preempt(0, 0));
    }

    #[test]
    fn chooses_lowest_priority_then_fewest() {
        struct Case {
            name: &'static str,
            short: Resources,
            candidates: Vec<Evictable>,
            want: Option<Vec<usize>>,
        }
        let cases = [
            Case {
                name: "nothing short",
                short: Resources::ZERO,
                candidates: vec![ev(10, 100, 100)],
                want: Some(vec![]),
            },
            Case {
                name: "one big low-priority beats two small and a higher one",
                short: Resources::new(0, 1000, 0),
                candidates: vec![
                    ev(10, 0, 600),
                    ev(10, 0, 500),
                    ev(10, 0, 1000),
                    ev(20, 0, 2000),
                ],
                want: Some(vec![2]),
            },
            Case {
                name: "lower priority wins even if it takes more allocations",
                short: Resources::new(0, 1000, 0),
                candidates: vec![ev(20, 0, 1000), ev(10, 0, 500), ev(10, 0, 500)],
                want: Some(vec![1, 2]),
            },
            Case {
                name: "needs a higher priority when the low ones are not enough",
                short: Resources::new(0, 1000, 0),
                candidates: vec![ev(10, 0, 300), ev(30, 0, 900), ev(20, 0, 800)],
                want: Some(vec![0, 2]),
            },
            Case {
                name: "both dimensions must be covered",
                short: Resources::new(500, 500, 0),
                candidates: vec![ev(10, 600, 0), ev(10, 0, 600), ev(10, 400, 400)],
                want: Some(vec![0, 1]),
            },
            Case {
                name: "ties go to the smaller eviction",
                short: Resources::new(0, 100, 0),
                candidates: vec![ev(10, 0, 900), ev(10, 0, 150)],
                want: Some(vec![1]),
            },
            Case {
                name: "not enough in total",
                short: Resources::new(0, 1000, 0),
                candidates: vec![ev(10, 0, 300), ev(10, 0, 300)],
                want: None,
            },
            Case {
                name: "useless candidates are ignored",
                short: Resources::new(100, 0, 0),
                candidates: vec![ev(1, 0, 5000), ev(10, 200, 0)],
                want: Some(vec![1]),
            },
        ];
        for c in cases {
            assert_eq!(
                choose_evictions(&c.short, &c.candidates),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn greedy_beyond_exact_limit_covers_and_is_minimal() {
        // 20 allocations of 100 MB each and one of 1000 MB, all priority 10: the big one alone
        // covers a 1000 MB shortfall.
        let mut candidates: Vec<Evictable> = (0..20).map(|_| ev(10, 0, 100)).collect();
        candidates.push(ev(10, 0, 1000));
        let short = Resources::new(0, 1000, 0);
        assert_eq!(choose_evictions(&short, &candidates), Some(vec![20]));

        // 30 small ones: 5 are needed for 450 MB, and no one of the five can be dropped.
        let candidates: Vec<Evictable> = (0..30).map(|i| ev(10, 0, 90 + i % 3)).collect();
        let short = Resources::new(0, 450, 0);
        let got = choose_evictions(&short, &candidates).expect("enough in total");
        let freed: Resources = got.iter().map(|&i| candidates[i].resources).sum();
        assert!(freed.covers(&short));
        for &drop in &got {
            let without: Resources = got
                .iter()
                .filter(|&&i| i != drop)
                .map(|&i| candidates[i].resources)
                .sum();
            assert!(!without.covers(&short), "{drop} was not needed in {got:?}");
        }
    }
}
