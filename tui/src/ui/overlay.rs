//! What is drawn over the views: the detail pane, the help and the confirmation dialog.

use super::theme::Theme;
use crate::app::{App, Confirm};
use crate::views::{GLOBAL_KEYS, Tone};
use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

/// Width of the label column in the detail pane.
const LABEL_WIDTH: usize = 14;

pub fn draw_detail(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let lines: Vec<Line> = match &app.list().selected {
        None => vec![Line::styled("nothing selected", theme.tone(Tone::Dim))],
        Some(key) => app
            .component()
            .detail(&app.ctx(), key)
            .into_iter()
            .map(|d| {
                if d.label.is_empty() {
                    Line::styled(d.value.text, theme.title())
                } else {
                    Line::from(vec![
                        Span::styled(format!("{:<LABEL_WIDTH$} ", d.label), theme.tone(Tone::Dim)),
                        Span::styled(d.value.text, theme.tone(d.value.tone)),
                    ])
                }
            })
            .collect(),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" detail (esc closes) ", theme.title()));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}

pub fn draw_help(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let view_keys = app
        .component()
        .keys()
        .iter()
        .filter(|k| !(app.read_only && k.action));
    let mut lines = Vec::new();
    let key_line = |keys: &str, what: &str| {
        Line::from(vec![
            Span::styled(format!(" {keys:<18} "), theme.accent()),
            Span::raw(what.to_owned()),
        ])
    };
    lines.push(Line::styled(" everywhere", theme.title()));
    lines.extend(GLOBAL_KEYS.iter().map(|k| key_line(k.keys, k.what)));
    let mut view_lines: Vec<Line> = view_keys.map(|k| key_line(k.keys, k.what)).collect();
    if !view_lines.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled(format!(" {}", app.view.name()), theme.title()));
        lines.append(&mut view_lines);
    }
    if app.read_only {
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            " read-only: actions are hidden and refused",
            theme.tone(Tone::Warn),
        ));
    }
    let height = lines.len() as u16 + 2;
    let popup = centered(area, 78, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(Span::styled(
            format!(" help: {} (esc closes) ", app.view.name()),
            theme.title(),
        ))),
        popup,
    );
}

pub fn draw_confirm(frame: &mut Frame, area: Rect, confirm: &Confirm, theme: &Theme) {
    let width = (confirm.question.chars().count() as u16 + 6).clamp(34, 76);
    let popup = centered(area, width, 6);
    let button = |label: &str, focused: bool| {
        Span::styled(
            format!("[ {label} ]"),
            if focused {
                theme.selected()
            } else {
                theme.tone(Tone::Dim)
            },
        )
    };
    let lines = vec![
        Line::raw(format!(" {}", confirm.question)),
        Line::raw(""),
        Line::from(vec![
            Span::raw(" "),
            button("Cancel", !confirm.on_confirm),
            Span::raw("  "),
            button("Confirm", confirm.on_confirm),
            Span::styled("   ←/→ choose, enter", theme.tone(Tone::Dim)),
        ]),
    ];
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" confirm ", theme.title())),
        ),
        popup,
    );
}
