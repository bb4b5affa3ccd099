//! The console's state and its reactions, with no terminal and no network: every input
//! goes through [`App::handle`], which changes the state and returns the one [`Action`]
//! the runtime must carry out. Tests drive it directly.

mod actions;
mod command_line;
mod filter;
mod input;
mod keys;
mod list;
mod logs;
mod logs_keys;
mod modes;
mod navigate;
mod order;
mod permissions;
mod rate;
mod refresh;

pub use crate::kinds::{RowKey, SortKey, natural_cmp, natural_key};
pub use command_line::{CommandLine, NodeVerb};
pub use filter::RowFilter;
pub use input::{Action, Command, Connection, Input, Update};
pub use list::{ListState, Sort};
pub use logs::{LogNews, LogPane, LogTarget, TAIL_LINES as LOG_TAIL_LINES};
pub use modes::{Confirm, Mode, Prompt, PromptKind};
pub use order::{Rank, RowOrder};
pub use permissions::{Area, JobRights, Permissions};
pub use rate::PlacementRate;
pub use refresh::Stale;

use crate::model::Cluster;
use crate::views::{AllocScope, Ctx, HealthFilter, TOPICS, TableView, Tone, ViewKind};
use drover_core::{Allocation, NodeId, SampledUsage, Timestamp};

/// How long a notice stays in the status bar: long enough to read a sentence, short
/// enough that an old outcome is not taken for the state of things now.
pub const NOTICE_TTL: std::time::Duration = std::time::Duration::from_secs(5);

/// A message in the status bar, and how it should read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub tone: Tone,
    /// When it was told; it goes once [`NOTICE_TTL`] has passed.
    pub since: Timestamp,
}

#[derive(Debug)]
pub struct App {
    pub cluster: Cluster,
    pub view: ViewKind,
    /// One per view, indexed by `ViewKind as usize`; each keeps its filter, sort and
    /// selection while another view is shown.
    lists: [ListState; ViewKind::COUNT],
    /// Per view, indexed like `lists`: what its order lacks of the latest data.
    stale: [Stale; ViewKind::COUNT],
    pub mode: Mode,
    pub read_only: bool,
    /// What the token may do; actions outside it are greyed and refused with the reason.
    pub permissions: Permissions,
    pub address: String,
    /// The server answering now (its URL with its real scheme), once one has: of several
    /// listed, the one the footer names.
    pub serving: Option<String>,
    pub connection: Connection,
    /// Whether the server ever answered: until it has, a failure means the address is
    /// wrong or the server is not up, not that an empty cluster was lost.
    pub ever_connected: bool,
    pub notice: Option<Notice>,
    pub now: Timestamp,
    pub width: u16,
    pub height: u16,
    pub detail_open: bool,
    /// Lines of the detail scrolled past (`J`/`K`); back to the top when the row changes.
    pub detail_scroll: u16,
    /// Lines of the help scrolled past (j/k while it is open); 0 when it opens.
    pub help_scroll: u16,
    /// Seconds east of UTC of the operator's clock, for times of day. The runtime sets it
    /// from the local time zone; it stays 0 (UTC) in tests, so they read the same anywhere.
    pub clock_offset: i32,
    pub health: HealthFilter,
    /// Index into [`TOPICS`].
    pub topic: usize,
    /// The namespace the jobs, evals, blocked and deployments views show (`:ns NAME`,
    /// `:ns *`); `None`: every namespace.
    pub namespace: Option<String>,
    /// Which allocations the allocations view shows.
    pub alloc_scope: AllocScope,
    /// The view `enter` drilled into the allocations view from, which `esc` goes back to
    /// (with its selection as it was); `None` when the allocations view was opened as a
    /// view of its own.
    pub drilled_from: Option<ViewKind>,
    pub alloc_detail: Option<Allocation>,
    /// The sampled usage of the node whose detail was opened last, once fetched.
    pub node_usage: Option<(NodeId, Option<SampledUsage>)>,
    pub placements: PlacementRate,
    /// The logs pane, while open (`l` on an allocation).
    pub logs: Option<LogPane>,
    /// Something visible changed since the last frame.
    pub dirty: bool,
}

impl App {
    pub fn new(address: impl Into<String>, read_only: bool, now: Timestamp) -> Self {
        Self {
            cluster: Cluster::default(),
            view: ViewKind::Nodes,
            lists: Default::default(),
            stale: std::array::from_fn(|_| Stale::All),
            mode: Mode::Normal,
            read_only,
            permissions: Permissions::default(),
            address: address.into(),
            serving: None,
            connection: Connection::Connecting,
            ever_connected: false,
            notice: None,
            now,
            width: 80,
            height: 24,
            detail_open: false,
            detail_scroll: 0,
            help_scroll: 0,
            clock_offset: 0,
            health: HealthFilter::All,
            topic: 0,
            namespace: None,
            alloc_scope: AllocScope::All,
            drilled_from: None,
            alloc_detail: None,
            node_usage: None,
            placements: PlacementRate::default(),
            logs: None,
            dirty: true,
        }
    }

    /// Reacts to one input. State changes set [`App::dirty`]; side effects are returned.
    pub fn handle(&mut self, input: Input) -> Action {
        match input {
            Input::Update(update) => {
                self.apply(update);
                self.dirty = true;
                Action::None
            }
            Input::Tick(now) => {
                self.now = now;
                self.placements.advance(now);
                if self
                    .notice
                    .as_ref()
                    .is_some_and(|n| now.since(n.since) >= NOTICE_TTL)
                {
                    self.notice = None;
                }
                self.dirty = true;
                Action::None
            }
            Input::Resize { width, height } => {
                self.width = width;
                self.height = height;
                self.dirty = true;
                self.prepare_frame();
                Action::None
            }
            Input::Key(key) => {
                self.prepare_frame();
                let action = self.on_key(key);
                self.dirty = true;
                self.prepare_frame();
                action
            }
            Input::Mouse(mouse) => {
                self.prepare_frame();
                let action = self.on_mouse(mouse);
                self.prepare_frame();
                action
            }
        }
    }

    /// Brings the current view's rows up to date and keeps the cursor in sight. The runtime
    /// calls it before each frame it draws, so drawing itself only reads.
    pub fn prepare_frame(&mut self) {
        let v = self.view as usize;
        let stale = std::mem::replace(&mut self.stale[v], Stale::Fresh);
        match stale {
            Stale::Fresh => {}
            Stale::All => {
                let order = refresh::build(self.component(), &self.ctx(), self.list());
                self.lists[v].set_order(order);
            }
            Stale::Rows(touched) => {
                let moves = refresh::replace(self.component(), &self.ctx(), self.list(), touched);
                let list = &mut self.lists[v];
                for (key, rank) in moves {
                    list.order.set(key, rank);
                }
                list.follow_selection();
            }
        }
        let height = crate::ui::layout::table_rows(self);
        self.lists[v].scroll_into_view(height);
    }

    /// What the current view must redo before its next frame. Filter, sort and view
    /// changes never leave it stale: keys bring the order up to date at once.
    pub fn staleness(&self) -> &Stale {
        &self.stale[self.view as usize]
    }

    /// Whether the current view's next frame re-sorts all its rows (as opposed to
    /// re-placing the few that changed).
    pub fn needs_full_rebuild(&self) -> bool {
        *self.staleness() == Stale::All
    }

    pub fn list(&self) -> &ListState {
        &self.lists[self.view as usize]
    }

    pub fn list_of(&self, view: ViewKind) -> &ListState {
        &self.lists[view as usize]
    }

    fn list_mut(&mut self) -> &mut ListState {
        &mut self.lists[self.view as usize]
    }

    /// Forces the current view to rebuild its order (its filter, sort or scope changed).
    fn invalidate_view(&mut self) {
        self.stale[self.view as usize] = Stale::All;
    }

    fn invalidate(&mut self, view: ViewKind) {
        self.stale[view as usize] = Stale::All;
    }

    fn touch(&mut self, view: ViewKind, key: RowKey) {
        let shown = self.lists[view as usize].order.len();
        self.stale[view as usize].touch(key, shown);
    }

    pub fn component(&self) -> &'static dyn TableView {
        self.view.component()
    }

    pub fn topic_filter(&self) -> Option<&'static str> {
        TOPICS.get(self.topic).copied().flatten()
    }

    /// What the views read.
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            cluster: &self.cluster,
            now: self.now,
            alloc_scope: &self.alloc_scope,
            health: self.health,
            topic: self.topic_filter(),
            namespace: self.namespace.as_deref(),
            alloc_detail: self.alloc_detail.as_ref(),
            node_usage: self.node_usage.as_ref(),
            clock_offset: self.clock_offset,
        }
    }

    fn apply(&mut self, update: Update) {
        match update {
            Update::Connection(c) => {
                if c == Connection::Connected && self.connection != Connection::Connected {
                    self.notice = None;
                    self.ever_connected = true;
                }
                self.connection = c;
            }
            Update::Serving(url) => {
                if let Some(old) = self.serving.as_ref().filter(|old| **old != url) {
                    let text = format!("{old} stopped answering: following {url}");
                    self.tell(text, Tone::Warn);
                }
                self.serving = Some(url);
            }
            Update::Snapshot(snapshot) => {
                self.cluster.load(*snapshot);
                for view in [
                    ViewKind::Nodes,
                    ViewKind::Evals,
                    ViewKind::Jobs,
                    ViewKind::Allocs,
                    ViewKind::Services,
                    ViewKind::Deployments,
                ] {
                    self.invalidate(view);
                }
            }
            Update::Events(events) => {
                let mut rows = Vec::new();
                let mut all = Vec::new();
                for (change, row) in events {
                    refresh::touched_by(&self.cluster, &change, &mut rows, &mut all);
                    if self.cluster.apply(change) {
                        self.placements.record(self.now);
                    }
                    let dropped = (self.cluster.events.len() == crate::model::EVENT_LOG_LEN)
                        .then(|| self.cluster.events.front().map(|e| e.seq))
                        .flatten();
                    self.cluster.log_event(row);
                    rows.extend(dropped.map(|seq| (ViewKind::Events, RowKey::Event(seq))));
                    if let Some(newest) = self.cluster.events.back() {
                        rows.push((ViewKind::Events, RowKey::Event(newest.seq)));
                    }
                }
                for view in all {
                    self.invalidate(view);
                }
                for (view, key) in rows {
                    self.touch(view, key);
                }
            }
            Update::Cluster(info) => {
                self.cluster.index = self.cluster.index.max(info.applied_index);
                if self.cluster.info != info {
                    self.cluster.info = info;
                    self.invalidate(ViewKind::Servers);
                }
            }
            Update::ServerViews(views) => {
                if self.cluster.server_views != views {
                    self.cluster.server_views = views;
                    self.invalidate(ViewKind::Servers);
                }
            }
            // Polled every few seconds: an unchanged answer must not rebuild the view.
            Update::Workers(workers) => {
                if self.cluster.workers == workers {
                    return;
                }
                self.cluster.workers = workers;
                self.invalidate(ViewKind::Workers);
            }
            Update::Scheduling(stats) => {
                self.cluster.stats = stats;
            }
            Update::Blocked(rows) => {
                if self.cluster.blocked == rows {
                    return;
                }
                self.cluster.blocked = rows;
                self.invalidate(ViewKind::Blocked);
            }
            Update::CommandDone(result) => match result {
                Ok(text) => self.tell(text, Tone::Good),
                Err(text) => self.tell(text, Tone::Bad),
            },
            // Read by the detail pane only: no row moves.
            Update::AllocDetail(alloc) => self.alloc_detail = Some(*alloc),
            Update::NodeUsage(node, usage) => self.node_usage = Some((node, usage)),
            Update::Permissions(permissions) => self.permissions = permissions,
            Update::Logs(target, news) => {
                if let Some(pane) = self.logs.as_mut().filter(|p| p.target == target) {
                    pane.apply(news);
                }
            }
        }
    }

    /// Why there is nothing to show yet, when the reason is the connection: the server was
    /// never reached (wrong address, not up) or is being reached for the first time.
    pub fn unreached(&self) -> Option<String> {
        if self.ever_connected {
            return None;
        }
        match &self.connection {
            Connection::Connected => None,
            Connection::Connecting => Some(format!("connecting to {}…", self.address)),
            Connection::Lost { reason, .. } => {
                Some(format!("cannot connect to {}: {reason}", self.address))
            }
        }
    }

    /// The server to name in one line: the one answering, else the first of those the
    /// console was given (and how many more), never the whole list.
    pub fn server(&self) -> String {
        if let Some(serving) = &self.serving {
            return serving.clone();
        }
        let mut listed = self
            .address
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let first = listed.next().unwrap_or(&self.address).to_owned();
        match listed.count() {
            0 => first,
            more => format!("{first} (+{more} more)"),
        }
    }

    fn tell(&mut self, text: impl Into<String>, tone: Tone) {
        self.notice = Some(Notice {
            text: text.into(),
            tone,
            since: self.now,
        });
    }
}

#[cfg(test)]
mod tests;
