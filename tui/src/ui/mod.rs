//! Drawing. Reads the state and nothing else: no network, no clock, no mutation.

pub mod layout;
pub mod table;
pub mod theme;

mod header;
mod help;
mod logs;
mod overlay;
mod status;

pub use help::help_len;
pub use theme::Theme;

use crate::app::{App, Mode};
use ratatui::Frame;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Draws one frame. Call [`App::prepare_frame`] first so the rows are current.
pub fn draw(frame: &mut Frame, app: &App, theme: &Theme) {
    let areas = layout::areas(app);
    header::draw(frame, areas.header, app, theme);
    header::draw_tabs(frame, areas.tabs, app, theme);
    if let Some(summary) = areas.summary {
        let lines: Vec<Line> = app
            .component()
            .summary(&app.ctx())
            .into_iter()
            .map(|cells| {
                let spans: Vec<Span> = std::iter::once(Span::raw(" "))
                    .chain(
                        cells
                            .into_iter()
                            .map(|c| Span::styled(c.text, theme.tone(c.tone))),
                    )
                    .collect();
                Line::from(spans)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), summary);
    }
    match (areas.logs, &app.logs) {
        (Some(area), Some(pane)) => logs::draw(frame, area, pane, theme),
        _ => {
            table::draw(frame, areas.table, app, theme);
            if let Some(detail) = areas.detail {
                overlay::draw_detail(frame, detail, app, theme);
            }
        }
    }
    status::draw(frame, areas.status, app, theme);
    match &app.mode {
        Mode::Help => help::draw(frame, frame.area(), app, theme),
        Mode::Confirm(confirm) => overlay::draw_confirm(frame, frame.area(), confirm, theme),
        _ => {}
    }
}
