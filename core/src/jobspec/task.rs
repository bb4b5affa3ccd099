//! `task` blocks: driver, `config`, `env`, `resources`, `kill_timeout`, `meta`, drover's
//! `snapshot`, task-level constraints, the blocks of [`super::task_blocks`] (`user`,
//! `kill_signal`, `restart`, `lifecycle`) and of [`super::task_files`] (`artifact`,
//! `template`, `dispatch_payload`, docker's `config`).

use super::decoder::{Decoder, join};
use super::job::{constraint, label_at};
use super::reader::{Item, Shape, walk};
use crate::types::{Constraint, Resources, RestartPolicy, Task, TaskConfig};
use hcl::edit::structure::{Block, Structure};

const TASK_FIELDS: &[(&str, Shape)] = &[
    ("driver", Shape::Attr),
    ("config", Shape::Block),
    ("env", Shape::Map),
    ("resources", Shape::Block),
    ("kill_timeout", Shape::Attr),
    ("meta", Shape::Map),
    ("constraint", Shape::Blocks),
    ("snapshot", Shape::Attr),
    ("artifact", Shape::Blocks),
    ("template", Shape::Blocks),
    ("service", Shape::Blocks),
    ("user", Shape::Attr),
    ("logs", Shape::Unsupported),
    ("vault", Shape::Unsupported),
    ("consul", Shape::Unsupported),
    ("volume_mount", Shape::Unsupported),
    ("lifecycle", Shape::Block),
    ("leader", Shape::Unsupported),
    ("dispatch_payload", Shape::Block),
    ("kill_signal", Shape::Attr),
    ("shutdown_delay", Shape::Unsupported),
    ("restart", Shape::Block),
    ("identity", Shape::Unsupported),
    ("affinity", Shape::Unsupported),
    ("scaling", Shape::Unsupported),
    ("csi_plugin", Shape::Unsupported),
    ("kind", Shape::Unsupported),
];

const RESOURCES_FIELDS: &[(&str, Shape)] = &[
    ("cpu", Shape::Attr),
    ("memory", Shape::Attr),
    ("disk", Shape::Attr),
    ("cores", Shape::Unsupported),
    ("memory_max", Shape::Unsupported),
    ("device", Shape::Unsupported),
    ("network", Shape::Block),
    ("numa", Shape::Unsupported),
];

/// What `raw_exec` and `exec` read from `config`; anything else there is a mistake.
const PROCESS_CONFIG_FIELDS: &[(&str, Shape)] = &[("command", Shape::Attr), ("args", Shape::Attr)];

/// A task at `groups[g].tasks[index]`. Its `constraint` blocks are appended to
/// `group_constraints`: a group's allocations land on one node, so a task's constraints
/// filter nodes exactly as the group's do (Nomad checks them together too).
pub(super) fn decode_task(
    d: &mut Decoder<'_>,
    group_path: &str,
    index: usize,
    block: &Block,
    group_constraints: &mut Vec<Constraint>,
    default_restart: &RestartPolicy,
) -> Task {
    let path = format!("{group_path}.tasks[{index}]");
    d.mark(path.clone(), Item::Block(block).at());
    let name = block.labels.first().map_or("", |l| l.as_str());
    if let Some(label) = block.labels.first() {
        d.mark(join(&path, "name"), label_at(label));
    }
    let mut task = Task::raw_exec(name, "");
    task.driver = String::new();
    let items = walk(d, &block.body, &format!("task {name:?}"), TASK_FIELDS);

    // The driver decides what `config` may hold, so it is read first.
    for (field, item) in &items {
        if let (&"driver", Item::Attr(a)) = (field, item) {
            task.driver = d.read(&path, a, |v, f| v.string(f)).unwrap_or_default();
        }
    }
    for (field, item) in items {
        match (field, item) {
            ("config", Item::Block(b)) => task.config = config(d, &path, &task.driver, b),
            ("env", item) => task.env = d.map(&path, "env", item),
            ("meta", item) => task.meta = d.map(&path, "meta", item),
            ("resources", Item::Block(b)) => task.resources = resources(d, &path, name, b),
            ("kill_timeout", Item::Attr(a)) => {
                if let Some(v) = d.read(&path, a, |v, f| v.duration(f)) {
                    task.kill_timeout = v;
                }
            }
            ("snapshot", Item::Attr(a)) => task.snapshot = d.read(&path, a, |v, f| v.string(f)),
            ("user", Item::Attr(a)) => task.user = d.read(&path, a, |v, f| v.string(f)),
            ("kill_signal", Item::Attr(a)) => {
                task.kill_signal = d.read(&path, a, |v, f| v.string(f));
            }
            ("restart", Item::Block(b)) => {
                let at = join(&path, "restart");
                let policy = super::group::restart(d, &at, b, default_restart.clone());
                task.restart = Some(policy);
            }
            ("lifecycle", Item::Block(b)) => {
                task.lifecycle = super::task_blocks::lifecycle(d, &path, b);
            }
            ("artifact", Item::Block(b)) => {
                let index = task.artifacts.len();
                let artifact = super::task_files::artifact(d, &path, index, b);
                task.artifacts.push(artifact);
            }
            ("template", Item::Block(b)) => {
                let index = task.templates.len();
                let template = super::task_files::template(d, &path, index, b);
                task.templates.push(template);
            }
            ("service", Item::Block(b)) => {
                let index = task.services.len();
                task.services
                    .push(super::service::service(d, &path, index, b));
            }
            ("dispatch_payload", Item::Block(b)) => {
                task.dispatch_payload = super::task_files::dispatch_payload(d, &path, b);
            }
            ("constraint", Item::Block(b)) => {
                let at = format!("{group_path}.constraints[{}]", group_constraints.len());
                if let Some(c) = constraint(d, &at, b) {
                    group_constraints.push(c);
                }
            }
            _ => {}
        }
    }
    task
}

/// The driver's configuration. The process drivers take `command` and `args` only; other
/// drivers' settings are kept as strings in [`TaskConfig::extra`].
fn config(d: &mut Decoder<'_>, task_path: &str, driver: &str, block: &Block) -> TaskConfig {
    let path = join(task_path, "config");
    d.mark(path.clone(), Item::Block(block).at());
    let mut config = TaskConfig::default();
    if matches!(driver, "raw_exec" | "exec") {
        let context = format!("config of the {driver} driver");
        for (name, item) in walk(d, &block.body, &context, PROCESS_CONFIG_FIELDS) {
            let Item::Attr(a) = item else { continue };
            match name {
                "command" => {
                    config.command = d.read(&path, a, |v, f| v.string(f)).unwrap_or_default()
                }
                "args" => config.args = d.read(&path, a, |v, f| v.strings(f)).unwrap_or_default(),
                _ => {}
            }
        }
        return config;
    }
    if driver == "docker" {
        return super::task_files::docker_config(d, &path, block);
    }
    for structure in block.body.iter() {
        match structure {
            Structure::Attribute(a) => {
                let key = a.key.as_str();
                match key {
                    "command" => {
                        config.command = d.read(&path, a, |v, f| v.string(f)).unwrap_or_default()
                    }
                    "args" => {
                        config.args = d.read(&path, a, |v, f| v.strings(f)).unwrap_or_default()
                    }
                    _ => {
                        if let Some(v) = d.read(&path, a, |v, f| v.string(f)) {
                            d.mark(format!("{path}[{key}]"), Item::Attr(a).at());
                            config.extra.insert(key.to_owned(), v);
                        }
                    }
                }
            }
            Structure::Block(b) => d.problems.at(
                Item::Block(b).at(),
                format!(
                    "config holds only `key = value` settings, not a {:?} block",
                    b.ident.as_str()
                ),
            ),
        }
    }
    config
}

fn resources(d: &mut Decoder<'_>, task_path: &str, task: &str, block: &Block) -> Resources {
    let path = join(task_path, "resources");
    d.mark(path.clone(), Item::Block(block).at());
    let mut r = Task::raw_exec("", "").resources;
    for (name, item) in walk(d, &block.body, "resources", RESOURCES_FIELDS) {
        let a = match item {
            Item::Attr(a) => a,
            Item::Block(b) => {
                super::network::refuse_task_network(d, task, b);
                continue;
            }
        };
        match name {
            "cpu" => r.cpu_mhz = d.read(&path, a, |v, f| v.whole(f)).unwrap_or(r.cpu_mhz),
            "memory" => r.memory_mb = d.read(&path, a, |v, f| v.whole(f)).unwrap_or(r.memory_mb),
            "disk" => r.disk_mb = d.read(&path, a, |v, f| v.whole(f)).unwrap_or(r.disk_mb),
            _ => {}
        }
    }
    r
}
