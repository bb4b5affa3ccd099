//! `drover service list|info`: the service catalog, what the agents running allocations
//! registered and what their checks say.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{self, OutputArgs, Table};
use drover_core::{ServiceHealth, ServiceRegistration};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum ServiceCommand {
    /// List the services with running instances (`-namespace '*'` for every namespace)
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show where a service runs: address, port, allocation, node, tags and health
    Info {
        /// The service's name
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// One line of `service list -json`.
#[derive(Debug, Serialize)]
struct ServiceEntry {
    namespace: String,
    name: String,
    tags: Vec<String>,
    instances: u32,
    health: &'static str,
}

pub async fn run(
    client: &Client,
    cmd: ServiceCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    match cmd {
        ServiceCommand::List { output } => {
            let namespace = match client.named_namespace() {
                Some("*") => "*".to_owned(),
                _ => client.namespace().to_owned(),
            };
            let answer = client
                .services()
                .list(pb::ListServicesRequest {
                    namespace,
                    ..Default::default()
                })
                .await
                .map_err(rpc_failed("listing services"))?
                .into_inner();
            let entries = answer
                .services
                .into_iter()
                .map(|s| {
                    Ok(ServiceEntry {
                        health: ServiceHealth::from_wire("health", s.health)?.as_str(),
                        namespace: s.namespace,
                        name: s.name,
                        tags: s.tags,
                        instances: s.instances,
                    })
                })
                .collect::<Result<Vec<_>, CliError>>()?;
            if output.json {
                output::print_json(out, &entries)?;
            } else {
                write!(out, "{}", list_table(&entries))?;
            }
        }
        ServiceCommand::Info { name, output } => {
            let answer = client
                .services()
                .info(pb::ServiceInfoRequest {
                    namespace: client.namespace().to_owned(),
                    name: name.clone(),
                    ..Default::default()
                })
                .await
                .map_err(rpc_failed(format_args!("querying service {name:?}")))?
                .into_inner();
            let instances = answer
                .instances
                .into_iter()
                .map(drover_proto::convert::service_registration)
                .collect::<Result<Vec<_>, _>>()?;
            if output.json {
                output::print_json(out, &instances)?;
            } else if instances.is_empty() {
                writeln!(out, "No instances of service {name:?} found")?;
            } else {
                write!(out, "{}", info_table(&instances, output.verbose))?;
            }
        }
    }
    Ok(Exit::OK)
}

fn list_table(entries: &[ServiceEntry]) -> String {
    if entries.is_empty() {
        return "No services found\n".into();
    }
    let mut table = Table::new(["Service Name", "Namespace", "Instances", "Health", "Tags"]);
    for e in entries {
        table.row([
            e.name.clone(),
            e.namespace.clone(),
            e.instances.to_string(),
            e.health.to_owned(),
            format!("[{}]", e.tags.join(",")),
        ]);
    }
    table.render()
}

/// The checks of `instances` (service, task, check, status, the output's first line),
/// with each one's allocation when `alloc_ids` (full ids when verbose); empty when they
/// have none.
pub fn checks_table(instances: &[ServiceRegistration], alloc_ids: Option<bool>) -> String {
    if instances.iter().all(|r| r.checks.is_empty()) {
        return String::new();
    }
    let head = ["Service", "Task", "Check", "Status", "Output"];
    let mut table = match alloc_ids {
        Some(_) => Table::new(["Alloc ID", head[0], head[1], head[2], head[3], head[4]]),
        None => Table::new(head),
    };
    for r in instances {
        for c in &r.checks {
            let mut row = vec![
                r.service_name.clone(),
                r.task.clone().unwrap_or_else(|| "(group)".to_owned()),
                c.name.clone(),
                c.status.as_str().to_owned(),
                c.output.lines().next().unwrap_or_default().to_owned(),
            ];
            if let Some(verbose) = alloc_ids {
                row.insert(0, output::id(r.alloc_id, verbose));
            }
            table.row(row);
        }
    }
    table.render()
}

fn info_table(instances: &[ServiceRegistration], verbose: bool) -> String {
    let mut table = Table::new([
        "Address", "Port", "Alloc ID", "Node ID", "Job ID", "Tags", "Health",
    ]);
    for r in instances {
        table.row([
            r.address.map(|a| a.to_string()).unwrap_or_default(),
            r.port.to_string(),
            output::id(r.alloc_id, verbose),
            output::id(r.node_id, verbose),
            r.job_id.clone(),
            format!("[{}]", r.tags.join(",")),
            r.health.as_str().to_owned(),
        ]);
    }
    let mut text = table.render();
    let checks = checks_table(instances, Some(verbose));
    if !checks.is_empty() {
        text.push_str("\nChecks\n");
        text.push_str(&checks);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::{CheckState, CheckStatus, CheckType, mock};

    #[test]
    fn tables_show_each_service_and_instance() {
        let entries = [ServiceEntry {
            namespace: "default".into(),
            name: "db".into(),
            tags: vec!["primary".into()],
            instances: 2,
            health: "critical",
        }];
        insta::assert_snapshot!(list_table(&entries));
        assert_eq!(list_table(&[]), "No services found\n");
        let reg = ServiceRegistration {
            id: ServiceRegistration::make_id(mock::alloc_id(1), None, 0),
            service_name: "db".into(),
            namespace: "default".into(),
            job_id: "shop".into(),
            alloc_id: mock::alloc_id(1),
            node_id: mock::node_id(1),
            task: None,
            address: Some("127.0.0.1".parse().expect("ip")),
            port: 5432,
            tags: vec!["primary".into()],
            health: ServiceHealth::Passing,
            checks: Vec::new(),
            create_index: 7,
            modify_index: 9,
        };
        insta::assert_snapshot!(info_table(std::slice::from_ref(&reg), false));

        // With checks: each one's status and the first line of its output.
        let check = |name: &str, status: CheckStatus, output: &str| CheckState {
            name: name.into(),
            check_type: CheckType::Tcp,
            status,
            output: output.into(),
            http_status: None,
            time: drover_core::Timestamp(0),
        };
        let mut checked = reg.clone();
        checked.health = ServiceHealth::Critical;
        checked.checks = vec![
            check(
                "alive",
                CheckStatus::Critical,
                "tcp connect 127.0.0.1:5432: refused\nretrying",
            ),
            check("ready", CheckStatus::Pending, ""),
        ];
        let mut task = reg;
        task.id = ServiceRegistration::make_id(mock::alloc_id(1), Some("db"), 0);
        task.port = 5433;
        task.task = Some("db".into());
        task.checks = vec![check(
            "alive",
            CheckStatus::Passing,
            "tcp connect 127.0.0.1:5433: success",
        )];
        insta::assert_snapshot!(info_table(&[checked, task], false));
    }
}
