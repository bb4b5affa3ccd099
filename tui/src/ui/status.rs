//! The bottom line: the connection, then whatever is being typed, or the last notice, or
//! the keys that matter most here.

use super::theme::Theme;
use crate::app::{App, Connection, Mode};
use crate::views::Tone;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let mut spans = match &app.connection {
        Connection::Connected => vec![Span::styled(
            format!(" ● {} ", app.address),
            theme.tone(Tone::Good),
        )],
        Connection::Connecting => vec![Span::styled(
            format!(" … connecting to {} ", app.address),
            theme.tone(Tone::Warn),
        )],
        // The reason is in the header and the table already.
        Connection::Lost { retry_in, .. } if !app.ever_connected => vec![Span::styled(
            format!(
                " ✕ cannot connect to {}, retrying in {}s ",
                app.address,
                retry_in.as_secs().max(1)
            ),
            theme.tone(Tone::Bad),
        )],
        Connection::Lost { reason, retry_in } => vec![Span::styled(
            format!(
                " ✕ connection lost ({reason}), reconnecting in {}s ",
                retry_in.as_secs().max(1)
            ),
            theme.tone(Tone::Bad),
        )],
    };
    spans.push(Span::raw("│ "));
    match &app.mode {
        Mode::Filter => {
            spans.push(Span::styled("/", theme.accent()));
            spans.push(Span::raw(format!("{}▏", app.list().filter)));
        }
        Mode::Command(text) => {
            spans.push(Span::styled(":", theme.accent()));
            spans.push(Span::raw(format!("{text}▏")));
        }
        Mode::Prompt(prompt) => {
            spans.push(Span::styled(prompt.question(), theme.accent()));
            spans.push(Span::raw(format!(" {}▏", prompt.input)));
        }
        Mode::Normal | Mode::Confirm(_) | Mode::Help => match &app.notice {
            Some(notice) => spans.push(Span::styled(notice.text.clone(), theme.tone(notice.tone))),
            None => spans.push(Span::styled(
                "? help  / filter  : view  1-9 sort  enter detail  q quit",
                theme.tone(Tone::Dim),
            )),
        },
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
