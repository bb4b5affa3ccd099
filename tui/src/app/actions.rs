//! The keys that change the cluster: which command each one asks for, the confirmation
//! the destructive ones go through first, and the read-only guard.

use super::command_line::NodeVerb;
use super::{Action, App, Area, Command, Confirm, Mode, Permissions, Prompt, PromptKind, RowKey};
use crate::views::{Tone, ViewKind};
use drover_core::{DeploymentStatus, Eligibility, NodeHealth, NodeId};

impl App {
    /// The keys that act on the cluster, named as the help lists them (`o`, `ctrl-k`). In
    /// read-only mode every one is refused.
    pub(super) fn on_action_key(&mut self, key: &str) -> Action {
        let known = self
            .component()
            .keys()
            .iter()
            .any(|k| k.action && k.keys == key);
        if !known {
            return Action::None;
        }
        if self.read_only {
            self.tell("read-only console: actions are disabled", Tone::Warn);
            return Action::None;
        }
        if let Some(area) = Area::of_view(self.view)
            && !self.permissions.allows(area)
        {
            self.tell_lacking(area);
            return Action::None;
        }
        let c = key.chars().next().unwrap_or_default();
        match (self.view, key) {
            (ViewKind::Nodes, _) => self.node_action(c),
            (ViewKind::Workers, _) => self.worker_action(c),
            (ViewKind::Jobs, "x") => {
                if let Some(RowKey::Job(job)) = self.list().selected.clone() {
                    self.confirm_stop_job(job);
                }
                Action::None
            }
            (ViewKind::Allocs, "r" | "ctrl-k") => {
                self.alloc_action(key == "r");
                Action::None
            }
            (ViewKind::Deployments, _) => self.deployment_action(c),
            _ => Action::None,
        }
    }

    /// Asks before restarting (`restart`) or stopping the selected allocation, naming it
    /// as the table does; a token without `alloc-lifecycle` in its namespace is told so.
    fn alloc_action(&mut self, restart: bool) {
        let Some(RowKey::Alloc(id)) = self.list().selected.clone() else {
            return;
        };
        let Some(alloc) = self.cluster.allocs.get(&id) else {
            return;
        };
        let namespace = alloc.job.namespace.to_string();
        if !self.permissions.may_touch_allocs_in(&namespace) {
            self.tell(
                format!("your token lacks alloc-lifecycle in namespace {namespace:?}"),
                Tone::Warn,
            );
            return;
        }
        let what = format!("allocation {} ({})", alloc.name(), id.short());
        self.mode = Mode::Confirm(if restart {
            Confirm::new(
                format!("restart the tasks of {what} in place?"),
                Command::RestartAlloc(id),
            )
        } else {
            Confirm::new(
                format!("stop {what}? its job places a replacement"),
                Command::StopAlloc(id),
            )
        });
    }

    /// Promote (`p`), pause (`P`), resume (`R`) or fail (`f`) the selected deployment.
    /// All but resuming ask first; what the deployment's status already rules out is
    /// refused here, the rest (canaries not healthy yet) by the server.
    fn deployment_action(&mut self, c: char) -> Action {
        let Some(RowKey::Deployment(id)) = self.list().selected.clone() else {
            return Action::None;
        };
        let Some(d) = self.cluster.deployments.get(&id) else {
            return Action::None;
        };
        if !self.permissions.may_stop_jobs_in(&d.namespace) {
            let text = format!("your token lacks submit-job in namespace {:?}", d.namespace);
            self.tell(text, Tone::Warn);
            return Action::None;
        }
        let what = format!(
            "deployment {} of {} v{}",
            id.short(),
            d.job_id,
            d.job_version
        );
        if !d.is_active() {
            let text = format!("{what} is {}: it no longer changes", d.status.as_str());
            self.tell(text, Tone::Warn);
            return Action::None;
        }
        let paused = d.status == DeploymentStatus::Paused;
        let (question, command) = match c {
            'p' if !d.requires_promotion() => {
                self.tell(format!("{what} has no canaries to promote"), Tone::Warn);
                return Action::None;
            }
            'p' => (
                format!("promote the canaries of {what}? the rest of each group rolls out"),
                Command::PromoteDeployment(id),
            ),
            'P' if paused => {
                self.tell(format!("{what} is already paused"), Tone::Warn);
                return Action::None;
            }
            'P' => (
                format!("pause {what}? nothing more of it is placed until resumed"),
                Command::PauseDeployment { id, pause: true },
            ),
            'R' if !paused => {
                self.tell(format!("{what} is not paused"), Tone::Warn);
                return Action::None;
            }
            'R' => return self.run(Command::PauseDeployment { id, pause: false }),
            'f' => (
                format!("fail {what}? with auto_revert its job goes back to its stable version"),
                Command::FailDeployment(id),
            ),
            _ => return Action::None,
        };
        self.mode = Mode::Confirm(Confirm::new(question, command));
        Action::None
    }

    fn node_action(&mut self, c: char) -> Action {
        let nodes: Vec<NodeId> = self
            .list()
            .targets()
            .into_iter()
            .filter_map(|k| match k {
                RowKey::Node(id) => Some(id),
                _ => None,
            })
            .collect();
        if nodes.is_empty() {
            return Action::None;
        }
        let verb = match c {
            'o' => NodeVerb::Offline,
            'O' => NodeVerb::Online,
            'd' => NodeVerb::Drain(None),
            'D' => NodeVerb::Undrain,
            'e' => {
                // Toggle from the first target's eligibility; all targets end up the same.
                let eligible = self
                    .cluster
                    .nodes
                    .get(&nodes[0])
                    .is_some_and(|n| n.eligibility == Eligibility::Eligible);
                NodeVerb::Eligible(!eligible)
            }
            _ => return Action::None,
        };
        self.act_on_nodes(verb, nodes)
    }

    /// What a node key or a `:node` command asks for: destructive verbs ask first.
    pub(super) fn act_on_nodes(&mut self, verb: NodeVerb, nodes: Vec<NodeId>) -> Action {
        let what = describe_nodes(self, &nodes);
        match verb {
            NodeVerb::Offline => {
                self.mode = Mode::Confirm(Confirm::new(
                    format!("offline {what}? it gets no new placements"),
                    Command::Offline(nodes),
                ))
            }
            NodeVerb::Online => {
                // Onlining a suspended node overrides the health machine (lost grace, flaky
                // cool-down, readiness): ask first. Onlining an offlined node does not.
                let overrides = nodes.iter().any(|id| {
                    self.cluster
                        .nodes
                        .get(id)
                        .is_some_and(|n| matches!(n.health, NodeHealth::Suspended(_)))
                });
                if !overrides {
                    return self.run(Command::Online(nodes));
                }
                self.mode = Mode::Confirm(Confirm::new(
                    format!("override the suspension of {what}? it becomes healthy at once"),
                    Command::Online(nodes),
                ))
            }
            NodeVerb::Drain(None) => {
                self.mode = Mode::Prompt(Prompt {
                    kind: PromptKind::DrainDeadline(nodes),
                    input: "1h".to_owned(),
                })
            }
            NodeVerb::Drain(Some(deadline)) => {
                self.submit_prompt(Prompt {
                    kind: PromptKind::DrainDeadline(nodes),
                    input: deadline,
                });
            }
            NodeVerb::Undrain => return self.run(Command::EndDrain(nodes)),
            NodeVerb::Eligible(false) => {
                self.mode = Mode::Confirm(Confirm::new(
                    format!("make {what} ineligible for new placements?"),
                    Command::SetEligibility {
                        nodes,
                        eligible: false,
                    },
                ));
            }
            NodeVerb::Eligible(true) => {
                return self.run(Command::SetEligibility {
                    nodes,
                    eligible: true,
                });
            }
        }
        Action::None
    }

    fn worker_action(&mut self, c: char) -> Action {
        let selected = match self.list().selected.clone() {
            Some(RowKey::Worker(server_id, worker_id)) => Some((server_id, worker_id)),
            _ => None,
        };
        match (c, selected) {
            ('p', Some(worker)) => self.act_on_workers(true, Some(worker)),
            ('r', Some(worker)) => self.act_on_workers(false, Some(worker)),
            ('P', _) => self.act_on_workers(true, None),
            ('R', _) => self.act_on_workers(false, None),
            ('c', Some((server_id, _))) => {
                let current = self
                    .cluster
                    .workers
                    .iter()
                    .filter(|w| w.server_id == server_id)
                    .count();
                self.mode = Mode::Prompt(Prompt {
                    kind: PromptKind::WorkerCount { server_id },
                    input: current.to_string(),
                });
                Action::None
            }
            _ => Action::None,
        }
    }

    /// Pauses (asking first) or resumes one worker, given as (server id, worker id), or
    /// every worker of every server.
    pub(super) fn act_on_workers(
        &mut self,
        pause: bool,
        worker: Option<(String, String)>,
    ) -> Action {
        match (pause, worker) {
            (true, Some((server_id, worker_id))) => {
                self.mode = Mode::Confirm(Confirm::new(
                    format!("pause worker {worker_id}?"),
                    Command::PauseWorker {
                        server_id,
                        worker_id,
                    },
                ));
                Action::None
            }
            (false, Some((server_id, worker_id))) => self.run(Command::ResumeWorker {
                server_id,
                worker_id,
            }),
            (true, None) => {
                self.mode = Mode::Confirm(Confirm::new(
                    "pause every worker of every server? nothing is scheduled until resumed",
                    Command::PauseAllWorkers,
                ));
                Action::None
            }
            (false, None) => self.run(Command::ResumeAllWorkers),
        }
    }

    /// Says the token cannot act in `area`, in the words the server would use.
    pub(super) fn tell_lacking(&mut self, area: Area) {
        self.tell(
            format!("your token lacks {}", Permissions::lacking(area)),
            Tone::Warn,
        );
    }

    pub(super) fn confirm_stop_job(&mut self, job: drover_core::JobKey) {
        if !self.permissions.may_stop_jobs_in(&job.namespace) {
            self.tell(
                format!(
                    "your token lacks submit-job in namespace {:?}",
                    job.namespace
                ),
                Tone::Warn,
            );
            return;
        }
        self.mode = Mode::Confirm(Confirm::new(
            format!("stop job {}?", job.id),
            Command::StopJob(job),
        ));
    }

    /// Hands a command to the runtime, refusing actions in read-only mode (the last guard:
    /// the keys are already refused).
    pub(super) fn run(&mut self, command: Command) -> Action {
        if self.read_only && command.is_action() {
            self.tell("read-only console: actions are disabled", Tone::Warn);
            return Action::None;
        }
        if command.is_action() {
            self.tell("sent, waiting for the server…", Tone::Dim);
        }
        Action::Run(command)
    }
}

/// `node-3` for one node, `4 nodes` for several.
pub(super) fn describe_nodes(app: &App, nodes: &[NodeId]) -> String {
    match nodes {
        [one] => app
            .cluster
            .nodes
            .get(one)
            .map(|n| format!("node {}", n.name))
            .unwrap_or_else(|| format!("node {}", one.short())),
        many => format!("{} nodes", many.len()),
    }
}
