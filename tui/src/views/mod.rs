//! The views, one component each. A view knows its columns, which rows it has, how to
//! order and describe each row, what its detail pane says and which keys it takes; the
//! generic table state (the app's `ListState`) and renderer do the rest. Views never
//! import the app: what both need lives in [`crate::kinds`].

mod allocs;
mod blocked;
mod deployments;
mod evals;
mod events;
mod format;
mod jobs;
mod nodes;
mod servers;
mod services;
mod workers;

pub use format::{age, clock, duration_short, percent, sentence};
pub use nodes::time_left;

pub use crate::kinds::{AllocScope, HealthFilter, TOPICS, Tone, ViewKind};
use crate::kinds::{RowKey, SortKey};
use crate::model::Cluster;
use drover_core::{NodeId, Timestamp};

impl ViewKind {
    /// The component that draws this view.
    pub fn component(self) -> &'static dyn TableView {
        match self {
            ViewKind::Nodes => &nodes::NodesView,
            ViewKind::Evals => &evals::EvalsView,
            ViewKind::Blocked => &blocked::BlockedView,
            ViewKind::Workers => &workers::WorkersView,
            ViewKind::Jobs => &jobs::JobsView,
            ViewKind::Allocs => &allocs::AllocsView,
            ViewKind::Events => &events::EventsView,
            ViewKind::Servers => &servers::ServersView,
            ViewKind::Services => &services::ServicesView,
            ViewKind::Deployments => &deployments::DeploymentsView,
        }
    }
}

/// One column of a table.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub title: &'static str,
    /// The width the column is drawn at (the last kept column takes what is left).
    pub width: u16,
    /// Lower is more important: on a narrow terminal the highest numbers are dropped first.
    pub priority: u8,
}

const fn col(title: &'static str, width: u16, priority: u8) -> Column {
    Column {
        title,
        width,
        priority,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
    /// A name whose end tells it from its siblings (`batch/dispatch-…-ab12cd34`,
    /// `sim-00017`): cut in the middle when it does not fit, never at the end.
    pub keep_end: bool,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Self {
        Self::tone(text, Tone::Normal)
    }

    pub fn tone(text: impl Into<String>, tone: Tone) -> Self {
        Self {
            text: text.into(),
            tone,
            keep_end: false,
        }
    }

    /// A name (job, allocation, node) that keeps its end when cut.
    pub fn name(text: impl Into<String>) -> Self {
        Self {
            keep_end: true,
            ..Self::new(text)
        }
    }
}

/// One line of a detail pane: a label and its value, a heading when the label is empty,
/// or a line of text drawn as it is (`raw`: a payload, whose indentation is its shape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetailLine {
    pub label: String,
    pub value: Cell,
    pub raw: bool,
}

impl DetailLine {
    pub fn heading(text: impl Into<String>) -> Self {
        Self {
            label: String::new(),
            value: Cell::tone(text, Tone::Dim),
            raw: false,
        }
    }

    pub fn field(label: impl Into<String>, value: impl Into<String>) -> Self {
        Self::toned(label, value, Tone::Normal)
    }

    pub fn toned(label: impl Into<String>, value: impl Into<String>, tone: Tone) -> Self {
        Self {
            label: label.into(),
            value: Cell::tone(value, tone),
            raw: false,
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self {
            label: String::new(),
            value: Cell::new(text),
            raw: true,
        }
    }
}

/// A key a view takes, for the help screen. `action` keys change the cluster: they are
/// hidden and refused in read-only mode.
#[derive(Clone, Copy, Debug)]
pub struct KeyHelp {
    pub keys: &'static str,
    pub what: &'static str,
    pub action: bool,
}

const fn key(keys: &'static str, what: &'static str) -> KeyHelp {
    KeyHelp {
        keys,
        what,
        action: false,
    }
}

const fn action(keys: &'static str, what: &'static str) -> KeyHelp {
    KeyHelp {
        keys,
        what,
        action: true,
    }
}

/// What a view reads besides the cluster: the clock and the view-specific scopes.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    pub cluster: &'a Cluster,
    pub now: Timestamp,
    /// Which allocations the allocations view shows.
    pub alloc_scope: &'a AllocScope,
    pub health: HealthFilter,
    /// Only events of this topic; `None`: all.
    pub topic: Option<&'static str>,
    /// Only jobs, evals, blocked evals and deployments of this namespace; `None`: every
    /// namespace.
    pub namespace: Option<&'a str>,
    /// The allocation fetched in full for the allocation detail, when it has arrived.
    pub alloc_detail: Option<&'a drover_core::Allocation>,
    /// The sampled usage fetched for the node detail, with the node it is of.
    pub node_usage: Option<&'a (NodeId, Option<drover_core::SampledUsage>)>,
    /// Seconds east of UTC of the operator's clock, for times of day (0 in tests).
    pub clock_offset: i32,
}

/// A view as a component of the console.
pub trait TableView: Sync {
    fn kind(&self) -> ViewKind;
    fn columns(&self) -> &'static [Column];
    /// Every row the view may show, in any order: a superset of the rows
    /// [`TableView::natural_rank`] places.
    fn rows(&self, ctx: &Ctx) -> Vec<RowKey>;
    /// Where the row sits in the view's natural order (ties end by the row key), or
    /// `None` when the view does not show it: gone, or outside the view's scope (health
    /// group, job, topic). Depends only on the row's own object, so a change to one object
    /// moves only its own row.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>>;
    /// The cells of one row; `None` when the row no longer exists.
    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>>;
    /// The value column `column` orders by.
    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey;
    /// The detail pane of one row; empty when the view has none.
    fn detail(&self, _ctx: &Ctx, _key: &RowKey) -> Vec<DetailLine> {
        Vec::new()
    }
    /// Lines drawn above the table (gauges of the view as a whole); empty for none.
    fn summary(&self, _ctx: &Ctx) -> Vec<Vec<Cell>> {
        Vec::new()
    }
    /// The keys this view adds to the global ones.
    fn keys(&self) -> &'static [KeyHelp];
}

/// The keys every view takes, listed first in the help.
pub const GLOBAL_KEYS: &[KeyHelp] = &[
    key(
        "j/k ↑/↓ pgup/pgdn",
        "move the selection (home/end: to the ends)",
    ),
    key("tab / shift-tab", "next / previous view"),
    key(
        ":nodes :allocs …",
        "go to a view (:evals :blocked :workers :jobs :deployments :services :servers :events too)",
    ),
    key(
        ":node offline ID",
        "also online, drain, undrain; ID: name or id prefix",
    ),
    key(
        ":workers pause",
        "or resume (all, or one: :worker pause ID); :job stop ID",
    ),
    key(
        ":ns NAME",
        "NAME's jobs, evals, blocked, deployments (:ns * for all)",
    ),
    key("/", "filter: text, !text inverts, ~regex (esc clears)"),
    key("1-9", "sort by that column (again: reverse)"),
    key(
        "enter / esc",
        "drill down (a node's or job's allocations) or open the detail / close, clear, go back",
    ),
    key(
        "i  J/K",
        "the row's detail (nodes and jobs too) / scroll the detail",
    ),
    key("y", "copy the selected id to the clipboard"),
    key("? / q ctrl-c", "this help / quit"),
];

impl<'a> Ctx<'a> {
    /// What the views read of `cluster` at `now` with no scope narrowed: every health
    /// group, topic and namespace, the whole cluster's allocations.
    pub fn new(cluster: &'a Cluster, now: Timestamp) -> Self {
        Ctx {
            cluster,
            now,
            alloc_scope: &AllocScope::All,
            health: HealthFilter::All,
            topic: None,
            namespace: None,
            alloc_detail: None,
            node_usage: None,
            clock_offset: 0,
        }
    }

    /// Whether a row of `namespace` is in the console's namespace scope.
    pub fn in_namespace(&self, namespace: &str) -> bool {
        self.namespace.is_none_or(|ns| ns == namespace)
    }
}
