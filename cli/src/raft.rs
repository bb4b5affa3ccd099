//! `drover operator raft list-peers|add-peer|remove-peer|transfer-leadership`: the
//! servers that form the cluster, read and changed through the leader.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum RaftCommand {
    /// List the Raft peers as the leader sees them: voters, learners, replication progress
    ListPeers {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Add a server (started with `--join` and no address) as a learner; once it has
    /// caught up it becomes a voter
    AddPeer {
        /// The new server's Raft address (host:port)
        #[arg(long, value_name = "HOST:PORT")]
        peer_address: String,
        /// Its server id (default: ask the server)
        #[arg(long, value_name = "ID")]
        peer_id: Option<u64>,
        /// Keep it a learner: it receives the log but does not vote
        #[arg(long)]
        non_voter: bool,
    },
    /// Remove a server from the cluster
    RemovePeer {
        /// The server's id
        #[arg(
            long,
            value_name = "ID",
            required_unless_present = "peer_address",
            conflicts_with = "peer_address"
        )]
        peer_id: Option<u64>,
        /// The server's Raft address, as `list-peers` shows it
        #[arg(long, value_name = "HOST:PORT")]
        peer_address: Option<String>,
    },
    /// The Raft progress of the server asked (not forwarded): role, term, log, commit,
    /// applied, snapshot and purged indexes
    State {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Hand leadership to another voter (the given one, or the most caught up)
    TransferLeadership {
        /// The server to lead
        #[arg(long, value_name = "ID")]
        peer_id: Option<u64>,
    },
}

/// One peer, as printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PeerView {
    pub name: String,
    pub id: u64,
    pub address: String,
    pub state: &'static str,
    pub voter: bool,
    pub matched_index: u64,
    /// How many entries it is behind the leader's log.
    pub lag: u64,
    pub reachable: bool,
    pub version: String,
}

fn view(p: pb::RaftPeer, last_log_index: u64) -> PeerView {
    PeerView {
        name: p.name,
        id: p.id,
        address: p.raft_address,
        state: match (p.leader, p.voter) {
            (true, _) => "leader",
            (false, true) => "follower",
            (false, false) => "learner",
        },
        voter: p.voter,
        matched_index: p.matched_index,
        lag: last_log_index.saturating_sub(p.matched_index),
        reachable: p.reachable,
        version: p.version,
    }
}

/// One server's Raft progress, as printed by `operator raft state`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateView {
    pub server_id: String,
    pub role: String,
    pub term: u64,
    pub leader_id: String,
    pub last_log_index: u64,
    pub committed_index: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
    pub purged_index: u64,
}

impl From<&pb::ClusterStatusResponse> for StateView {
    fn from(s: &pb::ClusterStatusResponse) -> Self {
        StateView {
            server_id: s.server_id.clone(),
            role: pb::RaftRole::try_from(s.role)
                .map(|r| output::wire_name(r.as_str_name(), "RAFT_ROLE_"))
                .unwrap_or_else(|_| format!("unknown ({})", s.role)),
            term: s.term,
            leader_id: s.leader_id.clone(),
            last_log_index: s.last_log_index,
            committed_index: s.committed_index,
            applied_index: s.applied_index,
            snapshot_index: s.snapshot_index,
            purged_index: s.purged_index,
        }
    }
}

impl StateView {
    fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Server", self.server_id.clone()),
            ("Role", self.role.clone()),
            ("Term", self.term.to_string()),
            (
                "Leader",
                if self.leader_id.is_empty() {
                    "-".into()
                } else {
                    self.leader_id.clone()
                },
            ),
            ("Last log index", self.last_log_index.to_string()),
            ("Committed index", self.committed_index.to_string()),
            ("Applied index", self.applied_index.to_string()),
            ("Snapshot index", self.snapshot_index.to_string()),
            ("Purged index", self.purged_index.to_string()),
        ]
    }
}

/// Nomad's `operator raft list-peers` columns, with replication progress.
pub fn render(peers: &[PeerView]) -> String {
    let mut table = Table::new([
        "Node",
        "ID",
        "Address",
        "State",
        "Voter",
        "Matched",
        "Lag",
        "Reachable",
        "Version",
    ]);
    for p in peers {
        table.row([
            if p.name.is_empty() {
                "-".into()
            } else {
                p.name.clone()
            },
            p.id.to_string(),
            p.address.clone(),
            p.state.to_string(),
            p.voter.to_string(),
            p.matched_index.to_string(),
            p.lag.to_string(),
            p.reachable.to_string(),
            if p.version.is_empty() {
                "-".into()
            } else {
                p.version.clone()
            },
        ]);
    }
    table.render()
}

async fn list(client: &Client) -> Result<(Vec<PeerView>, pb::ListPeersResponse), CliError> {
    let answer = client
        .cluster()
        .list_peers(pb::ListPeersRequest {})
        .await
        .map_err(rpc_failed("listing the raft peers"))?
        .into_inner();
    let peers = answer
        .peers
        .iter()
        .cloned()
        .map(|p| view(p, answer.last_log_index))
        .collect();
    Ok((peers, answer))
}

pub async fn run(client: &Client, cmd: RaftCommand, out: &mut dyn Write) -> Result<Exit, CliError> {
    match cmd {
        RaftCommand::ListPeers { output } => {
            let (peers, _) = list(client).await?;
            output::print_as(out, output.json, &peers, |p| render(p))?;
        }
        RaftCommand::State { output } => {
            let s = client
                .status()
                .cluster_status(pb::ClusterStatusRequest {})
                .await
                .map_err(rpc_failed("reading the server's raft state"))?
                .into_inner();
            let state = StateView::from(&s);
            output::print_as(out, output.json, &state, |s| output::key_values(&s.rows()))?;
        }
        RaftCommand::AddPeer {
            peer_address: address,
            peer_id: id,
            non_voter,
        } => {
            let added = client
                .cluster()
                .add_peer(pb::AddPeerRequest {
                    raft_address: address.clone(),
                    id: id.unwrap_or(0),
                    non_voter,
                })
                .await
                .map_err(rpc_failed(format!("adding the server at {address}")))?
                .into_inner();
            let role = if non_voter { "learner" } else { "voter" };
            writeln!(out, "Added server {} at {address} as a {role}", added.id)?;
        }
        RaftCommand::RemovePeer {
            peer_id: id,
            peer_address: address,
        } => {
            let id = match (id, address) {
                (Some(id), _) => id,
                (None, Some(address)) => {
                    let (peers, _) = list(client).await?;
                    peers
                        .iter()
                        .find(|p| p.address == address)
                        .map(|p| p.id)
                        .ok_or_else(|| {
                            CliError::Usage(format!("no raft peer has the address {address}"))
                        })?
                }
                (None, None) => {
                    return Err(CliError::Usage("give --peer-id or --peer-address".into()));
                }
            };
            client
                .cluster()
                .remove_peer(pb::RemovePeerRequest { id })
                .await
                .map_err(rpc_failed(format!("removing server {id}")))?;
            writeln!(out, "Removed server {id}")?;
        }
        RaftCommand::TransferLeadership { peer_id: id } => {
            let done = client
                .cluster()
                .transfer_leadership(pb::TransferLeadershipRequest {
                    id: id.unwrap_or(0),
                })
                .await
                .map_err(rpc_failed("handing leadership over"))?
                .into_inner();
            writeln!(
                out,
                "Server {} now leads (term {})",
                done.leader_id, done.term
            )?;
        }
    }
    Ok(Exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_print_with_their_lag() {
        let peer = |id: u64, leader, voter, matched, reachable: bool| pb::RaftPeer {
            id,
            name: if reachable {
                format!("s{id}")
            } else {
                String::new()
            },
            raft_address: format!("127.0.0.1:464{id}"),
            api_address: String::new(),
            voter,
            leader,
            matched_index: matched,
            reachable,
            version: if reachable {
                "0.1.0".into()
            } else {
                String::new()
            },
        };
        let peers: Vec<PeerView> = [
            peer(1, true, true, 120, true),
            peer(2, false, true, 118, true),
            peer(4, false, false, 0, false),
        ]
        .into_iter()
        .map(|p| view(p, 120))
        .collect();
        insta::assert_snapshot!(render(&peers), @r"
        Node  ID  Address         State     Voter  Matched  Lag  Reachable  Version
        s1    1   127.0.0.1:4641  leader    true   120      0    true       0.1.0
        s2    2   127.0.0.1:4642  follower  true   118      2    true       0.1.0
        -     4   127.0.0.1:4644  learner   false  0        120  false      -
        ");
    }
}
