//! The checks of `service` blocks and their checks: a name that is a DNS label once
//! interpolated (names are what `nomadService` and DNS-style lookups take), a port that is
//! a label of the group's network, checks that run at least a second apart and give up
//! before the next run, http paths that are paths, script checks with a command and a task
//! to run in.

use super::{MapKind, Report, fmt_duration, show};
use crate::types::{
    AddressMode, CheckKind, GroupNetwork, Job, MIN_CHECK_INTERVAL, Service, ServiceCheck,
    TaskGroup, is_dns_label,
};

/// The services of group `g` (at `p`) and of its task `task` (at `task_path`) when given.
pub(super) fn check_services(
    r: &mut Report<'_>,
    job: &Job,
    p: &str,
    g: &TaskGroup,
    task: Option<(&str, &str)>,
    services: &[Service],
) {
    let owner = task.map_or(p, |(path, _)| path);
    r.entries(owner, "services", services.len());
    for (i, s) in services.iter().take(r.limits.max_entries).enumerate() {
        let at = format!("{owner}.services[{i}]");
        check_service(r, job, g, task.map(|(_, name)| name), &at, s);
    }
}

fn check_service(
    r: &mut Report<'_>,
    job: &Job,
    g: &TaskGroup,
    task: Option<&str>,
    at: &str,
    s: &Service,
) {
    if r.text(at, "name", "service name", &s.name, r.limits.max_name_len) {
        let none = Default::default();
        let task_meta = task
            .and_then(|t| g.tasks.iter().find(|x| x.name == t))
            .map_or(&none, |t| &t.meta);
        let meta = crate::types::MetaLayers([&job.meta, &g.meta, task_meta]);
        let name = s.resolved_name(&job.name, &g.name, task, meta);
        let unset = name
            .split_once("${NOMAD_META_")
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(key, _)| key);
        if let Some(key) = unset {
            r.err(
                at,
                "name",
                format!(
                    "service name {} reads meta key {} that neither the job, the group nor the task sets",
                    show(&s.name),
                    show(key)
                ),
            );
        } else if !is_dns_label(&name) {
            r.err(
                at,
                "name",
                format!(
                    "service name {} is not a valid DNS label: 1 to 63 letters, digits and -, not starting or ending with -",
                    show(&name)
                ),
            );
        }
    }
    if !s.port_label.is_empty() && !has_port(g.network.as_ref(), &s.port_label) {
        r.err(
            at,
            "port",
            format!(
                "port {} is not a label of the group's network ports{}",
                show(&s.port_label),
                labels_hint(g.network.as_ref())
            ),
        );
    }
    // Groups share the host's network (bridge mode is refused), so an allocation has no
    // address of its own to advertise.
    if s.address_mode == AddressMode::Alloc {
        r.err(
            at,
            "address_mode",
            "address_mode \"alloc\" needs an allocation address of its own, which only bridge networking gives and drover does not support: use \"auto\" or \"host\"",
        );
    }
    r.entries(at, "tags", s.tags.len());
    for tag in s.tags.iter().take(r.limits.max_entries) {
        r.text(at, "tags", "tag", tag, r.limits.max_string_len);
    }
    r.map(at, "meta", &s.meta, MapKind::Meta);
    r.entries(at, "checks", s.checks.len());
    for (i, c) in s.checks.iter().take(r.limits.max_entries).enumerate() {
        check_check(r, g, task, s, &format!("{at}.checks[{i}]"), c);
    }
}

fn check_check(
    r: &mut Report<'_>,
    g: &TaskGroup,
    task: Option<&str>,
    s: &Service,
    at: &str,
    c: &ServiceCheck,
) {
    r.text(at, "name", "check name", &c.name, r.limits.max_name_len);
    if c.interval < MIN_CHECK_INTERVAL {
        r.err(
            at,
            "interval",
            format!(
                "interval {} is below the minimum of {}",
                fmt_duration(c.interval),
                fmt_duration(MIN_CHECK_INTERVAL)
            ),
        );
    } else {
        r.duration(at, "interval", c.interval);
    }
    if c.timeout.is_zero() {
        r.err(at, "timeout", "timeout must be above 0s");
    } else if c.timeout > c.interval {
        r.err(
            at,
            "timeout",
            format!(
                "timeout {} is above the interval {}: a check must give up before the next one starts",
                fmt_duration(c.timeout),
                fmt_duration(c.interval)
            ),
        );
    }
    if let Some(cr) = &c.check_restart {
        r.duration(at, "check_restart.grace", cr.grace);
    }
    if c.kind.needs_port() && s.port_label.is_empty() {
        r.err(
            at,
            "type",
            format!(
                "a {} check reaches the service through its port: set the service's port",
                c.kind.type_name()
            ),
        );
    }
    match &c.kind {
        CheckKind::Http {
            path,
            method,
            headers,
            expected_status,
        } => {
            if !path.starts_with('/') {
                r.err(at, "path", format!("path {} must start with /", show(path)));
            } else {
                r.text(at, "path", "path", path, r.limits.max_string_len);
            }
            if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
                r.err(
                    at,
                    "method",
                    format!("method {} is not an http method", show(method)),
                );
            }
            r.entries(at, "header", headers.len());
            for (name, values) in headers.iter().take(r.limits.max_entries) {
                if name.is_empty() || !name.bytes().all(is_header_name_byte) {
                    r.err(
                        at,
                        "header",
                        format!("header name {} is not a valid http header name", show(name)),
                    );
                }
                for v in values.iter().take(r.limits.max_entries) {
                    if v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                        r.err(
                            at,
                            "header",
                            format!("header {} holds a line break or NUL", show(name)),
                        );
                    }
                }
            }
            if let Some(code) = expected_status {
                if !(100..=599).contains(code) {
                    r.err(
                        at,
                        "expected_status",
                        format!("expected_status {code} is not an http status (100-599)"),
                    );
                }
            }
        }
        CheckKind::Tcp => {}
        CheckKind::Script { command, args } => {
            if command.is_empty() {
                r.err(at, "command", "a script check needs a command");
            } else {
                r.text(at, "command", "command", command, r.limits.max_string_len);
            }
            r.entries(at, "args", args.len());
            match (task, &c.task) {
                (Some(_), Some(_)) => r.err(
                    at,
                    "task",
                    "a task's script check runs in that task: task is for group services only",
                ),
                (None, None) => r.err(
                    at,
                    "task",
                    "a group service's script check needs the task it runs in (task = \"…\")",
                ),
                (None, Some(name)) if !g.tasks.iter().any(|t| &t.name == name) => r.err(
                    at,
                    "task",
                    format!("task {} is not a task of this group", show(name)),
                ),
                _ => {}
            }
        }
    }
}

fn has_port(network: Option<&GroupNetwork>, label: &str) -> bool {
    network.is_some_and(|n| n.ports.iter().any(|p| p.label == label))
}

fn labels_hint(network: Option<&GroupNetwork>) -> String {
    let labels: Vec<&str> = network
        .map(|n| n.ports.iter().map(|p| p.label.as_str()).collect())
        .unwrap_or_default();
    if labels.is_empty() {
        " (the group's network has no ports)".to_owned()
    } else {
        format!(" ({})", labels.join(", "))
    }
}

/// An http token character (RFC 9110), what a header name is made of.
fn is_header_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
