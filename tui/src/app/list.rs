//! The state of one table: filter, sort, the ordered rows it shows, and the selection.
//!
//! The selection is kept by row key, not position: when rows arrive, leave or move, the
//! cursor follows the same item; only when that item is gone does it stay at the same
//! position (clamped), on whatever row now sits there.

use super::order::RowOrder;
use drover_core::{AllocId, EvalId, JobKey, NodeId};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// The identity of a row, stable across refreshes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowKey {
    Node(NodeId),
    Alloc(AllocId),
    Eval(EvalId),
    Job(JobKey),
    /// Blocked evaluations are keyed by their eval id as the tracker sends it.
    Blocked(String),
    /// Server id, then worker id.
    Worker(String, String),
    /// The event log's sequence number.
    Event(u64),
}

impl RowKey {
    /// The id an operator copies (OSC 52) or types into the CLI.
    pub fn copy_text(&self) -> String {
        match self {
            RowKey::Node(id) => id.to_string(),
            RowKey::Alloc(id) => id.to_string(),
            RowKey::Eval(id) => id.to_string(),
            RowKey::Job(key) => key.id.to_string(),
            RowKey::Blocked(id) => id.clone(),
            RowKey::Worker(_, id) => id.clone(),
            RowKey::Event(seq) => seq.to_string(),
        }
    }
}

/// A value rows are ordered by. Numbers compare as numbers; text compares naturally, so
/// `node-2` comes before `node-10` (build it with [`SortKey::text`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    Num(u64),
    /// The text's [`natural_key`].
    Text(String),
}

impl SortKey {
    pub fn text(text: impl AsRef<str>) -> Self {
        SortKey::Text(natural_key(text.as_ref()))
    }
}

/// Digit runs are padded to this width so they compare by value as plain bytes.
const DIGIT_WIDTH: usize = 20;

/// A key whose plain byte order is the natural order of `text`: every run of digits is
/// zero-padded to a fixed width (leading zeros dropped first), so `node-2` sorts before
/// `node-10`. Computed once per row, it makes sorting thousands of rows cheap.
pub fn natural_key(text: &str) -> String {
    let mut key = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        key.push_str(&rest[..start]);
        let digits = &rest[start..];
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let run = digits[..end].trim_start_matches('0');
        for _ in run.len()..DIGIT_WIDTH {
            key.push('0');
        }
        key.push_str(run);
        rest = &digits[end..];
    }
    key.push_str(rest);
    key
}

/// Compares text the way people number things (see [`natural_key`]); texts that differ
/// only in leading zeros fall back to plain order so the order stays total.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    natural_key(a).cmp(&natural_key(b)).then_with(|| a.cmp(b))
}

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
    fn natural_order_reads_numbers_as_numbers() {
        let cases: [(&str, &str, Ordering); 7] = [
            ("node-2", "node-10", Ordering::Less),
            ("web[10]", "web[9]", Ordering::Greater),
            ("a", "b", Ordering::Less),
            ("node", "node-1", Ordering::Less),
            ("x07", "x7", Ordering::Less),
            ("x7", "x7", Ordering::Equal),
            ("10a", "10b", Ordering::Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(natural_cmp(a, b), want, "{a} vs {b}");
            assert_eq!(natural_cmp(b, a), want.reverse(), "{b} vs {a}");
        }
    }

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
