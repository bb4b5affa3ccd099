//! The modes the console can be in besides browsing: typing a filter, a `:` command or a
//! value, answering a confirmation, reading the help.

use super::Command;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing the current view's filter, which applies as it is typed.
    Filter,
    /// Typing a `:` command.
    Command(String),
    Prompt(Prompt),
    Confirm(Confirm),
    Help,
}

/// A question whose answer is a value typed by the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub kind: PromptKind,
    pub input: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptKind {
    DrainDeadline(Vec<drover_core::NodeId>),
    WorkerCount { server_id: String },
}

impl Prompt {
    pub fn question(&self) -> String {
        match &self.kind {
            PromptKind::DrainDeadline(nodes) => format!(
                "drain {} node(s) with deadline (e.g. 30s, 10m, 1h, none):",
                nodes.len()
            ),
            PromptKind::WorkerCount { server_id } => {
                format!("worker count for server {server_id}:")
            }
        }
    }
}

/// A destructive command waiting for the operator's yes.
///
/// Invariant: a new confirmation always starts on Cancel, so an operator who presses enter
/// out of habit changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confirm {
    pub question: String,
    pub command: Command,
    pub on_confirm: bool,
}

impl Confirm {
    pub fn new(question: impl Into<String>, command: Command) -> Self {
        Self {
            question: question.into(),
            command,
            on_confirm: false,
        }
    }
}

/// Reads a drain deadline: `none` (or nothing) for no deadline, else a number with a unit
/// `s`, `m` or `h`.
pub fn parse_deadline(text: &str) -> Result<Option<std::time::Duration>, String> {
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let invalid = || format!("invalid deadline {text:?}: use 30s, 10m, 1h or none");
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(invalid)?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| invalid())?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3_600),
        _ => return Err(invalid()),
    };
    if secs == 0 {
        return Err(invalid());
    }
    Ok(Some(std::time::Duration::from_secs(secs)))
}

#[cfg(test)]
mod tests {
    use super::parse_deadline;
    use std::time::Duration;

    #[test]
    fn deadlines_parse_with_units_or_none() {
        let cases: [(&str, Result<Option<u64>, ()>); 8] = [
            ("", Ok(None)),
            ("none", Ok(None)),
            ("30s", Ok(Some(30))),
            ("10m", Ok(Some(600))),
            (" 2h ", Ok(Some(7_200))),
            ("0s", Err(())),
            ("10", Err(())),
            ("abc", Err(())),
        ];
        for (text, want) in cases {
            let got = parse_deadline(text)
                .map(|d| d.map(|d: Duration| d.as_secs()))
                .map_err(|_| ());
            assert_eq!(got, want, "{text:?}");
        }
    }
}
