//! What `job status` adds for a periodic or parameterized job (a template never placed
//! itself): when the next periodic launch comes, and the children launched or dispatched
//! so far, newest first.

use super::show::JobRow;
use crate::client::Client;
use crate::error::{CliError, rpc_failed};
use crate::output::{self, Table};
use drover_core::periodic::Schedule;
use drover_core::{Job, JobStatus, Timestamp};
use drover_proto::v1 as pb;

/// When `job` launches next after `now`: `None` when it is not periodic, is stopped or
/// disabled, or its schedule never fires again.
pub fn next_launch(job: &Job, now: Timestamp) -> Option<Timestamp> {
    let periodic = job.periodic.as_ref().filter(|p| p.enabled && !job.stop)?;
    Schedule::new(periodic).ok()?.next_after(now)
}

/// The children of `job` (by their parent link), newest first.
pub async fn fetch(client: &Client, job: &Job) -> Result<Vec<JobRow>, CliError> {
    let answer = drover_proto::paging::job_list_all(
        &client.jobs(),
        pb::ListJobsRequest {
            namespace: job.namespace.to_string(),
            parent_id: job.id.to_string(),
            ..Default::default()
        },
    )
    .await
    .map_err(rpc_failed(format_args!(
        "listing the children of job {:?}",
        job.id.as_str()
    )))?;
    let mut rows = answer
        .jobs
        .into_iter()
        .map(JobRow::decode)
        .collect::<Result<Vec<_>, _>>()?;
    rows.sort_by(|a, b| b.submit_time.cmp(&a.submit_time).then(b.id.cmp(&a.id)));
    Ok(rows)
}

/// The section `job status` prints for a template job.
pub fn section(job: &Job, next: Option<Timestamp>, children: &[JobRow], now: Timestamp) -> String {
    let mut text = String::new();
    if job.periodic.is_some() {
        let next = next.map_or_else(
            || "<none>".to_string(),
            |at| format!("{at} (in {})", output::duration(at.since(now))),
        );
        text.push_str(&output::key_values(&[("Next Periodic Launch", next)]));
    }
    let title = if job.periodic.is_some() {
        "Previously Launched Jobs"
    } else {
        "Dispatched Jobs"
    };
    text.push_str(&format!("\n{title}\n"));
    if children.is_empty() {
        text.push_str("No child jobs\n");
        return text;
    }
    let mut table = Table::new(["ID", "Status", "Submit Date"]);
    for c in children {
        let status = if c.stop && c.status != JobStatus::Dead {
            format!("{} (stopped)", c.status.as_str())
        } else {
            c.status.as_str().to_string()
        };
        table.row([c.id.clone(), status, output::ago(c.submit_time, now)]);
    }
    text.push_str(&table.render());
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;
    use drover_core::types::PeriodicConfig;

    fn now() -> Timestamp {
        Timestamp::from_millis(1_700_000_000_000)
    }

    fn periodic(enabled: bool, stop: bool) -> Job {
        let mut job = mock::batch_job("nightly", 1);
        job.stop = stop;
        job.periodic = Some(PeriodicConfig {
            cron: "30 2 * * *".into(),
            prohibit_overlap: false,
            time_zone: String::new(),
            enabled,
        });
        job
    }

    fn child(id: &str, status: JobStatus, submit_ms: u64) -> JobRow {
        JobRow {
            id: id.into(),
            namespace: "default".into(),
            name: id.into(),
            job_type: drover_core::JobType::Batch,
            priority: 50,
            status,
            stop: false,
            version: 0,
            parent_id: Some("nightly".into()),
            is_template: false,
            submit_time: Timestamp::from_millis(submit_ms),
            modify_index: 1,
            summary: None,
        }
    }

    #[test]
    fn next_launch_only_for_an_active_schedule() {
        // 2023-11-14T22:13:20Z: the next 02:30 UTC is the 15th.
        let next = Timestamp::from_millis(1_700_015_400_000);
        let cases = [
            ("active", periodic(true, false), Some(next)),
            ("disabled", periodic(false, false), None),
            ("stopped", periodic(true, true), None),
            ("not periodic", mock::batch_job("b", 1), None),
        ];
        for (name, job, want) in cases {
            assert_eq!(next_launch(&job, now()), want, "{name}");
        }
    }

    #[test]
    fn the_section_lists_children_newest_first() {
        let job = periodic(true, false);
        let children = [
            child(
                "nightly/periodic-1699986600",
                JobStatus::Running,
                1_699_986_600_000,
            ),
            child(
                "nightly/periodic-1699900200",
                JobStatus::Dead,
                1_699_900_200_000,
            ),
        ];
        let next = next_launch(&job, now());
        insta::assert_snapshot!(section(&job, next, &children, now()));
        let mut dispatcher = mock::batch_job("transcode", 1);
        dispatcher.parameterized = Some(Default::default());
        insta::assert_snapshot!(section(&dispatcher, None, &[], now()));
    }
}
