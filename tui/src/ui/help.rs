//! The help overlay: every key of the current view, in two columns that wrap at spaces to
//! whatever width the terminal has, scrolled with j/k when it is taller than the screen.
//! The keys' handling asks [`help_len`] how far it may scroll, so both read one layout.

use super::overlay::{centered, wrap_words};
use super::theme::Theme;
use crate::app::App;
use crate::views::{GLOBAL_KEYS, Tone};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// The widest the overlay gets: room for the longest entry on one line.
const MAX_WIDTH: u16 = 78;
/// The keys' column at full width; on a narrow screen it takes a third of the room.
const KEYS_WIDTH: usize = 18;

/// Where the overlay goes on a screen of `area`, and how many text lines fit inside it.
fn popup(area: Rect, lines: usize) -> (Rect, usize) {
    let height = u16::try_from(lines + 2).unwrap_or(u16::MAX);
    let rect = centered(area, MAX_WIDTH, height);
    (rect, usize::from(rect.height.saturating_sub(2)))
}

/// The overlay's width inside its border on a screen `width` wide.
fn inner_width(width: u16) -> usize {
    usize::from(width.min(MAX_WIDTH).saturating_sub(2))
}

/// Every line of the help for `app`'s view, wrapped to `width` columns.
fn lines(app: &App, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    // A column of margin before the keys and one between the columns.
    let keys_width = KEYS_WIDTH.min(width / 3).max(1);
    let what_width = width.saturating_sub(keys_width + 2).max(1);
    let entry = |keys: &str, what: &str, greyed: bool| -> Vec<Line<'static>> {
        let keys = wrap_words(keys, keys_width);
        let what = wrap_words(what, what_width);
        let (key_style, what_style) = if greyed {
            (theme.tone(Tone::Dim), theme.tone(Tone::Dim))
        } else {
            (theme.accent(), ratatui::style::Style::default())
        };
        (0..keys.len().max(what.len()))
            .map(|i| {
                let k = keys.get(i).map_or("", String::as_str);
                let w = what.get(i).map_or("", String::as_str);
                Line::from(vec![
                    Span::styled(format!(" {k:<keys_width$} "), key_style),
                    Span::styled(w.to_owned(), what_style),
                ])
            })
            .collect()
    };
    let heading = |text: &str| Line::styled(format!(" {text}"), theme.title());
    let note = |text: &str, lines: &mut Vec<Line<'static>>| {
        lines.push(Line::raw(""));
        for part in wrap_words(text, width.saturating_sub(1).max(1)) {
            lines.push(Line::styled(format!(" {part}"), theme.tone(Tone::Warn)));
        }
    };
    // Actions the token cannot do stay listed, greyed, and a last line says what it lacks.
    let lacking = crate::app::Area::of_view(app.view)
        .filter(|area| !app.permissions.allows(*area))
        .map(crate::app::Permissions::lacking);
    let mut out = vec![heading("everywhere")];
    for k in GLOBAL_KEYS {
        out.extend(entry(k.keys, k.what, false));
    }
    let view_keys: Vec<_> = app
        .component()
        .keys()
        .iter()
        .filter(|k| !(app.read_only && k.action))
        .collect();
    if !view_keys.is_empty() {
        out.push(Line::raw(""));
        out.push(heading(app.view.name()));
        for k in view_keys {
            out.extend(entry(k.keys, k.what, k.action && lacking.is_some()));
        }
    }
    if app.read_only {
        note("read-only: actions are hidden and refused", &mut out);
    } else if let Some(lacks) = lacking {
        note(
            &format!("your token lacks {lacks}: the greyed actions are refused"),
            &mut out,
        );
    }
    out
}

/// How far the help can scroll on `app`'s screen: its lines less those in sight.
pub fn help_len(app: &App) -> usize {
    let all = lines(app, &Theme { color: false }, inner_width(app.width)).len();
    let area = Rect::new(0, 0, app.width, app.height);
    let (_, shown) = popup(area, all);
    all.saturating_sub(shown)
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let all = lines(app, theme, inner_width(area.width));
    let (rect, shown) = popup(area, all.len());
    let hidden = all.len().saturating_sub(shown);
    let scroll = usize::from(app.help_scroll).min(hidden);
    let title = if hidden == 0 {
        format!(" help: {} (esc closes) ", app.view.name())
    } else {
        format!(
            " help: {} (j/k scroll, {} more, esc closes) ",
            app.view.name(),
            hidden - scroll
        )
    };
    let visible: Vec<Line> = all.into_iter().skip(scroll).take(shown).collect();
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(visible).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(title, theme.title())),
        ),
        rect,
    );
}
