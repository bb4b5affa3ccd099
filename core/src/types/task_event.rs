//! One thing that happened to a task, as its node reports it.
//!
//! Every running allocation holds at least two events (received, started), so their size is
//! a large part of the servers' memory. An event is 40 bytes, not the 72 of a struct with
//! two inline strings: the kind is almost always one of the names agents use
//! ([`KNOWN_KINDS`]), kept as its number, and the one string left holds the message. Any
//! other kind is kept too, in front of the message in that string (see [`TaskEvent::kind`]).
//! It serializes exactly as the plain struct did, so Raft logs, snapshots and agents' state
//! files written before read the same.

use super::Timestamp;
use compact_str::CompactString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt::{self, Write};

/// The kinds agents report (Nomad's names, and drover's own): each is kept as its position
/// here. Appending a name is safe; the numbers live only in memory, never on disk or the wire.
pub const KNOWN_KINDS: [&str; 26] = [
    "Received",
    "Started",
    "Terminated",
    "Killing",
    "Killed",
    "Restarting",
    "Not Restarting",
    "Restart Signaled",
    "Signaling",
    "Driver Failure",
    "Setup Failure",
    "OOM Killed",
    "Sibling Task Failed",
    "Downloading Artifacts",
    "Failed Artifact Download",
    "Failed Template",
    "Template Rendered",
    "Template Re-rendered",
    "Task Setup",
    "Building Task Directory",
    "Leader Task Dead",
    "Alloc Unhealthy",
    "Failed Validation",
    "Task hook failed",
    "Driver",
    "Plugin became unhealthy",
];

/// `kind` of an event whose kind is not in [`KNOWN_KINDS`].
const OTHER_KIND: u8 = u8::MAX;

const HAS_EXIT_CODE: u8 = 1;
const INFRA_FAILURE: u8 = 2;

/// Invariant: `kind` is the position of the kind's name in [`KNOWN_KINDS`] whenever the name
/// is there, so equal events have equal fields (equality compares fields).
#[derive(Clone, PartialEq, Eq)]
pub struct TaskEvent {
    time: Timestamp,
    /// The message; for an [`OTHER_KIND`] event, `"{len}:{kind}"` and then the message, the
    /// kind's length in decimal bytes (a netstring's prefix, so any kind and message fit).
    text: CompactString,
    /// Meaningful when `flags` has [`HAS_EXIT_CODE`].
    exit_code: i32,
    kind: u8,
    flags: u8,
}

impl TaskEvent {
    /// An event of `kind` with `message`, which it keeps without copying when it is owned
    /// (as decoded from a report, a log entry or a snapshot) and the kind is a known one.
    pub fn new(time: Timestamp, kind: &str, message: impl Into<CompactString>) -> Self {
        let message = message.into();
        let (kind, text) = match KNOWN_KINDS.iter().position(|k| *k == kind) {
            Some(at) => (at as u8, message),
            None => {
                let mut text = CompactString::with_capacity(kind.len() + message.len() + 4);
                let _ = write!(text, "{}:{kind}{message}", kind.len());
                (OTHER_KIND, text)
            }
        };
        Self {
            time,
            text,
            exit_code: 0,
            kind,
            flags: 0,
        }
    }

    /// The same event with the exit code the task ended with (none clears it).
    pub fn with_exit_code(mut self, code: Option<i32>) -> Self {
        self.exit_code = code.unwrap_or(0);
        self.set_flag(HAS_EXIT_CODE, code.is_some());
        self
    }

    /// The same event marked (or not) as the node's fault: disk full or fork failed, never
    /// the job's (missing command, bad arguments, exit code). It feeds flakiness, and its
    /// message is the reason the node's health event gives.
    pub fn with_infra_failure(mut self, infra: bool) -> Self {
        self.set_flag(INFRA_FAILURE, infra);
        self
    }

    fn set_flag(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    pub fn time(&self) -> Timestamp {
        self.time
    }

    /// `Received`, `Started`, `Terminated`, `Restarting`, `Killing`, `Driver Failure`, ...
    pub fn kind(&self) -> &str {
        match KNOWN_KINDS.get(usize::from(self.kind)) {
            Some(name) => name,
            None => self.split_other().0,
        }
    }

    pub fn message(&self) -> &str {
        if usize::from(self.kind) < KNOWN_KINDS.len() {
            &self.text
        } else {
            self.split_other().1
        }
    }

    pub fn exit_code(&self) -> Option<i32> {
        (self.flags & HAS_EXIT_CODE != 0).then_some(self.exit_code)
    }

    pub fn infra_failure(&self) -> bool {
        self.flags & INFRA_FAILURE != 0
    }

    /// The kind and the message of an [`OTHER_KIND`] event's text. [`TaskEvent::new`] is the
    /// only writer of such text, so the prefix is always well formed; were it not, the whole
    /// text reads as the kind.
    fn split_other(&self) -> (&str, &str) {
        let text = self.text.as_str();
        let parsed = text.split_once(':').and_then(|(len, rest)| {
            let len: usize = len.parse().ok()?;
            Some((rest.get(..len)?, rest.get(len..)?))
        });
        parsed.unwrap_or((text, ""))
    }
}

impl fmt::Debug for TaskEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskEvent")
            .field("time", &self.time)
            .field("kind", &self.kind())
            .field("message", &self.message())
            .field("exit_code", &self.exit_code())
            .field("infra_failure", &self.infra_failure())
            .finish()
    }
}

/// The fields, in the order the plain struct had them: what the encodings hold.
#[derive(Serialize)]
struct Fields<'a> {
    time: Timestamp,
    kind: &'a str,
    message: &'a str,
    exit_code: Option<i32>,
    infra_failure: bool,
}

#[derive(Deserialize)]
struct OwnedFields {
    time: Timestamp,
    kind: CompactString,
    message: CompactString,
    exit_code: Option<i32>,
    infra_failure: bool,
}

impl Serialize for TaskEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Fields {
            time: self.time,
            kind: self.kind(),
            message: self.message(),
            exit_code: self.exit_code(),
            infra_failure: self.infra_failure(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TaskEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let f = OwnedFields::deserialize(deserializer)?;
        Ok(TaskEvent::new(f.time, &f.kind, f.message)
            .with_exit_code(f.exit_code)
            .with_infra_failure(f.infra_failure))
    }
}

#[cfg(test)]
mod tests;
