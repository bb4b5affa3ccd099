//! What drover's Raft log writes through `raft-log`: the log id, vote, node id and entry
//! types that its write-ahead log records, each with a fixed binary form.
//!
//! An entry's payload is the entry's own encoding ([`codec::encode_entry`](super::codec)),
//! so the bytes on disk are drover's format whatever the log store; `raft-log` adds its
//! record framing and a checksum around them.

use super::types::{LogId, TypeConfig, Vote};
use openraft::CommittedLeaderId;
use openraft::storage::LogFlushed;
use raft_log::codeq::{Decode, Encode};
use std::cmp::Ordering;
use std::io::{self, Read, Write};
use std::sync::Arc;

/// The `raft-log` type family of drover's log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WalTypes;

impl raft_log::Types for WalTypes {
    type LogId = WalLogId;
    type LogPayload = Payload;
    type Vote = WalVote;
    type Callback = Flushed;
    /// The Raft node id the data dir belongs to.
    type UserData = u64;

    fn log_index(log_id: &WalLogId) -> u64 {
        log_id.index
    }

    fn payload_size(payload: &Payload) -> u64 {
        payload.0.len() as u64
    }
}

/// A log id as the write-ahead log stores it. Its order is openraft's wherever openraft's
/// is defined (by leader, then index) and total elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct WalLogId {
    term: u64,
    node_id: u64,
    index: u64,
}

impl WalLogId {
    pub(crate) fn index(&self) -> u64 {
        self.index
    }
}

impl From<LogId> for WalLogId {
    fn from(id: LogId) -> Self {
        Self {
            term: id.leader_id.term,
            node_id: id.leader_id.node_id,
            index: id.index,
        }
    }
}

impl From<WalLogId> for LogId {
    fn from(id: WalLogId) -> Self {
        LogId::new(CommittedLeaderId::new(id.term, id.node_id), id.index)
    }
}

impl Encode for WalLogId {
    fn encode<W: Write>(&self, mut w: W) -> io::Result<usize> {
        let mut n = 0;
        for v in [self.term, self.node_id, self.index] {
            n += v.encode(&mut w)?;
        }
        Ok(n)
    }
}

impl Decode for WalLogId {
    fn decode<R: Read>(mut r: R) -> io::Result<Self> {
        Ok(Self {
            term: u64::decode(&mut r)?,
            node_id: u64::decode(&mut r)?,
            index: u64::decode(&mut r)?,
        })
    }
}

/// A vote as the write-ahead log stores it, ordered as openraft orders votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalVote(pub Vote);

impl PartialOrd for WalVote {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.0.partial_cmp(&other.0)
    }
}

impl Encode for WalVote {
    fn encode<W: Write>(&self, mut w: W) -> io::Result<usize> {
        let v = &self.0;
        let mut n = v.leader_id.term.encode(&mut w)?;
        n += v.leader_id.node_id.encode(&mut w)?;
        n += u8::from(v.committed).encode(&mut w)?;
        Ok(n)
    }
}

impl Decode for WalVote {
    fn decode<R: Read>(mut r: R) -> io::Result<Self> {
        let term = u64::decode(&mut r)?;
        let node_id = u64::decode(&mut r)?;
        let committed = match u8::decode(&mut r)? {
            0 => false,
            1 => true,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("vote committed flag {other} is neither 0 nor 1"),
                ));
            }
        };
        let mut vote = Vote::new(term, node_id);
        vote.committed = committed;
        Ok(WalVote(vote))
    }
}

/// One encoded log entry. Shared, so the log's cache and its readers hold one copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Payload(pub Arc<[u8]>);

impl Encode for Payload {
    fn encode<W: Write>(&self, mut w: W) -> io::Result<usize> {
        let len = u32::try_from(self.0.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("log entry of {} bytes exceeds 4 GiB", self.0.len()),
            )
        })?;
        len.encode(&mut w)?;
        w.write_all(&self.0)?;
        Ok(4 + self.0.len())
    }
}

impl Decode for Payload {
    fn decode<R: Read>(r: R) -> io::Result<Self> {
        // `Vec<u8>`'s form is the same: a big-endian length, then the bytes.
        Ok(Payload(Vec::<u8>::decode(r)?.into()))
    }
}

/// Who waits for a flush to reach the disk.
pub(crate) enum Flushed {
    /// openraft, for appended entries.
    Log(LogFlushed<TypeConfig>),
    /// A task of the log store (vote, truncate, purge).
    Done(tokio::sync::oneshot::Sender<io::Result<()>>),
    /// A thread that blocks for it ([`sync_blocking`]).
    Sync(std::sync::mpsc::SyncSender<io::Result<()>>),
}

/// Hands everything appended so far to the flush worker and blocks until it is synced.
pub(crate) fn sync_blocking(wal: &mut raft_log::RaftLog<WalTypes>) -> io::Result<()> {
    use raft_log::api::raft_log_writer::RaftLogWriter;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    wal.flush(true, Some(Flushed::Sync(tx)))?;
    rx.recv()
        .unwrap_or_else(|_| Err(io::Error::other("the flush worker stopped")))
}

impl raft_log::Callback for Flushed {
    fn send(self, res: io::Result<()>) {
        match self {
            Flushed::Log(done) => done.log_io_completed(res),
            Flushed::Done(tx) => {
                let _ = tx.send(res);
            }
            // The sender's own `send` (which reports a hung-up receiver), not this trait's.
            Flushed::Sync(tx) => {
                let _ = std::sync::mpsc::SyncSender::send(&tx, res);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Encode + Decode>(v: &T) -> T {
        let mut buf = Vec::new();
        let n = v.encode(&mut buf).unwrap();
        assert_eq!(n, buf.len());
        T::decode(buf.as_slice()).unwrap()
    }

    #[test]
    fn records_read_back_as_written() {
        let id = LogId::new(CommittedLeaderId::new(3, 2), 41);
        assert_eq!(LogId::from(round_trip(&WalLogId::from(id))), id);
        for vote in [Vote::new(4, 1), Vote::new_committed(5, 2), Vote::default()] {
            assert_eq!(round_trip(&WalVote(vote)).0, vote, "{vote:?}");
        }
        let p = Payload(Arc::from(b"dl\x01entry".as_slice()));
        assert_eq!(round_trip(&p), p);
    }

    #[test]
    fn log_ids_order_by_leader_then_index() {
        let id = |term, node, index| {
            WalLogId::from(LogId::new(CommittedLeaderId::new(term, node), index))
        };
        assert!(id(1, 1, 9) < id(2, 1, 3));
        assert!(id(2, 1, 3) < id(2, 1, 4));
    }

    #[test]
    fn a_vote_with_bad_flags_is_refused() {
        let mut buf = Vec::new();
        WalVote(Vote::new(1, 1)).encode(&mut buf).unwrap();
        *buf.last_mut().unwrap() = 9;
        let err = WalVote::decode(buf.as_slice()).unwrap_err();
        assert!(err.to_string().contains("committed flag 9"), "{err}");
    }
}
