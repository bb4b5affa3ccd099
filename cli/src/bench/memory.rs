//! This process's peak resident memory, as Linux keeps it (`VmHWM` in `/proc/self/status`).
//!
//! The high-water mark never goes down, so reading it once at the end of a run gives the
//! peak of the whole run, including every moment between samples.

/// The peak RSS of this process in KiB; `None` where `/proc` does not exist (not Linux).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
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
            assert_eq!(parse_vm_hwm(status), *want, "{status:?}");
        }
    }

    #[test]
    fn this_process_has_a_peak_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_kib().is_some_and(|kib| kib > 0));
        }
    }
}
