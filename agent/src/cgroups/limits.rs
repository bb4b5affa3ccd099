//! What a task's resources become in cgroup files, and what those files say back (pure).
//!
//! `memory` (MB) is the hard limit; `cpu` (MHz) is a relative weight, as Nomad does: v1
//! `cpu.shares` equal to the MHz, v2 `cpu.weight` from those shares by the conversion runc
//! and systemd use; `pids.max` bounds how many processes the task may hold.

/// A task's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub memory_mb: u64,
    pub cpu_mhz: u64,
    pub pids: u64,
}

/// v1's bounds for `cpu.shares`.
const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;

pub fn v1_cpu_shares(cpu_mhz: u64) -> u64 {
    cpu_mhz.clamp(MIN_SHARES, MAX_SHARES)
}

/// v2's `cpu.weight` (1..=10000) for the shares v1 would give.
pub fn v2_cpu_weight(cpu_mhz: u64) -> u64 {
    let shares = v1_cpu_shares(cpu_mhz);
    1 + (shares - MIN_SHARES) * 9999 / (MAX_SHARES - MIN_SHARES)
}

pub fn memory_bytes(memory_mb: u64) -> u64 {
    memory_mb.saturating_mul(1024 * 1024)
}

/// (controller, file, value) to write for `limits`, in order; v1 when `v1`.
pub fn writes(limits: &Limits, v1: bool) -> Vec<(&'static str, &'static str, String)> {
    // A task that asks for no memory is not limited (validation keeps jobs from it).
    let memory = match (limits.memory_mb, v1) {
        (0, true) => "-1".to_string(),
        (0, false) => "max".to_string(),
        (mb, _) => memory_bytes(mb).to_string(),
    };
    if v1 {
        vec![
            ("memory", "memory.limit_in_bytes", memory),
            (
                "cpu",
                "cpu.shares",
                v1_cpu_shares(limits.cpu_mhz).to_string(),
            ),
            ("pids", "pids.max", limits.pids.to_string()),
        ]
    } else {
        vec![
            ("memory", "memory.max", memory),
            // No swap: a task's memory is what it asked for, as on v1 without swap accounting.
            ("memory", "memory.swap.max", "0".into()),
            (
                "cpu",
                "cpu.weight",
                v2_cpu_weight(limits.cpu_mhz).to_string(),
            ),
            ("pids", "pids.max", limits.pids.to_string()),
        ]
    }
}

/// The value of `key` in a flat-keyed cgroup file (`memory.stat`, `memory.events`,
/// `memory.oom_control`, `cpu.stat`: `key value` lines).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Memory a task holds, as operators mean it (Kubernetes' "working set"): what the cgroup
/// is charged minus page cache the kernel may drop at once.
pub fn working_set(usage_bytes: u64, inactive_file: u64) -> u64 {
    usage_bytes.saturating_sub(inactive_file)
}

/// CPU used between two samples, in MHz of this node: the share of one core the task kept
/// busy times a core's MHz (Nomad reports CPU in the unit the job asks in).
pub fn cpu_mhz(cpu_ns_delta: u64, wall_ns: u64, mhz_per_core: u64) -> u64 {
    if wall_ns == 0 {
        return 0;
    }
    let busy = u128::from(cpu_ns_delta) * u128::from(mhz_per_core) / u128::from(wall_ns);
    u64::try_from(busy).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_mhz_becomes_shares_and_weights() {
        // (MHz, v1 shares, v2 weight)
        let cases = [
            (0, 2, 1),
            (100, 100, 4),
            (1024, 1024, 39),
            (4000, 4000, 153),
            (1_000_000, 262_144, 10_000),
        ];
        for (mhz, shares, weight) in cases {
            assert_eq!(v1_cpu_shares(mhz), shares, "{mhz}");
            assert_eq!(v2_cpu_weight(mhz), weight, "{mhz}");
        }
    }

    #[test]
    fn limits_are_written_per_version() {
        let limits = Limits {
            memory_mb: 64,
            cpu_mhz: 500,
            pids: 128,
        };
        assert_eq!(
            writes(&limits, true),
            vec![
                ("memory", "memory.limit_in_bytes", "67108864".to_string()),
                ("cpu", "cpu.shares", "500".into()),
                ("pids", "pids.max", "128".into()),
            ]
        );
        assert_eq!(
            writes(&limits, false),
            vec![
                ("memory", "memory.max", "67108864".to_string()),
                ("memory", "memory.swap.max", "0".into()),
                ("cpu", "cpu.weight", "19".into()),
                ("pids", "pids.max", "128".into()),
            ]
        );
    }

    #[test]
    fn cgroup_files_read_back() {
        let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        let events = "low 0\nhigh 0\nmax 14\noom 1\noom_kill 1\noom_group_kill 0\n";
        let cases = [
            (oom_control, "oom_kill", Some(2)),
            (events, "oom_kill", Some(1)),
            (events, "oom", Some(1)),
            (
                "usage_usec 1500\nuser_usec 1000\n",
                "usage_usec",
                Some(1500),
            ),
            ("total_inactive_file 4096\n", "inactive_file", None),
            ("", "oom_kill", None),
        ];
        for (text, key, want) in cases {
            assert_eq!(keyed(text, key), want, "{key} in {text:?}");
        }
        assert_eq!(working_set(10_000, 4_000), 6_000);
        assert_eq!(working_set(1, 4_000), 0);
        // Half a core for a second on a 2000 MHz core is 1000 MHz.
        assert_eq!(cpu_mhz(500_000_000, 1_000_000_000, 2000), 1000);
        assert_eq!(cpu_mhz(5, 0, 2000), 0);
    }
}
