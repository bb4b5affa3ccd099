//! Colours. Only the terminal's own palette colours are used (green, yellow, red), which
//! every theme tunes to read on its background, dark or light; dimming and reverse video
//! carry the rest. With `NO_COLOR` set, tones become modifiers only.

use crate::views::Tone;
use ratatui::style::{Color, Modifier, Style};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to anything non-empty (no-color.org).
    pub fn from_env() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self { color: !no_color }
    }

    pub fn tone(&self, tone: Tone) -> Style {
        let base = Style::default();
        match (tone, self.color) {
            (Tone::Normal, _) => base,
            (Tone::Dim, _) => base.add_modifier(Modifier::DIM),
            (Tone::Good, true) => base.fg(Color::Green),
            (Tone::Warn, true) => base.fg(Color::Yellow),
            (Tone::Bad, true) => base.fg(Color::Red).add_modifier(Modifier::BOLD),
            (Tone::Good, false) => base,
            (Tone::Warn, false) => base.add_modifier(Modifier::ITALIC),
            (Tone::Bad, false) => base.add_modifier(Modifier::BOLD),
        }
    }

    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    pub fn accent(&self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }
}
