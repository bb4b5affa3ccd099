//! Processes as the kernel shows them in `/proc`: identity that survives pid reuse, liveness
//! of processes the agent did not spawn itself, and signals to a task's process group.

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A process as the agent persists it. The start time (clock ticks since boot, field 22 of
/// `/proc/<pid>/stat`) tells a re-used pid from the original: the same pid with another
/// start time is another process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub pid: i32,
    pub start_ticks: u64,
}

/// The two fields of `/proc/<pid>/stat` the agent reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `Z` (zombie: exited, not reaped), `X` (dead), ...
    pub state: char,
    pub start_ticks: u64,
}

/// Parses `/proc/<pid>/stat`. The command name sits in parentheses and may itself contain
/// spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3), starttime is field 22: 18 fields further on.
    let start_ticks = fields.nth(18)?.parse().ok()?;
    Some(ProcStat { state, start_ticks })
}

pub fn read_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

impl ProcessRecord {
    /// The record of a live process, `None` if it is already gone.
    pub fn of(pid: i32) -> Option<Self> {
        read_stat(pid).map(|s| ProcessRecord {
            pid,
            start_ticks: s.start_ticks,
        })
    }

    /// Whether this very process (not a successor with its pid) still runs. A zombie has
    /// exited: its parent (init, after an agent restart) just has not reaped it yet.
    pub fn is_alive(&self) -> bool {
        read_stat(self.pid)
            .is_some_and(|s| s.start_ticks == self.start_ticks && !matches!(s.state, 'Z' | 'X'))
    }

    /// Sends `signal` to the task's whole process group (the task leads its own group), so
    /// children a shell script started get it too. A group already gone is not an error.
    pub fn signal_group(&self, signal: Signal) -> nix::Result<()> {
        match nix::sys::signal::killpg(Pid::from_raw(self.pid), signal) {
            Err(nix::errno::Errno::ESRCH) | Ok(()) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// A signal by name, with or without the `SIG` prefix, in any case (`TERM`, `SIGINT`).
pub fn parse_signal(name: &str) -> Option<Signal> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    Signal::from_str(&full).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_from_the_last_parenthesis() {
        let tail = "1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10";
        let cases = [
            (format!("42 (sleep) S {tail}"), Some(('S', 123456))),
            (format!("42 (my (odd) name) Z {tail}"), Some(('Z', 123456))),
            ("42 (sleep) S 1 2".to_string(), None),
            ("garbage".to_string(), None),
        ];
        for (text, want) in cases {
            let got = parse_stat(&text).map(|s| (s.state, s.start_ticks));
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessRecord::of(std::process::id() as i32).expect("own stat");
        assert!(me.is_alive());
        let reused = ProcessRecord {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!reused.is_alive());
    }

    #[test]
    fn signal_names_parse_with_or_without_prefix() {
        let cases = [
            ("SIGTERM", Some(Signal::SIGTERM)),
            ("int", Some(Signal::SIGINT)),
            (" SIGkill ", Some(Signal::SIGKILL)),
            ("SIGNOPE", None),
        ];
        for (name, want) in cases {
            assert_eq!(parse_signal(name), want, "{name}");
        }
    }
}
