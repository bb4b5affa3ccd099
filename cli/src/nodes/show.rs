//! `drover node status`: the node list, and one node with its events and allocations.

use super::resolve;
use crate::allocs::alloc_table;
use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table, key_values};
use drover_core::{Allocation, Node, Resources, Timestamp};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::io::Write;

/// A node as lists show it: the node, and what it runs.
#[derive(Clone, Debug, Serialize)]
pub struct NodeRow {
    pub node: Node,
    /// Allocations on it still using resources.
    pub live_allocs: u32,
    pub allocated: Resources,
}

impl NodeRow {
    fn decode(e: pb::NodeListEntry) -> Result<NodeRow, CliError> {
        let node = e
            .node
            .ok_or_else(|| CliError::IncompleteAnswer("node in a node list entry".into()))?;
        Ok(NodeRow {
            node: Node::try_from(node)?,
            live_allocs: e.live_allocs,
            allocated: e
                .allocated
                .map(Resources::try_from)
                .transpose()?
                .unwrap_or_default(),
        })
    }
}

pub async fn list(
    client: &Client,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let answer =
        drover_proto::paging::node_list_all(&client.operator(), pb::NodeListRequest::default())
            .await
            .map_err(rpc_failed("listing nodes"))?;
    let rows = answer
        .nodes
        .into_iter()
        .map(NodeRow::decode)
        .collect::<Result<Vec<_>, _>>()?;
    output::print_as(out, output.json, &rows[..], |rows| {
        node_table(rows, output.verbose)
    })?;
    Ok(Exit::OK)
}

pub fn node_table(rows: &[NodeRow], verbose: bool) -> String {
    if rows.is_empty() {
        return "No nodes registered\n".into();
    }
    let mut table = Table::new([
        "ID",
        "DC",
        "Name",
        "Class",
        "Drain",
        "Eligibility",
        "Status",
        "Health",
        "Allocs",
    ]);
    for r in rows {
        let n = &r.node;
        table.row([
            output::id(n.id, verbose),
            n.datacenter.clone(),
            n.name.clone(),
            n.class_key().to_string(),
            n.drain.is_some().to_string(),
            n.eligibility_label().to_string(),
            n.status.as_str().to_string(),
            n.health.as_str().to_string(),
            r.live_allocs.to_string(),
        ]);
    }
    table.render()
}

/// One node as `node status ID` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct NodeStatusView {
    #[serde(flatten)]
    pub row: NodeRow,
    pub allocations: Vec<Allocation>,
}

pub async fn status(
    client: &Client,
    given: &str,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let id = resolve(client, given).await?;
    let answer = client
        .operator()
        .node_get(pb::NodeGetRequest {
            query: None,
            node_id: id,
        })
        .await
        .map_err(rpc_failed(format_args!("querying node {given:?}")))?
        .into_inner();
    let row = NodeRow::decode(
        answer
            .node
            .ok_or_else(|| CliError::IncompleteAnswer(format!("node for {given:?}")))?,
    )?;
    let mut allocations = answer
        .allocations
        .into_iter()
        .map(Allocation::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    allocations.sort_by(|a, b| {
        b.create_index
            .cmp(&a.create_index)
            .then(a.name.cmp(&b.name))
    });
    let view = NodeStatusView { row, allocations };
    if output.json {
        output::print_json(out, &view)?;
    } else {
        write!(
            out,
            "{}",
            node_details(&view, output.verbose, output::now())
        )?;
    }
    Ok(Exit::OK)
}

fn resources(r: &Resources) -> String {
    format!(
        "{} MHz, {} MB memory, {} MB disk",
        r.cpu_mhz, r.memory_mb, r.disk_mb
    )
}

/// What the node's running allocations use, summed from the usage their agent samples,
/// in the units the allocated line uses.
fn used(allocations: &[Allocation]) -> String {
    drover_core::SampledUsage::of_running(allocations)
        .map_or_else(|| "<no samples yet>".into(), |u| u.summary())
}

pub fn node_details(view: &NodeStatusView, verbose: bool, now: Timestamp) -> String {
    let n = &view.row.node;
    let drain = match &n.drain {
        None => "false".to_string(),
        Some(d) => match d.deadline {
            Some(deadline) => format!("true (deadline {})", output::duration(deadline)),
            None => "true".to_string(),
        },
    };
    let mut text = key_values(&[
        ("ID", output::id(n.id, verbose)),
        ("Name", n.name.clone()),
        ("Class", n.class_key().to_string()),
        ("DC", n.datacenter.clone()),
        ("Drain", drain),
        ("Eligibility", n.eligibility_label().to_string()),
        ("Status", n.status.as_str().to_string()),
        (
            "Health",
            format!(
                "{} (for {})",
                n.health.as_str(),
                output::duration(now.since(n.health_since))
            ),
        ),
        (
            "Last Snapshot",
            n.last_snapshot.clone().unwrap_or_else(|| "<none>".into()),
        ),
        ("Resources", resources(&n.resources)),
        ("Reserved", resources(&n.reserved)),
        ("Allocated", resources(&view.row.allocated)),
        ("Used", used(&view.allocations)),
        (
            "Reserved Ports",
            match n.networks.reserved_ports.to_string() {
                none if none.is_empty() => "<none>".to_string(),
                ports => ports,
            },
        ),
        (
            "Dynamic Ports",
            format!(
                "{}-{}",
                n.networks.min_dynamic_port, n.networks.max_dynamic_port
            ),
        ),
    ]);
    text.push_str("\nHost Networks\n");
    if n.networks.addresses.is_empty() {
        text.push_str("No addresses: groups that ask for ports are not placed here\n");
    } else {
        let mut table = Table::new(["Name", "Address", "Interface"]);
        for a in &n.networks.addresses {
            table.row([
                a.host_network.to_string(),
                a.address.to_string(),
                a.interface.clone(),
            ]);
        }
        text.push_str(&table.render());
    }
    if !n.events.is_empty() {
        text.push_str("\nNode Events\n");
        let mut table = Table::new(["Time", "Subsystem", "Message"]);
        for e in n.events.iter().rev() {
            table.row([output::time(e.time), e.subsystem.clone(), e.message.clone()]);
        }
        text.push_str(&table.render());
    }
    text.push_str("\nAllocations\n");
    if view.allocations.is_empty() {
        text.push_str("No allocations placed\n");
    } else {
        text.push_str(&alloc_table(&view.allocations, verbose, now));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{NodeEvent, NodeHealth, SuspendReason, mock};

    fn row(n: u64) -> NodeRow {
        let mut node = mock::node(n);
        node.id = drover_core::NodeId::from_bytes([n as u8; 16]);
        node.health_since = Timestamp::from_millis(1_700_000_000_000);
        NodeRow {
            node,
            live_allocs: n as u32,
            allocated: Resources {
                cpu_mhz: 500 * n,
                memory_mb: 256 * n,
                disk_mb: 0,
            },
        }
    }

    #[test]
    fn node_list() {
        let mut offlined = row(2);
        offlined.node.health = NodeHealth::Offlined;
        let mut new = row(3);
        new.node.health = NodeHealth::Suspended(SuspendReason::New);
        new.node.node_class = "gpu".into();
        insta::assert_snapshot!(node_table(&[row(1), offlined, new], false));
    }

    #[test]
    fn node_details_with_events() {
        let mut r = row(1);
        r.node.events.push(NodeEvent {
            time: Timestamp::from_millis(1_700_000_000_000),
            subsystem: "Cluster".into(),
            message: "Node registered".into(),
        });
        let view = NodeStatusView {
            row: r,
            allocations: Vec::new(),
        };
        insta::assert_snapshot!(node_details(
            &view,
            false,
            Timestamp::from_millis(1_700_000_090_000)
        ));
    }

    /// The node's used line sums the running allocations' sampled tasks; a stopped
    /// allocation's last sample does not count.
    #[test]
    fn used_sums_what_running_allocations_sample() {
        let job = mock::service_job("web", 2);
        let usage = |cpu_mhz, memory_mb| drover_core::TaskState {
            usage: Some(drover_core::TaskUsage { cpu_mhz, memory_mb }),
            ..Default::default()
        };
        let mut running = mock::alloc(1, &job, mock::node_id(1), 0);
        running.client_status = drover_core::ClientStatus::Running;
        running.task_states = [("a", usage(100, 30)), ("b", usage(50, 10))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let mut done = running.clone();
        done.client_status = drover_core::ClientStatus::Complete;
        assert_eq!(used(&[]), "<no samples yet>");
        assert_eq!(
            used(&[running, done]),
            "150 MHz, 40 MB memory (2 tasks sampled)"
        );
    }
}
