//! The table every view is drawn as. Only the rows in sight are formatted, so drawing
//! costs the same for ten nodes as for ten thousand.

use super::theme::Theme;
use crate::app::App;
use crate::views::Column;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// The gutter left of each row: the marked sign.
const GUTTER: u16 = 2;

/// The columns that fit `width`, most important first to be kept, in display order, each
/// with the width it is drawn at; the last one takes the remaining space.
pub fn visible_columns(columns: &[Column], width: u16) -> Vec<(usize, u16)> {
    let inner = width.saturating_sub(2 + GUTTER);
    let mut by_priority: Vec<usize> = (0..columns.len()).collect();
    by_priority.sort_by_key(|i| (columns[*i].priority, *i));
    let mut kept = Vec::new();
    let mut used: u16 = 0;
    for i in by_priority {
        let need = columns[i].width + u16::from(!kept.is_empty());
        if used + need > inner {
            break;
        }
        used += need;
        kept.push(i);
    }
    kept.sort_unstable();
    let mut widths: Vec<(usize, u16)> = kept.iter().map(|i| (*i, columns[*i].width)).collect();
    if let Some(last) = widths.last_mut() {
        last.1 += inner.saturating_sub(used);
    }
    widths
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

/// Cuts `text` to `width` characters, marking the cut with an ellipsis.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return format!("{text:width$}");
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let view = app.component();
    let list = app.list();
    let columns = visible_columns(view.columns(), area.width);
    let sort = list.sort;
    let title = {
        let mut t = format!(" {} ({})", app.view.name(), list.order.len());
        if let Some(job) = app
            .alloc_job
            .as_ref()
            .filter(|_| app.view == crate::views::ViewKind::Allocs)
        {
            t = format!(" allocations of {} ({})", job.id, list.order.len());
        }
        if app.view == crate::views::ViewKind::Nodes
            && app.health != crate::views::HealthFilter::All
        {
            t.push_str(&format!(" · {}", app.health.label()));
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
            fit(&name, usize::from(*width)),
            theme.title().add_modifier(Modifier::UNDERLINED),
        ));
    }
    lines.push(Line::from(header));

    let ctx = app.ctx();
    let rows = usize::from(inner.height - 1);
    for (index, key) in list.order.rows_from(list.offset).take(rows) {
        let Some(cells) = view.cells(&ctx, key) else {
            continue;
        };
        let marked = list.marked.contains(key);
        let mut spans = vec![Span::raw(if marked { "● " } else { "  " })];
        for (n, (i, width)) in columns.iter().enumerate() {
            if n > 0 {
                spans.push(Span::raw(" "));
            }
            let cell = &cells[*i];
            spans.push(Span::styled(
                fit(&cell.text, usize::from(*width)),
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
        let (empty, tone) = match filter.error() {
            Some(why) => (format!("  {why}"), crate::views::Tone::Bad),
            None if list.filter.is_empty() => {
                ("  nothing here yet".to_owned(), crate::views::Tone::Dim)
            }
            None => (
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
        let wide = visible_columns(columns, all + 10);
        assert_eq!(wide.len(), columns.len());
        let narrow = visible_columns(columns, 40);
        assert!(narrow.len() < columns.len());
        for (i, _) in &narrow {
            for dropped in (0..columns.len()).filter(|d| !narrow.iter().any(|(k, _)| k == d)) {
                assert!(columns[*i].priority <= columns[dropped].priority);
            }
        }
        let drawn: u16 = narrow.iter().map(|(_, w)| w + 1).sum::<u16>() - 1;
        assert_eq!(drawn, 40 - 2 - GUTTER);
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
