//! `drover node drain`: start or end a drain. Starting one follows it, as Nomad's does,
//! until no allocation the drain moves is left on the node (`-detach` returns at once;
//! Ctrl-C stops following, never the drain).

use super::resolve;
use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output;
use drover_core::Allocation;
use drover_proto::v1 as pb;
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
    follow(client, &id, out).await
}

/// How a drain ended, as the node records it.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The servers' drainer moved everything the drain covers and ended it.
    Complete,
    /// An operator ended it (`-disable`) before that.
    Disabled,
}

/// How the drain of `node` ended, or `None` while it goes on. The drainer ends a drain by
/// itself and says so in the node's events; anything else that clears it is an operator.
fn ended(node: &drover_core::Node) -> Option<Ended> {
    if node.drain.is_some() {
        return None;
    }
    let complete = node
        .events
        .iter()
        .rev()
        .find(|e| e.message.contains("drain"))
        .is_some_and(|e| e.message.contains("drain complete"));
    Some(if complete {
        Ended::Complete
    } else {
        Ended::Disabled
    })
}

/// Reads the node until its drain ends (the servers end it once nothing it covers is left),
/// saying what is left each time that changes.
async fn follow(client: &Client, id: &str, out: &mut dyn Write) -> Result<Exit, CliError> {
    let short = output::id(id, false);
    writeln!(
        out,
        "==> Following the drain of node {short:?} (Ctrl-C stops following, not the drain)"
    )?;
    out.flush()?;
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
        let node = answer
            .node
            .and_then(|n| n.node)
            .map(drover_core::Node::try_from)
            .transpose()?
            .ok_or_else(|| CliError::IncompleteAnswer("node".into()))?;
        let allocs = answer
            .allocations
            .into_iter()
            .map(Allocation::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        let left = left_on_node(&allocs);
        match ended(&node) {
            Some(Ended::Complete) => {
                writeln!(out, "==> Drain complete for node {short:?}")?;
                return Ok(Exit::OK);
            }
            Some(Ended::Disabled) => {
                writeln!(
                    out,
                    "==> The drain of node {short:?} was ended with {} allocation(s) left",
                    left.len()
                )?;
                return Ok(Exit::OK);
            }
            None => {}
        }
        if last.as_ref() != Some(&left) {
            writeln!(
                out,
                "    {} allocation(s) on the node: {}",
                left.len(),
                left.join(", ")
            )?;
            out.flush()?;
            last = Some(left);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The names of the allocations the node still runs, wanted running or not yet stopped by
/// its client.
fn left_on_node(allocs: &[Allocation]) -> Vec<String> {
    let mut left: Vec<String> = allocs
        .iter()
        .filter(|a| !a.client_status.is_terminal())
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
    fn what_is_left_leaves_out_finished_allocations() {
        let allocs = [
            alloc("web", 0, ClientStatus::Running),
            alloc("web", 1, ClientStatus::Complete),
            alloc("web", 2, ClientStatus::Pending),
            alloc("gone", 0, ClientStatus::Lost),
        ];
        assert_eq!(left_on_node(&allocs), ["web.web[0]", "web.web[2]"]);
    }

    #[test]
    fn the_drain_end_is_read_from_the_node() {
        use drover_core::{DrainStrategy, NodeEvent, Timestamp};
        let event = |m: &str| NodeEvent {
            time: Timestamp::ZERO,
            subsystem: "cluster".into(),
            message: m.into(),
        };
        let mut node = mock::node(1);
        node.drain = Some(DrainStrategy {
            deadline: None,
            force: false,
            ignore_system_jobs: false,
            started_at: Timestamp::ZERO,
        });
        node.events = vec![event("node drain started")];
        assert_eq!(ended(&node), None);
        node.drain = None;
        node.events.push(event("node drain ended"));
        assert_eq!(ended(&node), Some(Ended::Disabled));
        node.events.push(event(
            "node drain complete: nothing left to move (the node stays ineligible)",
        ));
        assert_eq!(ended(&node), Some(Ended::Complete));
    }
}
