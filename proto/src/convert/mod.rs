//! Conversions between drover-core's types and the `drover.v1` messages.
//!
//! Core → proto is infallible (`From<&T>`): every core value has a wire form. Proto → core is
//! `TryFrom` (or a named function for requests) and never panics: anything a client sends
//! is checked, and a refusal is a [`ConvertError`] naming the field from the message's root
//! (`job.groups[0].tasks[1].resources.cpu_mhz: missing`). Enum values that are unspecified
//! or unknown to this build are errors, never defaults.
//!
//! What survives a round trip core → proto → core unchanged: everything, except
//! - a node's secret, which no read ever carries (it comes back empty), and
//! - sub-millisecond parts of durations (the wire counts whole milliseconds).

mod acl;
mod alloc_fields;
mod allocs;
mod deployments;
mod enums;
mod error;
mod evals;
mod events;
mod jobs;
mod network;
mod nodes;
mod operator;
mod resources;
mod service;
mod status;
mod task_files;
mod workers;

pub use alloc_fields::listed_allocation;
pub use allocs::node_plans;
pub use enums::WireEnum;
pub use error::{ConvertError, Problem};
pub use evals::EvalFilter;
pub use events::{EventFilter, KeyFilter};
pub use jobs::{
    DispatchRequest, JobRegistration, job_key, job_list_entry, plan_response, submitted_job,
};
pub use network::allocated_port;
pub use nodes::{
    AllocUpdates, ClientAllocUpdate, Heartbeat, NodeCredentials, NodeRegistration, WatchRequest,
    known_allocation,
};
pub use operator::{
    DrainRequest, DrainSettings, EligibilityChange, NodeFilter, SchedulerConfigUpdate,
};
pub use service::service_registration;
pub use workers::{WorkerConfigUpdate, WorkerPoolConfig, WorkerTarget};

use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

pub(crate) type Result<T> = std::result::Result<T, ConvertError>;

/// Adds the containing field to the path of an error on the way up.
pub(crate) trait Within<T> {
    fn within(self, parent: impl Display) -> Result<T>;
}

impl<T> Within<T> for Result<T> {
    fn within(self, parent: impl Display) -> Result<T> {
        self.map_err(|e| e.within(parent))
    }
}

/// A required nested message (or `optional` scalar) that must be present.
pub(crate) fn required<T>(field: &str, value: Option<T>) -> Result<T> {
    value.ok_or_else(|| ConvertError::new(field, Problem::Missing))
}

/// A required id: empty is "missing", anything else must parse.
pub fn parse_id<T: FromStr>(field: &str, text: &str) -> std::result::Result<T, ConvertError> {
    if text.is_empty() {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    text.parse()
        .map_err(|_| ConvertError::new(field, Problem::NotUuid(text.to_owned())))
}

/// An optional id, where the wire's empty string means none.
pub(crate) fn parse_opt_id<T: FromStr>(field: &str, text: &str) -> Result<Option<T>> {
    if text.is_empty() {
        Ok(None)
    } else {
        parse_id(field, text).map(Some)
    }
}

/// The wire form of an optional id: empty for none.
pub(crate) fn opt_id_text<T: Display>(id: &Option<T>) -> String {
    id.as_ref().map(ToString::to_string).unwrap_or_default()
}

/// Converts every item, naming a failing one `field[i]`.
pub(crate) fn each<P, C>(field: &str, items: Vec<P>, f: impl Fn(P) -> Result<C>) -> Result<Vec<C>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| f(item).within(format_args!("{field}[{i}]")))
        .collect()
}

/// Converts every item of a list of named things (groups, tasks), naming a failing one
/// `field[name]` as validation does (`groups[web].tasks[api].resources.memory`), or
/// `field[index]` where the name cannot identify it: empty, a duplicate, or not a plain
/// identifier (control characters, `/`, longer than 128 bytes).
pub(crate) fn each_named<P, C>(
    field: &str,
    items: Vec<P>,
    name: impl Fn(&P) -> &str,
    f: impl Fn(P) -> Result<C>,
) -> Result<Vec<C>> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let n = name(&item);
            let usable = !n.is_empty()
                && n.len() <= 128
                && !n.chars().any(|c| c.is_control() || c == '/')
                && seen.insert(n.to_owned());
            let label = if usable { n.to_owned() } else { i.to_string() };
            f(item).within(format_args!("{field}[{label}]"))
        })
        .collect()
}

/// Converts every value of a string-keyed map, naming a failing one `field["key"]`.
pub(crate) fn each_value<P, C, O: FromIterator<(String, C)>>(
    field: &str,
    map: BTreeMap<String, P>,
    f: impl Fn(P) -> Result<C>,
) -> Result<O> {
    map.into_iter()
        .map(|(k, v)| {
            let c = f(v).within(format_args!("{field}[{k:?}]"))?;
            Ok((k, c))
        })
        .collect()
}

/// A `uint32` on the wire into a core `u8` (priorities).
pub(crate) fn narrow_u8(field: &str, value: u32) -> Result<u8> {
    u8::try_from(value).map_err(|_| {
        ConvertError::new(
            field,
            Problem::OutOfRange {
                value: value.into(),
                max: u8::MAX.into(),
            },
        )
    })
}

/// A duration as whole milliseconds; saturates (a duration of 584 million years is
/// "forever" either way).
pub(crate) fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn from_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A count for the wire. `usize` is at most 64 bits on every platform drover builds for, so
/// this never loses anything; it saturates rather than wraps if that ever changes.
pub(crate) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Converts a whole message and roots its errors at `root` (`job`, `node`, ...), so a
/// `TryFrom` on a top-level message reports `job.groups[0]...` while nested conversions
/// reuse the unrooted function under their own field name.
macro_rules! rooted_try_from {
    ($proto:ty => $core:ty, $root:literal, $f:path) => {
        impl TryFrom<$proto> for $core {
            type Error = $crate::convert::ConvertError;
            fn try_from(p: $proto) -> ::std::result::Result<Self, Self::Error> {
                $crate::convert::Within::within($f(p), $root)
            }
        }
    };
}
pub(crate) use rooted_try_from;
