//! `drover node drain`: start or end a drain. Starting one follows it, as Nomad's does,
//! until no allocation the drain moves is left on the node (`-detach` returns at once;
//! Ctrl-C stops following, never the drain).

use super::resolve;
use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output;
use drover_core::{Allocation, JobType};
use drover_proto::v1 as pb;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

/// How often a followed drain's node is read again.
const POLL: Duration = Duration::from_millis(500);

/// What `node drain` was asked.
#[derive(Clone, Debug)]
pub struct DrainArgs {
    pub node_id: String,
    pub enable: bool,
    pub deadline: Option<Duration>,
    pub force: bool,
    pub ignore_system: bool,
    pub keep_ineligible: bool,
    pub detach: bool,
}

pub async fn run(client: &Client, args: DrainArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    let id = resolve(client, &args.node_id).await?;
    let answer = client
        .operator()
        .node_drain(pb::NodeDrainRequest {
            node_id: id.clone(),
            enable: args.enable,
            deadline_ms: args
                .deadline
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            force: args.force,
            ignore_system_jobs: args.ignore_system,
            mark_eligible: !args.enable && !args.keep_ineligible,
        })
        .await
        .map_err(rpc_failed(format_args!("draining node {:?}", args.node_id)))?
        .into_inner();
    let short = output::id(&id, false);
    if args.enable {
        writeln!(out, "Node {short:?} drain strategy set")?;
    } else {
        writeln!(out, "Node {short:?} drain strategy unset")?;
    }
    for eval in answer.eval_ids {
        writeln!(out, "Evaluation ID: {eval}")?;
    }
    if !args.enable || args.detach {
        return Ok(Exit::OK);
    }
    follow(client, &id, args.ignore_system, out).await
}

/// Reads the node until nothing the drain moves is left on it, saying what is left each
/// time that changes.
async fn follow(
    client: &Client,
    id: &str,
    ignore_system: bool,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let short = output::id(id, false);
    writeln!(
        out,
        "==> Following the drain of node {short:?} (Ctrl-C stops following, not the drain)"
    )?;
    out.flush()?;
    let mut job_types = BTreeMap::new();
    let mut last: Option<Vec<String>> = None;
    loop {
        let answer = client
            .operator()
            .node_get(pb::NodeGetRequest {
                query: None,
                node_id: id.to_string(),
            })
            .await
            .map_err(rpc_failed(format_args!(
                "following the drain of node {short:?}"
            )))?
            .into_inner();
        let draining = answer
            .node
            .as_ref()
            .and_then(|n| n.node.as_ref())
            .is_some_and(|n| n.drain.is_some());
        let allocs = answer
            .allocations
            .into_iter()
            .map(Allocation::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        if ignore_system {
            learn_job_types(client, &allocs, &mut job_types).await?;
        }
        let left = left_to_drain(&allocs, ignore_system.then_some(&job_types));
        if left.is_empty() {
            writeln!(out, "==> Drain complete for node {short:?}")?;
            return Ok(Exit::OK);
        }
        if !draining {
            writeln!(
                out,
                "==> The drain of node {short:?} was ended with {} allocation(s) left",
                left.len()
            )?;
            return Ok(Exit::OK);
        }
        if last.as_ref() != Some(&left) {
            writeln!(
                out,
                "    {} allocation(s) left: {}",
                left.len(),
                left.join(", ")
            )?;
            out.flush()?;
            last = Some(left);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The job types of the allocations' jobs not yet known, read once per job.
async fn learn_job_types(
    client: &Client,
    allocs: &[Allocation],
    known: &mut BTreeMap<(String, String), JobType>,
) -> Result<(), CliError> {
    let wanted: BTreeSet<(String, String)> = allocs
        .iter()
        .map(|a| (a.namespace.to_string(), a.job_id.to_string()))
        .filter(|k| !known.contains_key(k))
        .collect();
    for (namespace, job_id) in wanted {
        let answer = client
            .jobs()
            .get(pb::GetJobRequest {
                query: None,
                namespace: namespace.clone(),
                job_id: job_id.clone(),
            })
            .await;
        let job_type = match answer {
            Ok(found) => found
                .into_inner()
                .job
                .map(drover_core::Job::try_from)
                .transpose()?
                .map(|j| j.job_type),
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(status) => {
                return Err(rpc_failed(format_args!("querying job {job_id:?}"))(status));
            }
        };
        // A purged job's allocations are stopping anyway: count them as moving.
        known.insert((namespace, job_id), job_type.unwrap_or(JobType::Batch));
    }
    Ok(())
}

/// The names of the allocations still on the node that the drain moves: not yet
/// finished on the node, leaving out system jobs' when `system_kept` gives the job types.
fn left_to_drain(
    allocs: &[Allocation],
    system_kept: Option<&BTreeMap<(String, String), JobType>>,
) -> Vec<String> {
    let mut left: Vec<String> = allocs
        .iter()
        .filter(|a| !a.client_status.is_terminal())
        .filter(|a| {
            let key = (a.namespace.to_string(), a.job_id.to_string());
            system_kept.is_none_or(|types| types.get(&key) != Some(&JobType::System))
        })
        .map(|a| a.name.to_string())
        .collect();
    left.sort();
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{ClientStatus, mock};

    fn alloc(job: &str, n: u32, status: ClientStatus) -> Allocation {
        let mut a = mock::alloc(
            u64::from(n),
            &mock::service_job(job, 3),
            mock::node_id(1),
            n,
        );
        a.client_status = status;
        a
    }

    #[test]
    fn what_is_left_leaves_out_finished_and_kept_system_allocations() {
        let allocs = [
            alloc("web", 0, ClientStatus::Running),
            alloc("web", 1, ClientStatus::Complete),
            alloc("web", 2, ClientStatus::Pending),
            alloc("logs", 0, ClientStatus::Running),
            alloc("gone", 0, ClientStatus::Lost),
        ];
        let types = BTreeMap::from([
            (("default".to_string(), "web".to_string()), JobType::Service),
            (("default".to_string(), "logs".to_string()), JobType::System),
        ]);
        let cases: [(&str, Option<&BTreeMap<_, _>>, &[&str]); 2] = [
            (
                "everything moves",
                None,
                &["logs.web[0]", "web.web[0]", "web.web[2]"],
            ),
            (
                "system allocations stay",
                Some(&types),
                &["web.web[0]", "web.web[2]"],
            ),
        ];
        for (name, kept, want) in cases {
            assert_eq!(left_to_drain(&allocs, kept), want, "{name}");
        }
    }
}
