//! `drover node ...`: list and show nodes ([`show`]), and the operator's actions on one
//! node (offline / online, drain ([`drain`], followed until done), eligibility, purge). Node ids may be given by their first
//! characters, as tables print them.

pub mod drain;
pub mod show;

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs};
use drover_core::{Eligibility, NodeHealth};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use std::io::Write;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum NodeCommand {
    /// List every node, or show one node with its events and allocations
    Status {
        /// The node to show (an id or its first characters); all nodes when absent
        node_id: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Take a node out: it gets no new placements until `node online`
    Offline { node_id: String },
    /// Bring an offlined node back (suspended until its readiness passes)
    Online { node_id: String },
    /// Start or end a drain: allocations migrate off the node
    Drain {
        node_id: String,
        /// Start draining
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// End the drain
        #[arg(long)]
        disable: bool,
        /// Stop what is left after this long (e.g. 1h, 30m); no deadline when absent
        #[arg(long, value_parser = humantime::parse_duration)]
        deadline: Option<Duration>,
        /// Stop everything now instead of migrating gradually
        #[arg(long)]
        force: bool,
        /// Leave system job allocations in place
        #[arg(long)]
        ignore_system: bool,
        /// With -disable: keep the node ineligible for new placements
        #[arg(long)]
        keep_ineligible: bool,
        /// With -enable: return at once instead of following the drain until done
        #[arg(long)]
        detach: bool,
    },
    /// Mark a node eligible or ineligible for new placements (running work stays)
    Eligibility {
        node_id: String,
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        #[arg(long)]
        disable: bool,
    },
    /// Forget a node for good (one that is down and will not return); the jobs it ran are
    /// evaluated so its allocations are replaced. A live agent registers again
    Purge { node_id: String },
}

pub async fn run(client: &Client, cmd: NodeCommand, out: &mut dyn Write) -> Result<Exit, CliError> {
    match cmd {
        NodeCommand::Status {
            node_id: None,
            output,
        } => show::list(client, output, out).await,
        NodeCommand::Status {
            node_id: Some(id),
            output,
        } => show::status(client, &id, output, out).await,
        NodeCommand::Offline { node_id } => {
            let id = resolve(client, &node_id).await?;
            let answer = client
                .operator()
                .node_offline(pb::NodeOfflineRequest {
                    node_id: id.clone(),
                })
                .await
                .map_err(rpc_failed(format_args!("offlining node {node_id:?}")))?
                .into_inner();
            report_health(out, &id, answer.health)
        }
        NodeCommand::Online { node_id } => {
            let id = resolve(client, &node_id).await?;
            let answer = client
                .operator()
                .node_online(pb::NodeOnlineRequest {
                    node_id: id.clone(),
                })
                .await
                .map_err(rpc_failed(format_args!("onlining node {node_id:?}")))?
                .into_inner();
            report_health(out, &id, answer.health)
        }
        NodeCommand::Drain {
            node_id,
            enable,
            disable,
            deadline,
            force,
            ignore_system,
            keep_ineligible,
            detach,
        } => {
            if enable == disable {
                return Err(CliError::Usage(
                    "node drain needs exactly one of -enable and -disable".into(),
                ));
            }
            let args = drain::DrainArgs {
                node_id,
                enable,
                deadline,
                force,
                ignore_system,
                keep_ineligible,
                detach,
            };
            drain::run(client, args, out).await
        }
        NodeCommand::Eligibility {
            node_id,
            enable,
            disable,
        } => {
            if enable == disable {
                return Err(CliError::Usage(
                    "node eligibility needs exactly one of -enable and -disable".into(),
                ));
            }
            let id = resolve(client, &node_id).await?;
            let eligibility = if enable {
                Eligibility::Eligible
            } else {
                Eligibility::Ineligible
            };
            client
                .operator()
                .node_eligibility(pb::NodeEligibilityRequest {
                    node_id: id.clone(),
                    eligibility: eligibility.to_wire(),
                })
                .await
                .map_err(rpc_failed(format_args!(
                    "changing the eligibility of node {node_id:?}"
                )))?;
            writeln!(
                out,
                "Node {:?} scheduling eligibility set: {}",
                output::id(&id, false),
                eligibility.as_str()
            )?;
            Ok(Exit::OK)
        }
        NodeCommand::Purge { node_id } => {
            let id = resolve(client, &node_id).await?;
            let answer = client
                .operator()
                .node_purge(pb::NodePurgeRequest {
                    node_id: id.clone(),
                })
                .await
                .map_err(rpc_failed(format_args!("purging node {node_id:?}")))?
                .into_inner();
            writeln!(out, "Node {:?} purged", output::id(&id, false))?;
            for eval in answer.eval_ids {
                writeln!(out, "Evaluation ID: {eval}")?;
            }
            Ok(Exit::OK)
        }
    }
}

/// The full id of the one node whose id starts with `given`.
pub async fn resolve(client: &Client, given: &str) -> Result<String, CliError> {
    crate::resolve::id(client, crate::resolve::Kind::Node, given).await
}

/// Says which health an offline or online left the node in.
fn report_health(out: &mut dyn Write, id: &str, health: i32) -> Result<Exit, CliError> {
    let health = NodeHealth::from_wire("health", health)?;
    writeln!(
        out,
        "Node {:?} is {}",
        output::id(id, false),
        health.as_str()
    )?;
    Ok(Exit::OK)
}
