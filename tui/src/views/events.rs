//! The live event stream, newest first, filterable by topic.

use super::{Cell, Column, Ctx, KeyHelp, TableView, Tone, ViewKind, col, key};
use crate::kinds::{RowKey, SortKey};
use crate::model::EventRow;

pub struct EventsView;

fn event<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a EventRow> {
    let RowKey::Event(seq) = key else {
        return None;
    };
    // Sequence numbers are consecutive, so the position is arithmetic, not a search.
    let first = ctx.cluster.events.front()?.seq;
    let row = ctx
        .cluster
        .events
        .get(usize::try_from(seq.checked_sub(first)?).ok()?)?;
    (row.seq == *seq).then_some(row)
}

const COLUMNS: &[Column] = &[
    col("INDEX", 7, 1),
    col("TOPIC", 10, 0),
    col("TYPE", 17, 0),
    col("KEY", 12, 2),
    col("SUMMARY", 40, 0),
];

const KEYS: &[KeyHelp] = &[key("t", "cycle the topic shown")];

impl TableView for EventsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Events
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .events
            .iter()
            .map(|e| RowKey::Event(e.seq))
            .collect()
    }

    /// Newest first.
    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        let e = event(ctx, key).filter(|e| ctx.topic.is_none_or(|t| e.topic == t))?;
        Some(vec![SortKey::Num(u64::MAX - e.seq)])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let e = event(ctx, key)?;
        Some(vec![
            Cell::tone(e.index.to_string(), Tone::Dim),
            Cell::new(e.topic),
            Cell::new(e.event_type),
            Cell::tone(e.key.chars().take(12).collect::<String>(), Tone::Dim),
            Cell::new(e.summary.clone()),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(e) = event(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::Num(e.seq),
            1 => SortKey::text(e.topic),
            2 => SortKey::text(e.event_type),
            3 => SortKey::text(&e.key),
            _ => SortKey::text(&e.summary),
        }
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
