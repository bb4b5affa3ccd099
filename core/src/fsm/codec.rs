//! The binary form of commands (Raft log entries) and whole-store snapshots.
//!
//! Layout: a two-byte magic, a one-byte format version, then the postcard encoding of the
//! value. The version lets a newer server read an older log: decoding refuses versions it does
//! not know instead of guessing. Encoding is deterministic (every map is ordered), so
//! encode -> decode -> encode is byte-identical.

use super::command::Command;
use crate::state::{AclParts, StateStore, StoreParts};

const COMMAND_MAGIC: [u8; 2] = *b"dc";
const SNAPSHOT_MAGIC: [u8; 2] = *b"ds";
/// The command format this build writes and reads. Postcard is not self-describing, so any
/// change to a type a command holds is a new format: 2 added task users, lifecycle hooks,
/// restart overrides, ephemeral disks, ports, artifacts, templates and node networks; 3
/// added services and checks (jobs), the service catalog, and deployments (their commands,
/// a plan's deployment, an allocation's deployment link and health, a job's `stable` and
/// its update block's deployment settings); 4 added each registration's check results.
pub const COMMAND_FORMAT: u8 = 4;
/// The snapshot format this build writes and reads: the primary tables then the ACL tables.
/// 3 holds format 2's tables with the types of command format 2; 4 the types of command
/// format 3, the service catalog and the deployments table; 5 the types of command
/// format 4 (registrations with their check results); 6 writes the allocations in chunks
/// that a restore decodes in parallel (`state::alloc_chunks`).
pub const SNAPSHOT_FORMAT: u8 = 6;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("not a drover {what}: bad header bytes {found:02x?}")]
    BadMagic { what: &'static str, found: Vec<u8> },
    #[error(
        "{what} format version {found} is not supported (this build reads {supported}){}",
        written_by(*found, *supported)
    )]
    UnsupportedVersion {
        what: &'static str,
        found: u8,
        supported: u8,
    },
    #[error("malformed {what}: {source}")]
    Malformed {
        what: &'static str,
        source: postcard::Error,
    },
}

/// What an operator should do about a version this build does not read.
fn written_by(found: u8, supported: u8) -> &'static str {
    if found < supported {
        "; it was written by an older drover, whose data this build cannot read: start with a fresh data dir"
    } else {
        "; it was written by a newer drover: run that version"
    }
}

fn encode<T: serde::Serialize>(magic: [u8; 2], version: u8, value: &T) -> Vec<u8> {
    let out = vec![magic[0], magic[1], version];
    // Serializing plain data into a Vec cannot fail: every type here is serde-derived with no
    // custom serializer that errors.
    postcard::to_extend(value, out).unwrap_or_else(|e| panic!("encoding drover state failed: {e}"))
}

/// Checks a record's header (`magic` then one format byte; `magic` may be empty for values
/// that are never read out of context) and returns the body after it. Shared by every drover
/// record format, so all of them refuse foreign or newer bytes the same way.
pub fn read_header<'a>(
    what: &'static str,
    magic: &[u8],
    supported: u8,
    bytes: &'a [u8],
) -> Result<&'a [u8], CodecError> {
    let n = magic.len() + 1;
    if bytes.len() < n || &bytes[..magic.len()] != magic {
        return Err(CodecError::BadMagic {
            what,
            found: bytes[..bytes.len().min(n)].to_vec(),
        });
    }
    if bytes[magic.len()] != supported {
        return Err(CodecError::UnsupportedVersion {
            what,
            found: bytes[magic.len()],
            supported,
        });
    }
    Ok(&bytes[n..])
}

fn decode<'a, T: serde::Deserialize<'a>>(
    what: &'static str,
    magic: [u8; 2],
    supported: u8,
    bytes: &'a [u8],
) -> Result<T, CodecError> {
    let body = read_header(what, &magic, supported, bytes)?;
    postcard::from_bytes(body).map_err(|source| CodecError::Malformed { what, source })
}

pub fn encode_command(cmd: &Command) -> Vec<u8> {
    encode(COMMAND_MAGIC, COMMAND_FORMAT, cmd)
}

pub fn decode_command(bytes: &[u8]) -> Result<Command, CodecError> {
    decode("command", COMMAND_MAGIC, COMMAND_FORMAT, bytes)
}

/// Encodes the primary tables of the store; derived indexes are rebuilt on decode.
pub fn encode_snapshot(store: &StateStore) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and neither can serializing plain serde-derived data.
    encode_snapshot_to(store, &mut out)
        .unwrap_or_else(|e| panic!("encoding drover state failed: {e}"));
    out
}

/// [`encode_snapshot`] streamed into `out`: the same bytes, without first holding them all in
/// memory (at a million allocations that buffer was a few hundred megabytes beside the
/// store). Fails only when `out` does.
pub fn encode_snapshot_to(store: &StateStore, out: impl std::io::Write) -> std::io::Result<()> {
    let mut out = KeepIoError { out, error: None };
    std::io::Write::write_all(
        &mut out,
        &[SNAPSHOT_MAGIC[0], SNAPSHOT_MAGIC[1], SNAPSHOT_FORMAT],
    )?;
    match postcard::to_io(&(store.parts_ref(), store.acl_parts()), &mut out) {
        Ok(_) => Ok(()),
        // postcard reports a failed write as a full buffer; the writer's own error says why.
        Err(e) => Err(out.error.take().unwrap_or_else(|| {
            std::io::Error::other(format!("encoding drover state failed: {e}"))
        })),
    }
}

/// A writer that keeps the first error its inner writer returned.
struct KeepIoError<W> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> std::io::Write for KeepIoError<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf).inspect_err(|e| {
            self.error
                .get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<StateStore, CodecError> {
    const WHAT: &str = "snapshot";
    let (parts, acl): (StoreParts, AclParts) =
        decode(WHAT, SNAPSHOT_MAGIC, SNAPSHOT_FORMAT, bytes)?;
    let mut store = StateStore::from_parts(parts);
    store.restore_acl(acl);
    Ok(store)
}
