//! What goes into the console's state (keys, mouse, clock, news from the servers) and what
//! comes out of it (commands for the servers, the clipboard, quitting).

use crate::model::WorkerRow;
use crate::model::{
    BlockedRow, Change, ClusterInfo, EventRow, SchedulingStats, ServerView, Snapshot,
};
use drover_core::{AllocId, Allocation, DeploymentId, JobKey, NodeId, SampledUsage, Timestamp};
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use std::time::Duration;

/// Everything [`App::handle`](super::App::handle) reacts to.
#[derive(Clone, Debug)]
pub enum Input {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize {
        width: u16,
        height: u16,
    },
    /// The clock moved on: ages and time-left columns change with it.
    Tick(Timestamp),
    Update(Update),
}

/// News from the background tasks that talk to the servers.
#[derive(Clone, Debug)]
pub enum Update {
    Connection(Connection),
    /// The server followed from now on (its URL as dialed): the first, or the next one
    /// answering after it went away.
    Serving(String),
    /// Everything the read RPCs answered after a (re)connect.
    Snapshot(Box<Snapshot>),
    /// The events of one stream message, decoded.
    Events(Vec<(Change, EventRow)>),
    Cluster(ClusterInfo),
    /// What each server the console could ask said of itself.
    ServerViews(Vec<ServerView>),
    Workers(Vec<WorkerRow>),
    Scheduling(SchedulingStats),
    Blocked(Vec<BlockedRow>),
    /// The outcome of a command: what to tell the operator.
    CommandDone(Result<String, String>),
    AllocDetail(Box<Allocation>),
    /// What a node's running allocations use, fetched for its detail (`None`: no task
    /// sampled yet).
    NodeUsage(NodeId, Option<SampledUsage>),
    /// What the console's token may do (asked at each load when ACLs are on).
    Permissions(super::Permissions),
    /// From the stream of the logs pane's target (news of another target is dropped).
    Logs(super::LogTarget, super::LogNews),
}

/// The state of the link to the server, which the status bar shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Connection {
    Connecting,
    Connected,
    /// Lost (or never made); the background task retries by itself.
    Lost {
        reason: String,
        retry_in: Duration,
    },
}

/// What an operator asked the cluster to do. Executed by a background task; its outcome
/// comes back as [`Update::CommandDone`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Offline(Vec<NodeId>),
    Online(Vec<NodeId>),
    Drain {
        nodes: Vec<NodeId>,
        deadline: Option<Duration>,
    },
    EndDrain(Vec<NodeId>),
    SetEligibility {
        nodes: Vec<NodeId>,
        eligible: bool,
    },
    PauseWorker {
        server_id: String,
        worker_id: String,
    },
    ResumeWorker {
        server_id: String,
        worker_id: String,
    },
    PauseAllWorkers,
    ResumeAllWorkers,
    SetWorkerCount {
        server_id: String,
        count: u32,
    },
    StopJob(JobKey),
    /// Restarts an allocation's running tasks in place, on its node.
    RestartAlloc(AllocId),
    /// Stops an allocation; its job's scheduler places a replacement.
    StopAlloc(AllocId),
    /// Promotes every canary of a deployment (the server refuses while any is unhealthy).
    PromoteDeployment(DeploymentId),
    /// Pauses (`pause`) or resumes a deployment.
    PauseDeployment {
        id: DeploymentId,
        pause: bool,
    },
    /// Marks a deployment failed; with auto_revert its job goes back to its stable version.
    FailDeployment(DeploymentId),
    /// Not an action: fetches one allocation in full for its detail.
    FetchAlloc(AllocId),
    /// Not an action: fetches a node's allocations for the usage its detail shows.
    FetchNodeUsage(NodeId),
}

impl Command {
    /// Whether it changes the cluster (and so is refused in read-only mode).
    pub fn is_action(&self) -> bool {
        !matches!(self, Command::FetchAlloc(_) | Command::FetchNodeUsage(_))
    }
}

/// What the runtime must do after [`App::handle`](super::App::handle).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    Run(Command),
    /// Put this text on the clipboard (OSC 52).
    Copy(String),
    /// Stream this task output into the logs pane, ending any stream before it.
    StreamLogs(super::LogTarget),
    /// The logs pane closed: end its stream.
    StopLogs,
}
