//! `drover eval list|status`, and the "why is this pending" report every command that
//! shows an evaluation prints (placement failure metrics per task group).

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table, key_values};
use crate::resolve::{self, Kind};
use drover_core::{AllocMetric, EvalStatus, Evaluation, TriggeredBy};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// List evaluations, newest first
    List {
        /// Only evaluations of this job
        #[arg(long)]
        job: Option<String>,
        /// Only evaluations with this status (pending, blocked, complete, failed, canceled)
        #[arg(long)]
        status: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 0)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one evaluation and why its placements failed
    Status {
        /// The evaluation's full id
        eval_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run(client: &Client, cmd: EvalCommand, out: &mut dyn Write) -> Result<Exit, CliError> {
    match cmd {
        EvalCommand::List {
            job,
            status,
            limit,
            output,
        } => {
            let status = match status.as_deref() {
                None => 0,
                Some(s) => EvalStatus::parse(s)
                    .ok_or_else(|| {
                        CliError::Usage(format!(
                            "unknown eval status {s:?} (pending, blocked, complete, failed, canceled)"
                        ))
                    })?
                    .to_wire(),
            };
            let answer = drover_proto::paging::eval_list_all(
                &client.evals(),
                pb::ListEvalsRequest {
                    status,
                    // The server reads a namespace only with a job.
                    namespace: if job.is_some() {
                        client.namespace().to_string()
                    } else {
                        String::new()
                    },
                    job_id: job.unwrap_or_default(),
                    limit,
                    ..Default::default()
                },
            )
            .await
            .map_err(rpc_failed("listing evaluations"))?;
            let evals = answer
                .evaluations
                .into_iter()
                .map(Evaluation::try_from)
                .collect::<Result<Vec<_>, _>>()?;
            if output.json {
                output::print_json(out, &evals)?;
            } else {
                // A paused broker is why nothing leaves `pending`: say so above the list.
                if crate::operator::get_config(client).await?.pause_eval_broker {
                    writeln!(
                        out,
                        "eval broker paused: no evaluation is scheduled until \
                         `drover operator scheduler set-config -pause-eval-broker false`"
                    )?;
                }
                write!(out, "{}", eval_table(&evals, output.verbose))?;
            }
        }
        EvalCommand::Status { eval_id, output } => {
            let eval_id = resolve::id(client, Kind::Eval, &eval_id).await?;
            let eval = get(client, &eval_id).await?;
            if output.json {
                output::print_json(out, &eval)?;
            } else {
                write!(out, "{}", eval_details(&eval, output.verbose))?;
            }
        }
    }
    Ok(Exit::OK)
}

/// One evaluation by id.
pub async fn get(client: &Client, eval_id: &str) -> Result<Evaluation, CliError> {
    let answer = client
        .evals()
        .get(pb::GetEvalRequest {
            query: None,
            eval_id: eval_id.to_string(),
        })
        .await
        .map_err(rpc_failed(format_args!("querying evaluation {eval_id:?}")))?
        .into_inner();
    let eval = answer
        .evaluation
        .ok_or_else(|| CliError::IncompleteAnswer(format!("evaluation for {eval_id:?}")))?;
    Ok(Evaluation::try_from(eval)?)
}

pub fn eval_table(evals: &[Evaluation], verbose: bool) -> String {
    if evals.is_empty() {
        return "No evaluations found\n".into();
    }
    let mut table = Table::new([
        "ID",
        "Priority",
        "Triggered By",
        "Job ID",
        "Node ID",
        "Status",
        "Placement Failures",
    ]);
    for e in evals {
        table.row([
            output::id(e.id, verbose),
            e.priority.to_string(),
            e.triggered_by.to_string(),
            e.job_id.to_string(),
            e.node_id
                .map(|n| output::id(n, verbose))
                .unwrap_or_default(),
            e.status.to_string(),
            (!e.failed_tg_allocs.is_empty()).to_string(),
        ]);
    }
    table.render()
}

pub fn eval_details(e: &Evaluation, verbose: bool) -> String {
    let mut fields = vec![
        ("ID", output::id(e.id, verbose)),
        ("Create Time", output::time(e.create_time)),
        ("Modify Time", output::time(e.modify_time)),
        ("Status", e.status.to_string()),
        ("Status Description", or_none(&e.status_description)),
        ("Type", e.scheduler.to_string()),
        ("TriggeredBy", e.triggered_by.to_string()),
        ("Job ID", e.job_id.to_string()),
        ("Namespace", e.namespace.to_string()),
        ("Priority", e.priority.to_string()),
        (
            "Placement Failures",
            (!e.failed_tg_allocs.is_empty()).to_string(),
        ),
    ];
    if let Some(node) = e.node_id {
        fields.push(("Node ID", output::id(node, verbose)));
    }
    if let Some(prev) = e.previous_eval {
        fields.push(("Previous Eval", output::id(prev, verbose)));
    }
    if let Some(next) = e.next_eval {
        fields.push(("Next Eval", output::id(next, verbose)));
    }
    if let Some(blocked) = e.blocked_eval {
        fields.push(("Blocked Eval", output::id(blocked, verbose)));
    }
    let mut text = key_values(&fields);
    if !e.queued_allocations.is_empty() {
        text.push_str("\nQueued Allocations\n");
        let mut table = Table::new(["Task Group", "Queued"]);
        for (group, n) in &e.queued_allocations {
            table.row([group.clone(), n.to_string()]);
        }
        text.push_str(&table.render());
    }
    if !e.failed_tg_allocs.is_empty() {
        text.push_str("\nFailed Placements\n");
        text.push_str(&placement_failures(&e.failed_tg_allocs));
        if let Some(blocked) = e.blocked_eval {
            let _ = writeln!(
                text,
                "Evaluation {:?} waiting for additional capacity to place remainder",
                output::id(blocked, verbose)
            );
        }
    }
    text
}

fn or_none(text: &str) -> String {
    if text.is_empty() {
        "<none>".into()
    } else {
        text.to_string()
    }
}

/// Why each group's placements failed, as Nomad words it: which datacenter had no nodes,
/// which class and constraint filtered how many nodes, which resource ran out where.
pub fn placement_failures(failures: &BTreeMap<String, AllocMetric>) -> String {
    let mut text = String::new();
    for (group, m) in failures {
        // Every recorded group had at least one failure, whatever an older server sent.
        let n = m.coalesced_failures.max(1);
        let plural = if n == 1 { "allocation" } else { "allocations" };
        let _ = writeln!(text, "Task Group {group:?} (failed to place {n} {plural}):");
        let mut reasons = Vec::new();
        if m.nodes_evaluated == 0 {
            reasons.push("No nodes were eligible for evaluation".to_string());
        }
        for (dc, available) in &m.nodes_available {
            if *available == 0 {
                reasons.push(format!("No nodes are available in datacenter {dc:?}"));
            }
        }
        for (class, filtered) in &m.class_filtered {
            reasons.push(format!(
                "Class {class:?}: {filtered} nodes excluded by filter"
            ));
        }
        for (constraint, filtered) in &m.constraint_filtered {
            reasons.push(
                match drover_core::scheduler::feasible::missing_driver(constraint) {
                    Some(driver) => format!("Missing driver {driver} on {filtered} nodes"),
                    None => {
                        format!("Constraint {constraint:?}: {filtered} nodes excluded by filter")
                    }
                },
            );
        }
        if m.nodes_exhausted > 0 {
            reasons.push(format!(
                "Resources exhausted on {} nodes",
                m.nodes_exhausted
            ));
        }
        for (class, exhausted) in &m.class_exhausted {
            reasons.push(format!("Class {class:?} exhausted on {exhausted} nodes"));
        }
        for (dimension, exhausted) in &m.dimension_exhausted {
            reasons.push(format!(
                "Dimension {:?} exhausted on {exhausted} nodes",
                dimension.as_str()
            ));
        }
        for (shortage, nodes) in &m.ports_exhausted {
            let plural = if *nodes == 1 { "node" } else { "nodes" };
            reasons.push(format!("{shortage} on {nodes} {plural}"));
        }
        if reasons.is_empty() {
            reasons.push(format!(
                "{} nodes evaluated, {} filtered",
                m.nodes_evaluated, m.nodes_filtered
            ));
        }
        for reason in reasons {
            let _ = writeln!(text, "  * {reason}");
        }
    }
    text
}

/// What an evaluation was created for: a node's change, or its job.
pub fn trigger_line(e: &Evaluation, verbose: bool) -> String {
    match (e.triggered_by, e.node_id) {
        (TriggeredBy::NodeUpdate | TriggeredBy::NodeDrain, Some(node)) => {
            format!(
                "Evaluation triggered by node {:?}",
                output::id(node, verbose)
            )
        }
        _ => format!("Evaluation triggered by job {:?}", e.job_id.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{Dimension, EvalId, Job, JobType, Timestamp};

    fn eval(n: u8, status: EvalStatus) -> Evaluation {
        let job = Job::new("web", JobType::Service, Vec::new());
        let mut e = Evaluation::new(
            EvalId::from_bytes([n; 16]),
            &job,
            TriggeredBy::JobRegister,
            Timestamp::from_millis(1_700_000_000_000),
        );
        e.status = status;
        e
    }

    fn failed_metric() -> AllocMetric {
        AllocMetric {
            nodes_evaluated: 3,
            nodes_filtered: 2,
            nodes_available: [("dc1".to_string(), 3)].into(),
            constraint_filtered: [
                ("${attr.kernel.name} = windows".to_string(), 2),
                ("missing driver raw_exec".to_string(), 5),
            ]
            .into(),
            nodes_exhausted: 5,
            dimension_exhausted: [(Dimension::Memory, 1)].into(),
            ports_exhausted: [
                (drover_core::PortShortage::Taken(8080), 3),
                (drover_core::PortShortage::DynamicExhausted, 1),
            ]
            .into(),
            coalesced_failures: 2,
            ..AllocMetric::default()
        }
    }

    #[test]
    fn eval_list_table() {
        let mut blocked = eval(2, EvalStatus::Blocked);
        blocked
            .failed_tg_allocs
            .insert("api".into(), failed_metric());
        insta::assert_snapshot!(eval_table(&[eval(1, EvalStatus::Complete), blocked], false));
    }

    #[test]
    fn eval_details_with_failures() {
        let mut e = eval(3, EvalStatus::Complete);
        e.failed_tg_allocs.insert("api".into(), failed_metric());
        e.queued_allocations.insert("api".into(), 2);
        e.blocked_eval = Some(EvalId::from_bytes([4; 16]));
        insta::assert_snapshot!(eval_details(&e, false));
    }

    #[test]
    fn no_nodes_at_all() {
        let failures = [("cache".to_string(), AllocMetric::default())].into();
        insta::assert_snapshot!(placement_failures(&failures), @r#"
        Task Group "cache" (failed to place 1 allocation):
          * No nodes were eligible for evaluation
        "#);
    }
}
