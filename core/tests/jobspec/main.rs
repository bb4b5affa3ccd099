//! The jobspec parser against the shipped examples (golden snapshots) and against the
//! mistakes people make in job files (exact positions and messages).

// The sans-IO rule (clippy.toml) is for the library: these tests read the shipped examples.
#![allow(clippy::disallowed_methods)]

mod functions;
mod json;
mod mistakes;
mod network;
mod services;
mod syntax;
mod task_blocks;
mod task_files;
mod variables;

use drover_core::jobspec::{JobspecError, parse_hcl, parse_source};
use drover_core::types::Job;
use std::path::Path;

/// Reads a job file and parses it as the CLI does.
fn parse_file(path: &Path) -> Result<Job, JobspecError> {
    let src = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    parse_source(&src, &path.display().to_string())
}

/// Every example parses, validates, and decodes to the snapshot kept beside this test.
#[test]
fn examples_match_their_snapshots() {
    insta::glob!("../../../examples", "*.hcl", |path| {
        let job = parse_file(path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        insta::assert_debug_snapshot!(job);
    });
}

/// What parsing a source should give: a job passing some checks, or exactly this error text.
enum Expect {
    Job(fn(&Job)),
    Err(&'static str),
}

/// Parses `src` as `t.hcl` and compares with `expect`, describing any mismatch.
fn check(src: &str, expect: Expect) -> Result<(), String> {
    match (parse_hcl(src, "t.hcl"), expect) {
        (Ok(job), Expect::Job(assert_job)) => {
            assert_job(&job);
            Ok(())
        }
        (Err(e), Expect::Err(want)) if e.to_string() == want => Ok(()),
        (Err(e), Expect::Err(want)) => Err(format!("{src}\n  got:  {e}\n  want: {want}")),
        (Ok(_), Expect::Err(want)) => Err(format!("{src}\n  parsed, want: {want}")),
        (Err(e), Expect::Job(_)) => Err(format!("{src}\n  failed: {e}")),
    }
}

/// Runs a table through [`check`] and reports every mismatch at once.
fn check_all(cases: Vec<(String, Expect)>) {
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|(src, expect)| check(&src, expect).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A job with one raw_exec group; `group_extra` and `task_extra` are spliced into the group
/// and the task (task lines start at line 6 when `group_extra` is empty).
fn job(group_extra: &str, task_extra: &str) -> String {
    format!(
        "job \"t\" {{\n  group \"g\" {{\n{group_extra}    task \"t\" {{\n      driver = \"raw_exec\"\n      config {{ command = \"/bin/true\" }}\n{task_extra}    }}\n  }}\n}}\n"
    )
}
