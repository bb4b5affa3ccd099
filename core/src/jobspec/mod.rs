//! Job files: Nomad's HCL job specification (the part drover supports) and JSON (drover's
//! own serde form, or Nomad's `{"Job": {…}}` API form), turned into a [`Job`] ready to
//! register.
//!
//! Parsing is strict. Every attribute and block is known, a Nomad feature drover refuses by
//! name, or an error with its line and column and the closest known name; a value of the
//! wrong type names the field and the type it needs. A job that decodes cleanly is then
//! checked by [`crate::validate::validate_job`], and each problem it finds is pointed back
//! at the place in the file that set the field (or, for a field left to its default, the
//! block that would hold it). So a file that parses is a job the server will accept.
//! Task-level `constraint` blocks join their group's constraints: a group's tasks share a
//! node, so they filter nodes exactly as group constraints do.
//!
//! Defaults follow Nomad: a group's restart and reschedule policies start from the job
//! type's defaults, task resources from 100 MHz and 300 MB, a missing `count` is 1.
//! Strings are kept as written, `${NOMAD_ALLOC_DIR}` and `${attr.…}` included: the agent
//! and the scheduler interpolate them, not the parser. A job that names no namespace is
//! returned with an empty one: the submitter's namespace (`-namespace`) or the servers'
//! default applies.

mod decoder;
mod duration;
mod error;
mod functions;
mod group;
mod job;
mod json;
mod migrate;
mod network;
mod nomad_json;
mod reader;
mod service;
mod special_forms;
mod task;
mod task_blocks;
mod task_files;
mod value;
mod variables;

pub use duration::parse_duration;
pub use error::{JobspecError, Position, Problem};
pub use json::{decode_nomad_job, parse_json};
pub use variables::{Inputs, file_references};

use crate::types::Job;
use crate::validate::{Limits, validate_job};
use decoder::Decoder;
use std::path::Path;

/// Parses an HCL job file. `file_name` only labels the error messages.
pub fn parse_hcl(src: &str, file_name: &str) -> Result<Job, JobspecError> {
    parse_hcl_with(src, file_name, &Inputs::default())
}

/// Parses an HCL job file whose variables take values from `inputs` (the caller read
/// them: core does no IO).
pub fn parse_hcl_with(src: &str, file_name: &str, inputs: &Inputs) -> Result<Job, JobspecError> {
    let mut d = Decoder::new(src);
    let body = match hcl::edit::parser::parse_body(src) {
        Ok(body) => body,
        Err(e) => {
            let at = e.location();
            d.problems.push(Problem {
                position: Some(Position {
                    line: at.line(),
                    column: at.column(),
                }),
                message: format!("invalid hcl: {}", e.message()),
            });
            return Err(into_error(d, file_name));
        }
    };
    d.scope = variables::resolve(&mut d, &body, inputs);
    if !d.problems.is_empty() {
        return Err(into_error(d, file_name));
    }
    let job = job::decode_file(&mut d, &body);
    match job {
        Some(job) if d.problems.is_empty() => {
            check(&mut d, &job);
            d.problems.finish(file_name).map(|()| job)
        }
        _ => Err(into_error(d, file_name)),
    }
}

/// Parses the text of a job file named `file_name` (the caller read it; core does no IO):
/// JSON when the name ends in `.json` or the text starts with `{`, HCL otherwise.
pub fn parse_source(src: &str, file_name: &str) -> Result<Job, JobspecError> {
    parse_source_with(src, file_name, &Inputs::default())
}

/// [`parse_source`] with variable values for an HCL file (JSON has no variables).
pub fn parse_source_with(src: &str, file_name: &str, inputs: &Inputs) -> Result<Job, JobspecError> {
    let ext = Path::new(file_name).extension().and_then(|e| e.to_str());
    let is_json = match ext {
        Some(ext) if ext.eq_ignore_ascii_case("json") => true,
        Some(ext) if ext.eq_ignore_ascii_case("hcl") || ext.eq_ignore_ascii_case("nomad") => false,
        _ => src.trim_start().starts_with('{'),
    };
    if is_json {
        parse_json(src, file_name)
    } else {
        parse_hcl_with(src, file_name, inputs)
    }
}

fn into_error(d: Decoder<'_>, file_name: &str) -> JobspecError {
    match d.problems.finish(file_name) {
        Err(e) => e,
        // Callers only get here with problems recorded; keep the error non-empty anyway.
        Ok(()) => JobspecError::Invalid {
            file: file_name.to_owned(),
            problems: vec![Problem {
                position: None,
                message: "job file is invalid".into(),
            }],
        },
    }
}

/// Runs drover's job validation and reports each problem where its field was written. The
/// job is checked as the servers will see it (an unnamed namespace is the default one).
fn check(d: &mut Decoder<'_>, job: &Job) {
    let mut as_submitted = job.clone();
    crate::validate::canonicalize(&mut as_submitted);
    let job = &as_submitted;
    let Err(invalid) = validate_job(job, &Limits::default()) else {
        return;
    };
    for e in &invalid.errors {
        let message = format!("{}: {}", e.path, e.reason);
        match d.locate(&by_index(job, &e.path)) {
            Some(at) => d.problems.at(at, message),
            None => d.problems.push(Problem {
                position: None,
                message,
            }),
        }
    }
    if invalid.omitted > 0 {
        d.problems.push(Problem {
            position: None,
            message: format!("and {} more problems", invalid.omitted),
        });
    }
}

/// Validation names groups and tasks by name where it can (`groups[web].tasks[app]`); the
/// decoder recorded positions by index (`groups[0].tasks[0]`). Rewrites the former into the
/// latter, the first group or task of a name being the one validation means.
fn by_index(job: &Job, path: &str) -> String {
    let Some((gi, rest)) = job.groups.iter().enumerate().find_map(|(i, g)| {
        strip_segment(path, &format!("groups[{}]", g.name)).map(|rest| (i, rest))
    }) else {
        return path.to_owned();
    };
    let group = &job.groups[gi];
    let rest = match rest.strip_prefix('.') {
        Some(inner) => group
            .tasks
            .iter()
            .enumerate()
            .find_map(|(ti, t)| {
                strip_segment(inner, &format!("tasks[{}]", t.name))
                    .map(|tail| format!(".tasks[{ti}]{tail}"))
            })
            .unwrap_or_else(|| rest.to_owned()),
        None => rest.to_owned(),
    };
    format!("groups[{gi}]{rest}")
}

/// `path` without a leading `segment`, when the segment ends there or at a `.`.
fn strip_segment<'p>(path: &'p str, segment: &str) -> Option<&'p str> {
    path.strip_prefix(segment)
        .filter(|rest| rest.is_empty() || rest.starts_with('.'))
}
