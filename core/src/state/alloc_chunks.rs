//! The allocations of a snapshot, written in chunks that decode in parallel.
//!
//! At a million allocations, decoding them one after another was a third of a restart's
//! snapshot load while the machine's other cores idled. Postcard's bytes cannot be split
//! without decoding them, so the table is written as a sequence of byte strings, each the
//! postcard encoding of up to [`ALLOC_CHUNK`] allocations in key order; a restore decodes
//! the chunks on as many threads as the machine has (the result is the same table,
//! whichever thread finishes first). The chunk size is fixed, so the encoding stays
//! deterministic.

use crate::types::Allocation;
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Deserializer, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Allocations per chunk: large enough that a chunk's length prefix and thread hand-off
/// cost nothing, small enough that a million make sixty chunks to share between threads.
pub const ALLOC_CHUNK: usize = 16_384;

/// Serializes `allocs` (in key order, `len` of them) as chunks.
pub(super) fn serialize<'a, S: Serializer>(
    len: usize,
    allocs: impl Iterator<Item = &'a Allocation>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let chunks = len.div_ceil(ALLOC_CHUNK);
    let mut seq = serializer.serialize_seq(Some(chunks))?;
    let mut allocs = allocs.peekable();
    let mut buf = Vec::new();
    while allocs.peek().is_some() {
        let chunk: Vec<&Allocation> = allocs.by_ref().take(ALLOC_CHUNK).collect();
        buf.clear();
        buf = postcard::to_extend(&chunk, buf).map_err(S::Error::custom)?;
        seq.serialize_element(&Blob(&buf))?;
    }
    seq.end()
}

/// `#[serde(with)]` for an owned table: the same bytes as [`serialize`].
pub(super) mod owned {
    use super::*;

    pub fn serialize<S: Serializer>(allocs: &[Arc<Allocation>], s: S) -> Result<S::Ok, S::Error> {
        super::serialize(allocs.len(), allocs.iter().map(|a| &**a), s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Arc<Allocation>>, D::Error> {
        let chunks = d.deserialize_seq(ChunksVisitor)?;
        decode_in_parallel(&chunks).map_err(D::Error::custom)
    }
}

/// Decodes every chunk, on up to as many threads as the machine has cores, and joins
/// them in order. Each allocation is put behind its `Arc` on the thread that decoded it,
/// so the restore after this moves pointers, never the allocations themselves.
fn decode_in_parallel(chunks: &[Cow<'_, [u8]>]) -> Result<Vec<Arc<Allocation>>, postcard::Error> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks.len());
    let decode = |part: &[Cow<'_, [u8]>]| -> Result<Vec<Vec<Arc<Allocation>>>, postcard::Error> {
        part.iter()
            .map(|c| {
                let chunk: Vec<Allocation> = postcard::from_bytes(c)?;
                Ok(chunk.into_iter().map(Arc::new).collect())
            })
            .collect()
    };
    let decoded: Vec<Vec<Arc<Allocation>>> = if threads <= 1 {
        decode(chunks)?
    } else {
        let per_thread = chunks.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .chunks(per_thread)
                .map(|part| scope.spawn(move || decode(part)))
                .collect();
            let mut all = Vec::with_capacity(chunks.len());
            for handle in handles {
                let part = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                all.extend(part);
            }
            Ok::<_, postcard::Error>(all)
        })?
    };
    let mut allocs = Vec::with_capacity(decoded.iter().map(Vec::len).sum());
    for chunk in decoded {
        allocs.extend(chunk);
    }
    Ok(allocs)
}

/// A byte string, written as one (postcard: a length, then the bytes).
struct Blob<'a>(&'a [u8]);

impl serde::Serialize for Blob<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Reads the chunk sequence, borrowing each chunk from the input where the deserializer
/// can (postcard over a slice always can).
struct ChunksVisitor;

impl<'de> Visitor<'de> for ChunksVisitor {
    type Value = Vec<Cow<'de, [u8]>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence of allocation chunks")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // The hint comes from the input: never trust it for more than a small start.
        let mut chunks = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(ChunkBytes(c)) = seq.next_element()? {
            chunks.push(c);
        }
        Ok(chunks)
    }
}

struct ChunkBytes<'de>(Cow<'de, [u8]>);

impl<'de> serde::Deserialize<'de> for ChunkBytes<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Cow<'de, [u8]>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the bytes of an allocation chunk")
            }

            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }

            fn visit_bytes<E>(self, v: &[u8]) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_vec()))
            }

            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_bytes(BytesVisitor).map(ChunkBytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Table(#[serde(with = "owned")] Vec<Arc<Allocation>>);

    /// Sizes around the chunk boundaries: each decodes to the same table, the encoding of
    /// the decoded table is byte-identical, and the chunk count is what the size says.
    #[test]
    fn tables_of_every_size_round_trip_through_chunks() {
        let job = mock::service_job("web", 1);
        for n in [
            0,
            1,
            ALLOC_CHUNK - 1,
            ALLOC_CHUNK,
            ALLOC_CHUNK + 1,
            3 * ALLOC_CHUNK + 7,
        ] {
            let table = Table(
                (0..n as u64)
                    .map(|i| Arc::new(mock::alloc(i, &job, mock::node_id(i % 7), i as u32)))
                    .collect(),
            );
            let bytes = postcard::to_allocvec(&table).unwrap();
            assert_eq!(
                usize::from(bytes[0]),
                n.div_ceil(ALLOC_CHUNK),
                "{n}: chunk count (one varint byte)"
            );
            let back: Table = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back, table, "{n}: decoded table");
            assert_eq!(
                postcard::to_allocvec(&back).unwrap(),
                bytes,
                "{n}: re-encoded"
            );
        }
    }

    /// A chunk that does not decode fails the whole table, naming postcard's reason.
    #[test]
    fn a_corrupt_chunk_is_an_error() {
        let job = mock::service_job("web", 1);
        let table = Table(vec![Arc::new(mock::alloc(1, &job, mock::node_id(1), 0))]);
        let mut bytes = postcard::to_allocvec(&table).unwrap();
        // The chunk's length prefix now says more bytes than the input holds.
        bytes.truncate(bytes.len() - 1);
        let err = postcard::from_bytes::<Table>(&bytes).unwrap_err();
        assert!(!err.to_string().is_empty());
    }
}
