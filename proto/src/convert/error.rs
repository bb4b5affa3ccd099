//! The one error of every proto → core conversion: which field, and what is wrong with it.

use std::fmt;

/// A message that cannot become a core value.
///
/// `path` names the offending field from the root of what was converted, in the shape a
/// person would write it: `job.groups[0].tasks[1].resources.cpu_mhz`, `eval.failed_tg_allocs["web"]`.
/// The server hands the whole text back as INVALID_ARGUMENT, so a client learns exactly
/// which field to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ConvertError {
    path: String,
    problem: Problem,
}

/// What is wrong with the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A required nested message, scalar or id was not sent.
    #[error("missing")]
    Missing,
    /// An enum left at its `*_UNSPECIFIED` zero value where a value is required.
    #[error("unspecified")]
    Unspecified,
    /// An enum number this build does not know. Never read as a default: a newer client's
    /// value silently turned into something else would do the wrong thing.
    #[error("unknown value {0}")]
    UnknownEnumValue(i32),
    /// An id that is not UUID text.
    #[error("{0:?} is not a uuid")]
    NotUuid(String),
    /// A number the core type is too narrow for.
    #[error("{value} is out of range (at most {max})")]
    OutOfRange { value: u64, max: u64 },
    /// A map key outside the known set (e.g. a resource dimension).
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    /// Fields that are each well formed but contradict one another.
    #[error("{0}")]
    Invalid(&'static str),
    /// A value the wire allows but drover does not take, with what it says about it
    /// (`network mode "bridge": ...`, a reserved port list that does not parse).
    #[error("{0}")]
    Refused(String),
}

impl ConvertError {
    /// An error about `field`, relative to the message being converted.
    pub fn new(field: impl Into<String>, problem: Problem) -> Self {
        Self {
            path: field.into(),
            problem,
        }
    }

    /// The full path of the offending field.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// Prefixes the path with the field that contains it, so errors raised deep in a message
    /// read from its root: `cpu_mhz` within `resources` within `tasks[1]` gives
    /// `tasks[1].resources.cpu_mhz`. A subscript (`[3]`, `["web"]`) attaches with no dot.
    pub fn within(mut self, parent: impl fmt::Display) -> Self {
        let parent = parent.to_string();
        self.path = if self.path.is_empty() {
            parent
        } else if self.path.starts_with('[') {
            format!("{parent}{}", self.path)
        } else {
            format!("{parent}.{}", self.path)
        };
        self
    }
}

impl From<ConvertError> for tonic::Status {
    /// Everything a conversion refuses is the client's mistake.
    fn from(e: ConvertError) -> Self {
        tonic::Status::invalid_argument(e.to_string())
    }
}
