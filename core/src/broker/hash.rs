//! A cheap hasher for eval ids.
//!
//! Eval ids are random UUIDs minted by the servers (never chosen by users), so their bits
//! are already uniform: a multiply-rotate fold spreads them over the table as well as
//! SipHash would, in a fraction of the time, and with no random key the broker touches no
//! OS randomness. Keys chosen by users (job names) keep std's keyed SipHash, which resists
//! crafted collisions.

use crate::EvalId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by eval id with [`IdHasher`].
pub(super) type IdMap<V> = HashMap<EvalId, V, BuildHasherDefault<IdHasher>>;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct IdHasher(u64);

/// The 64-bit golden-ratio constant: odd, with well-mixed bits.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl IdHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.mix(u64::from_le_bytes(
                word.try_into().expect("chunks of eight"),
            ));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        // Only ever the length prefix of the 16 id bytes: nothing to mix in.
        let _ = n;
    }

    fn finish(&self) -> u64 {
        // The multiply leaves its best bits high; fold them into the low bits the table
        // indexes by.
        self.0 ^ (self.0 >> 32)
    }
}
