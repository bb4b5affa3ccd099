//! The job read commands: `status` (all jobs, or one with its summary and allocations),
//! `history` and `inspect`.

use crate::allocs::alloc_table;
use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::evals::placement_failures;
use crate::output::{self, OutputArgs, Table, key_values};
use drover_core::state::JobSummary;
use drover_core::{Allocation, Evaluation, Job, JobStatus, JobType, Timestamp};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::io::Write;

/// One line of the job list.
#[derive(Clone, Debug, Serialize)]
pub struct JobRow {
    pub id: String,
    pub namespace: String,
    pub name: String,
    pub job_type: JobType,
    pub priority: u32,
    pub status: JobStatus,
    pub stop: bool,
    pub version: u64,
    pub parent_id: Option<String>,
    pub is_template: bool,
    pub submit_time: Timestamp,
    pub modify_index: u64,
    pub summary: Option<JobSummary>,
}

impl JobRow {
    pub(crate) fn decode(e: pb::JobListEntry) -> Result<JobRow, CliError> {
        Ok(JobRow {
            job_type: JobType::from_wire("job_type", e.job_type)?,
            status: JobStatus::from_wire("status", e.status)?,
            summary: e.summary.map(JobSummary::try_from).transpose()?,
            parent_id: (!e.parent_id.is_empty()).then_some(e.parent_id),
            id: e.id,
            namespace: e.namespace,
            name: e.name,
            priority: e.priority,
            stop: e.stop,
            version: e.version,
            is_template: e.is_template,
            submit_time: Timestamp::from_millis(e.submit_time_unix_ms),
            modify_index: e.modify_index,
        })
    }
}

pub async fn list(
    client: &Client,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let answer = drover_proto::paging::job_list_all(
        &client.jobs(),
        pb::ListJobsRequest {
            namespace: client.namespace_filter(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed("listing jobs"))?;
    let rows = answer
        .jobs
        .into_iter()
        .map(JobRow::decode)
        .collect::<Result<Vec<_>, _>>()?;
    let every_namespace = client.namespace_filter().is_empty();
    output::print_as(out, output.json, &rows[..], |rows| {
        job_table(rows, every_namespace)
    })?;
    Ok(Exit::OK)
}

/// The job list; `with_namespace` adds Nomad's Namespace column, for `-namespace '*'`
/// where the same id can be listed twice.
pub fn job_table(rows: &[JobRow], with_namespace: bool) -> String {
    if rows.is_empty() {
        return "No running jobs\n".into();
    }
    let mut table = if with_namespace {
        Table::new([
            "ID",
            "Namespace",
            "Type",
            "Priority",
            "Status",
            "Submit Date",
        ])
    } else {
        Table::new(["ID", "Type", "Priority", "Status", "Submit Date"])
    };
    for r in rows {
        let mut cells = vec![r.id.clone()];
        if with_namespace {
            cells.push(r.namespace.clone());
        }
        cells.extend([
            r.job_type.to_string(),
            r.priority.to_string(),
            status_text(r.status, r.stop),
            output::time(r.submit_time),
        ]);
        table.row(cells);
    }
    table.render()
}

fn status_text(status: JobStatus, stop: bool) -> String {
    if stop {
        format!("{} (stopped)", status.as_str())
    } else {
        status.as_str().to_string()
    }
}

/// One job as `job status ID` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct JobStatusView {
    pub job: Job,
    pub summary: Option<JobSummary>,
    /// Newest first.
    pub allocations: Vec<Allocation>,
    /// The newest evaluation: its failures say why allocations are pending.
    pub latest_evaluation: Option<Evaluation>,
    /// A periodic job's next launch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_launch: Option<Timestamp>,
    /// A periodic or parameterized job's children, newest first; empty for other jobs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<JobRow>,
    /// The job's newest deployment, if it rolls out under an `update` block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_deployment: Option<drover_core::types::Deployment>,
}

pub async fn status(
    client: &Client,
    job_id: &str,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let view = fetch_status(client, job_id).await?;
    if output.json {
        output::print_json(out, &view)?;
    } else {
        write!(out, "{}", job_details(&view, output.verbose, output::now()))?;
        if let Some(d) = &view.latest_deployment {
            writeln!(out, "\nLatest Deployment")?;
            write!(out, "{}", crate::deployments::details(d, output.verbose))?;
        }
    }
    Ok(Exit::OK)
}

async fn fetch_status(client: &Client, job_id: &str) -> Result<JobStatusView, CliError> {
    let action = format!("querying job {job_id:?}");
    let mut jobs = client.jobs();
    let job = jobs
        .get(pb::GetJobRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        })
        .await
        .map_err(rpc_failed(&action))?
        .into_inner()
        .job
        .ok_or_else(|| CliError::IncompleteAnswer(format!("job for {job_id:?}")))?;
    let job = Job::try_from(job)?;
    let summary = jobs
        .summary(pb::JobSummaryRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        })
        .await
        .map_err(rpc_failed(&action))?
        .into_inner()
        .summary
        .map(JobSummary::try_from)
        .transpose()?;
    let mut allocations = drover_proto::paging::job_allocations_all(
        &jobs,
        pb::JobAllocationsRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed(&action))?
    .allocations
    .into_iter()
    .map(Allocation::try_from)
    .collect::<Result<Vec<_>, _>>()?;
    allocations.sort_by(|a, b| {
        b.create_index
            .cmp(&a.create_index)
            .then(a.name.cmp(&b.name))
    });
    let latest_evaluation = jobs
        .evaluations(pb::JobEvaluationsRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        })
        .await
        .map_err(rpc_failed(&action))?
        .into_inner()
        .evaluations
        .into_iter()
        .next()
        .map(Evaluation::try_from)
        .transpose()?;
    let (next_launch, children) = if job.is_template() {
        (
            super::children::next_launch(&job, output::now()),
            super::children::fetch(client, &job).await?,
        )
    } else {
        (None, Vec::new())
    };
    let latest_deployment = crate::deployments::latest(client, job_id).await?;
    Ok(JobStatusView {
        job,
        summary,
        allocations,
        latest_evaluation,
        next_launch,
        children,
        latest_deployment,
    })
}

pub fn job_details(view: &JobStatusView, verbose: bool, now: Timestamp) -> String {
    let job = &view.job;
    let mut text = key_values(&[
        ("ID", job.id.to_string()),
        ("Name", job.name.clone()),
        ("Submit Date", output::time(job.submit_time)),
        ("Type", job.job_type.to_string()),
        ("Priority", job.priority.to_string()),
        ("Datacenters", job.datacenters.join(",")),
        ("Namespace", job.namespace.clone()),
        ("Status", status_text(job.status, job.stop)),
        ("Version", job.version.to_string()),
        ("Periodic", job.periodic.is_some().to_string()),
        ("Parameterized", job.parameterized.is_some().to_string()),
    ]);
    if job.is_template() {
        text.push_str(&super::children::section(
            job,
            view.next_launch,
            &view.children,
            now,
        ));
    }
    if let Some(summary) = &view.summary {
        text.push_str("\nSummary\n");
        let mut table = Table::new([
            "Task Group",
            "Queued",
            "Starting",
            "Running",
            "Failed",
            "Complete",
            "Lost",
            "Unknown",
        ]);
        for (group, g) in &summary.groups {
            table.row([
                group.clone(),
                g.queued.to_string(),
                g.starting.to_string(),
                g.running.to_string(),
                g.failed.to_string(),
                g.complete.to_string(),
                g.lost.to_string(),
                g.unknown.to_string(),
            ]);
        }
        text.push_str(&table.render());
    }
    if let Some(eval) = &view.latest_evaluation
        && !eval.failed_tg_allocs.is_empty()
    {
        text.push_str("\nPlacement Failure\n");
        text.push_str(&placement_failures(&eval.failed_tg_allocs));
    }
    text.push_str("\nAllocations\n");
    if view.allocations.is_empty() {
        text.push_str("No allocations placed\n");
    } else {
        text.push_str(&alloc_table(&view.allocations, verbose, now));
    }
    text
}

pub async fn history(
    client: &Client,
    job_id: &str,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let versions = versions(
        client,
        job_id,
        format!("querying the history of job {job_id:?}"),
    )
    .await?;
    if output.json {
        output::print_json(out, &versions)?;
    } else {
        write!(out, "{}", history_table(&versions))?;
    }
    Ok(Exit::OK)
}

/// Every stored version of `job_id`, newest first; `action` says what the caller was doing
/// when the server refuses (`job scale nosuchjob` is not "querying the history").
pub(super) async fn versions(
    client: &Client,
    job_id: &str,
    action: String,
) -> Result<Vec<Job>, CliError> {
    let answer = client
        .jobs()
        .versions(pb::JobVersionsRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            ..Default::default()
        })
        .await
        .map_err(rpc_failed(action))?
        .into_inner();
    Ok(answer
        .versions
        .into_iter()
        .map(Job::try_from)
        .collect::<Result<Vec<_>, _>>()?)
}

pub fn history_table(versions: &[Job]) -> String {
    let mut table = Table::new(["Version", "Submit Date", "Stopped", "Task Groups"]);
    for job in versions {
        let groups: Vec<String> = job
            .groups
            .iter()
            .map(|g| format!("{}[{}]", g.name, g.count))
            .collect();
        table.row([
            job.version.to_string(),
            output::time(job.submit_time),
            job.stop.to_string(),
            groups.join(" "),
        ]);
    }
    table.render()
}

pub async fn inspect(
    client: &Client,
    job_id: &str,
    version: Option<u64>,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let all = versions(client, job_id, format!("looking up job {job_id:?}")).await?;
    let job = match version {
        None => all.into_iter().next(),
        Some(v) => all.into_iter().find(|j| j.version == v),
    };
    let job = job.ok_or_else(|| match version {
        Some(v) => CliError::Usage(format!("job {job_id:?} has no version {v}")),
        None => CliError::Usage(format!("job {job_id:?} has no stored version")),
    })?;
    output::print_json(out, &job)?;
    Ok(Exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    const NOW: Timestamp = Timestamp(1_700_000_600_000);

    fn web() -> Job {
        let mut job = mock::service_job("web", 2);
        job.submit_time = Timestamp::from_millis(1_700_000_000_000);
        job.status = JobStatus::Running;
        job
    }

    #[test]
    fn job_list() {
        let row = |id: &str, job_type, status, stop| JobRow {
            id: id.into(),
            namespace: "default".into(),
            name: id.into(),
            job_type,
            priority: 50,
            status,
            stop,
            version: 0,
            parent_id: None,
            is_template: false,
            submit_time: Timestamp::from_millis(1_700_000_000_000),
            modify_index: 7,
            summary: None,
        };
        let rows = [
            row("web", JobType::Service, JobStatus::Running, false),
            row("nightly-report", JobType::Batch, JobStatus::Dead, true),
        ];
        insta::assert_snapshot!(job_table(&rows, false));
        insta::assert_snapshot!("job_list_every_namespace", job_table(&rows, true));
        assert_eq!(job_table(&[], false), "No running jobs\n");
    }

    #[test]
    fn job_status_with_allocations() {
        let job = web();
        let mut allocs: Vec<Allocation> = (0..2)
            .map(|i| {
                let mut a = mock::alloc(
                    i + 1,
                    &job,
                    drover_core::NodeId::from_bytes([9; 16]),
                    i as u32,
                );
                a.id = drover_core::AllocId::from_bytes([i as u8 + 1; 16]);
                a.create_time = Timestamp::from_millis(1_700_000_001_000);
                a.modify_time = Timestamp::from_millis(1_700_000_500_000);
                a
            })
            .collect();
        allocs[1].client_status = drover_core::ClientStatus::Running;
        let view = JobStatusView {
            latest_deployment: Default::default(),
            job,
            summary: None,
            allocations: allocs,
            latest_evaluation: None,
            next_launch: None,
            children: Vec::new(),
        };
        insta::assert_snapshot!(job_details(&view, false, NOW));
    }

    #[test]
    fn history_lists_versions() {
        let mut v1 = web();
        v1.version = 1;
        v1.stop = true;
        insta::assert_snapshot!(history_table(&[v1, web()]));
    }
}
