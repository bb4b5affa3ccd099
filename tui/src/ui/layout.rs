//! Where everything goes on screen. Pure arithmetic on the terminal size, shared by the
//! renderer and the mouse handling so a click lands on what was drawn there.

use crate::app::App;
use crate::views::ViewKind;
use ratatui::layout::{Constraint, Direction, Layout, Rect};

/// Terminals at least this wide show the detail beside the table, narrower ones below it.
const SIDE_BY_SIDE_WIDTH: u16 = 120;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub tabs: Rect,
    /// The view's gauges line, for views that have one.
    pub summary: Option<Rect>,
    pub table: Rect,
    pub detail: Option<Rect>,
    /// The logs pane, over the summary, table and detail, while it is open.
    pub logs: Option<Rect>,
    pub status: Rect,
}

pub fn areas(app: &App) -> Areas {
    let full = Rect::new(0, 0, app.width, app.height);
    let summary_lines: u16 = if app.view == ViewKind::Workers { 2 } else { 0 };
    let has_summary = summary_lines > 0;
    let [header, tabs, summary, body, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Length(summary_lines),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(full);
    let (table, detail) = if app.detail_open {
        // Beside the table when there is room; below it, and taller, when there is not,
        // since the detail is what the operator opened it for.
        let (direction, table_share) = if app.width >= SIDE_BY_SIDE_WIDTH {
            (Direction::Horizontal, 55)
        } else {
            (Direction::Vertical, 35)
        };
        let [table, detail] = Layout::default()
            .direction(direction)
            .constraints([
                Constraint::Percentage(table_share),
                Constraint::Percentage(100 - table_share),
            ])
            .areas(body);
        (table, Some(detail))
    } else {
        (body, None)
    };
    Areas {
        header,
        tabs,
        summary: has_summary.then_some(summary),
        table,
        detail,
        logs: app.logs.is_some().then(|| {
            Rect::new(
                full.x,
                tabs.bottom(),
                full.width,
                status.y.saturating_sub(tabs.bottom()),
            )
        }),
        status,
    }
}

/// How many lines of output the logs pane shows (inside its border).
pub fn logs_rows(app: &App) -> u16 {
    areas(app).logs.map_or(0, |r| r.height.saturating_sub(2))
}

/// How many data rows the table shows (inside its border, below the column titles).
pub fn table_rows(app: &App) -> usize {
    usize::from(areas(app).table.height.saturating_sub(3))
}

/// The padding of each tab's label on a line `width` wide: a space each side when every
/// tab fits so, none when only that fits (the labels stay whole either way).
pub fn tab_padding(width: u16) -> u16 {
    if tabs_fit(width, 2, ViewKind::name) {
        2
    } else {
        0
    }
}

fn tabs_fit(width: u16, padding: u16, label: fn(ViewKind) -> &'static str) -> bool {
    let labels: u16 = ViewKind::TABS
        .iter()
        .map(|v| label(*v).len() as u16 + 1)
        .sum();
    1 + labels + padding * ViewKind::TABS.len() as u16 <= width
}

/// A tab's label on a line `width` wide: its name, or its short name when the names do
/// not fit even unpadded, so that no label is cut.
pub fn tab_label(view: ViewKind, width: u16) -> &'static str {
    if tabs_fit(width, 0, ViewKind::name) {
        view.name()
    } else {
        view.short_name()
    }
}

/// The width of a tab's label, padded, on a line `width` wide.
pub fn tab_width(view: ViewKind, width: u16) -> u16 {
    tab_label(view, width).len() as u16 + tab_padding(width)
}

/// Which tab is at column `x`.
pub fn tab_at(tabs: Rect, x: u16) -> Option<ViewKind> {
    let mut left = tabs.x + 1;
    for view in ViewKind::TABS {
        let right = left + tab_width(view, tabs.width);
        if (left..right).contains(&x) {
            return Some(view);
        }
        left = right + 1;
    }
    None
}
