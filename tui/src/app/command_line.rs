//! `:` commands. Besides going to a view, they act on a node, worker or job named on the
//! line, so an operator who knows what to touch does not have to find its row first. They
//! go through the same confirmations and read-only guard as the keys.

use super::{Action, App, Mode};
use crate::views::{Tone, ViewKind};
use drover_core::{JobKey, NodeId};

/// How many candidates an ambiguous name lists.
const CANDIDATES_SHOWN: usize = 3;

const NODE_USAGE: &str =
    "usage: :node offline|online|drain|undrain|eligible|ineligible NODE [DEADLINE]";
const WORKERS_USAGE: &str = "usage: :workers pause|resume [WORKER]";
const JOB_USAGE: &str = "usage: :job stop JOB";
const NS_USAGE: &str = "usage: :ns NAMESPACE (or * for every namespace)";

/// What a node key or `:node` command does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeVerb {
    Offline,
    Online,
    /// With the deadline typed on the command line; `None` asks for it.
    Drain(Option<String>),
    Undrain,
    Eligible(bool),
}

/// One `:` line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandLine {
    Quit,
    Help,
    View(ViewKind),
    Node {
        verb: NodeVerb,
        node: String,
    },
    /// `worker`: `None` for every worker of every server.
    Workers {
        pause: bool,
        worker: Option<String>,
    },
    StopJob(String),
    /// Scope the jobs, evals, blocked and deployments views to one namespace; `None`: all
    /// (`*`).
    Namespace(Option<String>),
}

impl CommandLine {
    pub fn parse(text: &str) -> Result<Self, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let Some((&first, args)) = words.split_first() else {
            return Err(
                "empty command: type a view (:nodes) or an action (:node offline NODE)".into(),
            );
        };
        match (first, args) {
            ("q" | "quit", []) => Ok(CommandLine::Quit),
            ("help", []) => Ok(CommandLine::Help),
            ("node" | "nodes", [verb, rest @ ..]) => parse_node(verb, rest),
            ("worker" | "workers", [verb, rest @ ..]) => {
                let pause = match *verb {
                    "pause" => true,
                    "resume" => false,
                    _ => return Err(format!("unknown workers action {verb:?}; {WORKERS_USAGE}")),
                };
                match rest {
                    [] => Ok(CommandLine::Workers {
                        pause,
                        worker: None,
                    }),
                    [worker] => Ok(CommandLine::Workers {
                        pause,
                        worker: Some((*worker).to_owned()),
                    }),
                    _ => Err(WORKERS_USAGE.to_owned()),
                }
            }
            ("job" | "jobs", ["stop", job]) => Ok(CommandLine::StopJob((*job).to_owned())),
            ("ns" | "namespace", ["*"]) => Ok(CommandLine::Namespace(None)),
            ("ns" | "namespace", [ns]) => Ok(CommandLine::Namespace(Some((*ns).to_owned()))),
            ("ns" | "namespace", _) => Err(NS_USAGE.to_owned()),
            ("job" | "jobs", [_, ..]) => Err(JOB_USAGE.to_owned()),
            (name, []) => ViewKind::parse(name)
                .map(CommandLine::View)
                .ok_or_else(|| format!("unknown command :{name}")),
            (name, _) => Err(format!("unknown command :{name}")),
        }
    }
}

fn parse_node(verb: &str, rest: &[&str]) -> Result<CommandLine, String> {
    let node = |rest: &[&str]| match rest {
        [node] => Ok((*node).to_owned()),
        _ => Err(NODE_USAGE.to_owned()),
    };
    let verb = match verb {
        "offline" => NodeVerb::Offline,
        "online" => NodeVerb::Online,
        "undrain" => NodeVerb::Undrain,
        "eligible" => NodeVerb::Eligible(true),
        "ineligible" => NodeVerb::Eligible(false),
        "drain" => {
            return match rest {
                [node] => Ok(CommandLine::Node {
                    verb: NodeVerb::Drain(None),
                    node: (*node).to_owned(),
                }),
                [node, deadline] => Ok(CommandLine::Node {
                    verb: NodeVerb::Drain(Some((*deadline).to_owned())),
                    node: (*node).to_owned(),
                }),
                _ => Err(NODE_USAGE.to_owned()),
            };
        }
        _ => return Err(format!("unknown node action {verb:?}; {NODE_USAGE}")),
    };
    Ok(CommandLine::Node {
        verb,
        node: node(rest)?,
    })
}

/// `a, b, c and 2 more`.
fn candidates(mut names: Vec<String>) -> String {
    names.sort();
    let more = names.len().saturating_sub(CANDIDATES_SHOWN);
    names.truncate(CANDIDATES_SHOWN);
    let mut text = names.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

impl App {
    /// Carries out a `:` line; a mistake is told in the status bar, never acted on.
    pub(super) fn run_command_line(&mut self, text: &str) -> Action {
        let command = match CommandLine::parse(text) {
            Ok(c) => c,
            Err(e) => {
                self.tell(e, Tone::Bad);
                return Action::None;
            }
        };
        let acts = matches!(
            command,
            CommandLine::Node { .. } | CommandLine::Workers { .. } | CommandLine::StopJob(_)
        );
        if acts && self.read_only {
            self.tell("read-only console: actions are disabled", Tone::Warn);
            return Action::None;
        }
        let area = match &command {
            CommandLine::Node { .. } => Some(super::Area::Nodes),
            CommandLine::Workers { .. } => Some(super::Area::Operator),
            _ => None,
        };
        if let Some(area) = area
            && !self.permissions.allows(area)
        {
            self.tell_lacking(area);
            return Action::None;
        }
        let outcome = match command {
            CommandLine::Quit => return Action::Quit,
            CommandLine::Help => {
                self.mode = Mode::Help;
                Ok(Action::None)
            }
            CommandLine::Namespace(ns) => {
                let told = match &ns {
                    Some(ns) => format!("showing namespace {ns:?}"),
                    None => "showing every namespace".to_owned(),
                };
                self.namespace = ns;
                for view in [
                    ViewKind::Jobs,
                    ViewKind::Evals,
                    ViewKind::Blocked,
                    ViewKind::Deployments,
                ] {
                    self.invalidate(view);
                }
                self.tell(told, Tone::Normal);
                Ok(Action::None)
            }
            CommandLine::View(view) => {
                self.switch_to(view);
                Ok(Action::None)
            }
            CommandLine::Node { verb, node } => self
                .resolve_node(&node)
                .map(|id| self.act_on_nodes(verb, vec![id])),
            CommandLine::Workers { pause, worker } => match worker {
                None => Ok(self.act_on_workers(pause, None)),
                Some(w) => self
                    .resolve_worker(&w)
                    .map(|w| self.act_on_workers(pause, Some(w))),
            },
            CommandLine::StopJob(job) => self.resolve_job(&job).map(|key| {
                self.confirm_stop_job(key);
                Action::None
            }),
        };
        outcome.unwrap_or_else(|e| {
            self.tell(e, Tone::Bad);
            Action::None
        })
    }

    /// A node by its exact name, else by its id or a unique prefix of it.
    fn resolve_node(&self, target: &str) -> Result<NodeId, String> {
        let nodes = &self.cluster.nodes;
        let named: Vec<_> = nodes.values().filter(|n| n.name == target).collect();
        if let [one] = named.as_slice() {
            return Ok(one.id);
        }
        let prefix = target.to_lowercase();
        let by_id: Vec<_> = nodes
            .values()
            .filter(|n| n.id.to_string().starts_with(&prefix))
            .collect();
        match (by_id.as_slice(), named.len()) {
            ([one], _) => Ok(one.id),
            ([], 0) => Err(format!(
                "no node is named {target:?} or has an id starting so"
            )),
            ([], _) => Err(format!(
                "{} nodes are named {target:?}: give an id prefix ({})",
                named.len(),
                candidates(named.iter().map(|n| n.id.short()).collect())
            )),
            (many, _) => Err(format!(
                "node id prefix {target:?} is ambiguous: {}",
                candidates(
                    many.iter()
                        .map(|n| format!("{} ({})", n.id.short(), n.name))
                        .collect()
                )
            )),
        }
    }

    /// A worker by its id or a unique prefix of it, as (server id, worker id).
    fn resolve_worker(&self, target: &str) -> Result<(String, String), String> {
        let workers = &self.cluster.workers;
        let exact: Vec<_> = workers.iter().filter(|w| w.id == target).collect();
        let found = if exact.is_empty() {
            workers
                .iter()
                .filter(|w| w.id.starts_with(target))
                .collect()
        } else {
            exact
        };
        match found.as_slice() {
            [one] => Ok((one.server_id.clone(), one.id.clone())),
            [] => Err(format!("no worker has an id starting {target:?}")),
            many => Err(format!(
                "worker {target:?} is ambiguous: {}",
                candidates(
                    many.iter()
                        .map(|w| format!("{} on {}", w.id, w.server_id))
                        .collect()
                )
            )),
        }
    }

    /// A job by `namespace/id`, or by id when one namespace has it.
    fn resolve_job(&self, target: &str) -> Result<JobKey, String> {
        let jobs = &self.cluster.jobs;
        if let Some((namespace, id)) = target.split_once('/') {
            let key = JobKey::new(namespace, id);
            return if jobs.contains_key(&key) {
                Ok(key)
            } else {
                Err(format!("no job {target:?}"))
            };
        }
        let found: Vec<&JobKey> = jobs.keys().filter(|k| k.id.as_str() == target).collect();
        match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(format!("no job {target:?}")),
            many => Err(format!(
                "job {target:?} is in several namespaces: {} (give namespace/{target})",
                candidates(many.iter().map(|k| k.namespace.to_string()).collect())
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_commands_or_usage() {
        let node = |verb, node: &str| -> Result<CommandLine, &str> {
            Ok(CommandLine::Node {
                verb,
                node: node.to_owned(),
            })
        };
        let cases: Vec<(&str, Result<CommandLine, &str>)> = vec![
            ("nodes", Ok(CommandLine::View(ViewKind::Nodes))),
            (" evals ", Ok(CommandLine::View(ViewKind::Evals))),
            ("quit", Ok(CommandLine::Quit)),
            ("node offline node-3", node(NodeVerb::Offline, "node-3")),
            ("node online ab12", node(NodeVerb::Online, "ab12")),
            ("node drain n1", node(NodeVerb::Drain(None), "n1")),
            (
                "node drain n1 30m",
                node(NodeVerb::Drain(Some("30m".into())), "n1"),
            ),
            ("node ineligible n1", node(NodeVerb::Eligible(false), "n1")),
            (
                "workers pause",
                Ok(CommandLine::Workers {
                    pause: true,
                    worker: None,
                }),
            ),
            (
                "worker resume w-1",
                Ok(CommandLine::Workers {
                    pause: false,
                    worker: Some("w-1".into()),
                }),
            ),
            ("job stop web", Ok(CommandLine::StopJob("web".into()))),
            ("ns prod", Ok(CommandLine::Namespace(Some("prod".into())))),
            ("namespace *", Ok(CommandLine::Namespace(None))),
            ("ns", Err(NS_USAGE)),
            ("node offline", Err(NODE_USAGE)),
            ("node reboot n1", Err("unknown node action \"reboot\"")),
            ("workers nap", Err("unknown workers action \"nap\"")),
            ("job start web", Err(JOB_USAGE)),
            ("nosuch", Err("unknown command :nosuch")),
            ("nodes now", Err("unknown node action \"now\"")),
            ("", Err("empty command")),
        ];
        for (text, want) in cases {
            match (CommandLine::parse(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
