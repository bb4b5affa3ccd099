//! The latest result of each check of a service registration, as the agent running the
//! allocation reports it: what `service info` and Nomad's allocation checks answer.
//!
//! A node writes these into the servers' state, so every part is bounded where it is
//! stored ([`CheckState::bound`]): a node cannot grow server memory through them.

use super::{ServiceHealth, Timestamp};
use serde::{Deserialize, Serialize};

/// The most output kept of one result, in bytes (cut at a character boundary).
pub const MAX_CHECK_OUTPUT: usize = 1024;
/// The most checks kept per registration: as many as a job may give a service (the
/// jobspec's list bound, `validate::Limits::max_entries`).
pub const MAX_REGISTRATION_CHECKS: usize = 1_024;
/// The longest check name kept, in bytes: a jobspec identifier's bound.
pub const MAX_CHECK_NAME: usize = 128;

/// What a check says now. `Pending` has not run yet and counts as critical: a service has
/// not passed until its checks have.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
pub enum CheckStatus {
    #[default]
    Pending,
    Passing,
    Warning,
    Critical,
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pending => "pending",
            CheckStatus::Passing => "passing",
            CheckStatus::Warning => "warning",
            CheckStatus::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(CheckStatus::Pending),
            "passing" => Some(CheckStatus::Passing),
            "warning" => Some(CheckStatus::Warning),
            "critical" => Some(CheckStatus::Critical),
            _ => None,
        }
    }

    /// What the status is worth to its service's health.
    pub fn health(self) -> ServiceHealth {
        match self {
            CheckStatus::Passing => ServiceHealth::Passing,
            CheckStatus::Warning => ServiceHealth::Warning,
            CheckStatus::Pending | CheckStatus::Critical => ServiceHealth::Critical,
        }
    }
}

impl From<ServiceHealth> for CheckStatus {
    fn from(h: ServiceHealth) -> Self {
        match h {
            ServiceHealth::Passing => CheckStatus::Passing,
            ServiceHealth::Warning => CheckStatus::Warning,
            ServiceHealth::Critical => CheckStatus::Critical,
        }
    }
}

/// Which kind of check produced a result.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub enum CheckType {
    #[default]
    Tcp,
    Http,
    Script,
}

impl CheckType {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckType::Tcp => "tcp",
            CheckType::Http => "http",
            CheckType::Script => "script",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tcp" => Some(CheckType::Tcp),
            "http" => Some(CheckType::Http),
            "script" => Some(CheckType::Script),
            _ => None,
        }
    }
}

/// The latest result of one check.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct CheckState {
    pub name: String,
    pub check_type: CheckType,
    pub status: CheckStatus,
    /// At most [`MAX_CHECK_OUTPUT`] bytes; empty while pending.
    pub output: String,
    /// The answer's status code, for an http check that got one.
    pub http_status: Option<u16>,
    /// When the result was found (pending: when the check was set up).
    pub time: Timestamp,
}

impl CheckState {
    /// The state held to its bounds: the name and output cut to [`MAX_CHECK_NAME`] and
    /// [`MAX_CHECK_OUTPUT`] bytes.
    pub fn bound(mut self) -> Self {
        truncate_at_char(&mut self.name, MAX_CHECK_NAME);
        truncate_at_char(&mut self.output, MAX_CHECK_OUTPUT);
        self
    }

    /// What a service with these checks is worth: the worst of their statuses, passing
    /// without any. The one place a registration's health comes from.
    pub fn health_of<'a>(checks: impl IntoIterator<Item = &'a CheckState>) -> ServiceHealth {
        ServiceHealth::worst(checks.into_iter().map(|c| c.status.health()))
    }

    /// The checks a registration keeps of `checks`: at most [`MAX_REGISTRATION_CHECKS`],
    /// each bounded.
    pub fn bound_all(checks: Vec<CheckState>) -> Vec<CheckState> {
        checks
            .into_iter()
            .take(MAX_REGISTRATION_CHECKS)
            .map(CheckState::bound)
            .collect()
    }
}

/// Cuts `s` to at most `max` bytes, at a character boundary.
pub(crate) fn truncate_at_char(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(status: CheckStatus, output: &str) -> CheckState {
        CheckState {
            name: "alive".into(),
            check_type: CheckType::Tcp,
            status,
            output: output.into(),
            http_status: None,
            time: Timestamp(1),
        }
    }

    #[test]
    fn health_is_the_worst_status_and_pending_is_not_passing() {
        use CheckStatus::*;
        for (statuses, want) in [
            (vec![], ServiceHealth::Passing),
            (vec![Passing, Passing], ServiceHealth::Passing),
            (vec![Passing, Warning], ServiceHealth::Warning),
            (vec![Passing, Pending], ServiceHealth::Critical),
            (vec![Warning, Critical], ServiceHealth::Critical),
        ] {
            let checks: Vec<CheckState> = statuses.iter().map(|s| state(*s, "")).collect();
            assert_eq!(CheckState::health_of(&checks), want, "{statuses:?}");
        }
    }

    #[test]
    fn bounds_cut_output_names_and_lists() {
        // A multi-byte character across the bound is dropped whole.
        let long = format!("{}é{}", "x".repeat(MAX_CHECK_OUTPUT - 1), "y".repeat(500));
        let mut s = state(CheckStatus::Critical, &long);
        s.name = "n".repeat(MAX_CHECK_NAME * 2);
        let s = s.bound();
        assert_eq!(s.output, "x".repeat(MAX_CHECK_OUTPUT - 1));
        assert_eq!(s.name.len(), MAX_CHECK_NAME);
        let many = vec![state(CheckStatus::Passing, "ok"); MAX_REGISTRATION_CHECKS + 5];
        assert_eq!(CheckState::bound_all(many).len(), MAX_REGISTRATION_CHECKS);
    }

    #[test]
    fn a_registration_keeps_as_many_checks_as_a_jobspec_service_may_have() {
        assert_eq!(
            MAX_REGISTRATION_CHECKS,
            crate::validate::Limits::default().max_entries
        );
    }

    #[test]
    fn names_round_trip() {
        for s in [
            CheckStatus::Pending,
            CheckStatus::Passing,
            CheckStatus::Warning,
            CheckStatus::Critical,
        ] {
            assert_eq!(CheckStatus::parse(s.as_str()), Some(s));
        }
        for t in [CheckType::Tcp, CheckType::Http, CheckType::Script] {
            assert_eq!(CheckType::parse(t.as_str()), Some(t));
        }
    }
}
