//! `drover alloc status|logs|stop|restart`, and the allocation table the job and node
//! views share.

mod lifecycle;
mod logs;

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table, key_values};
use crate::resolve::{self, Kind};
use drover_core::{Allocation, Timestamp};
use drover_proto::v1 as pb;
use std::fmt::Write as _;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum AllocCommand {
    /// Show one allocation: its placement, status history and task states
    Status {
        /// The allocation's id, or a unique prefix of it
        alloc_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print what a task wrote to stdout (or stderr), read from its node's agent
    Logs(logs::LogsArgs),
    /// Stop an allocation; the scheduler places a replacement if its job still wants one
    Stop {
        /// The allocation's id, or a unique prefix of it
        alloc_id: String,
        /// Return once the stop is written instead of following the evaluation
        #[arg(long)]
        detach: bool,
        /// Print full ids
        #[arg(long)]
        verbose: bool,
    },
    /// Restart an allocation's running tasks in place, on the same node
    Restart {
        /// The allocation's id, or a unique prefix of it
        alloc_id: String,
        /// Only this task (default: every running task)
        task: Option<String>,
    },
}

pub async fn run(
    client: &Client,
    cmd: AllocCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    match cmd {
        AllocCommand::Status { alloc_id, output } => status(client, &alloc_id, output, out).await,
        AllocCommand::Logs(args) => logs::run(client, args, out).await,
        AllocCommand::Stop {
            alloc_id,
            detach,
            verbose,
        } => lifecycle::stop(client, &alloc_id, detach, verbose, out).await,
        AllocCommand::Restart { alloc_id, task } => {
            lifecycle::restart(client, &alloc_id, task, out).await
        }
    }
}

async fn status(
    client: &Client,
    alloc_id: &str,
    output: OutputArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let alloc_id = resolve::id(client, Kind::Alloc, alloc_id).await?;
    let answer = client
        .operator()
        .alloc_get(pb::AllocGetRequest {
            query: None,
            alloc_id: alloc_id.clone(),
        })
        .await
        .map_err(rpc_failed(format_args!("querying allocation {alloc_id:?}")))?
        .into_inner();
    let alloc = answer
        .allocation
        .ok_or_else(|| CliError::IncompleteAnswer(format!("allocation for {alloc_id:?}")))?;
    let alloc = Allocation::try_from(alloc)?;
    if output.json {
        output::print_json(out, &alloc)?;
    } else {
        write!(
            out,
            "{}",
            alloc_details(&alloc, output.verbose, output::now())
        )?;
        write!(out, "{}", service_checks(client, &alloc).await)?;
    }
    Ok(Exit::OK)
}

/// The allocation's service checks as Nomad's `alloc status` prints them; nothing when
/// it has none (or the catalog cannot be read: the allocation's own status still shows).
async fn service_checks(client: &Client, alloc: &Allocation) -> String {
    let answer = client
        .services()
        .info(pb::ServiceInfoRequest {
            namespace: alloc.namespace.to_string(),
            alloc_id: alloc.id.to_string(),
            ..Default::default()
        })
        .await;
    let Ok(answer) = answer else {
        return String::new();
    };
    let instances: Vec<_> = answer
        .into_inner()
        .instances
        .into_iter()
        .filter_map(|r| drover_proto::convert::service_registration(r).ok())
        .collect();
    let table = crate::services::checks_table(&instances, None);
    if table.is_empty() {
        return table;
    }
    format!("\nNomad Service Checks\n{table}")
}

/// Allocations as job and node views list them, in the order given.
pub fn alloc_table(allocs: &[Allocation], verbose: bool, now: Timestamp) -> String {
    let mut table = Table::new([
        "ID",
        "Node ID",
        "Task Group",
        "Version",
        "Desired",
        "Status",
        "Created",
        "Modified",
    ]);
    for a in allocs {
        table.row([
            output::id(a.id, verbose),
            output::id(a.node_id, verbose),
            a.task_group.to_string(),
            a.job_version.to_string(),
            a.desired_status.as_str().to_string(),
            a.client_status.as_str().to_string(),
            output::ago(a.create_time, now),
            output::ago(a.modify_time, now),
        ]);
    }
    table.render()
}

pub fn alloc_details(a: &Allocation, verbose: bool, now: Timestamp) -> String {
    let describe = |status: &str, why: &str| {
        if why.is_empty() {
            status.to_string()
        } else {
            format!("{status} ({why})")
        }
    };
    let mut fields = vec![
        ("ID", output::id(a.id, verbose)),
        ("Eval ID", output::id(a.eval_id, verbose)),
        ("Name", a.name.to_string()),
        ("Node ID", output::id(a.node_id, verbose)),
        ("Job ID", a.job_id.to_string()),
        ("Namespace", a.namespace.to_string()),
        ("Job Version", a.job_version.to_string()),
        (
            "Client Status",
            describe(a.client_status.as_str(), &a.client_description),
        ),
        (
            "Desired Status",
            describe(a.desired_status.as_str(), &a.desired_description),
        ),
        ("Created", output::ago(a.create_time, now)),
        ("Modified", output::ago(a.modify_time, now)),
        (
            "Resources",
            format!(
                "{} MHz, {} MB memory, {} MB disk",
                a.resources.cpu_mhz, a.resources.memory_mb, a.resources.disk_mb
            ),
        ),
    ];
    // Live usage (tasks the agent samples from cgroups) against what was asked.
    if let Some(usage) = drover_core::SampledUsage::of_alloc(a) {
        fields.push(("Usage", usage.against(a.resources)));
    }
    if let Some(prev) = a.links.get().previous_allocation {
        fields.push(("Replaces", output::id(prev, verbose)));
    }
    if let Some(next) = a.links.get().next_allocation {
        fields.push(("Replaced By", output::id(next, verbose)));
    }
    if let Some(eval) = a.links.get().follow_up_eval_id {
        fields.push(("Follow-up Eval", output::id(eval, verbose)));
    }
    let mut text = key_values(&fields);
    if !a.ports.is_empty() {
        // Where each port is reached, and the port the task binds when it is mapped.
        text.push_str("\nAllocation Addresses\n");
        let mut table = Table::new(["Label", "Address", "Task Port"]);
        for p in &a.ports {
            table.row([
                p.label.to_string(),
                p.socket().to_string(),
                p.task_port().to_string(),
            ]);
        }
        text.push_str(&table.render());
    }
    if !a.state_history.is_empty() {
        text.push_str("\nStatus History\n");
        let mut table = Table::new(["Time", "Client Status"]);
        for entry in &a.state_history {
            table.row([
                output::time(entry.time),
                entry.client_status.as_str().to_string(),
            ]);
        }
        text.push_str(&table.render());
    }
    if let Some(tracker) = &a.links.get().reschedule_tracker
        && !tracker.events.is_empty()
    {
        text.push_str("\nReschedule Attempts\n");
        let mut table = Table::new(["Time", "Previous Alloc", "Previous Node", "Delay"]);
        for e in &tracker.events {
            table.row([
                output::time(e.time),
                output::id(e.prev_alloc_id, verbose),
                output::id(e.prev_node_id, verbose),
                output::duration(std::time::Duration::from_millis(e.delay_ms)),
            ]);
        }
        text.push_str(&table.render());
    }
    for (task, state) in &a.task_states {
        let run_state = format!("{:?}", state.state).to_lowercase();
        let usage = state.usage.map_or(String::new(), |u| {
            format!(", using {} MHz and {} MB", u.cpu_mhz, u.memory_mb)
        });
        let _ = writeln!(
            text,
            "\nTask {task:?} is {run_state:?} (restarts: {}, failed: {}{usage})",
            state.restarts, state.failed
        );
        let mut table = Table::new(["Time", "Type", "Description"]);
        for e in state.events.iter().rev() {
            let mut description = e.message().to_string();
            if let Some(code) = e.exit_code() {
                description = format!("{description} (exit code {code})")
                    .trim()
                    .to_string();
            }
            table.row([output::time(e.time()), e.kind().to_string(), description]);
        }
        text.push_str(&table.render());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{ClientStatus, NodeId, TaskEvent, TaskRunState, TaskState, mock};

    #[test]
    fn alloc_details_with_task_events_and_addresses() {
        let job = mock::service_job("web", 1);
        let mut a = mock::alloc(1, &job, NodeId::from_bytes([7; 16]), 0);
        a.id = drover_core::AllocId::from_bytes([1; 16]);
        a.eval_id = drover_core::EvalId::from_bytes([2; 16]);
        a.create_time = Timestamp::from_millis(1_700_000_000_000);
        a.modify_time = Timestamp::from_millis(1_700_000_060_000);
        a.record_client_status(
            ClientStatus::Running,
            Timestamp::from_millis(1_700_000_030_000),
        );
        a.ports = [("http", 21042, 0), ("admin", 8080, 80)]
            .into_iter()
            .map(|(label, value, to)| drover_core::AllocatedPort {
                label: label.into(),
                value,
                to,
                host_ip: "10.0.0.7".parse().expect("ip"),
            })
            .collect();
        a.task_states.insert(
            "server",
            TaskState {
                state: TaskRunState::Running,
                started_at: Some(Timestamp::from_millis(1_700_000_030_000)),
                events: vec![
                    TaskEvent::new(Timestamp::from_millis(1_700_000_010_000), "Received", ""),
                    TaskEvent::new(
                        Timestamp::from_millis(1_700_000_030_000),
                        "Started",
                        "task started",
                    ),
                ],
                usage: Some(drover_core::TaskUsage {
                    cpu_mhz: 42,
                    memory_mb: 17,
                }),
                ..TaskState::default()
            },
        );
        insta::assert_snapshot!(alloc_details(
            &a,
            false,
            Timestamp::from_millis(1_700_000_120_000)
        ));
    }
}
