//! What is drawn over the views: the detail pane and the confirmation dialog (the help
//! has a module of its own, `help`).

use super::theme::Theme;
use crate::app::{App, Confirm};
use crate::views::Tone;
use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Padding, Paragraph, Wrap};

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
                if d.raw {
                    Line::styled(d.value.text, theme.tone(d.value.tone))
                } else if d.label.is_empty() {
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
    let title = if app.detail_scroll > 0 {
        format!(
            " detail (esc closes, J/K scroll: line {}) ",
            app.detail_scroll + 1
        )
    } else {
        " detail (esc closes) ".to_owned()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, theme.title()));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((app.detail_scroll, 0)),
        area,
    );
}

pub(super) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}

/// The confirmation's buttons, and the hint beside them when there is room.
const BUTTONS_WIDTH: usize = 23;
const CONFIRM_HINT: &str = "←/→ choose, enter";
/// Widest the dialog gets: a question longer than this wraps.
const CONFIRM_MAX_WIDTH: u16 = 76;

pub fn draw_confirm(frame: &mut Frame, area: Rect, confirm: &Confirm, theme: &Theme) {
    // Borders and a column of padding each side.
    const FRAME: u16 = 4;
    let hint_width = CONFIRM_HINT.chars().count();
    let want = confirm
        .question
        .chars()
        .count()
        .max(BUTTONS_WIDTH + 3 + hint_width) as u16
        + FRAME;
    let width = want.min(CONFIRM_MAX_WIDTH).min(area.width);
    let inner = usize::from(width.saturating_sub(FRAME)).max(1);
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
    let mut lines: Vec<Line> = wrap_words(&confirm.question, inner)
        .into_iter()
        .map(Line::raw)
        .collect();
    lines.push(Line::raw(""));
    let mut buttons = vec![
        button("Cancel", !confirm.on_confirm),
        Span::raw("  "),
        button("Confirm", confirm.on_confirm),
    ];
    let hint = Span::styled(CONFIRM_HINT, theme.tone(Tone::Dim));
    if BUTTONS_WIDTH + 3 + hint_width <= inner {
        buttons.push(Span::raw("   "));
        buttons.push(hint);
        lines.push(Line::from(buttons));
    } else {
        lines.push(Line::from(buttons));
        lines.push(Line::from(hint));
    }
    let popup = centered(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .padding(Padding::horizontal(1))
                .title(Span::styled(" confirm ", theme.title())),
        ),
        popup,
    );
}

/// Breaks `text` into lines of at most `width` characters at spaces (a longer word is cut
/// where it must be), so a long question stays inside the dialog's padding.
pub(super) fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..width).collect());
        }
        let word: String = word.into_iter().collect();
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if needed > width && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap_words;

    #[test]
    fn words_wrap_at_spaces_and_long_words_are_cut() {
        let cases: [(&str, usize, &[&str]); 4] = [
            ("stop job web?", 20, &["stop job web?"]),
            (
                "offline node node-1? it gets no",
                12,
                &["offline node", "node-1? it", "gets no"],
            ),
            ("abcdefghij xy", 4, &["abcd", "efgh", "ij", "xy"]),
            ("", 5, &[""]),
        ];
        for (text, width, want) in cases {
            assert_eq!(wrap_words(text, width), want, "{text:?} at {width}");
        }
    }
}
