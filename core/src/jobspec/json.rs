//! JSON job files: drover's own format (the [`Job`] structure as serde writes it, so a job
//! shown as JSON can be edited and submitted again) and Nomad's `{"Job": {…}}` format.

use super::error::{JobspecError, Position, Problem};
use super::nomad_json;
use crate::types::Job;
use crate::validate::{Limits, validate_job};

/// Parses a JSON job, in Nomad's format when the document is `{"Job": {…}}` and in
/// drover's otherwise, and validates it. Syntax errors carry their position; other
/// problems name the field by path.
pub fn parse_json(src: &str, file_name: &str) -> Result<Job, JobspecError> {
    let invalid = |problems| JobspecError::Invalid {
        file: file_name.to_owned(),
        problems,
    };
    if let Ok(serde_json::Value::Object(doc)) = serde_json::from_str(src) {
        if let Some(wrapped) = nomad_json::unwrap(&doc) {
            let mut problems = Vec::new();
            let job = nomad_json::decode(wrapped, &mut problems);
            if problems.is_empty() {
                validated(&job, &mut problems);
            }
            return if problems.is_empty() {
                Ok(job)
            } else {
                Err(invalid(problems))
            };
        }
    }
    let job: Job = serde_json::from_str(src).map_err(|e| {
        let position = (e.line() > 0).then(|| Position {
            line: e.line(),
            column: e.column().max(1),
        });
        invalid(vec![Problem {
            position,
            message: serde_message(&e),
        }])
    })?;
    let mut problems = Vec::new();
    validated(&job, &mut problems);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    Ok(job)
}

/// serde_json's message without the ` at line L column C` tail the position already gives.
fn serde_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let cut = text.rfind(" at line ").unwrap_or(text.len());
    format!("invalid json: {}", &text[..cut])
}

/// Appends validation's problems, named by field path (JSON keeps no positions). The job
/// is checked as the servers will see it (an unnamed namespace is the default one).
fn validated(job: &Job, problems: &mut Vec<Problem>) {
    let mut as_submitted = job.clone();
    crate::validate::canonicalize(&mut as_submitted);
    if let Err(e) = validate_job(&as_submitted, &Limits::default()) {
        problems.extend(e.errors.iter().map(|f| Problem {
            position: None,
            message: format!("{}: {}", f.path, f.reason),
        }));
    }
}

/// Decodes the `Job` object of Nomad's API (the value under `"Job"` in a register or plan
/// body) without validating it: the HTTP adapter hands the job to the server, whose
/// validation is the one that counts. `label` names the source in the problems (for
/// example `request body`). Unknown keys, and Nomad features drover lacks that carry
/// content, are refused by name as in a job file.
pub fn decode_nomad_job(job: &serde_json::Value, label: &str) -> Result<Job, JobspecError> {
    let mut problems = Vec::new();
    let job = nomad_json::decode(job, &mut problems);
    if problems.is_empty() {
        Ok(job)
    } else {
        Err(JobspecError::Invalid {
            file: label.to_owned(),
            problems,
        })
    }
}
