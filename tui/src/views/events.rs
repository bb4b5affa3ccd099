//! The live event stream, newest first, filterable by topic.

use super::format::{age, clock};
use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, col, key};
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
    col("TIME", 8, 0),
    col("INDEX", 7, 2),
    col("TOPIC", 10, 0),
    col("TYPE", 17, 0),
    col("KEY", 8, 3),
    col("SUMMARY", 30, 0),
];

/// An event's key as the other views show the same object: an id (node, allocation,
/// evaluation) by its first eight characters, as every table prints ids and as `:`
/// commands and the CLI take them; anything else (a job's id) as it is.
fn short_key(key: &str) -> &str {
    let is_uuid = key.len() == 36
        && key.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if is_uuid { &key[..8] } else { key }
}

const KEYS: &[KeyHelp] = &[
    key("t", "cycle the topic shown"),
    key("enter", "the event's payload (J/K scroll it)"),
];

/// The payload as the server sent it, one field a line. The derived form names every
/// field and enum value, so nothing of the object is hidden; its four-space indentation is
/// halved and an optional scalar's `Some(` wrapper (three lines each) is dropped, to keep
/// nested objects readable in a narrow pane.
fn payload_lines(payload: &drover_proto::v1::event::Payload) -> Vec<DetailLine> {
    let text = format!("{payload:#?}");
    let raw: Vec<&str> = text.lines().collect();
    let mut lines = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let line = raw[i];
        let body = line.trim_start_matches(' ');
        let depth = (line.len() - body.len()) / 4;
        let mut shown = body.to_owned();
        if let (Some(head), Some(value), Some(close)) = (
            body.strip_suffix("Some("),
            raw.get(i + 1).map(|l| l.trim()),
            raw.get(i + 2).map(|l| l.trim()),
        ) && close.starts_with(')')
            && !value.ends_with(['{', '(', '['])
        {
            shown = format!("{head}{}{}", value.trim_end_matches(','), &close[1..]);
            i += 2;
        }
        lines.push(DetailLine::text(format!("{}{shown}", "  ".repeat(depth))));
        i += 1;
    }
    lines
}

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
            Cell::new(clock(e.received, ctx.clock_offset)),
            Cell::tone(e.index.to_string(), Tone::Dim),
            Cell::new(e.topic),
            Cell::new(e.event_type),
            Cell::tone(short_key(&e.key), Tone::Dim),
            Cell::new(e.summary.clone()),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(e) = event(ctx, key) else {
            return SortKey::Num(0);
        };
        match column {
            0 => SortKey::Num(e.received.as_millis()),
            1 => SortKey::Num(e.seq),
            2 => SortKey::text(e.topic),
            3 => SortKey::text(e.event_type),
            4 => SortKey::text(&e.key),
            _ => SortKey::text(&e.summary),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(e) = event(ctx, key) else {
            return Vec::new();
        };
        let mut lines = vec![
            DetailLine::field("type", format!("{} {}", e.topic, e.event_type)),
            DetailLine::field("key", e.key.clone()),
            DetailLine::field("raft index", e.index.to_string()),
            DetailLine::field(
                "received",
                format!("{} ({} ago)", e.received, age(e.received, ctx.now)),
            ),
            DetailLine::field("summary", e.summary.clone()),
        ];
        match &e.payload {
            Some(payload) => {
                lines.push(DetailLine::heading("payload"));
                lines.extend(payload_lines(payload));
            }
            None => lines.push(DetailLine::heading("no payload")),
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}

#[cfg(test)]
mod tests {
    use super::short_key;

    #[test]
    fn ids_in_keys_read_by_their_first_eight_characters() {
        let node = drover_core::mock::node_id(7).to_string();
        let cases = [
            (node.as_str(), &node[..8]),
            ("web-0", "web-0"),
            (
                "batch/dispatch-1767225600-ab12cd34",
                "batch/dispatch-1767225600-ab12cd34",
            ),
            ("", ""),
        ];
        for (key, want) in cases {
            assert_eq!(short_key(key), want, "{key:?}");
        }
    }
}
