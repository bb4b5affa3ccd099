//! Ids by prefix, as operators type them: the eight characters a table shows, or any
//! other leading part of the hyphenated form.
//!
//! Every id table is ordered by the id's bytes, which is the order of its hex digits, so
//! the ids starting with a prefix are one contiguous range: the prefix padded with `0`
//! digits up to the prefix padded with `f` digits. Resolving a prefix is a range scan, not
//! a walk over the table.

use std::fmt;

/// A validated leading part of a UUID: up to 32 hex digits, hyphens allowed only where
/// the hyphenated form has them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IdPrefix {
    lo: [u8; 16],
    hi: [u8; 16],
    digits: u8,
}

/// Why a string is not an id prefix.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum IdPrefixError {
    #[error("an id prefix needs at least one hex digit")]
    Empty,
    #[error("{given:?} is not an id prefix: {reason}")]
    Invalid { given: String, reason: &'static str },
}

/// Where the hyphenated form puts its hyphens (character positions).
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl IdPrefix {
    /// Parses `given` (case-insensitive, surrounding blanks ignored).
    pub fn parse(given: &str) -> Result<IdPrefix, IdPrefixError> {
        let text = given.trim();
        let invalid = |reason| IdPrefixError::Invalid {
            given: given.to_string(),
            reason,
        };
        if text.len() > 36 {
            return Err(invalid("longer than an id"));
        }
        let mut lo = [0u8; 16];
        let mut hi = [0xffu8; 16];
        let mut digits = 0usize;
        for (pos, c) in text.chars().enumerate() {
            if c == '-' {
                if !HYPHENS.contains(&pos) {
                    return Err(invalid("a hyphen where an id has none"));
                }
                continue;
            }
            let Some(nibble) = c.to_digit(16) else {
                return Err(invalid("ids are hex digits and hyphens"));
            };
            if digits == 32 {
                return Err(invalid("longer than an id"));
            }
            let nibble = nibble as u8;
            let byte = digits / 2;
            if digits % 2 == 0 {
                lo[byte] = nibble << 4;
                hi[byte] = (nibble << 4) | 0x0f;
            } else {
                lo[byte] |= nibble;
                hi[byte] = lo[byte];
            }
            digits += 1;
        }
        if digits == 0 {
            return Err(IdPrefixError::Empty);
        }
        Ok(IdPrefix {
            lo,
            hi,
            digits: digits as u8,
        })
    }

    /// The smallest and the largest id that start with the prefix, for a range scan.
    pub fn bounds<Id>(&self, from_bytes: impl Fn([u8; 16]) -> Id) -> (Id, Id) {
        (from_bytes(self.lo), from_bytes(self.hi))
    }

    /// Whether the prefix is a whole id.
    pub fn is_complete(&self) -> bool {
        self.digits == 32
    }
}

impl fmt::Display for IdPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex: String = self.lo.iter().map(|b| format!("{b:02x}")).collect();
        f.write_str(&hex[..self.digits as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::EvalId;

    fn hex(bytes: [u8; 16]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn prefixes_are_ranges_of_ids() {
        // (typed, lowest id, highest id)
        let cases = [
            (
                "a",
                "a0000000000000000000000000000000",
                "afffffffffffffffffffffffffffffff",
            ),
            (
                "A31FF64E",
                "a31ff64e000000000000000000000000",
                "a31ff64effffffffffffffffffffffff",
            ),
            (
                "a31ff64e-1",
                "a31ff64e100000000000000000000000",
                "a31ff64e1fffffffffffffffffffffff",
            ),
            (
                " 06f9cab1 ",
                "06f9cab1000000000000000000000000",
                "06f9cab1ffffffffffffffffffffffff",
            ),
            (
                "0123456789abcdef0123456789abcdef",
                "0123456789abcdef0123456789abcdef",
                "0123456789abcdef0123456789abcdef",
            ),
            (
                "01234567-89ab-cdef-0123-456789abcdef",
                "0123456789abcdef0123456789abcdef",
                "0123456789abcdef0123456789abcdef",
            ),
        ];
        for (typed, lo, hi) in cases {
            let p = IdPrefix::parse(typed).unwrap_or_else(|e| panic!("{typed:?}: {e}"));
            let (a, b) = p.bounds(|b| b);
            assert_eq!(
                (hex(a), hex(b)),
                (lo.to_string(), hi.to_string()),
                "{typed:?}"
            );
            assert_eq!(p.is_complete(), lo == hi, "{typed:?}");
            let (first, last) = p.bounds(EvalId::from_bytes);
            assert!(first <= last, "{typed:?}");
        }
    }

    #[test]
    fn bad_prefixes_say_why() {
        let cases = [
            ("", "an id prefix needs at least one hex digit"),
            ("  ", "an id prefix needs at least one hex digit"),
            (
                "-",
                "\"-\" is not an id prefix: a hyphen where an id has none",
            ),
            (
                "xyz",
                "\"xyz\" is not an id prefix: ids are hex digits and hyphens",
            ),
            (
                "a3-1",
                "\"a3-1\" is not an id prefix: a hyphen where an id has none",
            ),
            (
                "0123456789abcdef0123456789abcdef0",
                "\"0123456789abcdef0123456789abcdef0\" is not an id prefix: longer than an id",
            ),
        ];
        for (typed, want) in cases {
            let err = IdPrefix::parse(typed).expect_err(typed);
            assert_eq!(err.to_string(), want, "{typed:?}");
        }
    }
}
