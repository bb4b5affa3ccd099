//! What Linux keeps about a process in `/proc/PID`: its peak and current resident memory
//! (`status`), the CPU time it has used (`stat`), and the bytes it caused to be written to
//! storage (`io`). Read for the benchmarked server apart from this process, so the
//! server's figures never include the simulator's.
//!
//! The high-water mark never goes down, so reading it once at the end of a run gives the
//! peak of the whole run, including every moment between samples.

/// One reading of a process; every field is what the kernel counted since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
    /// User plus system CPU time, in seconds.
    pub cpu_secs: f64,
    /// Bytes the process sent to the storage layer (`write_bytes`: page cache writeback and
    /// direct writes, what reaches the disk).
    pub write_bytes: u64,
}

/// The peak RSS of this process in KiB; `None` where `/proc` does not exist (not Linux).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_field(&status, "VmHWM:")
}

/// `pid`'s usage; `None` when the process is gone or `/proc` does not exist.
pub fn usage(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `io` needs the same user (or ptrace rights); without it writes read as unknown (0).
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    Some(Usage {
        peak_rss_kib: status_field(&status, "VmHWM:")?,
        rss_kib: status_field(&status, "VmRSS:")?,
        cpu_secs: cpu_ticks(&stat)? as f64 / clock_ticks_per_sec(),
        write_bytes: io_field(&io, "write_bytes:").unwrap_or(0),
    })
}

fn status_field(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
}

fn io_field(io: &str, key: &str) -> Option<u64> {
    io.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|value| value.trim().parse().ok())
}

/// utime + stime from `/proc/PID/stat`. The command name (field 2) is in parentheses and
/// may hold spaces, so fields are counted after its closing parenthesis: utime and stime
/// are the 12th and 13th fields after it.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_sec() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks as f64,
        _ => 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_high_water_mark() {
        let cases: &[(&str, Option<u64>)] = &[
            (
                "Name:\tdrover\nVmPeak:\t 900 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1 kB\n",
                Some(123456),
            ),
            ("VmHWM: 0 kB", Some(0)),
            ("VmRSS:\t 1 kB\n", None),
            ("VmHWM:\t lots kB\n", None),
            ("VmHWM:\t 12 MB\n", None),
        ];
        for (status, want) in cases {
            assert_eq!(status_field(status, "VmHWM:"), *want, "{status:?}");
        }
    }

    #[test]
    fn reads_cpu_ticks_past_a_command_name_with_spaces() {
        let cases: &[(&str, Option<u64>)] = &[
            (
                "42 (drover) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1",
                Some(300),
            ),
            (
                "42 (tokio (worker) 1) R 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0",
                Some(10),
            ),
            ("42 (drover) S 1 42", None),
            ("no parenthesis", None),
        ];
        for (stat, want) in cases {
            assert_eq!(cpu_ticks(stat), *want, "{stat:?}");
        }
    }

    #[test]
    fn reads_write_bytes() {
        let io = "rchar: 1\nwchar: 2\nread_bytes: 4096\nwrite_bytes: 20979712\n";
        assert_eq!(io_field(io, "write_bytes:"), Some(20_979_712));
        assert_eq!(io_field("", "write_bytes:"), None);
    }

    #[test]
    fn this_process_has_usage_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_kib().is_some_and(|kib| kib > 0));
            let me = usage(std::process::id()).expect("this process is readable");
            assert!(me.peak_rss_kib >= me.rss_kib && me.rss_kib > 0, "{me:?}");
        }
    }
}
