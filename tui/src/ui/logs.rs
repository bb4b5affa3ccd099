//! The logs pane: the output lines in a bordered box whose title says what is shown and
//! how to move, and whose last line says how the stream ended, if it has.

use super::Theme;
use crate::app::LogPane;
use crate::kinds::Tone;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

pub fn draw(frame: &mut Frame, area: Rect, pane: &LogPane, theme: &Theme) {
    let t = &pane.target;
    let id = t.alloc_id.to_string();
    let task = t
        .task
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    let stream = if t.stderr { "stderr" } else { "stdout" };
    let mode = if pane.follow {
        "following".to_owned()
    } else {
        format!("paused, {} newer", pane.from_bottom)
    };
    let title = format!(" logs {}{task} {stream} ({mode}) ", &id[..8]);
    let keys = " esc closes  j/k scroll  f follow  e stdout/stderr  t task ";
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, theme.title()))
        .title_bottom(Span::styled(keys, theme.tone(Tone::Dim)));
    let height = usize::from(area.height.saturating_sub(2));
    let ended = pane.ended.as_ref().map(|result| match result {
        Ok(()) => Line::styled("-- end of output --", theme.tone(Tone::Dim)),
        Err(reason) => Line::styled(format!("-- {reason} --"), theme.tone(Tone::Bad)),
    });
    let room = height.saturating_sub(usize::from(ended.is_some()));
    let mut lines: Vec<Line> = pane
        .visible(room)
        .into_iter()
        .map(|l| Line::raw(l.to_owned()))
        .collect();
    if lines.is_empty() && pane.ended.is_none() {
        lines.push(Line::styled("waiting for output…", theme.tone(Tone::Dim)));
    }
    lines.extend(ended);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
