//! Moving between views as k9s does: `tab` through the views, `enter` drills from a node
//! or a job into its allocations (elsewhere it opens the row's detail), `esc` closes,
//! clears, then goes back where the drill started.

use super::{Action, App, Command, RowKey};
use crate::views::{AllocScope, ViewKind};

impl App {
    pub(super) fn cycle_view(&mut self, step: isize) {
        let tabs = ViewKind::TABS;
        let i = tabs.iter().position(|v| *v == self.view).unwrap_or(0) as isize;
        let next = (i + step).rem_euclid(tabs.len() as isize) as usize;
        self.switch_to(tabs[next]);
    }

    /// Goes to `view` as a view of its own (a tab, a click, a `:` command): the
    /// allocations view then shows every allocation, and no drill is left to go back from.
    pub(super) fn switch_to(&mut self, view: ViewKind) {
        if view == ViewKind::Allocs {
            self.scope_allocs(AllocScope::All);
        }
        self.drilled_from = None;
        self.show(view);
    }

    fn show(&mut self, view: ViewKind) {
        if self.view != view {
            self.view = view;
            self.detail_open = false;
        }
    }

    /// Narrows the allocations view to `scope`, starting its table afresh when the scope
    /// changes (a filter or selection made for one node's rows means nothing for another's).
    fn scope_allocs(&mut self, scope: AllocScope) {
        if self.alloc_scope != scope {
            self.lists[ViewKind::Allocs as usize] = Default::default();
            self.invalidate(ViewKind::Allocs);
            self.alloc_scope = scope;
        }
    }

    /// `enter`: a node's or a job's allocations; on any other row, its detail.
    pub(super) fn enter(&mut self) -> Action {
        let scope = match &self.list().selected {
            Some(RowKey::Node(id)) if self.view == ViewKind::Nodes => AllocScope::Node(*id),
            Some(RowKey::Job(job)) if self.view == ViewKind::Jobs => AllocScope::Job(job.clone()),
            Some(_) => return self.toggle_detail(),
            None => return Action::None,
        };
        self.scope_allocs(scope);
        self.drilled_from = Some(self.view);
        self.show(ViewKind::Allocs);
        Action::None
    }

    /// Lines in the selected row's detail, which bound its scrolling.
    pub(super) fn detail_len(&self) -> u16 {
        self.list().selected.as_ref().map_or(0, |key| {
            let lines = self.component().detail(&self.ctx(), key).len();
            u16::try_from(lines).unwrap_or(u16::MAX)
        })
    }

    /// `i` everywhere, and `enter` where it does not drill down: the selected row's detail.
    pub(super) fn toggle_detail(&mut self) -> Action {
        let Some(selected) = self.list().selected.clone() else {
            return Action::None;
        };
        if self.view == ViewKind::Workers {
            return Action::None;
        }
        self.detail_open = !self.detail_open;
        if self.detail_open {
            self.fetch_detail(selected)
        } else {
            Action::None
        }
    }

    /// What the detail of `selected` needs beyond the lists: an allocation in full, a
    /// node's sampled usage. Asked when the detail opens and when the selection moves
    /// while it is open.
    pub(super) fn fetch_detail(&self, selected: RowKey) -> Action {
        match (self.view, selected) {
            (ViewKind::Allocs, RowKey::Alloc(id)) => Action::Run(Command::FetchAlloc(id)),
            (ViewKind::Nodes, RowKey::Node(id)) => Action::Run(Command::FetchNodeUsage(id)),
            _ => Action::None,
        }
    }

    /// `esc`: closes the detail, else clears the filter, else the marks, else goes back to
    /// the view the allocations were drilled into from.
    pub(super) fn back(&mut self) {
        if self.detail_open {
            self.detail_open = false;
        } else if !self.list().filter.is_empty() {
            self.list_mut().filter.clear();
            self.invalidate_view();
        } else if !self.list().marked.is_empty() {
            self.list_mut().marked.clear();
        } else if let Some(origin) = self.drilled_from.filter(|_| self.view == ViewKind::Allocs) {
            self.drilled_from = None;
            self.show(origin);
        }
    }
}
