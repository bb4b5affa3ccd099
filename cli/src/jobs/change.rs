//! The job commands that change a registered job in place: `scale` and `revert`.
//!
//! Both read the job's current version and register the changed spec with that version's
//! modify index as the expected one, so a registration that slipped in between is refused
//! (the check runs in the server's FSM) instead of being overwritten.

use super::show::versions;
use super::submit;
use crate::client::Client;
use crate::error::{CliError, Exit};
use drover_core::Job;
use std::io::Write;

/// Splits `job scale`'s `[GROUP] COUNT` arguments.
pub fn group_and_count(args: &[String]) -> Result<(Option<&str>, u32), CliError> {
    let (group, count) = match args {
        [count] => (None, count),
        [group, count] => (Some(group.as_str()), count),
        _ => return Err(CliError::Usage("job scale takes [GROUP] COUNT".into())),
    };
    let count = count
        .parse()
        .map_err(|_| CliError::Usage(format!("count {count:?} is not a whole number ≥ 0")))?;
    Ok((group, count))
}

/// Sets the count of one group of `job_id` (the only group when `group` is `None`).
pub async fn scale(
    client: &Client,
    job_id: &str,
    group: Option<&str>,
    count: u32,
    detach: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let mut job = current(client, job_id).await?;
    if job.job_type.is_per_node() {
        return Err(CliError::Usage(format!(
            "job {job_id:?} is a {} job: it runs one allocation per node and has no count to scale",
            job.job_type.as_str()
        )));
    }
    let names: Vec<String> = job.groups.iter().map(|g| g.name.clone()).collect();
    let target = match (group, names.as_slice()) {
        (Some(g), _) => g.to_string(),
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(CliError::Usage(format!(
                "job {job_id:?} has groups {}: name the one to scale",
                names.join(", ")
            )));
        }
    };
    let Some(g) = job.groups.iter_mut().find(|g| g.name == target) else {
        return Err(CliError::Usage(format!(
            "job {job_id:?} has no group {target:?} (groups: {})",
            names.join(", ")
        )));
    };
    g.count = count;
    let expected = job.modify_index;
    submit::run(client, job, Some(expected), detach, verbose, out).await
}

/// Registers the stored `version` of `job_id` again, as a new version.
pub async fn revert(
    client: &Client,
    job_id: &str,
    version: u64,
    detach: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let all = versions(client, job_id, format!("looking up job {job_id:?}")).await?;
    let current = all
        .first()
        .ok_or_else(|| CliError::Usage(format!("job {job_id:?} has no stored version")))?;
    if current.version == version {
        return Err(CliError::Usage(format!(
            "job {job_id:?} is already at version {version}"
        )));
    }
    let expected = current.modify_index;
    let stored: Vec<String> = all.iter().map(|j| j.version.to_string()).collect();
    let old = all
        .iter()
        .find(|j| j.version == version)
        .cloned()
        .ok_or_else(|| {
            CliError::Usage(format!(
                "job {job_id:?} has no version {version} (stored: {})",
                stored.join(", ")
            ))
        })?;
    submit::run(client, old, Some(expected), detach, verbose, out).await
}

/// The job as registered now (its newest version).
async fn current(client: &Client, job_id: &str) -> Result<Job, CliError> {
    versions(client, job_id, format!("looking up job {job_id:?}"))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Usage(format!("job {job_id:?} has no stored version")))
}
