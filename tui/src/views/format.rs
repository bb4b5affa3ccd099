//! Short human forms of times and ratios, sized for table cells.

use drover_core::Timestamp;
use std::time::Duration;

/// `3s`, `4m`, `2h`, `5d`: the largest whole unit, which is what an operator scans for.
pub fn duration_short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m", s / 60),
        3_600..86_400 => format!("{}h", s / 3_600),
        _ => format!("{}d", s / 86_400),
    }
}

/// How long ago `since` was; a time in the future (clock skew) reads as `0s`.
pub fn age(since: Timestamp, now: Timestamp) -> String {
    if since.as_millis() == 0 {
        return "-".to_owned();
    }
    duration_short(now.since(since))
}

/// The time of day of `t`, `HH:MM:SS`, on a clock `offset` seconds east of UTC.
pub fn clock(t: Timestamp, offset: i32) -> String {
    let secs = (t.as_millis() / 1_000) as i64 + i64::from(offset);
    let day = secs.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", day / 3_600, day / 60 % 60, day % 60)
}

/// `used` of `total` as a whole percentage; `-` when there is no capacity.
pub fn percent(used: u64, total: u64) -> String {
    if total == 0 {
        return "-".to_owned();
    }
    format!("{}%", used.saturating_mul(100) / total)
}

/// A description written by an agent or a server, in the house style: lower-case first
/// (`tasks are running`, whichever agent wrote `Tasks are running`), an acronym at the
/// start (`TLS ...`) left as it is.
pub fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), second) if !second.is_some_and(char::is_uppercase) => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_use_the_largest_whole_unit() {
        let cases: [(u64, &str); 6] = [
            (0, "0s"),
            (59, "59s"),
            (60, "1m"),
            (3_599, "59m"),
            (7_200, "2h"),
            (90_000, "1d"),
        ];
        for (secs, want) in cases {
            assert_eq!(duration_short(Duration::from_secs(secs)), want, "{secs}s");
        }
    }

    #[test]
    fn percentages_guard_against_empty_capacity() {
        let cases: [(u64, u64, &str); 3] = [(50, 200, "25%"), (1, 0, "-"), (300, 300, "100%")];
        for (used, total, want) in cases {
            assert_eq!(percent(used, total), want, "{used}/{total}");
        }
    }

    #[test]
    fn clock_times_follow_the_offset_across_midnight() {
        // 2026-01-01T00:00:05Z
        let t = Timestamp::from_millis(1_767_225_605_000);
        assert_eq!(clock(t, 0), "00:00:05");
        assert_eq!(clock(t, 2 * 3_600), "02:00:05");
        assert_eq!(clock(t, -3_600), "23:00:05");
    }

    #[test]
    fn descriptions_read_lower_case_first() {
        let cases = [
            ("Tasks are running", "tasks are running"),
            ("tasks are running", "tasks are running"),
            ("TLS handshake failed", "TLS handshake failed"),
            ("A", "a"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(sentence(text), want, "{text:?}");
        }
    }

    #[test]
    fn ages_of_unset_times_are_a_dash() {
        let now = Timestamp::from_millis(10_000);
        assert_eq!(age(Timestamp::from_millis(0), now), "-");
        assert_eq!(age(Timestamp::from_millis(4_000), now), "6s");
        assert_eq!(age(Timestamp::from_millis(20_000), now), "0s");
    }
}
