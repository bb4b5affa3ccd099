//! What a task brings into its directory: `artifact`, `template` and `dispatch_payload`
//! blocks, and the docker driver's `config` (its image and command; what drover cannot
//! honour yet is refused with the reason).

use super::decoder::{Decoder, join};
use super::job::one_of;
use super::reader::{Item, Shape, walk};
use crate::types::{Artifact, ArtifactMode, ChangeMode, TaskConfig, Template};
use hcl::edit::structure::Block;

const ARTIFACT_FIELDS: &[(&str, Shape)] = &[
    ("source", Shape::Attr),
    ("destination", Shape::Attr),
    ("mode", Shape::Attr),
    ("options", Shape::Map),
    ("headers", Shape::Unsupported),
    ("chown", Shape::Unsupported),
];

const TEMPLATE_FIELDS: &[(&str, Shape)] = &[
    ("data", Shape::Attr),
    ("source", Shape::Attr),
    ("destination", Shape::Attr),
    ("env", Shape::Attr),
    ("change_mode", Shape::Attr),
    ("change_signal", Shape::Attr),
    ("perms", Shape::Attr),
    ("left_delimiter", Shape::Attr),
    ("right_delimiter", Shape::Attr),
    ("splay", Shape::Unsupported),
    ("wait", Shape::Unsupported),
    ("uid", Shape::Unsupported),
    ("gid", Shape::Unsupported),
    ("error_on_missing_key", Shape::Unsupported),
    ("change_script", Shape::Unsupported),
    ("vault_grace", Shape::Unsupported),
    ("once", Shape::Unsupported),
];

const DISPATCH_PAYLOAD_FIELDS: &[(&str, Shape)] = &[("file", Shape::Attr)];

/// What the docker driver reads from `config`. `volumes` and `auth` are walked as known
/// names so that [`docker_config`] can refuse them with the reason.
const DOCKER_CONFIG_FIELDS: &[(&str, Shape)] = &[
    ("image", Shape::Attr),
    ("command", Shape::Attr),
    ("args", Shape::Attr),
    ("network_mode", Shape::Attr),
    ("ports", Shape::Attr),
    ("volumes", Shape::Attr),
    ("auth", Shape::Block),
    ("entrypoint", Shape::Unsupported),
    ("labels", Shape::Unsupported),
    ("privileged", Shape::Unsupported),
    ("mount", Shape::Unsupported),
    ("port_map", Shape::Unsupported),
    ("cap_add", Shape::Unsupported),
    ("devices", Shape::Unsupported),
    ("logging", Shape::Unsupported),
    ("force_pull", Shape::Unsupported),
    ("work_dir", Shape::Unsupported),
    ("hostname", Shape::Unsupported),
];

/// An `artifact` block of the task at `task_path`, the `index`-th.
pub(super) fn artifact(
    d: &mut Decoder<'_>,
    task_path: &str,
    index: usize,
    block: &Block,
) -> Artifact {
    let path = format!("{task_path}.artifacts[{index}]");
    let at = Item::Block(block).at();
    d.mark(path.clone(), at);
    let mut artifact = Artifact {
        source: String::new(),
        destination: Artifact::DEFAULT_DESTINATION.into(),
        mode: ArtifactMode::Any,
        options: Default::default(),
    };
    for (name, item) in walk(d, &block.body, "artifact", ARTIFACT_FIELDS) {
        match (name, item) {
            ("options", item) => artifact.options = d.map(&path, "options", item),
            (_, Item::Attr(a)) => match name {
                "source" => {
                    artifact.source = d.read(&path, a, |v, f| v.string(f)).unwrap_or_default()
                }
                "destination" => {
                    if let Some(dest) = d.read(&path, a, |v, f| v.string(f)) {
                        artifact.destination = dest;
                    }
                }
                "mode" => {
                    let names = ArtifactMode::ALL.map(ArtifactMode::as_str);
                    if let Some(mode) = d.read(&path, a, |v, f| {
                        let text = v.string(f)?;
                        ArtifactMode::parse(&text).ok_or_else(|| (v.at, one_of(f, &text, &names)))
                    }) {
                        artifact.mode = mode;
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    if artifact.source.is_empty() {
        d.problems.at(at, "artifact needs a source");
    }
    artifact
}

/// A `template` block of the task at `task_path`, the `index`-th.
pub(super) fn template(
    d: &mut Decoder<'_>,
    task_path: &str,
    index: usize,
    block: &Block,
) -> Template {
    let path = format!("{task_path}.templates[{index}]");
    let at = Item::Block(block).at();
    d.mark(path.clone(), at);
    let mut t = Template::inline("", "");
    t.data = None;
    for (name, item) in walk(d, &block.body, "template", TEMPLATE_FIELDS) {
        let Item::Attr(a) = item else { continue };
        let text = |d: &mut Decoder<'_>| d.read(&path, a, |v, f| v.string(f));
        match name {
            "data" => t.data = text(d),
            "source" => t.source = text(d),
            "destination" => t.destination = text(d).unwrap_or_default(),
            "env" => t.env = d.read(&path, a, |v, f| v.bool(f)).unwrap_or(false),
            "change_mode" => {
                let names = ChangeMode::ALL.map(ChangeMode::as_str);
                if let Some(mode) = d.read(&path, a, |v, f| {
                    let text = v.string(f)?;
                    ChangeMode::parse(&text).ok_or_else(|| (v.at, one_of(f, &text, &names)))
                }) {
                    t.change_mode = mode;
                }
            }
            "change_signal" => t.change_signal = text(d),
            "perms" => t.perms = text(d).unwrap_or_else(|| Template::DEFAULT_PERMS.into()),
            "left_delimiter" => t.left_delimiter = text(d).unwrap_or_default(),
            "right_delimiter" => t.right_delimiter = text(d).unwrap_or_default(),
            _ => {}
        }
    }
    if t.destination.is_empty() {
        d.problems.at(at, "template needs a destination");
    }
    t
}

/// A `dispatch_payload` block: the file (in the task's `local/` dir) the payload goes to.
pub(super) fn dispatch_payload(
    d: &mut Decoder<'_>,
    task_path: &str,
    block: &Block,
) -> Option<String> {
    let path = join(task_path, "dispatch_payload");
    let at = Item::Block(block).at();
    d.mark(path.clone(), at);
    let mut file = None;
    for (_, item) in walk(d, &block.body, "dispatch_payload", DISPATCH_PAYLOAD_FIELDS) {
        if let Item::Attr(a) = item {
            file = d.read(&path, a, |v, f| v.string(f));
        }
    }
    if file.is_none() {
        d.problems.at(at, "dispatch_payload needs a file");
    }
    file
}

/// The docker driver's `config`: `image` (kept in `extra`), `command`, `args`,
/// `network_mode` and `ports` (labels of the group's network ports; validation checks the
/// group has them). Volumes wait for host volumes and private registries for credentials
/// the agent can hold; each is refused saying so.
pub(super) fn docker_config(d: &mut Decoder<'_>, path: &str, block: &Block) -> TaskConfig {
    let mut config = TaskConfig::default();
    for (name, item) in walk(
        d,
        &block.body,
        "config of the docker driver",
        DOCKER_CONFIG_FIELDS,
    ) {
        let at = item.at();
        let refused = match name {
            "volumes" => Some(
                "volumes in a docker task's config need host volumes, which drover does not have yet",
            ),
            "auth" => Some(
                "auth in a docker task's config is not supported: the agent pulls only public or local images",
            ),
            _ => None,
        };
        if let Some(why) = refused {
            d.problems.at(at, why);
            continue;
        }
        let Item::Attr(a) = item else { continue };
        match name {
            "command" => config.command = d.read(path, a, |v, f| v.string(f)).unwrap_or_default(),
            "args" => config.args = d.read(path, a, |v, f| v.strings(f)).unwrap_or_default(),
            "ports" => config.ports = d.read(path, a, |v, f| v.strings(f)).unwrap_or_default(),
            _ => {
                if let Some(v) = d.read(path, a, |v, f| v.string(f)) {
                    d.mark(format!("{path}[{name}]"), at);
                    config.extra.insert(name.to_owned(), v);
                }
            }
        }
    }
    config
}
