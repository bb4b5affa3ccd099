//! Binary forms of what the Raft layer writes to disk and sends between servers.
//!
//! Every record starts with a short header (magic bytes where the record stands alone, then a
//! format version) so a newer server refuses what it cannot read instead of guessing.
//!
//! A log entry is `"dl" 1`, then the postcard encoding of `(term, leader node, index, kind)`,
//! then the payload: nothing for a blank entry, core's versioned [`encode_command`] bytes for a
//! command (so the log format is drover's, not openraft's), the postcard encoding of the
//! membership for a membership entry.

use super::types::{Entry, LogId, Membership, ServerId};
use drover_core::fsm::{CodecError, decode_command, encode_command, read_header};
use openraft::{CommittedLeaderId, EntryPayload};
use serde::Serialize;
use serde::de::DeserializeOwned;

const ENTRY_MAGIC: [u8; 2] = *b"dl";
/// The log entry format this build writes and reads.
pub const ENTRY_FORMAT: u8 = 1;
/// The format of the small values kept beside the log (vote, committed, purged).
pub const META_FORMAT: u8 = 1;
const RPC_MAGIC: [u8; 2] = *b"dr";
/// The format of Raft messages between servers.
pub const RPC_FORMAT: u8 = 1;

const KIND_BLANK: u8 = 0;
const KIND_COMMAND: u8 = 1;
const KIND_MEMBERSHIP: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Foreign bytes, a newer format, or a body that does not decode.
    #[error(transparent)]
    Record(#[from] CodecError),
    #[error("cannot encode {what}: {source}")]
    Encode {
        what: &'static str,
        source: postcard::Error,
    },
    #[error("malformed command in log entry {index}: {source}")]
    Command { index: u64, source: CodecError },
    #[error("log entry {index} has unknown payload kind {kind}")]
    UnknownKind { index: u64, kind: u8 },
}

fn header<'a>(
    what: &'static str,
    magic: &[u8],
    version: u8,
    bytes: &'a [u8],
) -> Result<&'a [u8], RecordError> {
    Ok(read_header(what, magic, version, bytes)?)
}

fn malformed(what: &'static str) -> impl FnOnce(postcard::Error) -> RecordError {
    move |source| RecordError::Record(CodecError::Malformed { what, source })
}

/// Encodes one log entry.
pub fn encode_entry(entry: &Entry) -> Result<Vec<u8>, RecordError> {
    let what = "log entry";
    let kind = match &entry.payload {
        EntryPayload::Blank => KIND_BLANK,
        EntryPayload::Normal(_) => KIND_COMMAND,
        EntryPayload::Membership(_) => KIND_MEMBERSHIP,
    };
    let id = &entry.log_id;
    let head = (id.leader_id.term, id.leader_id.node_id, id.index, kind);
    let out = vec![ENTRY_MAGIC[0], ENTRY_MAGIC[1], ENTRY_FORMAT];
    let mut out =
        postcard::to_extend(&head, out).map_err(|source| RecordError::Encode { what, source })?;
    match &entry.payload {
        EntryPayload::Blank => {}
        EntryPayload::Normal(cmd) => out.extend_from_slice(&encode_command(cmd)),
        EntryPayload::Membership(m) => {
            out = postcard::to_extend(m, out)
                .map_err(|source| RecordError::Encode { what, source })?;
        }
    }
    Ok(out)
}

fn entry_head(bytes: &[u8]) -> Result<(LogId, u8, &[u8]), RecordError> {
    let what = "log entry";
    let body = header(what, &ENTRY_MAGIC, ENTRY_FORMAT, bytes)?;
    let ((term, node, index, kind), rest) =
        postcard::take_from_bytes::<(u64, ServerId, u64, u8)>(body).map_err(malformed(what))?;
    let log_id = LogId::new(CommittedLeaderId::new(term, node), index);
    Ok((log_id, kind, rest))
}

/// Decodes only the log id of an encoded entry (cheap: the payload is not read).
pub fn decode_entry_log_id(bytes: &[u8]) -> Result<LogId, RecordError> {
    entry_head(bytes).map(|(id, _, _)| id)
}

/// Decodes one log entry.
pub fn decode_entry(bytes: &[u8]) -> Result<Entry, RecordError> {
    let (log_id, kind, rest) = entry_head(bytes)?;
    let index = log_id.index;
    let payload = match kind {
        KIND_BLANK => EntryPayload::Blank,
        KIND_COMMAND => EntryPayload::Normal(
            decode_command(rest).map_err(|source| RecordError::Command { index, source })?,
        ),
        KIND_MEMBERSHIP => EntryPayload::Membership(
            postcard::from_bytes::<Membership>(rest).map_err(malformed("membership log entry"))?,
        ),
        kind => return Err(RecordError::UnknownKind { index, kind }),
    };
    Ok(Entry { log_id, payload })
}

/// Encodes a small value kept beside the log (vote, committed log id, purged log id).
pub fn encode_meta<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, RecordError> {
    postcard::to_extend(value, vec![META_FORMAT])
        .map_err(|source| RecordError::Encode { what, source })
}

pub fn decode_meta<T: DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, RecordError> {
    let body = header(what, &[], META_FORMAT, bytes)?;
    postcard::from_bytes(body).map_err(malformed(what))
}

/// Encodes a Raft message (request or response) for the transport.
pub fn encode_rpc<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, RecordError> {
    let out = vec![RPC_MAGIC[0], RPC_MAGIC[1], RPC_FORMAT];
    postcard::to_extend(value, out).map_err(|source| RecordError::Encode { what, source })
}

pub fn decode_rpc<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, RecordError> {
    let body = header(what, &RPC_MAGIC, RPC_FORMAT, bytes)?;
    postcard::from_bytes(body).map_err(malformed(what))
}
