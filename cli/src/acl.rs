//! `drover acl ...`: bootstrap, tokens and policies.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use crate::output::{OutputArgs, Table, key_values, print_json};
use drover_proto::v1 as pb;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum AclCommand {
    /// Create the cluster's first management token (once per cluster)
    Bootstrap {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create, list, inspect and delete tokens
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Apply, list, inspect and delete policies
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is printed once
    Create {
        /// A name for people
        #[arg(long, default_value = "")]
        name: String,
        /// `client` (what its policies grant) or `management` (anything)
        #[arg(long = "type", default_value = "client")]
        kind: String,
        /// A policy the token holds; repeat for several
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// How long the token lives (`24h`, `30d`); forever when absent
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<Duration>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// List every token (without secrets)
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one token
    Info {
        accessor_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a token: it stops working at once
    Delete { accessor_id: String },
    /// Show the token this command runs with, and what it may do
    #[command(name = "self")]
    Myself {
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Create or replace a policy from an HCL rules file (`-` reads standard input)
    Apply {
        name: String,
        file: PathBuf,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List every policy
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one policy and its rules
    Info {
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a policy; tokens that name it lose what it granted
    Delete { name: String },
}

fn write(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    writeln!(out, "{text}").map_err(CliError::Output)
}

fn time_text(ms: u64) -> String {
    if ms == 0 {
        return "never".into();
    }
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| ms.to_string())
}

fn token_text(t: &pb::AclToken) -> String {
    let mut pairs = vec![("Accessor ID", t.accessor_id.clone())];
    if !t.secret_id.is_empty() {
        pairs.push(("Secret ID", t.secret_id.clone()));
    }
    pairs.extend([
        ("Name", t.name.clone()),
        ("Type", t.r#type.clone()),
        ("Policies", t.policies.join(", ")),
        ("Create Time", time_text(t.create_time_ms)),
        ("Expiry Time", time_text(t.expiry_time_ms)),
        ("Create Index", t.create_index.to_string()),
        ("Modify Index", t.modify_index.to_string()),
    ]);
    key_values(&pairs)
}

fn show_token(out: &mut dyn Write, t: Option<pb::AclToken>, json: bool) -> Result<(), CliError> {
    let t = t.ok_or_else(|| CliError::IncompleteAnswer("token".into()))?;
    if json {
        return print_json(out, &token_json(&t));
    }
    write(out, &token_text(&t))
}

fn token_json(t: &pb::AclToken) -> serde_json::Value {
    serde_json::json!({
        "accessor_id": t.accessor_id,
        "secret_id": (!t.secret_id.is_empty()).then_some(&t.secret_id),
        "name": t.name,
        "type": t.r#type,
        "policies": t.policies,
        "create_time_ms": t.create_time_ms,
        "expiry_time_ms": (t.expiry_time_ms > 0).then_some(t.expiry_time_ms),
        "create_index": t.create_index,
        "modify_index": t.modify_index,
    })
}

pub async fn run(client: &Client, cmd: AclCommand, out: &mut dyn Write) -> Result<Exit, CliError> {
    let acl = client.acl();
    match cmd {
        AclCommand::Bootstrap { output } => {
            let r = acl
                .clone()
                .bootstrap(pb::AclBootstrapRequest {})
                .await
                .map_err(rpc_failed("bootstrapping acl"))?
                .into_inner();
            show_token(out, r.token, output.json)?;
        }
        AclCommand::Token { command } => token(client, command, out).await?,
        AclCommand::Policy { command } => policy(client, command, out).await?,
    }
    Ok(Exit::OK)
}

async fn token(client: &Client, cmd: TokenCommand, out: &mut dyn Write) -> Result<(), CliError> {
    let mut acl = client.acl();
    match cmd {
        TokenCommand::Create {
            name,
            kind,
            policies,
            ttl,
            output,
        } => {
            let r = acl
                .token_create(pb::AclTokenCreateRequest {
                    name,
                    r#type: kind,
                    policies,
                    ttl_ms: ttl.map_or(0, |t| t.as_millis().min(u64::MAX as u128) as u64),
                })
                .await
                .map_err(rpc_failed("creating a token"))?
                .into_inner();
            show_token(out, r.token, output.json)
        }
        TokenCommand::List { output } => {
            let r = acl
                .token_list(pb::AclTokenListRequest::default())
                .await
                .map_err(rpc_failed("listing tokens"))?
                .into_inner();
            if output.json {
                let all: Vec<_> = r.tokens.iter().map(token_json).collect();
                return print_json(out, &all);
            }
            let mut table = Table::new(["Accessor ID", "Name", "Type", "Policies", "Expires"]);
            for t in &r.tokens {
                let id = if output.verbose {
                    t.accessor_id.clone()
                } else {
                    t.accessor_id.chars().take(8).collect()
                };
                table.row([
                    id,
                    t.name.clone(),
                    t.r#type.clone(),
                    t.policies.join(","),
                    time_text(t.expiry_time_ms),
                ]);
            }
            write(out, &table.render())
        }
        TokenCommand::Info {
            accessor_id,
            output,
        } => {
            let accessor_id = full_accessor(client, &accessor_id).await?;
            let r = acl
                .token_get(pb::AclTokenGetRequest { accessor_id })
                .await
                .map_err(rpc_failed("reading the token"))?
                .into_inner();
            show_token(out, r.token, output.json)
        }
        TokenCommand::Delete { accessor_id } => {
            let accessor_id = full_accessor(client, &accessor_id).await?;
            acl.token_delete(pb::AclTokenDeleteRequest {
                accessor_id: accessor_id.clone(),
            })
            .await
            .map_err(rpc_failed(format_args!("deleting token {accessor_id}")))?;
            write(out, &format!("Token {accessor_id} deleted"))
        }
        TokenCommand::Myself { output } => {
            let r = acl
                .token_self(pb::AclTokenSelfRequest {
                    namespace: client.namespace().to_string(),
                })
                .await
                .map_err(rpc_failed("reading this token"))?
                .into_inner();
            if output.json {
                return print_json(
                    out,
                    &serde_json::json!({
                        "acl_enabled": r.acl_enabled,
                        "token": r.token.as_ref().map(token_json),
                        "management": r.management,
                        "namespace": client.namespace(),
                        "namespace_capabilities": r.namespace_capabilities,
                        "node": r.node,
                        "operator": r.operator,
                        "agent": r.agent,
                    }),
                );
            }
            if !r.acl_enabled {
                return write(
                    out,
                    "ACLs are disabled on this cluster: every call is allowed",
                );
            }
            if let Some(t) = &r.token {
                write(out, &token_text(t))?;
            }
            let none = |s: &str| {
                if s.is_empty() {
                    "none".to_string()
                } else {
                    s.to_string()
                }
            };
            let caps = if r.namespace_capabilities.is_empty() {
                "none".to_string()
            } else {
                r.namespace_capabilities.join(", ")
            };
            write(
                out,
                &key_values(&[
                    ("Namespace", client.namespace().to_string()),
                    ("Capabilities", caps),
                    ("Node", none(&r.node)),
                    ("Operator", none(&r.operator)),
                    ("Agent", none(&r.agent)),
                ]),
            )
        }
    }
}

/// A full accessor id from a unique prefix of one (as lists print them).
async fn full_accessor(client: &Client, given: &str) -> Result<String, CliError> {
    if given.len() == 36 {
        return Ok(given.to_string());
    }
    let tokens = client
        .acl()
        .token_list(pb::AclTokenListRequest::default())
        .await
        .map_err(rpc_failed("listing tokens"))?
        .into_inner()
        .tokens;
    let matches: Vec<_> = tokens
        .iter()
        .filter(|t| !given.is_empty() && t.accessor_id.starts_with(given))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.accessor_id.clone()),
        [] => Err(CliError::Usage(format!(
            "no token's accessor id starts with {given:?}"
        ))),
        many => Err(CliError::Usage(format!(
            "accessor id prefix {given:?} is ambiguous: {}",
            many.iter()
                .map(|t| t.accessor_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

async fn policy(client: &Client, cmd: PolicyCommand, out: &mut dyn Write) -> Result<(), CliError> {
    let mut acl = client.acl();
    match cmd {
        PolicyCommand::Apply {
            name,
            file,
            description,
        } => {
            let rules = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(&file)
            }
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?;
            acl.policy_apply(pb::AclPolicyApplyRequest {
                name: name.clone(),
                description,
                rules,
            })
            .await
            .map_err(rpc_failed(format_args!("applying policy {name:?}")))?;
            write(out, &format!("Policy {name:?} applied"))
        }
        PolicyCommand::List { output } => {
            let r = acl
                .policy_list(pb::AclPolicyListRequest::default())
                .await
                .map_err(rpc_failed("listing policies"))?
                .into_inner();
            if output.json {
                let all: Vec<_> = r
                    .policies
                    .iter()
                    .map(|p| serde_json::json!({"name": p.name, "description": p.description, "modify_index": p.modify_index}))
                    .collect();
                return print_json(out, &all);
            }
            let mut table = Table::new(["Name", "Description"]);
            for p in &r.policies {
                table.row([p.name.clone(), p.description.clone()]);
            }
            write(out, &table.render())
        }
        PolicyCommand::Info { name, output } => {
            let r = acl
                .policy_get(pb::AclPolicyGetRequest { name: name.clone() })
                .await
                .map_err(rpc_failed(format_args!("reading policy {name:?}")))?
                .into_inner();
            let p = r
                .policy
                .ok_or_else(|| CliError::IncompleteAnswer(format!("policy {name:?}")))?;
            if output.json {
                return print_json(
                    out,
                    &serde_json::json!({"name": p.name, "description": p.description, "rules": p.rules,
                        "create_index": p.create_index, "modify_index": p.modify_index}),
                );
            }
            write(
                out,
                &key_values(&[
                    ("Name", p.name.clone()),
                    ("Description", p.description.clone()),
                    ("Create Index", p.create_index.to_string()),
                    ("Modify Index", p.modify_index.to_string()),
                ]),
            )?;
            write(out, &format!("\nRules\n{}", p.rules.trim_end()))
        }
        PolicyCommand::Delete { name } => {
            acl.policy_delete(pb::AclPolicyDeleteRequest { name: name.clone() })
                .await
                .map_err(rpc_failed(format_args!("deleting policy {name:?}")))?;
            write(out, &format!("Policy {name:?} deleted"))
        }
    }
}
