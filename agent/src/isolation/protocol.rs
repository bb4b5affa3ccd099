//! What the shim tells its parent, one JSON line on the socket it got as stdin: the task
//! started (with its pid as the shim sees it), or it could not start and whose fault that
//! is. A shim that replaces itself with the task sends nothing: the socket closes on exec.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    Started {
        pid: i32,
    },
    /// `infra`: the node's fault (namespaces, mounts, cgroups); otherwise the job's
    /// (a command that does not exist in the task's root, a user that cannot run it).
    Failed {
        message: String,
        infra: bool,
    },
    /// Stage two's last word: how the task ended.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

impl Report {
    pub fn line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }

    /// The reports in `text`, one per line; lines that are not reports are skipped.
    pub fn parse_all(text: &str) -> Vec<Report> {
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_line_by_line() {
        let reports = vec![
            Report::Started { pid: 7 },
            Report::Failed {
                message: "no \"sh\" in the task's root".into(),
                infra: false,
            },
            Report::Exited {
                code: None,
                signal: Some(9),
            },
        ];
        let text: String = reports.iter().map(Report::line).collect();
        assert_eq!(Report::parse_all(&format!("{text}garbage\n")), reports);
    }
}
