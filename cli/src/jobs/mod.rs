//! `drover job ...`: register, plan, inspect and stop jobs.
//!
//! - [`submit`]: the commands that change something (`run`, `plan`, `stop`, `dispatch`).
//! - [`change`]: the commands that change a registered job in place (`scale`, `revert`).
//! - [`show`]: the read commands (`status`, `history`, `inspect`) and their output.
//! - [`periodic`]: `periodic force`; [`children`]: a periodic or parameterized job's next
//!   launch and children, for `status`.

pub mod change;
pub mod children;
pub mod diff;
pub mod periodic;
pub mod show;
pub mod submit;
pub mod vars;

use crate::client::Client;
use crate::error::{CliError, Exit};
use crate::output::OutputArgs;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Subcommand)]
pub enum JobCommand {
    /// Register a job from a job file (HCL or JSON) and follow its evaluation
    Run {
        /// The job file
        file: PathBuf,
        /// Return once the job is registered, without following the evaluation
        #[arg(long)]
        detach: bool,
        /// Register only if the job's modify index is still this (0: the job must be new),
        /// as printed by `job plan`
        #[arg(long)]
        check_index: Option<u64>,
        /// Show full ids
        #[arg(long)]
        verbose: bool,
        #[command(flatten)]
        vars: vars::VarArgs,
    },
    /// Check a job file (syntax and every rule a server applies) without registering it
    Validate {
        /// The job file
        file: PathBuf,
        #[command(flatten)]
        vars: vars::VarArgs,
    },
    /// Show what registering a job file would change, without registering it.
    ///
    /// Exits 0 when nothing would change, 1 when allocations or the spec would change,
    /// and 255 on errors (Nomad's convention).
    Plan {
        /// The job file
        file: PathBuf,
        #[command(flatten)]
        vars: vars::VarArgs,
    },
    /// List every job, or show one job with its summary and allocations
    Status {
        /// The job to show; all jobs when absent
        job_id: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Stop a job's allocations (the job stays, for its history) or, with -purge, remove it
    Stop {
        job_id: String,
        /// Remove the job and its history instead of only stopping it
        #[arg(long)]
        purge: bool,
        /// Return at once, without following the evaluation
        #[arg(long)]
        detach: bool,
        /// Show full ids
        #[arg(long)]
        verbose: bool,
    },
    /// Set the count of a group of a service or batch job, and follow the evaluation
    Scale {
        job_id: String,
        /// `[GROUP] COUNT`: the group may be left out when the job has only one (Nomad's
        /// `job scale <job> [<group>] <count>`)
        #[arg(num_args = 1..=2, value_name = "[GROUP] COUNT", required = true)]
        group_and_count: Vec<String>,
        /// Return at once, without following the evaluation
        #[arg(long)]
        detach: bool,
        /// Show full ids
        #[arg(long)]
        verbose: bool,
    },
    /// Register a stored version of a job again (as a new version), and follow the
    /// evaluation
    Revert {
        job_id: String,
        /// The version to go back to (see `job history`)
        version: u64,
        /// Return at once, without following the evaluation
        #[arg(long)]
        detach: bool,
        /// Show full ids
        #[arg(long)]
        verbose: bool,
    },
    /// List the stored versions of a job, newest first
    History {
        job_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print a job's specification as JSON
    Inspect {
        job_id: String,
        /// A stored version instead of the current one
        #[arg(long)]
        version: Option<u64>,
        /// Accepted for symmetry with the other read commands: the output is always JSON
        #[arg(long)]
        json: bool,
    },
    /// Act on a periodic job (`periodic force JOB`: launch a child now)
    Periodic {
        #[command(subcommand)]
        command: periodic::PeriodicCommand,
    },
    /// Launch a child of a parameterized job
    Dispatch {
        /// The parameterized job
        job_id: String,
        /// A file whose content is the payload (`-` reads standard input)
        payload: Option<PathBuf>,
        /// Meta for the child, as key=value; repeat for several
        #[arg(long = "meta", value_name = "KEY=VALUE")]
        meta: Vec<String>,
        /// Return once dispatched, without following the evaluation
        #[arg(long)]
        detach: bool,
        /// Show full ids
        #[arg(long)]
        verbose: bool,
    },
}

pub async fn run(client: &Client, cmd: JobCommand, out: &mut dyn Write) -> Result<Exit, CliError> {
    match cmd {
        JobCommand::Run {
            file,
            detach,
            check_index,
            verbose,
            vars,
        } => {
            let job = in_namespace(load(&file, &vars)?, client.named_namespace())?;
            submit::run(client, job, check_index, detach, verbose, out).await
        }
        JobCommand::Validate { file, vars } => validate(&file, &vars, out),
        JobCommand::Plan { file, vars } => {
            let job = in_namespace(load(&file, &vars)?, client.named_namespace())?;
            submit::plan(client, job, &file, out).await
        }
        JobCommand::Status { job_id, output } => match job_id {
            None => show::list(client, output, out).await,
            Some(id) => show::status(client, &id, output, out).await,
        },
        JobCommand::Stop {
            job_id,
            purge,
            detach,
            verbose,
        } => submit::stop(client, &job_id, purge, detach, verbose, out).await,
        JobCommand::Scale {
            job_id,
            group_and_count,
            detach,
            verbose,
        } => {
            let (group, count) = change::group_and_count(&group_and_count)?;
            change::scale(client, &job_id, group, count, detach, verbose, out).await
        }
        JobCommand::Revert {
            job_id,
            version,
            detach,
            verbose,
        } => change::revert(client, &job_id, version, detach, verbose, out).await,
        JobCommand::History { job_id, output } => show::history(client, &job_id, output, out).await,
        JobCommand::Inspect {
            job_id, version, ..
        } => show::inspect(client, &job_id, version, out).await,
        JobCommand::Periodic { command } => periodic::run(client, command, out).await,
        JobCommand::Dispatch {
            job_id,
            payload,
            meta,
            detach,
            verbose,
        } => {
            let payload = payload.as_deref().map(read_payload).transpose()?;
            let meta = submit::parse_meta(&meta)?;
            submit::dispatch(client, &job_id, payload, meta, detach, verbose, out).await
        }
    }
}

/// `job validate`: the job file parses and passes every rule a server applies.
pub fn validate(file: &Path, vars: &vars::VarArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    load(file, vars)?;
    writeln!(out, "Job validation successful")?;
    Ok(Exit::OK)
}

/// `job` in its namespace: the one its file names, else the one the operator named
/// (`-namespace`, `DROVER_NAMESPACE`), else the default. A file and an operator naming two
/// different ones is a mistake, refused naming both (as Nomad does).
pub fn in_namespace(
    mut job: drover_core::Job,
    named: Option<&str>,
) -> Result<drover_core::Job, CliError> {
    let named = named.filter(|n| *n != "*");
    match (job.namespace.as_str(), named) {
        ("", Some(ns)) => job.namespace = ns.to_string(),
        ("", None) => job.namespace = drover_core::DEFAULT_NAMESPACE.to_string(),
        (file, Some(ns)) if file != ns => {
            return Err(CliError::Usage(format!(
                "namespace: the job file names {file:?} but -namespace (or DROVER_NAMESPACE) names {ns:?}: drop one of them"
            )));
        }
        _ => {}
    }
    Ok(job)
}

/// Reads and checks a job file with the jobspec parser (HCL, or JSON by extension), its
/// variables taking their values from `vars` and the environment.
pub fn load(path: &Path, vars: &vars::VarArgs) -> Result<drover_core::Job, CliError> {
    let src = std::fs::read_to_string(path)
        .map_err(|e| CliError::Jobspec(format!("{}: cannot read job file: {e}", path.display())))?;
    let inputs = vars.inputs(&src)?;
    drover_core::jobspec::parse_source_with(&src, &path.display().to_string(), &inputs)
        .map_err(|e| CliError::Jobspec(e.to_string()))
}

fn read_payload(path: &Path) -> Result<Vec<u8>, CliError> {
    let read = if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(path)
    };
    read.map_err(|source| CliError::ReadFile {
        path: path.display().to_string(),
        source,
    })
}
