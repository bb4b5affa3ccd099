//! A job's services and checks as Nomad's `api.Service` and `api.ServiceCheck` write them
//! (provider always `nomad`); `ExpectedStatus` is drover's own. And the catalog's
//! registrations as `api.ServiceRegistration` (drover adds `Health`).

use super::ns;
use drover_core::types::{CheckKind, CheckRestart, Service, ServiceCheck};
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadService {
    pub name: String,
    pub port_label: String,
    pub tags: Vec<String>,
    pub meta: BTreeMap<String, String>,
    pub address_mode: &'static str,
    pub provider: &'static str,
    pub checks: Vec<NomadCheck>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadCheck {
    pub name: String,
    #[serde(rename = "Type")]
    pub kind: &'static str,
    pub path: String,
    pub method: String,
    pub header: BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_status: Option<u16>,
    pub command: String,
    pub args: Vec<String>,
    pub task_name: String,
    pub interval: u64,
    pub timeout: u64,
    pub on_update: &'static str,
    pub check_restart: Option<NomadCheckRestart>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadCheckRestart {
    pub limit: u32,
    pub grace: u64,
    pub ignore_warnings: bool,
}

pub fn services(list: &[Service]) -> Vec<NomadService> {
    list.iter().map(service).collect()
}

fn service(s: &Service) -> NomadService {
    NomadService {
        name: s.name.clone(),
        port_label: s.port_label.clone(),
        tags: s.tags.clone(),
        meta: s.meta.clone(),
        address_mode: s.address_mode.as_str(),
        provider: "nomad",
        checks: s.checks.iter().map(check).collect(),
    }
}

fn check(c: &ServiceCheck) -> NomadCheck {
    let mut out = NomadCheck {
        name: c.name.clone(),
        kind: c.kind.type_name(),
        path: String::new(),
        method: String::new(),
        header: BTreeMap::new(),
        expected_status: None,
        command: String::new(),
        args: Vec::new(),
        task_name: c.task.clone().unwrap_or_default(),
        interval: ns(c.interval),
        timeout: ns(c.timeout),
        on_update: c.on_update.as_str(),
        check_restart: c.check_restart.as_ref().map(check_restart),
    };
    match &c.kind {
        CheckKind::Http {
            path,
            method,
            headers,
            expected_status,
        } => {
            out.path = path.clone();
            out.method = method.clone();
            out.header = headers.clone();
            out.expected_status = *expected_status;
        }
        CheckKind::Tcp => {}
        CheckKind::Script { command, args } => {
            out.command = command.clone();
            out.args = args.clone();
        }
    }
    out
}

fn check_restart(r: &CheckRestart) -> NomadCheckRestart {
    NomadCheckRestart {
        limit: r.limit,
        grace: ns(r.grace),
        ignore_warnings: r.ignore_warnings,
    }
}

/// One instance of a service, as Nomad's `/v1/service/:name` lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NomadServiceRegistration {
    #[serde(rename = "ID")]
    pub id: String,
    pub service_name: String,
    pub namespace: String,
    #[serde(rename = "NodeID")]
    pub node_id: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    #[serde(rename = "AllocID")]
    pub alloc_id: String,
    pub tags: Vec<String>,
    pub address: String,
    pub port: u32,
    /// drover: what the checks say (passing, warning, critical).
    pub health: &'static str,
    pub create_index: u64,
    pub modify_index: u64,
}

impl From<&pb::ServiceRegistration> for NomadServiceRegistration {
    fn from(r: &pb::ServiceRegistration) -> Self {
        let health = match pb::ServiceHealth::try_from(r.health) {
            Ok(pb::ServiceHealth::Passing) => "passing",
            Ok(pb::ServiceHealth::Warning) => "warning",
            Ok(pb::ServiceHealth::Critical) => "critical",
            _ => "",
        };
        Self {
            id: r.id.clone(),
            service_name: r.service_name.clone(),
            namespace: r.namespace.clone(),
            node_id: r.node_id.clone(),
            job_id: r.job_id.clone(),
            alloc_id: r.alloc_id.clone(),
            tags: r.tags.clone(),
            address: r.address.clone(),
            port: r.port,
            health,
            create_index: r.create_index,
            modify_index: r.modify_index,
        }
    }
}
