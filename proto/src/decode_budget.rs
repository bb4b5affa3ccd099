//! What a message may cost to decode, checked on its wire bytes before prost decodes it.
//!
//! Protobuf is compact where Rust is not: an empty task group is 2 bytes on the wire and a
//! few hundred once decoded, so a 16 MB request of empty groups would cost gigabytes. The
//! codec ([`crate::codec`]) walks each incoming message with the shape of its type
//! (generated from the `.proto` files by `build/shapes.rs`), adding up what decoding would
//! allocate, and refuses, with INVALID_ARGUMENT naming the field, a message that would
//! cost more than [`FLOOR_BYTES`] + [`FACTOR`] times its own size, or that carries more
//! entries in one repeated field than [`max_entries`] allows. The walk allocates nothing
//! and reads each byte once.

use tonic::Status;

/// What any message may cost, however small it is on the wire.
pub const FLOOR_BYTES: usize = 1 << 20;
/// How many times its wire size a larger message may cost once decoded.
pub const FACTOR: usize = 8;
/// The deepest nesting a message may have (prost's own limit is 100).
const MAX_DEPTH: usize = 64;
/// Entries one repeated field of one message may hold, unless [`FIELD_LIMITS`] says less.
const DEFAULT_MAX_ENTRIES: u64 = 1_000_000;
/// What a map entry costs beyond its key and value (the tree's node).
const MAP_NODE_BYTES: usize = 16;
/// What a packed scalar may grow to per wire byte (a one-byte varint becoming a u64).
const PACKED_GROWTH: usize = 8;

/// Tighter bounds on the repeated fields a caller controls most: ten times the default
/// validation limits (`drover_core::validate::Limits`), so that a server configured with
/// higher limits still validates what it is sent, and nothing far beyond is decoded.
const FIELD_LIMITS: &[(&str, &str, u64)] = &[
    ("drover.v1.Job", "groups", 10_000),
    ("drover.v1.TaskGroup", "tasks", 1_000),
    ("drover.v1.TaskGroup", "constraints", 1_000),
    ("drover.v1.Task", "constraints", 1_000),
    ("drover.v1.Job", "constraints", 1_000),
    // Ports are bounded by the port numbers themselves (validation refuses more dynamic
    // ports than a dynamic range holds): ten times that many at most.
    ("drover.v1.GroupNetwork", "ports", 800_000),
    ("drover.v1.NodeNetworks", "addresses", 10_000),
    ("drover.v1.UpdateAllocationsRequest", "updates", 100_000),
];

/// How a field's value is held.
#[derive(Debug)]
pub(crate) enum Kind {
    /// A number, bool or enum.
    Scalar,
    /// A string or bytes.
    Bytes,
    /// A message, by index in [`MESSAGES`].
    Message(usize),
}

#[derive(Debug)]
pub(crate) struct FieldShape {
    pub number: u32,
    pub name: &'static str,
    pub repeated: bool,
    pub kind: Kind,
}

/// A message type: its fields and an estimate of the struct prost decodes it into.
#[derive(Debug)]
pub struct MessageShape {
    pub(crate) name: &'static str,
    pub(crate) size: usize,
    pub(crate) map_entry: bool,
    pub(crate) fields: &'static [FieldShape],
}

include!(concat!(env!("OUT_DIR"), "/drover_shapes.rs"));

/// The shape of the message called `full_name` (`drover.v1.Job`), if it is one of ours.
pub fn shape_of(full_name: &str) -> Option<&'static MessageShape> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(full_name))
        .ok()
        .map(|i| &MESSAGES[i])
}

/// The most entries `field` of `message` may hold in one message.
fn max_entries(message: &str, field: &str) -> u64 {
    FIELD_LIMITS
        .iter()
        .find(|(m, f, _)| *m == message && *f == field)
        .map_or(DEFAULT_MAX_ENTRIES, |(_, _, n)| *n)
}

/// Why a message is refused before it is decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    TooMany {
        path: String,
        count: u64,
        max: u64,
    },
    TooCostly {
        cost: usize,
        allowed: usize,
        wire: usize,
    },
    TooDeep {
        path: String,
    },
}

impl From<Refusal> for Status {
    fn from(r: Refusal) -> Status {
        Status::invalid_argument(match r {
            Refusal::TooMany { path, count, max } => {
                format!("{path}: more than {max} entries ({count} so far) in one message")
            }
            Refusal::TooCostly {
                cost,
                allowed,
                wire,
            } => format!(
                "message of {wire} bytes would take more than {allowed} bytes to decode ({cost} so far): too many empty or tiny entries"
            ),
            Refusal::TooDeep { path } => {
                format!("{path}: nested more than {MAX_DEPTH} messages deep")
            }
        })
    }
}

/// Refuses `bytes` (one encoded message of shape `shape`) if decoding it would cost more
/// than the budget for its size, or a repeated field holds too many entries. Malformed
/// bytes pass: prost's decoder reports them.
pub fn check(shape: &MessageShape, bytes: &[u8]) -> Result<(), Refusal> {
    let mut walk = Walk {
        cost: shape.size,
        allowed: FLOOR_BYTES.saturating_add(FACTOR.saturating_mul(bytes.len())),
        wire: bytes.len(),
        path: Vec::new(),
    };
    match walk.message(shape, bytes, 0) {
        Err(Stop::Refused(r)) => Err(r),
        Ok(()) | Err(Stop::Malformed) => Ok(()),
    }
}

enum Stop {
    Refused(Refusal),
    Malformed,
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Stop {
        Stop::Refused(r)
    }
}

struct Walk {
    cost: usize,
    allowed: usize,
    wire: usize,
    path: Vec<&'static str>,
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, Stop> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at).ok_or(Stop::Malformed)?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err(Stop::Malformed)
}

impl Walk {
    fn add(&mut self, bytes: usize) -> Result<(), Stop> {
        self.cost = self.cost.saturating_add(bytes);
        if self.cost > self.allowed {
            return Err(Refusal::TooCostly {
                cost: self.cost,
                allowed: self.allowed,
                wire: self.wire,
            }
            .into());
        }
        Ok(())
    }

    fn path_with(&self, field: &str) -> String {
        let mut p = self.path.join(".");
        if !p.is_empty() {
            p.push('.');
        }
        p.push_str(field);
        p
    }

    fn message(&mut self, shape: &MessageShape, bytes: &[u8], depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Refusal::TooDeep {
                path: self.path.join("."),
            }
            .into());
        }
        // (field number, entries seen) for the repeated fields met so far.
        let mut counts: Vec<(u32, u64)> = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let key = varint(bytes, &mut at)?;
            let number = u32::try_from(key >> 3).map_err(|_| Stop::Malformed)?;
            let field = shape.fields.iter().find(|f| f.number == number);
            let len = match key & 7 {
                0 => {
                    varint(bytes, &mut at)?;
                    0
                }
                1 => {
                    at += 8;
                    0
                }
                5 => {
                    at += 4;
                    0
                }
                2 => usize::try_from(varint(bytes, &mut at)?).map_err(|_| Stop::Malformed)?,
                _ => return Err(Stop::Malformed),
            };
            let wire_type = key & 7;
            let body = if wire_type == 2 {
                let end = at.checked_add(len).ok_or(Stop::Malformed)?;
                let body = bytes.get(at..end).ok_or(Stop::Malformed)?;
                at = end;
                body
            } else {
                if at > bytes.len() {
                    return Err(Stop::Malformed);
                }
                &[]
            };
            let Some(field) = field else {
                continue;
            };
            if field.repeated {
                let seen = match counts.iter_mut().find(|(n, _)| *n == number) {
                    Some((_, c)) => c,
                    None => {
                        counts.push((number, 0));
                        &mut counts.last_mut().ok_or(Stop::Malformed)?.1
                    }
                };
                *seen += 1;
                let max = max_entries(shape.name, field.name);
                if *seen > max {
                    return Err(Refusal::TooMany {
                        path: self.path_with(field.name),
                        count: *seen,
                        max,
                    }
                    .into());
                }
            }
            match (&field.kind, wire_type) {
                (Kind::Bytes, 2) => {
                    self.add(len + if field.repeated { 24 } else { 0 })?;
                }
                (Kind::Message(i), 2) => {
                    let child = &MESSAGES[*i];
                    if field.repeated {
                        let node = if child.map_entry { MAP_NODE_BYTES } else { 0 };
                        self.add(child.size + node)?;
                    }
                    self.path.push(field.name);
                    self.message(child, body, depth + 1)?;
                    self.path.pop();
                }
                (Kind::Scalar, 2) => self.add(len.saturating_mul(PACKED_GROWTH))?,
                (Kind::Scalar, _) if field.repeated => self.add(8)?,
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1 as pb;
    use prost::{Message, Name};

    fn shape<M: Name>() -> &'static MessageShape {
        shape_of(&M::full_name()).expect("a shape for every message")
    }

    fn job_of_groups(n: usize) -> pb::Job {
        pb::Job {
            id: "j".into(),
            groups: vec![pb::TaskGroup::default(); n],
            ..Default::default()
        }
    }

    #[test]
    fn every_generated_message_has_a_shape_found_by_its_name() {
        assert!(MESSAGES.windows(2).all(|w| w[0].name < w[1].name), "sorted");
        for name in [
            "drover.v1.Job",
            "drover.v1.RegisterJobRequest",
            "drover.v1.AgentGrant",
        ] {
            assert!(shape_of(name).is_some(), "{name}");
        }
        assert!(shape_of("drover.v1.NoSuchMessage").is_none());
        assert!(shape::<pb::Job>().size > shape::<pb::AgentGrant>().size);
    }

    #[test]
    fn ordinary_messages_pass() {
        let mut job = job_of_groups(50);
        for g in &mut job.groups {
            g.name = "web".into();
            g.tasks = vec![pb::Task {
                name: "server".into(),
                driver: "raw_exec".into(),
                ..Default::default()
            }];
        }
        let req = pb::RegisterJobRequest {
            job: Some(job),
            ..Default::default()
        };
        assert_eq!(
            check(shape::<pb::RegisterJobRequest>(), &req.encode_to_vec()),
            Ok(())
        );
    }

    #[test]
    fn many_empty_groups_are_refused_by_count_and_by_cost() {
        // Named groups: large enough on the wire that only their number is refused.
        let mut job = job_of_groups(10_001);
        for g in &mut job.groups {
            g.name = "a-group-name-of-some-considerable-length-for-a-group-of-a-job".into();
        }
        let req = pb::RegisterJobRequest {
            job: Some(job),
            ..Default::default()
        };
        let refused = check(shape::<pb::RegisterJobRequest>(), &req.encode_to_vec());
        assert!(
            matches!(&refused, Err(Refusal::TooMany { path, max: 10_000, .. }) if path == "job.groups"),
            "{refused:?}"
        );
        // Under the count limit, the cost still bounds empty entries: 9,000 empty groups
        // are 18 KB on the wire and several MB decoded.
        let req = pb::RegisterJobRequest {
            job: Some(job_of_groups(9_000)),
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let refused = check(shape::<pb::RegisterJobRequest>(), &bytes);
        assert!(
            matches!(refused, Err(Refusal::TooCostly { wire, .. }) if wire == bytes.len()),
            "{refused:?}"
        );
        let status = Status::from(refused.unwrap_err());
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn malformed_bytes_are_left_to_prost() {
        let shape = shape::<pb::RegisterJobRequest>();
        for bytes in [&[0x0a, 0xff][..], &[0xff; 12][..], &[0x0b][..]] {
            assert_eq!(check(shape, bytes), Ok(()), "{bytes:?}");
        }
    }
}
