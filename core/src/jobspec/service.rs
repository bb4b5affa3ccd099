//! `service` blocks of groups and tasks, and their `check` and `check_restart` blocks.
//! Only Nomad's native discovery exists here: `provider = "consul"` is refused by name.
//! What can only be judged against the rest of the job (the port label, the interval and
//! timeout, the path, the name once interpolated) is validation's, pointed back here.

use super::decoder::{Decoder, join};
use super::job::one_of;
use super::reader::{Item, Shape, walk};
use super::value::{Fault, Value};
use crate::types::{AddressMode, CheckKind, CheckRestart, OnUpdate, Service, ServiceCheck};
use hcl::edit::structure::{Block, Structure};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a check waits between runs and for an answer when the file says nothing.
pub(crate) const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

const SERVICE_FIELDS: &[(&str, Shape)] = &[
    ("name", Shape::Attr),
    ("port", Shape::Attr),
    ("tags", Shape::Attr),
    ("meta", Shape::Map),
    ("provider", Shape::Attr),
    ("address_mode", Shape::Attr),
    ("check", Shape::Blocks),
    ("check_restart", Shape::Block),
    ("canary_tags", Shape::Unsupported),
    ("canary_meta", Shape::Unsupported),
    ("tagged_addresses", Shape::Unsupported),
    ("enable_tag_override", Shape::Unsupported),
    ("connect", Shape::Unsupported),
    ("identity", Shape::Unsupported),
    ("task", Shape::Unsupported),
    ("address", Shape::Unsupported),
    ("on_update", Shape::Unsupported),
    ("cluster", Shape::Unsupported),
];

const CHECK_FIELDS: &[(&str, Shape)] = &[
    ("type", Shape::Attr),
    ("name", Shape::Attr),
    ("path", Shape::Attr),
    ("method", Shape::Attr),
    ("header", Shape::Block),
    ("expected_status", Shape::Attr),
    ("command", Shape::Attr),
    ("args", Shape::Attr),
    ("task", Shape::Attr),
    ("interval", Shape::Attr),
    ("timeout", Shape::Attr),
    ("on_update", Shape::Attr),
    ("check_restart", Shape::Block),
    ("port", Shape::Unsupported),
    ("protocol", Shape::Unsupported),
    ("address_mode", Shape::Unsupported),
    ("body", Shape::Unsupported),
    ("initial_status", Shape::Unsupported),
    ("success_before_passing", Shape::Unsupported),
    ("failures_before_critical", Shape::Unsupported),
    ("failures_before_warning", Shape::Unsupported),
    ("tls_skip_verify", Shape::Unsupported),
    ("tls_server_name", Shape::Unsupported),
    ("grpc_service", Shape::Unsupported),
    ("grpc_use_tls", Shape::Unsupported),
    ("expose", Shape::Unsupported),
];

const CHECK_RESTART_FIELDS: &[(&str, Shape)] = &[
    ("limit", Shape::Attr),
    ("grace", Shape::Attr),
    ("ignore_warnings", Shape::Attr),
];

const CHECK_TYPES: [&str; 3] = ["http", "tcp", "script"];

/// The `index`th service of the group or task at `owner_path`.
pub(super) fn service(
    d: &mut Decoder<'_>,
    owner_path: &str,
    index: usize,
    block: &Block,
) -> Service {
    let path = format!("{owner_path}.services[{index}]");
    d.mark(path.clone(), Item::Block(block).at());
    let mut s = Service {
        name: String::new(),
        port_label: String::new(),
        tags: Vec::new(),
        meta: BTreeMap::new(),
        address_mode: AddressMode::Auto,
        checks: Vec::new(),
    };
    let mut shared_restart = None;
    let mut check_blocks = Vec::new();
    for (field, item) in walk(d, &block.body, "service", SERVICE_FIELDS) {
        match (field, item) {
            ("name", Item::Attr(a)) => {
                s.name = d.read(&path, a, |v, f| v.string(f)).unwrap_or_default()
            }
            ("port", Item::Attr(a)) => {
                s.port_label = d.read(&path, a, |v, f| v.string(f)).unwrap_or_default()
            }
            ("tags", Item::Attr(a)) => {
                s.tags = d.read(&path, a, |v, f| v.strings(f)).unwrap_or_default()
            }
            ("meta", item) => s.meta = d.map(&path, "meta", item),
            ("provider", Item::Attr(a)) => {
                d.read(&path, a, provider);
            }
            ("address_mode", Item::Attr(a)) => {
                let mode = d.read(&path, a, |v, f| {
                    let text = v.string(f)?;
                    AddressMode::parse(&text)
                        .ok_or_else(|| (v.at, one_of(f, &text, &AddressMode::NAMES)))
                });
                s.address_mode = mode.unwrap_or_default();
            }
            ("check_restart", Item::Block(b)) => {
                shared_restart = Some(check_restart(d, &join(&path, "check_restart"), b));
            }
            ("check", Item::Block(b)) => check_blocks.push(b),
            _ => {}
        }
    }
    for b in check_blocks {
        let at = format!("{path}.checks[{}]", s.checks.len());
        let mut c = check(d, &at, b);
        // A service's check_restart is the default of each of its checks.
        if c.check_restart.is_none() {
            c.check_restart = shared_restart;
        }
        s.checks.push(c);
    }
    s
}

/// Only `"nomad"`: there is no Consul to register with.
fn provider(v: &Value, field: &str) -> Result<(), Fault> {
    let name = v.string(field)?;
    match name.as_str() {
        "nomad" => Ok(()),
        "consul" => Err((
            v.at,
            format!(
                "{field}: provider \"consul\" is not supported: drover has no consul, its own catalog is provider = \"nomad\""
            ),
        )),
        _ => Err((v.at, one_of(field, &name, &["nomad"]))),
    }
}

fn check(d: &mut Decoder<'_>, path: &str, block: &Block) -> ServiceCheck {
    d.mark(path.to_owned(), Item::Block(block).at());
    let mut c = ServiceCheck {
        name: String::new(),
        kind: CheckKind::Tcp,
        interval: DEFAULT_CHECK_INTERVAL,
        timeout: DEFAULT_CHECK_TIMEOUT,
        on_update: OnUpdate::RequireHealthy,
        check_restart: None,
        task: None,
    };
    let items = walk(d, &block.body, "check", CHECK_FIELDS);
    let mut kind = None;
    for (field, item) in &items {
        if let (&"type", Item::Attr(a)) = (field, item) {
            kind = d.read(path, a, |v, f| {
                let text = v.string(f)?;
                if CHECK_TYPES.contains(&text.as_str()) {
                    Ok(text)
                } else {
                    Err((v.at, one_of(f, &text, &CHECK_TYPES)))
                }
            });
        }
    }
    let Some(kind) = kind else {
        if !items.iter().any(|(f, _)| *f == "type") {
            d.problems.at(
                Item::Block(block).at(),
                "check needs a type (one of http, tcp, script)",
            );
        }
        return c;
    };
    let (mut http_path, mut method, mut headers, mut expected) =
        (String::new(), "GET".to_owned(), BTreeMap::new(), None);
    let (mut command, mut args) = (String::new(), Vec::new());
    // Which fields each type reads: any other is a mistake worth naming.
    let belongs = |field: &str| match field {
        "path" | "method" | "header" | "expected_status" => kind == "http",
        "command" | "args" | "task" => kind == "script",
        _ => true,
    };
    for (field, item) in items {
        if !belongs(field) {
            d.problems.at(
                item.at(),
                format!("{field} does not apply to a {kind} check"),
            );
            continue;
        }
        match (field, item) {
            ("name", Item::Attr(a)) => {
                c.name = d.read(path, a, |v, f| v.string(f)).unwrap_or_default()
            }
            ("path", Item::Attr(a)) => {
                http_path = d.read(path, a, |v, f| v.string(f)).unwrap_or_default()
            }
            ("method", Item::Attr(a)) => {
                method = d.read(path, a, |v, f| v.string(f)).unwrap_or(method);
            }
            ("header", Item::Block(b)) => headers = header(d, &join(path, "header"), b),
            ("expected_status", Item::Attr(a)) => expected = d.read(path, a, |v, f| v.whole(f)),
            ("command", Item::Attr(a)) => {
                command = d.read(path, a, |v, f| v.string(f)).unwrap_or_default()
            }
            ("args", Item::Attr(a)) => {
                args = d.read(path, a, |v, f| v.strings(f)).unwrap_or_default()
            }
            ("task", Item::Attr(a)) => c.task = d.read(path, a, |v, f| v.string(f)),
            ("interval", Item::Attr(a)) => {
                c.interval = d.read(path, a, |v, f| v.duration(f)).unwrap_or(c.interval)
            }
            ("timeout", Item::Attr(a)) => {
                c.timeout = d.read(path, a, |v, f| v.duration(f)).unwrap_or(c.timeout)
            }
            ("on_update", Item::Attr(a)) => {
                let on = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    OnUpdate::parse(&text).ok_or_else(|| (v.at, one_of(f, &text, &OnUpdate::NAMES)))
                });
                c.on_update = on.unwrap_or_default();
            }
            ("check_restart", Item::Block(b)) => {
                c.check_restart = Some(check_restart(d, &join(path, "check_restart"), b));
            }
            _ => {}
        }
    }
    c.kind = match kind.as_str() {
        "http" => CheckKind::Http {
            path: http_path,
            method,
            headers,
            expected_status: expected,
        },
        "script" => CheckKind::Script { command, args },
        _ => CheckKind::Tcp,
    };
    c
}

/// `header { Name = ["value", …] }`.
fn header(d: &mut Decoder<'_>, path: &str, block: &Block) -> BTreeMap<String, Vec<String>> {
    d.mark(path.to_owned(), Item::Block(block).at());
    let mut headers = BTreeMap::new();
    for structure in block.body.iter() {
        match structure {
            Structure::Attribute(a) => {
                if let Some(values) = d.read(path, a, |v, f| v.strings(f)) {
                    headers.insert(a.key.as_str().to_owned(), values);
                }
            }
            Structure::Block(b) => d.problems.at(
                Item::Block(b).at(),
                format!(
                    "header holds only `Name = [\"value\"]` entries, not a {:?} block",
                    b.ident.as_str()
                ),
            ),
        }
    }
    headers
}

fn check_restart(d: &mut Decoder<'_>, path: &str, block: &Block) -> CheckRestart {
    d.mark(path.to_owned(), Item::Block(block).at());
    let mut r = CheckRestart::default();
    for (name, item) in walk(d, &block.body, "check_restart", CHECK_RESTART_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "limit" => r.limit = d.read(path, a, |v, f| v.whole(f)).unwrap_or(r.limit),
            "grace" => r.grace = d.read(path, a, |v, f| v.duration(f)).unwrap_or(r.grace),
            "ignore_warnings" => {
                r.ignore_warnings = d
                    .read(path, a, |v, f| v.bool(f))
                    .unwrap_or(r.ignore_warnings)
            }
            _ => {}
        }
    }
    r
}
