//! `drover deployment list|status|promote|fail|pause|resume|unblock`, and the per-group
//! progress `job run` and `job status` print.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table, key_values};
use drover_core::types::{Deployment, DeploymentStatus};
use drover_proto::v1 as pb;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum DeploymentCommand {
    /// List deployments, newest first
    List {
        /// Only deployments of this job
        #[arg(long)]
        job: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one deployment and its groups' progress
    Status {
        /// The deployment's id or a unique prefix of it
        deployment_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Promote a deployment's canaries once they are healthy
    Promote {
        deployment_id: String,
        /// Only this group's canaries (repeatable); none: every group's
        #[arg(long = "group")]
        groups: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Mark a deployment failed (with auto_revert, the job goes back to its last stable version)
    Fail {
        deployment_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Pause a running deployment
    Pause {
        deployment_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Resume a paused deployment
    Resume {
        deployment_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Mark a running deployment successful as it is
    Unblock {
        deployment_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run(
    client: &Client,
    cmd: DeploymentCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let mut api = client.deployments();
    let (id, acted, output, verb) = match cmd {
        DeploymentCommand::List { job, output } => {
            let answer = api
                .list(pb::ListDeploymentsRequest {
                    query: None,
                    namespace: client.namespace().to_string(),
                    job_id: job.unwrap_or_default(),
                })
                .await
                .map_err(rpc_failed("listing deployments"))?
                .into_inner();
            let list = answer
                .deployments
                .into_iter()
                .map(Deployment::try_from)
                .collect::<Result<Vec<_>, _>>()?;
            if output.json {
                output::print_json(out, &list)?;
            } else {
                write!(out, "{}", table(&list, output.verbose))?;
            }
            return Ok(Exit::OK);
        }
        DeploymentCommand::Status {
            deployment_id,
            output,
        } => {
            let d = get(client, &deployment_id).await?;
            if output.json {
                output::print_json(out, &d)?;
            } else {
                write!(out, "{}", details(&d, output.verbose))?;
            }
            return Ok(Exit::OK);
        }
        DeploymentCommand::Promote {
            deployment_id,
            groups,
            output,
        } => {
            let call = api.promote(pb::PromoteDeploymentRequest {
                id: deployment_id.clone(),
                groups,
            });
            (deployment_id, call.await, output, "promoting")
        }
        DeploymentCommand::Fail {
            deployment_id,
            output,
        } => {
            let call = api.fail(by_id(&deployment_id));
            (deployment_id, call.await, output, "failing")
        }
        DeploymentCommand::Pause {
            deployment_id,
            output,
        } => {
            let call = api.pause(by_id(&deployment_id));
            (deployment_id, call.await, output, "pausing")
        }
        DeploymentCommand::Resume {
            deployment_id,
            output,
        } => {
            let call = api.resume(by_id(&deployment_id));
            (deployment_id, call.await, output, "resuming")
        }
        DeploymentCommand::Unblock {
            deployment_id,
            output,
        } => {
            let call = api.unblock(by_id(&deployment_id));
            (deployment_id, call.await, output, "unblocking")
        }
    };
    let answer = acted
        .map_err(rpc_failed(format_args!("{verb} deployment {id:?}")))?
        .into_inner();
    let d = Deployment::try_from(
        answer
            .deployment
            .ok_or_else(|| CliError::IncompleteAnswer(format!("deployment for {id:?}")))?,
    )?;
    if output.json {
        output::print_json(out, &d)?;
    } else {
        if !answer.eval_id.is_empty() {
            writeln!(
                out,
                "Evaluation {} follows",
                output::id(&answer.eval_id, output.verbose)
            )?;
        }
        write!(out, "{}", details(&d, output.verbose))?;
    }
    Ok(Exit::OK)
}

fn by_id(id: &str) -> pb::DeploymentIdRequest {
    pb::DeploymentIdRequest { id: id.to_string() }
}

/// One deployment by id or prefix.
pub async fn get(client: &Client, id: &str) -> Result<Deployment, CliError> {
    let answer = client
        .deployments()
        .get(pb::GetDeploymentRequest {
            query: None,
            id: id.to_string(),
        })
        .await
        .map_err(rpc_failed(format_args!("querying deployment {id:?}")))?
        .into_inner();
    let d = answer
        .deployment
        .ok_or_else(|| CliError::IncompleteAnswer(format!("deployment for {id:?}")))?;
    Ok(Deployment::try_from(d)?)
}

/// The newest deployment of a job, if it has one.
pub async fn latest(client: &Client, job_id: &str) -> Result<Option<Deployment>, CliError> {
    let answer = client
        .deployments()
        .list(pb::ListDeploymentsRequest {
            query: None,
            namespace: client.namespace().to_string(),
            job_id: job_id.to_string(),
        })
        .await
        .map_err(rpc_failed(format_args!(
            "listing deployments of {job_id:?}"
        )))?
        .into_inner();
    match answer.deployments.into_iter().next() {
        Some(d) => Ok(Some(Deployment::try_from(d)?)),
        None => Ok(None),
    }
}

pub fn table(list: &[Deployment], verbose: bool) -> String {
    if list.is_empty() {
        return "No deployments found\n".into();
    }
    let mut t = Table::new(["ID", "Job ID", "Job Version", "Status", "Description"]);
    for d in list {
        t.row([
            output::id(d.id, verbose),
            d.job_id.to_string(),
            d.job_version.to_string(),
            d.status.as_str().to_string(),
            d.description.clone(),
        ]);
    }
    t.render()
}

/// The deployment's header and its groups' progress, as Nomad's `deployment status`.
pub fn details(d: &Deployment, verbose: bool) -> String {
    let mut s = key_values(&[
        ("ID", output::id(d.id, verbose)),
        ("Job ID", d.job_id.to_string()),
        ("Job Version", d.job_version.to_string()),
        ("Status", d.status.as_str().to_string()),
        ("Description", d.description.clone()),
    ]);
    s.push_str("\nDeployed\n");
    s.push_str(&groups(d));
    s
}

/// Per-group progress: desired, canaries, placed, healthy, unhealthy, deadline.
pub fn groups(d: &Deployment) -> String {
    let canaries = d.groups.values().any(|g| g.desired_canaries > 0);
    let mut t = if canaries {
        Table::new([
            "Task Group",
            "Promoted",
            "Desired",
            "Canaries",
            "Placed",
            "Healthy",
            "Unhealthy",
            "Progress Deadline",
        ])
    } else {
        Table::new([
            "Task Group",
            "Desired",
            "Placed",
            "Healthy",
            "Unhealthy",
            "Progress Deadline",
        ])
    };
    for (name, g) in &d.groups {
        let deadline = g
            .require_progress_by
            .map_or_else(|| "-".to_string(), |t| t.to_string());
        let mut row = vec![name.clone()];
        if canaries {
            row.push(g.promoted.to_string());
        }
        row.push(g.desired_total.to_string());
        if canaries {
            row.push(g.desired_canaries.to_string());
        }
        row.extend([
            g.placed.to_string(),
            g.healthy.to_string(),
            g.unhealthy.to_string(),
            deadline,
        ]);
        t.row(row);
    }
    t.render()
}

/// Whether `d` has ended, and whether well.
pub fn finished(d: &Deployment) -> Option<bool> {
    match d.status {
        DeploymentStatus::Running | DeploymentStatus::Paused => None,
        DeploymentStatus::Successful => Some(true),
        DeploymentStatus::Failed | DeploymentStatus::Cancelled => Some(false),
    }
}

/// How often `job run` reads the deployment it follows.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Follows the deployment of `job_id`'s version `version` to its end, printing each
/// group's progress as it changes, as Nomad's `job run` does. A job without one (no
/// `update` block, or nothing changed) returns at once.
pub async fn follow(
    client: &Client,
    job_id: &str,
    version: u64,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let Some(first) = latest(client, job_id)
        .await?
        .filter(|d| d.job_version == version)
    else {
        return Ok(Exit::OK);
    };
    writeln!(
        out,
        "Monitoring deployment {} of job {job_id:?} version {version}",
        first.id.short()
    )?;
    let mut shown = String::new();
    loop {
        let d = get(client, &first.id.to_string()).await?;
        let progress = groups(&d);
        if progress != shown {
            write!(out, "{progress}")?;
            shown = progress;
        }
        if let Some(ok) = finished(&d) {
            writeln!(
                out,
                "Deployment {} {}: {}",
                d.id.short(),
                d.status.as_str(),
                d.description
            )?;
            return Ok(if ok {
                Exit::OK
            } else {
                Exit::DEPLOYMENT_FAILED
            });
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}
