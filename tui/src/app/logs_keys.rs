//! Opening the logs pane (`l` on an allocation) and the keys while it is open.

use super::{Action, App, LogPane, LogTarget, Mode, RowKey};
use ratatui::crossterm::event::{KeyCode, KeyEvent};

impl App {
    /// `l` in the allocations view: the selected allocation's stdout, followed.
    pub(super) fn open_logs(&mut self) -> Action {
        let Some(RowKey::Alloc(alloc_id)) = self.list().selected.clone() else {
            return Action::None;
        };
        let tasks: Vec<String> = self
            .alloc_detail
            .as_ref()
            .filter(|a| a.id == alloc_id)
            .map(|a| a.task_states.keys().map(String::from).collect())
            .unwrap_or_default();
        let target = LogTarget {
            alloc_id,
            task: tasks.first().cloned(),
            stderr: false,
        };
        self.logs = Some(LogPane::new(target.clone(), tasks));
        Action::StreamLogs(target)
    }

    /// Lines the logs pane shows at once.
    pub fn logs_height(&self) -> usize {
        usize::from(crate::ui::layout::logs_rows(self))
    }

    pub(super) fn on_logs_key(&mut self, key: KeyEvent) -> Action {
        let page = self.logs_height().max(1) as isize;
        let Some(pane) = self.logs.as_mut() else {
            return Action::None;
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q' | 'l') => {
                self.logs = None;
                return Action::StopLogs;
            }
            KeyCode::Char('?') => self.mode = Mode::Help,
            KeyCode::Up | KeyCode::Char('k') => pane.scroll(1),
            KeyCode::Down | KeyCode::Char('j') => pane.scroll(-1),
            KeyCode::PageUp => pane.scroll(page),
            KeyCode::PageDown => pane.scroll(-page),
            KeyCode::Home | KeyCode::Char('g') => pane.to_top(),
            KeyCode::End | KeyCode::Char('G') => pane.to_bottom(),
            KeyCode::Char('f') => {
                if pane.follow {
                    pane.scroll(1);
                } else {
                    pane.to_bottom();
                }
            }
            KeyCode::Char('e') => {
                let mut target = pane.target.clone();
                target.stderr = !target.stderr;
                return self.restream(target);
            }
            KeyCode::Char('t') => {
                if let Some(task) = pane.next_task() {
                    let mut target = pane.target.clone();
                    target.task = Some(task);
                    return self.restream(target);
                }
            }
            _ => {}
        }
        Action::None
    }

    /// Shows another stream of the same allocation in a fresh pane.
    fn restream(&mut self, target: LogTarget) -> Action {
        let tasks = self
            .logs
            .as_ref()
            .map(|p| p.tasks.clone())
            .unwrap_or_default();
        self.logs = Some(LogPane::new(target.clone(), tasks));
        Action::StreamLogs(target)
    }
}
