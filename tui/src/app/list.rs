//! The state of one table: filter, sort, the ordered rows it shows, and the selection.
//!
//! The selection is kept by row key, not position: when rows arrive, leave or move, the
//! cursor follows the same item; only when that item is gone does it stay at the same
//! position (clamped), on whatever row now sits there.

use super::order::RowOrder;
use crate::kinds::RowKey;
use std::collections::BTreeSet;

/// Which column orders the table, and which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub column: usize,
    pub descending: bool,
}

#[derive(Clone, Debug, Default)]
pub struct ListState {
    /// What `/` typed (see [`super::RowFilter`] for its forms); rows it does not admit are
    /// hidden.
    pub filter: String,
    /// `None`: the view's natural order.
    pub sort: Option<Sort>,
    /// The rows shown, filtered and sorted. Rebuilt when the filter or sort change, kept
    /// up to date row by row when the data changes, never touched while drawing.
    pub order: RowOrder,
    /// Invariant: when `order` is not empty, `cursor < order.len()` and `selected` is
    /// `order[cursor]`.
    pub cursor: usize,
    pub selected: Option<RowKey>,
    /// The first row drawn; kept so the cursor stays in view without jumping.
    pub offset: usize,
    /// Rows marked with space, acted on together.
    pub marked: BTreeSet<RowKey>,
}

impl ListState {
    /// Installs a freshly built order, keeping the selection on the same row if it is still
    /// there, and dropping marks on rows that are gone.
    pub fn set_order(&mut self, order: RowOrder) {
        self.order = order;
        self.follow_selection();
    }

    /// Re-finds the selected row after the order changed (rebuilt or edited in place): the
    /// cursor moves to wherever that row now is, or stays at its position (clamped) when
    /// the row is gone. Marks on rows that are gone are dropped.
    pub fn follow_selection(&mut self) {
        let found = self
            .selected
            .as_ref()
            .and_then(|key| self.order.position(key));
        self.cursor = match found {
            Some(i) => i,
            None => self.cursor.min(self.order.len().saturating_sub(1)),
        };
        self.selected = self.order.get(self.cursor).cloned();
        let order = &self.order;
        self.marked.retain(|k| order.contains(k));
    }

    /// Moves the cursor by `delta` rows, clamped to the table.
    pub fn move_by(&mut self, delta: isize) {
        if self.order.is_empty() {
            return;
        }
        let last = self.order.len() - 1;
        let target = self.cursor.saturating_add_signed(delta).min(last);
        self.select_index(target);
    }

    pub fn select_index(&mut self, index: usize) {
        if let Some(key) = self.order.get(index) {
            self.cursor = index;
            self.selected = Some(key.clone());
        }
    }

    /// Sorts by `column`; asking for the column already sorted on reverses it.
    pub fn sort_by(&mut self, column: usize) {
        self.sort = Some(match self.sort {
            Some(s) if s.column == column => Sort {
                column,
                descending: !s.descending,
            },
            _ => Sort {
                column,
                descending: false,
            },
        });
    }

    pub fn toggle_mark(&mut self) {
        if let Some(key) = self.selected.clone()
            && !self.marked.remove(&key)
        {
            self.marked.insert(key);
        }
    }

    /// The rows an action applies to, in display order: the marked ones, or else the
    /// selected one.
    pub fn targets(&self) -> Vec<RowKey> {
        if self.marked.is_empty() {
            self.selected.iter().cloned().collect()
        } else {
            self.order
                .iter()
                .filter(|k| self.marked.contains(k))
                .cloned()
                .collect()
        }
    }

    /// Adjusts `offset` so the cursor is inside a window of `height` rows.
    pub fn scroll_into_view(&mut self, height: usize) {
        if height == 0 {
            return;
        }
        if self.cursor < self.offset {
            self.offset = self.cursor;
        } else if self.cursor >= self.offset + height {
            self.offset = self.cursor + 1 - height;
        }
        let max_offset = self.order.len().saturating_sub(height);
        self.offset = self.offset.min(max_offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::order::Rank;

    #[test]
    fn the_cursor_follows_its_row_and_clamps_when_it_goes() {
        let keys = |ns: &[u64]| {
            let rows = ns.iter().map(|n| (Rank::default(), RowKey::Event(*n)));
            RowOrder::build(rows.collect(), false)
        };
        let mut list = ListState::default();
        list.set_order(keys(&[1, 2, 3, 4]));
        list.select_index(2);
        list.set_order(keys(&[0, 1, 2, 3, 4]));
        assert_eq!(
            (list.cursor, list.selected.clone()),
            (3, Some(RowKey::Event(3)))
        );
        list.set_order(keys(&[0, 1]));
        assert_eq!(
            (list.cursor, list.selected.clone()),
            (1, Some(RowKey::Event(1)))
        );
        list.set_order(keys(&[]));
        assert_eq!((list.cursor, list.selected.clone()), (0, None));
    }
}
