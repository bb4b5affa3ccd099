//! `formatdate(spec, timestamp)`: an RFC 3339 timestamp in the layout `spec` writes with
//! Nomad's HCL2 (and Terraform's) sequences: `YYYY YY MMMM MMM MM M DD D EEEE EEE hh h HH
//! H AA aa mm m ss s ZZZZZ ZZZZ ZZZ Z`; text in single quotes is literal (`''` is a
//! quote); other letters are refused, so that a typo is not copied into the output.

use super::{Result, s};
use chrono::{DateTime, Datelike as _, FixedOffset, Timelike as _};
use hcl::eval::FuncArgs;
use std::fmt::Write as _;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

pub(super) fn formatdate(a: FuncArgs) -> Result {
    let spec = s(&a[0]);
    let at = DateTime::parse_from_rfc3339(s(&a[1])).map_err(|e| {
        format!(
            "formatdate: timestamp {:?} is not an RFC 3339 time: {e}",
            s(&a[1])
        )
    })?;
    let chars: Vec<char> = spec.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            i = quoted(&chars, i, &mut out)
                .ok_or_else(|| format!("formatdate: unterminated quote in {spec:?}"))?;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            out.push(c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        let seq: String = chars[i..i + run].iter().collect();
        write_sequence(&mut out, &seq, &at).ok_or_else(|| {
            format!("formatdate: invalid date format sequence {seq:?} in {spec:?}")
        })?;
        i += run;
    }
    Ok(out.into())
}

/// Copies the quoted literal starting at `chars[start]` (a `'`), `''` as one quote;
/// answers the index after it, or `None` when it never closes.
fn quoted(chars: &[char], start: usize, out: &mut String) -> Option<usize> {
    if chars.get(start + 1) == Some(&'\'') {
        out.push('\'');
        return Some(start + 2);
    }
    let mut i = start + 1;
    loop {
        match chars.get(i)? {
            '\'' if chars.get(i + 1) == Some(&'\'') => {
                out.push('\'');
                i += 2;
            }
            '\'' => return Some(i + 1),
            c => {
                out.push(*c);
                i += 1;
            }
        }
    }
}

fn write_sequence(out: &mut String, seq: &str, at: &DateTime<FixedOffset>) -> Option<()> {
    let hour12 = match at.hour() % 12 {
        0 => 12,
        h => h,
    };
    let offset = at.offset().local_minus_utc();
    let (sign, abs) = if offset < 0 {
        ('-', -offset)
    } else {
        ('+', offset)
    };
    let (oh, om) = (abs / 3600, abs % 3600 / 60);
    let month = MONTHS[at.month0() as usize];
    let weekday = match at.weekday() {
        chrono::Weekday::Mon => "Monday",
        chrono::Weekday::Tue => "Tuesday",
        chrono::Weekday::Wed => "Wednesday",
        chrono::Weekday::Thu => "Thursday",
        chrono::Weekday::Fri => "Friday",
        chrono::Weekday::Sat => "Saturday",
        chrono::Weekday::Sun => "Sunday",
    };
    let _ = match seq {
        "YYYY" => write!(out, "{:04}", at.year()),
        "YY" => write!(out, "{:02}", at.year().rem_euclid(100)),
        "MMMM" => write!(out, "{month}"),
        "MMM" => write!(out, "{}", &month[..3]),
        "MM" => write!(out, "{:02}", at.month()),
        "M" => write!(out, "{}", at.month()),
        "DD" => write!(out, "{:02}", at.day()),
        "D" => write!(out, "{}", at.day()),
        "EEEE" => write!(out, "{weekday}"),
        "EEE" => write!(out, "{}", &weekday[..3]),
        "hh" => write!(out, "{:02}", at.hour()),
        "h" => write!(out, "{}", at.hour()),
        "HH" => write!(out, "{hour12:02}"),
        "H" => write!(out, "{hour12}"),
        "AA" => write!(out, "{}", if at.hour() < 12 { "AM" } else { "PM" }),
        "aa" => write!(out, "{}", if at.hour() < 12 { "am" } else { "pm" }),
        "mm" => write!(out, "{:02}", at.minute()),
        "m" => write!(out, "{}", at.minute()),
        "ss" => write!(out, "{:02}", at.second()),
        "s" => write!(out, "{}", at.second()),
        "ZZZZZ" => write!(out, "{sign}{oh:02}:{om:02}"),
        "ZZZZ" => write!(out, "{sign}{oh:02}{om:02}"),
        "ZZZ" if offset == 0 => write!(out, "UTC"),
        "ZZZ" => write!(out, "{sign}{oh:02}{om:02}"),
        "Z" if offset == 0 => write!(out, "Z"),
        "Z" => write!(out, "{sign}{oh:02}:{om:02}"),
        _ => return None,
    };
    Some(())
}
