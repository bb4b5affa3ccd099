//! Delivery tokens: proof that a caller holds the current delivery of an eval.

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The token of one delivery of an eval, needed to ack, nack or touch its nack timer.
///
/// 128 bits held as two words (8-byte aligned, so it packs tightly into the broker's
/// tables), handed out with no allocation or formatting; it prints (and parses) in UUID
/// form for the wire and for operators. One half is random and the other counts the
/// broker's deliveries, so tokens of one broker are unique by construction and tokens of
/// different leaders collide only by a 64-bit chance.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Token {
    salt: u64,
    seq: u64,
}

impl Token {
    /// The token of delivery number `seq`, salted with randomness from `rng`.
    pub(crate) fn generate(seq: u64, rng: &mut impl Rng) -> Token {
        Token {
            salt: rng.random(),
            seq,
        }
    }

    pub fn from_u128(bits: u128) -> Token {
        Token {
            salt: (bits >> 64) as u64,
            seq: bits as u64,
        }
    }

    pub fn as_u128(self) -> u128 {
        (u128::from(self.salt) << 64) | u128::from(self.seq)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&uuid::Uuid::from_u128(self.as_u128()).hyphenated(), f)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({self})")
    }
}

impl FromStr for Token {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s).map(|u| Token::from_u128(u.as_u128()))
    }
}
