//! The console's screen as text, and keys typed into it: what the screen tests read and do.

use drover_tui::app::{App, Input};
use drover_tui::ui::{Theme, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The frame `app` draws now, one line per row, trailing spaces cut.
pub fn screen(app: &mut App, theme: Theme) -> String {
    app.prepare_frame();
    let mut terminal =
        Terminal::new(TestBackend::new(app.width, app.height)).expect("test terminal");
    terminal
        .draw(|frame| draw(frame, app, &theme))
        .expect("draw");
    let buffer = terminal.backend().buffer();
    let area = buffer.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Types `text`: `\n` is enter, `\x1b` esc, `→` the right arrow, anything else itself.
pub fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        let code = match c {
            '\n' => KeyCode::Enter,
            '\x1b' => KeyCode::Esc,
            '→' => KeyCode::Right,
            c => KeyCode::Char(c),
        };
        app.handle(Input::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }
}
