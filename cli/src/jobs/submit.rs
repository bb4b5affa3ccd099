//! The job commands that change something: `run`, `plan` (a dry run, but it answers what
//! would change), `stop` and `dispatch`.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::evals::placement_failures;
use crate::monitor::monitor;
use crate::output;
use drover_core::{AllocMetric, DesiredUpdates, Job};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

/// Registers `job` and, unless `detach`, follows its evaluation to the end.
pub async fn run(
    client: &Client,
    job: Job,
    check_index: Option<u64>,
    detach: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let id = job.id.to_string();
    let answer = client
        .jobs()
        .register(pb::RegisterJobRequest {
            job: Some((&job).into()),
            enforce_index: check_index,
        })
        .await
        .map_err(rpc_failed(format_args!("registering job {id:?}")))?
        .into_inner();
    for warning in &answer.warnings {
        writeln!(out, "Warning: {warning}")?;
    }
    if answer.eval_id.is_empty() {
        writeln!(out, "Job registration successful")?;
        if job.parameterized.is_some() {
            writeln!(
                out,
                "Job {id:?} is parameterized: launch it with `drover job dispatch {id}`"
            )?;
        } else if job.periodic.as_ref().is_some_and(|p| p.enabled) {
            writeln!(
                out,
                "Job {id:?} is periodic: each launch runs as a child job"
            )?;
        }
        return Ok(Exit::OK);
    }
    if detach {
        writeln!(out, "Job registration successful")?;
        writeln!(out, "Evaluation ID: {}", answer.eval_id)?;
        return Ok(Exit::OK);
    }
    let exit = monitor(client, &answer.eval_id, verbose, out).await?;
    if exit != Exit::OK {
        return Ok(exit);
    }
    crate::deployments::follow(client, &id, answer.job_version, out).await
}

/// What `job plan` found, in a form both the text and a script can read.
#[derive(Clone, Debug, Serialize)]
pub struct PlanView {
    pub job_id: String,
    /// No job of this id is registered yet.
    pub new_job: bool,
    pub spec_changed: bool,
    pub has_changes: bool,
    /// The job's version after such a registration.
    pub job_version: u64,
    /// Group -> what would be placed, stopped, updated, ...
    pub groups: BTreeMap<String, DesiredUpdates>,
    /// Group -> why placements would fail.
    pub failures: BTreeMap<String, AllocMetric>,
    /// What `job run -check-index` must be given to register exactly this plan.
    pub job_modify_index: u64,
    /// The registered spec's fields the file changes (empty for a new job).
    pub fields: Vec<super::diff::FieldChange>,
}

/// Asks the server what registering `job` would do, prints it, and exits 1 when it
/// would change anything.
pub async fn plan(
    client: &Client,
    job: Job,
    file: &Path,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let id = job.id.to_string();
    let registered = registered_job(client, &job).await?;
    let current = registered.as_ref().map(|j| j.job_modify_index);
    let answer = client
        .jobs()
        .plan(pb::PlanJobRequest {
            job: Some((&job).into()),
            validate_only: false,
        })
        .await
        .map_err(rpc_failed(format_args!("planning job {id:?}")))?
        .into_inner();
    let mut view = decode_plan(&job, current, answer)?;
    if let Some(registered) = &registered
        && view.spec_changed
    {
        view.fields = super::diff::job_diff(registered, &job);
    }
    write!(out, "{}", render_plan(&view, &file.display().to_string()))?;
    Ok(if view.has_changes {
        Exit::CHANGES
    } else {
        Exit::OK
    })
}

/// The registered job of `job`'s id, `None` when it is not registered.
async fn registered_job(client: &Client, job: &Job) -> Result<Option<Job>, CliError> {
    let answer = client
        .jobs()
        .get(pb::GetJobRequest {
            query: None,
            namespace: job.namespace.clone(),
            job_id: job.id.to_string(),
        })
        .await;
    match answer {
        Ok(found) => Ok(found.into_inner().job.map(Job::try_from).transpose()?),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
        Err(status) => Err(rpc_failed(format_args!(
            "querying job {:?}",
            job.id.as_str()
        ))(status)),
    }
}

fn decode_plan(
    job: &Job,
    current: Option<u64>,
    answer: pb::PlanJobResponse,
) -> Result<PlanView, CliError> {
    let mut groups: BTreeMap<String, DesiredUpdates> = job
        .groups
        .iter()
        .map(|g| (g.name.clone(), DesiredUpdates::default()))
        .collect();
    for (group, u) in answer.desired_updates {
        groups.insert(
            group,
            DesiredUpdates {
                canary: u.canary,
                place: u.place,
                stop: u.stop,
                migrate: u.migrate,
                in_place_update: u.in_place_update,
                destructive_update: u.destructive_update,
                ignore: u.ignore,
                preemptions: u.preemptions,
                reconnect: u.reconnect,
                disconnect: u.disconnect,
                reschedule_now: u.reschedule_now,
                reschedule_later: u.reschedule_later,
            },
        );
    }
    let failures = answer
        .failures
        .into_iter()
        .map(|(group, m)| Ok((group, AllocMetric::try_from(m)?)))
        .collect::<Result<_, CliError>>()?;
    Ok(PlanView {
        job_id: job.id.to_string(),
        new_job: current.is_none(),
        spec_changed: answer.spec_changed,
        has_changes: answer.has_changes,
        job_version: answer.job_version,
        groups,
        failures,
        job_modify_index: current.unwrap_or(0),
        fields: Vec::new(),
    })
}

/// The plan as Nomad prints it: a marked line per job and group, the scheduler's dry-run
/// verdict, and how to register exactly this plan.
pub fn render_plan(plan: &PlanView, file: &str) -> String {
    let mut text = String::new();
    let job_mark = match (plan.new_job, plan.spec_changed) {
        (true, _) => "+ ",
        (false, true) => "+/- ",
        (false, false) => "",
    };
    let _ = writeln!(text, "{job_mark}Job: {:?}", plan.job_id);
    for change in &plan.fields {
        let _ = writeln!(text, "    {}", change.line());
    }
    for (group, updates) in &plan.groups {
        let counts = update_counts(updates);
        let mark = group_mark(updates, plan.new_job);
        if counts.is_empty() {
            let _ = writeln!(text, "{mark}Task Group: {group:?}");
        } else {
            let _ = writeln!(text, "{mark}Task Group: {group:?} ({})", counts.join(", "));
        }
    }
    text.push_str("\nScheduler dry-run:\n");
    if plan.failures.is_empty() {
        text.push_str("- All tasks successfully allocated.\n");
    } else {
        text.push_str("- WARNING: Failed to place all allocations.\n");
        for line in placement_failures(&plan.failures).lines() {
            let _ = writeln!(text, "  {line}");
        }
    }
    let _ = write!(
        text,
        "\nJob Modify Index: {index}\n\
         To submit the job with version verification run:\n\n\
         drover job run -check-index {index} {file}\n\n\
         When running the job with the check-index flag, the job will only be run if the\n\
         job modify index given matches the server-side version. If the index has\n\
         changed, another user has modified the job and the plan's results are\n\
         potentially invalid.\n",
        index = plan.job_modify_index
    );
    text
}

fn update_counts(u: &DesiredUpdates) -> Vec<String> {
    [
        (u.place, "create"),
        (u.stop, "destroy"),
        (u.migrate, "migrate"),
        (u.in_place_update, "in-place update"),
        (u.destructive_update, "create/destroy update"),
        (u.preemptions, "preempt"),
        (u.reconnect, "reconnect"),
        (u.disconnect, "disconnect"),
        (u.reschedule_now, "reschedule now"),
        (u.reschedule_later, "reschedule later"),
        (u.ignore, "ignore"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect()
}

fn group_mark(u: &DesiredUpdates, new_job: bool) -> &'static str {
    let adds = u.place > 0;
    let removes = u.stop > 0;
    let changes = u.migrate + u.in_place_update + u.destructive_update + u.preemptions > 0;
    match (adds, removes, changes) {
        (true, false, false) if new_job => "+ ",
        (true, false, false) => "+/- ",
        (false, true, false) => "- ",
        (false, false, false) => "",
        _ => "+/- ",
    }
}

/// Stops (or purges) a job and, unless `detach`, follows the evaluation that stops its
/// allocations.
pub async fn stop(
    client: &Client,
    job_id: &str,
    purge: bool,
    detach: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let answer = client
        .jobs()
        .deregister(pb::DeregisterJobRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            purge,
        })
        .await
        .map_err(rpc_failed(format_args!("stopping job {job_id:?}")))?
        .into_inner();
    if answer.eval_id.is_empty() || detach {
        let what = if purge { "purged" } else { "stopped" };
        writeln!(out, "Job {job_id:?} {what}")?;
        if !answer.eval_id.is_empty() {
            writeln!(out, "Evaluation ID: {}", answer.eval_id)?;
        }
        return Ok(Exit::OK);
    }
    monitor(client, &answer.eval_id, verbose, out).await
}

/// `key=value` pairs from the command line.
pub fn parse_meta(pairs: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::Usage(format!(
                "meta {pair:?} is not of the form key=value"
            ))),
        })
        .collect()
}

/// Launches a child of the parameterized job `job_id`.
pub async fn dispatch(
    client: &Client,
    job_id: &str,
    payload: Option<Vec<u8>>,
    meta: BTreeMap<String, String>,
    detach: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let answer = client
        .jobs()
        .dispatch(pb::DispatchJobRequest {
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
            payload: payload.unwrap_or_default(),
            meta: meta.into_iter().collect(),
        })
        .await
        .map_err(rpc_failed(format_args!("dispatching job {job_id:?}")))?
        .into_inner();
    write!(
        out,
        "{}",
        output::key_values(&[
            ("Dispatched Job ID", answer.dispatched_job_id.clone()),
            ("Evaluation ID", answer.eval_id.clone()),
        ])
    )?;
    if detach || answer.eval_id.is_empty() {
        return Ok(Exit::OK);
    }
    writeln!(out)?;
    monitor(client, &answer.eval_id, verbose, out).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::Dimension;

    fn plan_view(new_job: bool, groups: &[(&str, DesiredUpdates)]) -> PlanView {
        PlanView {
            job_id: "web".into(),
            new_job,
            spec_changed: true,
            has_changes: true,
            job_version: u64::from(!new_job),
            groups: groups
                .iter()
                .map(|(g, u)| (g.to_string(), u.clone()))
                .collect(),
            failures: BTreeMap::new(),
            job_modify_index: if new_job { 0 } else { 12 },
            fields: Vec::new(),
        }
    }

    #[test]
    fn plan_of_a_new_job() {
        let view = plan_view(
            true,
            &[(
                "api",
                DesiredUpdates {
                    place: 3,
                    ..Default::default()
                },
            )],
        );
        insta::assert_snapshot!(render_plan(&view, "examples/web.hcl"));
    }

    #[test]
    fn plan_of_a_changed_job_with_failures() {
        let mut view = plan_view(
            false,
            &[
                (
                    "api",
                    DesiredUpdates {
                        place: 1,
                        stop: 1,
                        destructive_update: 2,
                        ignore: 1,
                        ..Default::default()
                    },
                ),
                (
                    "cache",
                    DesiredUpdates {
                        ignore: 2,
                        ..Default::default()
                    },
                ),
            ],
        );
        view.failures.insert(
            "api".into(),
            AllocMetric {
                nodes_evaluated: 2,
                nodes_exhausted: 2,
                dimension_exhausted: [(Dimension::Cpu, 2)].into(),
                coalesced_failures: 1,
                ..Default::default()
            },
        );
        insta::assert_snapshot!(render_plan(&view, "web.hcl"));
    }

    #[test]
    fn plan_lists_the_changed_fields() {
        let mut view = plan_view(
            false,
            &[(
                "api",
                DesiredUpdates {
                    destructive_update: 2,
                    ..Default::default()
                },
            )],
        );
        let mut registered = drover_core::mock::service_job("web", 2);
        drover_core::validate::canonicalize(&mut registered);
        let mut file = registered.clone();
        file.groups[0].count = 3;
        file.groups[0].tasks[0].resources.cpu_mhz = 200;
        view.fields = crate::jobs::diff::job_diff(&registered, &file);
        insta::assert_snapshot!(render_plan(&view, "web.hcl"));
    }

    #[test]
    fn meta_pairs() {
        let ok = parse_meta(&["a=1".into(), "b=x=y".into(), "c=".into()]).expect("parses");
        assert_eq!(ok.get("b").map(String::as_str), Some("x=y"));
        assert_eq!(ok.get("c").map(String::as_str), Some(""));
        for bad in ["novalue", "=1"] {
            let err = parse_meta(&[bad.into()]).expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
