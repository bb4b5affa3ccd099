//! Taking over the terminal and always giving it back: on return, on error, and on panic.

use crate::app::Input;
use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long the input thread waits for a key before checking whether it should stop.
const INPUT_POLL: Duration = Duration::from_millis(100);

/// The terminal in raw mode on the alternate screen, with mouse capture if asked for.
/// Dropping it restores the terminal; a panic hook does the same if the process panics
/// first.
#[derive(Debug)]
pub struct Session {
    pub terminal: DefaultTerminal,
    mouse: bool,
}

impl Session {
    pub fn start(mouse: bool) -> std::io::Result<Self> {
        // ratatui's init installs a hook that leaves raw mode and the alternate screen;
        // ours runs first and releases the mouse too.
        let terminal = ratatui::try_init()?;
        if !mouse {
            return Ok(Self { terminal, mouse });
        }
        let inner = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = execute!(std::io::stdout(), DisableMouseCapture);
            inner(info);
        }));
        if let Err(e) = execute!(std::io::stdout(), EnableMouseCapture) {
            let _ = ratatui::try_restore();
            return Err(e);
        }
        Ok(Self { terminal, mouse })
    }

    /// Puts `text` on the clipboard with OSC 52, which terminals (and tmux with
    /// `set-clipboard on`) honour even over ssh.
    pub fn copy(&mut self, text: &str) -> std::io::Result<()> {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        let mut out = std::io::stdout();
        write!(out, "\x1b]52;c;{encoded}\x07")?;
        out.flush()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.mouse {
            let _ = execute!(std::io::stdout(), DisableMouseCapture);
        }
        if let Err(error) = ratatui::try_restore() {
            tracing::warn!(%error, "restoring the terminal failed");
        }
    }
}

/// Reads terminal events on a thread of its own (crossterm's read blocks) and forwards
/// them; stops when the flag is set or the receiver is gone.
pub fn spawn_input(tx: mpsc::Sender<Input>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match event::poll(INPUT_POLL) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(error) => {
                    tracing::warn!(%error, "reading the terminal failed");
                    return;
                }
            }
            let input = match event::read() {
                Ok(Event::Key(key)) => Input::Key(key),
                Ok(Event::Mouse(mouse)) => Input::Mouse(mouse),
                Ok(Event::Resize(width, height)) => Input::Resize { width, height },
                Ok(_) => continue,
                Err(error) => {
                    tracing::warn!(%error, "reading the terminal failed");
                    return;
                }
            };
            if tx.blocking_send(input).is_err() {
                return;
            }
        }
    })
}
