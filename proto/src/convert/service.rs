//! Services and checks as jobs declare them, and the catalog's registrations.

use super::{ConvertError, Problem, Result, Within, each, parse_id};
use crate::WireEnum;
use crate::v1 as pb;
use drover_core::*;
use std::time::Duration;

fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

// --- Core → proto ---------------------------------------------------------------------------

impl From<&Service> for pb::Service {
    fn from(s: &Service) -> Self {
        pb::Service {
            name: s.name.clone(),
            port_label: s.port_label.clone(),
            tags: s.tags.clone(),
            meta: s.meta.clone(),
            address_mode: s.address_mode.as_str().into(),
            checks: s.checks.iter().map(Into::into).collect(),
        }
    }
}

impl From<&ServiceCheck> for pb::ServiceCheck {
    fn from(c: &ServiceCheck) -> Self {
        use pb::service_check::Kind;
        let kind = match &c.kind {
            CheckKind::Http {
                path,
                method,
                headers,
                expected_status,
            } => Kind::Http(pb::HttpCheck {
                path: path.clone(),
                method: method.clone(),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.clone(), pb::HeaderValues { values: v.clone() }))
                    .collect(),
                expected_status: expected_status.map(u32::from),
            }),
            CheckKind::Tcp => Kind::Tcp(true),
            CheckKind::Script { command, args } => Kind::Script(pb::ScriptCheck {
                command: command.clone(),
                args: args.clone(),
            }),
        };
        pb::ServiceCheck {
            name: c.name.clone(),
            kind: Some(kind),
            interval_ms: to_ms(c.interval),
            timeout_ms: to_ms(c.timeout),
            on_update: c.on_update.as_str().into(),
            check_restart: c.check_restart.map(|r| pb::CheckRestart {
                limit: r.limit,
                grace_ms: to_ms(r.grace),
                ignore_warnings: r.ignore_warnings,
            }),
            task: c.task.clone(),
        }
    }
}

impl From<&ServiceRegistration> for pb::ServiceRegistration {
    fn from(r: &ServiceRegistration) -> Self {
        pb::ServiceRegistration {
            id: r.id.clone(),
            service_name: r.service_name.clone(),
            namespace: r.namespace.clone(),
            job_id: r.job_id.clone(),
            alloc_id: r.alloc_id.to_string(),
            node_id: r.node_id.to_string(),
            task: r.task.clone().unwrap_or_default(),
            address: r.address.map(|a| a.to_string()).unwrap_or_default(),
            port: r.port.into(),
            tags: r.tags.clone(),
            health: r.health.to_wire(),
            create_index: r.create_index,
            modify_index: r.modify_index,
            checks: r.checks.iter().map(Into::into).collect(),
        }
    }
}

impl From<&CheckState> for pb::CheckState {
    fn from(c: &CheckState) -> Self {
        pb::CheckState {
            name: c.name.clone(),
            check_type: c.check_type.as_str().into(),
            status: c.status.to_wire(),
            output: c.output.clone(),
            http_status: c.http_status.map(u32::from),
            time_ms: c.time.as_millis(),
            on_update: String::new(),
        }
    }
}

// --- Proto → core ---------------------------------------------------------------------------

pub(crate) fn services(field: &str, list: Vec<pb::Service>) -> Result<Vec<Service>> {
    each(field, list, service)
}

fn service(p: pb::Service) -> Result<Service> {
    let address_mode = if p.address_mode.is_empty() {
        AddressMode::Auto
    } else {
        AddressMode::parse(&p.address_mode).ok_or_else(|| {
            ConvertError::new("address_mode", Problem::Invalid("not auto, host or alloc"))
        })?
    };
    Ok(Service {
        name: p.name,
        port_label: p.port_label,
        tags: p.tags,
        meta: p.meta,
        address_mode,
        checks: each("checks", p.checks, check)?,
    })
}

fn check(p: pb::ServiceCheck) -> Result<ServiceCheck> {
    use pb::service_check::Kind;
    let kind = match p.kind {
        Some(Kind::Http(h)) => CheckKind::Http {
            path: h.path,
            method: if h.method.is_empty() {
                "GET".into()
            } else {
                h.method
            },
            headers: h.headers.into_iter().map(|(k, v)| (k, v.values)).collect(),
            expected_status: h
                .expected_status
                .map(|s| {
                    u16::try_from(s).map_err(|_| {
                        ConvertError::new("expected_status", Problem::Invalid("not an http status"))
                    })
                })
                .transpose()
                .within("http")?,
        },
        Some(Kind::Tcp(_)) => CheckKind::Tcp,
        Some(Kind::Script(s)) => CheckKind::Script {
            command: s.command,
            args: s.args,
        },
        None => return Err(ConvertError::new("kind", Problem::Missing)),
    };
    let on_update = if p.on_update.is_empty() {
        OnUpdate::RequireHealthy
    } else {
        OnUpdate::parse(&p.on_update).ok_or_else(|| {
            ConvertError::new(
                "on_update",
                Problem::Invalid("not require_healthy, ignore_warnings or ignore"),
            )
        })?
    };
    Ok(ServiceCheck {
        name: p.name,
        kind,
        interval: Duration::from_millis(p.interval_ms),
        timeout: Duration::from_millis(p.timeout_ms),
        on_update,
        check_restart: p.check_restart.map(|r| CheckRestart {
            limit: r.limit,
            grace: Duration::from_millis(r.grace_ms),
            ignore_warnings: r.ignore_warnings,
        }),
        task: p.task,
    })
}

/// A registration as an agent reports it or a server answers it.
pub fn service_registration(p: pb::ServiceRegistration) -> Result<ServiceRegistration> {
    let address = if p.address.is_empty() {
        None
    } else {
        Some(
            p.address
                .parse()
                .map_err(|_| ConvertError::new("address", Problem::Invalid("not an IP address")))?,
        )
    };
    Ok(ServiceRegistration {
        id: p.id,
        service_name: p.service_name,
        namespace: p.namespace,
        job_id: p.job_id,
        alloc_id: parse_id("alloc_id", &p.alloc_id)?,
        node_id: parse_id("node_id", &p.node_id)?,
        task: Some(p.task).filter(|t| !t.is_empty()),
        address,
        port: u16::try_from(p.port)
            .map_err(|_| ConvertError::new("port", Problem::Invalid("not a port (0-65535)")))?,
        tags: p.tags,
        health: ServiceHealth::from_wire("health", p.health)?,
        checks: each("checks", p.checks, check_state)?,
        create_index: p.create_index,
        modify_index: p.modify_index,
    })
}

fn check_state(p: pb::CheckState) -> Result<CheckState> {
    Ok(CheckState {
        check_type: CheckType::parse(&p.check_type).ok_or_else(|| {
            ConvertError::new("check_type", Problem::Invalid("not http, tcp or script"))
        })?,
        status: CheckStatus::from_wire("status", p.status)?,
        http_status: p
            .http_status
            .map(|s| {
                u16::try_from(s).map_err(|_| {
                    ConvertError::new("http_status", Problem::Invalid("not an http status"))
                })
            })
            .transpose()?,
        time: Timestamp::from_millis(p.time_ms),
        name: p.name,
        output: p.output,
    })
}
