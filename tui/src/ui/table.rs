//! The table every view is drawn as. Only the rows in sight are formatted, so drawing
//! costs the same for ten nodes as for ten thousand.

use super::theme::Theme;
use crate::app::App;
use crate::views::{AllocScope, Cell, Column};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// The gutter left of each row: the marked sign.
const GUTTER: u16 = 2;

/// The narrowest a column is drawn: its set width, and never less than its title (with
/// room for the arrow when the table is sorted by it, so sorting does not cut its name).
fn min_width(c: &Column, sorted: bool) -> u16 {
    c.width
        .max(c.title.chars().count() as u16 + u16::from(sorted))
}

/// The columns that fit `width`, most important first to be kept, in display order, each
/// with the width it is drawn at. `wants[i]` is the widest text column `i` holds in the
/// rows in sight (missing: nothing to show): columns grow toward it while there is room,
/// so nothing is cut while the table has space to spare, and what is left goes to the
/// last column. `sorted` is the column the table is sorted by.
pub fn visible_columns(
    columns: &[Column],
    width: u16,
    wants: &[usize],
    sorted: Option<usize>,
) -> Vec<(usize, u16)> {
    let min = |i: usize| min_width(&columns[i], sorted == Some(i));
    let inner = width.saturating_sub(2 + GUTTER);
    let mut by_priority: Vec<usize> = (0..columns.len()).collect();
    by_priority.sort_by_key(|i| (columns[*i].priority, *i));
    let mut kept = Vec::new();
    let mut used: u16 = 0;
    for i in by_priority {
        let need = min(i) + u16::from(!kept.is_empty());
        if used + need > inner {
            break;
        }
        used += need;
        kept.push(i);
    }
    kept.sort_unstable();
    let mut widths: Vec<(usize, u16)> = kept.iter().map(|i| (*i, min(*i))).collect();
    let mut spare = inner.saturating_sub(used);
    // One column at a time, one character each, so that when room runs out every cut
    // column has had its fair share.
    loop {
        let mut grew = false;
        for (i, w) in widths.iter_mut() {
            let want = wants.get(*i).copied().unwrap_or(0);
            if spare > 0 && usize::from(*w) < want {
                *w += 1;
                spare -= 1;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    if let Some(last) = widths.last_mut() {
        last.1 += spare;
    }
    widths
}

/// The columns of `app`'s current view as drawn in a table of `area`: the same figures
/// for drawing and for finding the column under the mouse.
pub fn layout(app: &App, area: Rect) -> Vec<(usize, u16)> {
    let view = app.component();
    let ctx = app.ctx();
    let rows: Vec<Vec<Cell>> = rows_in_sight(app, area)
        .filter_map(|(_, key)| view.cells(&ctx, key))
        .collect();
    let widest = wants(view.columns().len(), rows.iter().map(Vec::as_slice));
    let sorted = app.list().sort.map(|s| s.column);
    visible_columns(view.columns(), area.width, &widest, sorted)
}

/// The rows a table of `area` shows, with their positions.
fn rows_in_sight<'a>(
    app: &'a App,
    area: Rect,
) -> impl Iterator<Item = (usize, &'a crate::app::RowKey)> + 'a {
    // Border, titles, border.
    let rows = usize::from(area.height.saturating_sub(3));
    let list = app.list();
    list.order.rows_from(list.offset).take(rows)
}

/// The widest text of each column over `rows`.
fn wants<'a>(columns: usize, rows: impl IntoIterator<Item = &'a [Cell]>) -> Vec<usize> {
    let mut wants = vec![0; columns];
    for cells in rows {
        for (want, cell) in wants.iter_mut().zip(cells) {
            *want = (*want).max(cell.text.chars().count());
        }
    }
    wants
}

/// The column drawn at screen column `x`, for a table whose area starts at `left`.
pub fn column_at(columns: &[(usize, u16)], left: u16, x: u16) -> Option<usize> {
    let mut start = left + 1 + GUTTER;
    for (i, width) in columns {
        if (start..start + width).contains(&x) {
            return Some(*i);
        }
        start += width + 1;
    }
    None
}

/// Cuts `text` to `width` characters, marking the cut with an ellipsis: at the end, or
/// for a name that keeps its end (`keep_end`) in the middle, keeping a third of the room
/// for its start and the rest for its end, where names made by the servers differ
/// (dispatched and periodic children, numbered nodes).
fn fit(text: &str, width: usize, keep_end: bool) -> String {
    let len = text.chars().count();
    if len <= width {
        return format!("{text:width$}");
    }
    let room = width.saturating_sub(1);
    let head = if keep_end { room / 3 } else { room };
    let mut cut: String = text.chars().take(head).collect();
    cut.push('…');
    cut.extend(text.chars().skip(len - (room - head)));
    cut
}

/// What the allocations view shows, as its title says it: whose allocations, named as
/// the view they were drilled from names them.
fn alloc_title(app: &App) -> String {
    match &app.alloc_scope {
        AllocScope::All => "allocations".to_owned(),
        AllocScope::Job(job) => format!("allocations of job {}", job.id),
        AllocScope::Node(id) => {
            let name = app
                .cluster
                .nodes
                .get(id)
                .map_or_else(|| id.short(), |n| n.name.clone());
            format!("allocations on node {name}")
        }
    }
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let view = app.component();
    let list = app.list();
    let ctx = app.ctx();
    // Each row in sight is formatted once, for its widths and for drawing it.
    let rows: Vec<(usize, &crate::app::RowKey, Vec<Cell>)> = rows_in_sight(app, area)
        .filter_map(|(index, key)| view.cells(&ctx, key).map(|cells| (index, key, cells)))
        .collect();
    let widest = wants(
        view.columns().len(),
        rows.iter().map(|(_, _, c)| c.as_slice()),
    );
    let sort = list.sort;
    let columns = visible_columns(view.columns(), area.width, &widest, sort.map(|s| s.column));
    let title = {
        let mut t = format!(" {} ({})", app.view.name(), list.order.len());
        if app.view == crate::views::ViewKind::Allocs {
            t = format!(" {} ({})", alloc_title(app), list.order.len());
        }
        if app.view == crate::views::ViewKind::Nodes
            && app.health != crate::views::HealthFilter::All
        {
            t.push_str(&format!(" · {}", app.health.label()));
        }
        if let Some(ns) = app.namespace.as_deref().filter(|_| {
            matches!(
                app.view,
                crate::views::ViewKind::Jobs
                    | crate::views::ViewKind::Evals
                    | crate::views::ViewKind::Blocked
                    | crate::views::ViewKind::Deployments
            )
        }) {
            t.push_str(&format!(" · namespace {ns}"));
        }
        if app.view == crate::views::ViewKind::Events {
            t.push_str(&format!(
                " · {}",
                app.topic_filter().unwrap_or("all topics")
            ));
        }
        if !list.filter.is_empty() {
            t.push_str(&format!(" · /{}", list.filter));
        }
        if !list.marked.is_empty() {
            t.push_str(&format!(" · {} marked", list.marked.len()));
        }
        t.push(' ');
        t
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, theme.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 {
        return;
    }

    let mut lines = Vec::with_capacity(usize::from(inner.height));
    let mut header = vec![Span::raw(" ".repeat(usize::from(GUTTER)))];
    for (n, (i, width)) in columns.iter().enumerate() {
        if n > 0 {
            header.push(Span::raw(" "));
        }
        let mut name = view.columns()[*i].title.to_owned();
        if let Some(s) = sort.filter(|s| s.column == *i) {
            name.push(if s.descending { '↓' } else { '↑' });
        }
        header.push(Span::styled(
            fit(&name, usize::from(*width), false),
            theme.title().add_modifier(Modifier::UNDERLINED),
        ));
    }
    lines.push(Line::from(header));

    for (index, key, cells) in rows {
        let marked = list.marked.contains(key);
        let mut spans = vec![Span::raw(if marked { "● " } else { "  " })];
        for (n, (i, width)) in columns.iter().enumerate() {
            if n > 0 {
                spans.push(Span::raw(" "));
            }
            let cell = &cells[*i];
            spans.push(Span::styled(
                fit(&cell.text, usize::from(*width), cell.keep_end),
                theme.tone(cell.tone),
            ));
        }
        let mut line = Line::from(spans);
        if index == list.cursor {
            line = line.patch_style(theme.selected());
        }
        lines.push(line);
    }
    if list.order.is_empty() {
        let filter = crate::app::RowFilter::parse(&list.filter);
        let (empty, tone) = match (filter.error(), app.unreached()) {
            (Some(why), _) => (format!("  {why}"), crate::views::Tone::Bad),
            (None, Some(why)) => (format!("  {why}"), crate::views::Tone::Warn),
            (None, None) if list.filter.is_empty() => {
                ("  nothing here yet".to_owned(), crate::views::Tone::Dim)
            }
            (None, None) => (
                "  no row matches the filter (esc clears it)".to_owned(),
                crate::views::Tone::Dim,
            ),
        };
        lines.push(Line::styled(empty, theme.tone(tone)));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::ViewKind;

    #[test]
    fn narrow_tables_drop_the_least_important_columns_first() {
        let columns = ViewKind::Nodes.component().columns();
        let all: u16 = columns.iter().map(|c| c.width + 1).sum::<u16>() + 2 + GUTTER;
        let wide = visible_columns(columns, all + 10, &[], None);
        assert_eq!(wide.len(), columns.len());
        let narrow = visible_columns(columns, 40, &[], None);
        assert!(narrow.len() < columns.len());
        for (i, _) in &narrow {
            for dropped in (0..columns.len()).filter(|d| !narrow.iter().any(|(k, _)| k == d)) {
                assert!(columns[*i].priority <= columns[dropped].priority);
            }
        }
        let drawn: u16 = narrow.iter().map(|(_, w)| w + 1).sum::<u16>() - 1;
        assert_eq!(drawn, 40 - 2 - GUTTER);
    }

    /// Text longer than its column grows the column while the table has room; without
    /// room, cut columns share what there is; what is left goes to the last column.
    #[test]
    fn columns_grow_to_their_text_while_there_is_room() {
        let columns = [
            Column {
                title: "NAME",
                width: 6,
                priority: 0,
            },
            Column {
                title: "ID",
                width: 4,
                priority: 0,
            },
            Column {
                title: "SUMMARY",
                width: 8,
                priority: 0,
            },
        ];
        // (table width, widest text per column, widths drawn)
        let cases: [(u16, &[usize], &[u16]); 4] = [
            // Inner width 20 = 6 + 1 + 4 + 1 + 8: no room to spare.
            (24, &[30, 2, 30], &[6, 4, 8]),
            (34, &[10, 2, 20], &[10, 4, 14]),
            (34, &[30, 2, 30], &[11, 4, 13]),
            (60, &[10, 2, 12], &[10, 4, 40]),
        ];
        for (width, wants, want) in cases {
            let got: Vec<u16> = visible_columns(&columns, width, wants, None)
                .into_iter()
                .map(|(_, w)| w)
                .collect();
            assert_eq!(got, want, "width {width}, wants {wants:?}");
            let drawn: u16 = got.iter().map(|w| w + 1).sum::<u16>() - 1;
            assert_eq!(drawn, width - 2 - GUTTER, "the table is filled");
        }
        // A title has room for the sort arrow when the table is sorted by it.
        let tight = [
            Column {
                title: "ELIG",
                width: 4,
                priority: 0,
            },
            Column {
                title: "ID",
                width: 4,
                priority: 0,
            },
        ];
        assert_eq!(visible_columns(&tight, 14, &[], None), vec![(0, 4), (1, 5)]);
        assert_eq!(
            visible_columns(&tight, 14, &[], Some(0)),
            vec![(0, 5), (1, 4)]
        );
    }

    #[test]
    fn names_are_cut_in_the_middle_and_keep_their_end() {
        let cases = [
            ("web-0", 8, false, "web-0   "),
            ("running (stopped)", 10, false, "running (…"),
            (
                "batch/dispatch-1767225600-ab12cd34",
                20,
                true,
                "batch/…5600-ab12cd34",
            ),
            ("sim-00017", 6, true, "s…0017"),
            ("abc", 1, true, "…"),
        ];
        for (text, width, keep_end, want) in cases {
            let got = fit(text, width, keep_end);
            assert_eq!(got, want, "{text:?} in {width}");
            assert_eq!(got.chars().count(), width);
        }
    }

    #[test]
    fn clicks_map_to_the_column_drawn_there() {
        let columns = [(0, 4), (2, 3)];
        let cases = [
            (0, None),
            (3, Some(0)),
            (6, Some(0)),
            (7, None),
            (8, Some(2)),
            (11, None),
        ];
        for (x, want) in cases {
            assert_eq!(column_at(&columns, 0, x), want, "x = {x}");
        }
    }
}
