//! `drover server members`: the servers of the cluster as the one asked sees them.

use crate::client::{Client, ClientArgs};
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum ServerCommand {
    /// List the servers of the cluster: name, id, address, Raft role, status and version
    Members {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// One server, as printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub name: String,
    pub id: String,
    pub address: String,
    pub role: String,
    pub status: String,
    pub version: String,
    /// Milliseconds since the server asked last heard from it; `None` when it does not
    /// track that server.
    pub last_contact_ms: Option<u64>,
}

impl From<pb::Member> for MemberView {
    fn from(m: pb::Member) -> Self {
        let role = pb::RaftRole::try_from(m.role)
            .map(|r| output::wire_name(r.as_str_name(), "RAFT_ROLE_"))
            .unwrap_or_else(|_| format!("unknown ({})", m.role));
        let status = pb::MemberStatus::try_from(m.status)
            .map(|s| output::wire_name(s.as_str_name(), "MEMBER_STATUS_"))
            .unwrap_or_else(|_| format!("unknown ({})", m.status));
        MemberView {
            name: m.name,
            id: m.id,
            address: m.address,
            last_contact_ms: (m.last_contact_ms > 0 || role == "leader")
                .then_some(m.last_contact_ms),
            role,
            status,
            version: m.version,
        }
    }
}

pub async fn members(
    client: &Client,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let answer = client
        .status()
        .members(pb::MembersRequest {})
        .await
        .map_err(rpc_failed("listing the servers"))?
        .into_inner();
    let members: Vec<MemberView> = answer.members.into_iter().map(MemberView::from).collect();
    output::print_as(out, output.json, &members, |m| render(m))?;
    Ok(Exit::OK)
}

/// Nomad's `server members` columns.
pub fn render(members: &[MemberView]) -> String {
    let mut table = Table::new(["Name", "ID", "Address", "Role", "Status", "Version"]);
    for m in members {
        let or_dash = |v: &str| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.to_string()
            }
        };
        table.row([
            or_dash(&m.name),
            m.id.clone(),
            m.address.clone(),
            m.role.clone(),
            m.status.clone(),
            or_dash(&m.version),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_print_as_a_table() {
        let members: Vec<MemberView> = [
            (1, "a", pb::RaftRole::Leader, pb::MemberStatus::Alive),
            (
                2,
                "b",
                pb::RaftRole::Follower,
                pb::MemberStatus::Unreachable,
            ),
        ]
        .into_iter()
        .map(|(id, name, role, status)| {
            MemberView::from(pb::Member {
                id: id.to_string(),
                name: name.to_string(),
                address: format!("127.0.0.1:464{id}"),
                role: role as i32,
                status: status as i32,
                last_contact_ms: 0,
                version: "0.1.0".into(),
            })
        })
        .collect();
        insta::assert_snapshot!(render(&members), @r"
        Name  ID  Address         Role      Status       Version
        a     1   127.0.0.1:4641  leader    alive        0.1.0
        b     2   127.0.0.1:4642  follower  unreachable  0.1.0
        ");
    }
}
