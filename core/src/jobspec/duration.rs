//! Durations as Nomad job files write them: Go's `time.ParseDuration` syntax.
//!
//! A duration is a sequence of decimal numbers, each with an optional fraction and a unit
//! (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`): `30s`, `1h30m`, `1.5h`, `250ms`. A bare `0` is
//! allowed. Go's grammar is parsed here rather than a human-friendly one (`2 hours`) so that
//! every duration a Nomad job file contains means the same thing to drover, and nothing else
//! is accepted. Negative durations, which Go allows, mean nothing for any jobspec field and
//! are refused.

use std::time::Duration;

const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses `text` as a Go duration; the error is a reason without the field name.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = |why: &str| format!("invalid duration {text:?}: {why}");
    let body = text.strip_prefix('+').unwrap_or(text);
    if body.starts_with('-') {
        return Err(invalid("it must not be negative"));
    }
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(invalid("it is empty (write e.g. \"30s\" or \"1h30m\")"));
    }
    let mut rest = body;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid("expected a number"));
        }
        if fraction.contains('.') {
            return Err(invalid("a number has more than one '.'"));
        }
        if unit.is_empty() {
            return Err(invalid("a number has no unit (use h, m, s, ms, us or ns)"));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(invalid(&format!(
                "unknown unit {unit:?} (use h, m, s, ms, us or ns)"
            )));
        };
        let too_long = || invalid("it is too long");
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_long())?
        };
        let mut nanos = whole.checked_mul(scale).ok_or_else(too_long)?;
        // Digits past nanosecond precision are dropped, as Go does.
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            nanos += u128::from(digit - b'0') * place;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(too_long)?;
        rest = after;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| invalid("it is too long"))?;
    // The remainder is below 10^9, so it fits.
    let subsec = (total_nanos % 1_000_000_000) as u32;
    Ok(Duration::new(secs, subsec))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    fn check(text: &str, expect: Result<Duration, &str>) {
        match (parse_duration(text), expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
            (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn reads_go_durations() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        for (text, want) in [
            ("0", s(0)),
            ("30s", s(30)),
            ("1h30m", s(5400)),
            ("1.5h", s(5400)),
            ("+5m", s(300)),
            ("250ms", ms(250)),
            ("1m0.5s", ms(60_500)),
            (".5s", ms(500)),
            ("1.s", s(1)),
            ("100us", Duration::from_micros(100)),
            ("100µs", Duration::from_micros(100)),
            ("7ns", Duration::from_nanos(7)),
            ("1.0000000019s", Duration::from_nanos(1_000_000_001)),
            ("2h45m10s", s(2 * 3600 + 45 * 60 + 10)),
        ] {
            check(text, Ok(want));
        }
    }

    #[test]
    fn refuses_what_go_refuses_and_negatives() {
        for (text, why) in [
            ("", "it is empty"),
            ("30", "has no unit"),
            ("30sec", "unknown unit \"sec\""),
            ("1d", "unknown unit \"d\""),
            ("s", "expected a number"),
            (".s", "expected a number"),
            ("1..5s", "more than one '.'"),
            ("-5s", "must not be negative"),
            ("5 s", "unknown unit \" s\""),
            ("99999999999999999999999999999999999999h", "too long"),
        ] {
            check(text, Err(why));
        }
    }
}
