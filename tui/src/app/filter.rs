//! The `/` filter's forms: plain text (case-insensitive substring), `~pattern` for a
//! regular expression, and a leading `!` on either to show the rows that do *not* match.
//! A row matches when any of its cells does, so one filter works on every view.

use crate::views::Cell;

/// A parsed `/` filter. Parsed once per rebuild of a view, not per row, so a regular
/// expression is compiled once for thousands of rows.
#[derive(Clone, Debug)]
pub enum RowFilter {
    /// No filter (or only `!`): every row.
    All,
    Text {
        /// Lower-cased, as the cells are compared lower-cased.
        needle: String,
        invert: bool,
    },
    Regex {
        regex: regex::Regex,
        invert: bool,
    },
    /// A `~` pattern that does not compile: no row is shown, and the table says why.
    Invalid(String),
}

impl RowFilter {
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        let (invert, rest) = match text.strip_prefix('!') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, text),
        };
        if let Some(pattern) = rest.strip_prefix('~') {
            if pattern.is_empty() {
                return RowFilter::All;
            }
            // Case-insensitive like the plain form, unless the pattern says otherwise.
            return match regex::RegexBuilder::new(pattern)
                .case_insensitive(true)
                .build()
            {
                Ok(regex) => RowFilter::Regex { regex, invert },
                Err(e) => RowFilter::Invalid(invalid_regex(pattern, &e)),
            };
        }
        if rest.is_empty() {
            return RowFilter::All;
        }
        RowFilter::Text {
            needle: rest.to_lowercase(),
            invert,
        }
    }

    /// Whether a row with these cells is shown.
    pub fn admits(&self, cells: &[Cell]) -> bool {
        match self {
            RowFilter::All => true,
            RowFilter::Text { needle, invert } => {
                let found = cells
                    .iter()
                    .any(|c| c.text.to_lowercase().contains(needle.as_str()));
                found != *invert
            }
            RowFilter::Regex { regex, invert } => {
                let found = cells.iter().any(|c| regex.is_match(&c.text));
                found != *invert
            }
            RowFilter::Invalid(_) => false,
        }
    }

    pub fn is_all(&self) -> bool {
        matches!(self, RowFilter::All)
    }

    /// Why the filter shows nothing, when it cannot be used.
    pub fn error(&self) -> Option<&str> {
        match self {
            RowFilter::Invalid(why) => Some(why),
            _ => None,
        }
    }
}

/// The regex crate's message spans several lines with a caret diagram; the status line has
/// room for its last line only, which is the reason itself.
fn invalid_regex(pattern: &str, error: &regex::Error) -> String {
    let text = error.to_string();
    let reason = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid")
        .trim()
        .trim_start_matches("error: ");
    format!("invalid regex {pattern:?}: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(texts: &[&str]) -> Vec<Cell> {
        texts.iter().map(|t| Cell::new(*t)).collect()
    }

    #[test]
    fn every_form_matches_any_cell() {
        let web = row(&["web-1", "running"]);
        let batch = row(&["batch-2", "Pending"]);
        // (filter, admits web, admits batch)
        let cases: [(&str, bool, bool); 12] = [
            ("", true, true),
            ("!", true, true),
            ("web", true, false),
            ("WEB", true, false),
            ("!web", false, true),
            ("! web", false, true),
            ("pending", false, true),
            ("~^web-\\d$", true, false),
            ("~^B", false, true),
            ("!~^web", false, true),
            ("~run|pend", true, true),
            ("~", true, true),
        ];
        for (text, want_web, want_batch) in cases {
            let filter = RowFilter::parse(text);
            assert_eq!(filter.admits(&web), want_web, "{text:?} on web");
            assert_eq!(filter.admits(&batch), want_batch, "{text:?} on batch");
        }
    }

    #[test]
    fn a_broken_regex_shows_nothing_and_says_why() {
        let filter = RowFilter::parse("~web[");
        assert!(!filter.admits(&row(&["web["])));
        let why = filter.error().expect("an error");
        assert!(why.starts_with("invalid regex \"web[\": "), "{why}");
        assert!(!why.contains('\n'), "{why}");
    }
}
