//! The console's state and its reactions, with no terminal and no network: every input
//! goes through [`App::handle`], which changes the state and returns the one [`Action`]
//! the runtime must carry out. Tests drive it directly.

mod actions;
mod input;
mod keys;
mod list;
mod modes;
mod rate;

pub use input::{Action, Command, Connection, Input, Update};
pub use list::{ListState, RowKey, Sort, SortKey, natural_cmp, natural_key};
pub use modes::{Confirm, Mode, Prompt, PromptKind};
pub use rate::PlacementRate;

use crate::model::Cluster;
use crate::views::{Ctx, HealthFilter, TOPICS, TableView, Tone, ViewKind};
use drover_core::{Allocation, JobKey, Timestamp};

/// A message in the status bar, and how it should read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub tone: Tone,
}

#[derive(Debug)]
pub struct App {
    pub cluster: Cluster,
    pub view: ViewKind,
    /// One per view, indexed by `ViewKind as usize`; each keeps its filter, sort and
    /// selection while another view is shown.
    lists: [ListState; 7],
    /// Per view: the data generation its order was built for; `None` forces a rebuild.
    built: [Option<u64>; 7],
    /// Bumped on every change to the data the views read.
    generation: u64,
    pub mode: Mode,
    pub read_only: bool,
    pub address: String,
    pub connection: Connection,
    pub notice: Option<Notice>,
    pub now: Timestamp,
    pub width: u16,
    pub height: u16,
    pub detail_open: bool,
    pub health: HealthFilter,
    /// Index into [`TOPICS`].
    pub topic: usize,
    /// The job whose allocations the allocations view shows.
    pub alloc_job: Option<JobKey>,
    pub alloc_detail: Option<Allocation>,
    pub placements: PlacementRate,
    /// Something visible changed since the last frame.
    pub dirty: bool,
}

impl App {
    pub fn new(address: impl Into<String>, read_only: bool, now: Timestamp) -> Self {
        Self {
            cluster: Cluster::default(),
            view: ViewKind::Nodes,
            lists: Default::default(),
            built: [None; 7],
            generation: 0,
            mode: Mode::Normal,
            read_only,
            address: address.into(),
            connection: Connection::Connecting,
            notice: None,
            now,
            width: 80,
            height: 24,
            detail_open: false,
            health: HealthFilter::All,
            topic: 0,
            alloc_job: None,
            alloc_detail: None,
            placements: PlacementRate::default(),
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
        if self.built[v] != Some(self.generation) {
            let order = self.build_order();
            self.lists[v].set_order(order);
            self.built[v] = Some(self.generation);
        }
        let height = crate::ui::layout::table_rows(self);
        self.lists[v].scroll_into_view(height);
    }

    /// Whether the current view's rows were built before the latest data change. Filter,
    /// sort and view changes never leave it set: keys rebuild at once.
    pub fn rows_outdated(&self) -> bool {
        self.built[self.view as usize] != Some(self.generation)
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

    /// Forces the current view to rebuild its order (its filter or sort changed).
    fn invalidate_view(&mut self) {
        self.built[self.view as usize] = None;
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
            alloc_job: self.alloc_job.as_ref(),
            health: self.health,
            topic: self.topic_filter(),
            alloc_detail: self.alloc_detail.as_ref(),
        }
    }

    fn build_order(&self) -> Vec<RowKey> {
        let ctx = self.ctx();
        let view = self.component();
        let list = self.list();
        let mut rows = view.rows(&ctx);
        let needle = list.filter.trim().to_lowercase();
        if !needle.is_empty() {
            rows.retain(|key| {
                view.cells(&ctx, key).is_some_and(|cells| {
                    cells
                        .iter()
                        .any(|c| c.text.to_lowercase().contains(&needle))
                })
            });
        }
        if let Some(sort) = list.sort {
            let mut keyed: Vec<(SortKey, RowKey)> = rows
                .into_iter()
                .map(|k| (view.sort_key(&ctx, &k, sort.column), k))
                .collect();
            // Stable: rows with equal values keep the view's natural order.
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            if sort.descending {
                keyed.reverse();
            }
            rows = keyed.into_iter().map(|(_, k)| k).collect();
        }
        rows
    }

    fn apply(&mut self, update: Update) {
        match update {
            Update::Connection(c) => {
                if c == Connection::Connected && self.connection != Connection::Connected {
                    self.notice = None;
                }
                self.connection = c;
                return;
            }
            Update::Snapshot(snapshot) => self.cluster.load(*snapshot),
            Update::Events(events) => {
                for (change, row) in events {
                    if self.cluster.apply(change) {
                        self.placements.record(self.now);
                    }
                    self.cluster.log_event(row);
                }
            }
            Update::Cluster(info) => {
                self.cluster.index = self.cluster.index.max(info.applied_index);
                self.cluster.info = info;
                return;
            }
            // Polled every few seconds: an unchanged answer must not rebuild the view.
            Update::Workers(workers) => {
                if self.cluster.workers == workers {
                    return;
                }
                self.cluster.workers = workers;
            }
            Update::Scheduling(stats) => {
                self.cluster.stats = stats;
                return;
            }
            Update::Blocked(rows) => {
                if self.cluster.blocked == rows {
                    return;
                }
                self.cluster.blocked = rows;
            }
            Update::CommandDone(result) => {
                self.notice = Some(match result {
                    Ok(text) => Notice {
                        text,
                        tone: Tone::Good,
                    },
                    Err(text) => Notice {
                        text,
                        tone: Tone::Bad,
                    },
                });
                return;
            }
            Update::AllocDetail(alloc) => self.alloc_detail = Some(*alloc),
        }
        self.generation += 1;
    }

    fn tell(&mut self, text: impl Into<String>, tone: Tone) {
        self.notice = Some(Notice {
            text: text.into(),
            tone,
        });
    }
}

#[cfg(test)]
mod tests;
