//! The bottom line: the connection, then whatever is being typed, or the last notice, or
//! the keys that matter most here: as many as fit, the most needed kept first.

use super::theme::Theme;
use crate::app::{App, Connection, Mode};
use crate::views::Tone;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// The key hints, in the order they read, each with its rank: lower ranks stay longest
/// as the terminal narrows (help and quit lead to everything else).
fn hints(app: &App) -> [(&'static str, u8); 6] {
    let enter = match app.view {
        crate::views::ViewKind::Nodes | crate::views::ViewKind::Jobs => "enter allocs",
        _ => "enter detail",
    };
    [
        ("? help", 0),
        ("/ filter", 2),
        (": view", 1),
        ("1-9 sort", 4),
        (enter, 3),
        ("q quit", 0),
    ]
}

/// The hints that fit in `room` columns (two spaces between them), in reading order.
fn fitting(hints: &[(&'static str, u8)], room: usize) -> Vec<&'static str> {
    let mut by_rank: Vec<usize> = (0..hints.len()).collect();
    by_rank.sort_by_key(|i| (hints[*i].1, *i));
    let mut kept = vec![false; hints.len()];
    let mut used = 0;
    for i in by_rank {
        let width = hints[i].0.chars().count() + if used == 0 { 0 } else { 2 };
        if used + width > room {
            break;
        }
        used += width;
        kept[i] = true;
    }
    hints
        .iter()
        .zip(kept)
        .filter(|(_, k)| *k)
        .map(|(h, _)| h.0)
        .collect()
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let mut spans = match &app.connection {
        Connection::Connected => vec![Span::styled(
            format!(" ● {} ", app.server()),
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
            None => {
                let used: usize = spans.iter().map(Span::width).sum();
                let room = usize::from(area.width).saturating_sub(used);
                let shown = fitting(&hints(app), room).join("  ");
                spans.push(Span::styled(shown, theme.tone(Tone::Dim)));
            }
        },
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

#[cfg(test)]
mod tests {
    use super::fitting;

    #[test]
    fn hints_are_dropped_by_rank_and_keep_their_order() {
        let hints = [("? help", 0), ("/ filter", 2), (": view", 1), ("q quit", 0)];
        let cases: [(usize, &[&str]); 5] = [
            (100, &["? help", "/ filter", ": view", "q quit"]),
            (24, &["? help", ": view", "q quit"]),
            (14, &["? help", "q quit"]),
            (6, &["? help"]),
            (3, &[]),
        ];
        for (room, want) in cases {
            assert_eq!(fitting(&hints, room), want, "{room}");
        }
    }
}
