//! Keyboard and mouse handling for each mode.

use super::actions::describe_nodes;
use super::modes::parse_deadline;
use super::{Action, App, Command, Confirm, Mode, Prompt, PromptKind};
use crate::views::{TOPICS, Tone, ViewKind};
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

/// Rows the mouse wheel scrolls per notch.
const WHEEL_STEP: isize = 3;

impl App {
    pub(super) fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        match self.mode.clone() {
            Mode::Normal if self.logs.is_some() => self.on_logs_key(key),
            Mode::Normal => self.on_normal_key(key),
            Mode::Help => {
                self.on_help_key(key);
                Action::None
            }
            Mode::Filter => {
                self.on_filter_key(key);
                Action::None
            }
            Mode::Command(text) => self.on_command_key(key, text),
            Mode::Prompt(prompt) => self.on_prompt_key(key, prompt),
            Mode::Confirm(confirm) => self.on_confirm_key(key, confirm),
        }
    }

    fn on_normal_key(&mut self, key: KeyEvent) -> Action {
        let before = self.list().selected.clone();
        let action = self.on_normal_key_here(key);
        let moved = self
            .list()
            .selected
            .clone()
            .filter(|now| Some(now) != before.as_ref());
        match (action, moved) {
            (Action::None, Some(now)) if self.detail_open => self.fetch_detail(now),
            (action, _) => action,
        }
    }

    fn on_normal_key_here(&mut self, key: KeyEvent) -> Action {
        let page = crate::ui::layout::table_rows(self).max(1) as isize;
        // k9s's kill: checked before `k`, which moves the selection.
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('k') {
            return self.on_action_key("ctrl-k");
        }
        match key.code {
            KeyCode::Char('J') if self.detail_open => {
                let lines = self.detail_len();
                self.detail_scroll = (self.detail_scroll + 1).min(lines.saturating_sub(1));
                return Action::None;
            }
            KeyCode::Char('K') if self.detail_open => {
                self.detail_scroll = self.detail_scroll.saturating_sub(1);
                return Action::None;
            }
            _ => self.detail_scroll = 0,
        }
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('?') => {
                self.help_scroll = 0;
                self.mode = Mode::Help;
            }
            KeyCode::Char('/') => self.mode = Mode::Filter,
            KeyCode::Char(':') => self.mode = Mode::Command(String::new()),
            KeyCode::Tab => self.cycle_view(1),
            KeyCode::BackTab => self.cycle_view(-1),
            KeyCode::Down | KeyCode::Char('j') => self.list_mut().move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.list_mut().move_by(-1),
            KeyCode::PageDown => self.list_mut().move_by(page),
            KeyCode::PageUp => self.list_mut().move_by(-page),
            KeyCode::Home => self.list_mut().select_index(0),
            KeyCode::End => {
                let last = self.list().order.len().saturating_sub(1);
                self.list_mut().select_index(last);
            }
            KeyCode::Char(c @ '1'..='9') => {
                let column = usize::from(c as u8 - b'1');
                if column < self.component().columns().len() {
                    self.list_mut().sort_by(column);
                    self.invalidate_view();
                }
            }
            KeyCode::Enter => return self.enter(),
            KeyCode::Char('i') => return self.toggle_detail(),
            KeyCode::Esc => self.back(),
            KeyCode::Char('y') => {
                return match &self.list().selected {
                    Some(key) => {
                        let text = key.copy_text();
                        self.tell(format!("copied {text}"), Tone::Good);
                        Action::Copy(text)
                    }
                    None => Action::None,
                };
            }
            KeyCode::Char('l') if self.view == ViewKind::Allocs => return self.open_logs(),
            KeyCode::Char(' ') if self.view == ViewKind::Nodes => {
                self.list_mut().toggle_mark();
                self.list_mut().move_by(1);
            }
            KeyCode::Char('g') if self.view == ViewKind::Nodes => {
                self.health = self.health.next();
                self.invalidate_view();
                self.tell(
                    format!("showing {} nodes", self.health.label()),
                    Tone::Normal,
                );
            }
            KeyCode::Char('t') if self.view == ViewKind::Events => {
                self.topic = (self.topic + 1) % TOPICS.len();
                self.invalidate_view();
                self.tell(
                    format!("showing {} events", self.topic_filter().unwrap_or("all")),
                    Tone::Normal,
                );
            }
            KeyCode::Char(c) => return self.on_action_key(c.encode_utf8(&mut [0; 4])),
            _ => {}
        }
        Action::None
    }

    /// Keys while the help is open: scrolling it, closing it; nothing reaches the view.
    fn on_help_key(&mut self, key: KeyEvent) {
        let most = u16::try_from(crate::ui::help_len(self)).unwrap_or(u16::MAX);
        let page = self.height.saturating_sub(4).max(1);
        self.help_scroll = match key.code {
            KeyCode::Esc | KeyCode::Char('?' | 'q') => {
                self.mode = Mode::Normal;
                0
            }
            KeyCode::Down | KeyCode::Char('j') => self.help_scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.help_scroll.saturating_sub(1),
            KeyCode::PageDown => self.help_scroll.saturating_add(page),
            KeyCode::PageUp => self.help_scroll.saturating_sub(page),
            KeyCode::Home => 0,
            KeyCode::End => most,
            _ => self.help_scroll,
        }
        .min(most);
    }

    fn on_filter_key(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Esc => {
                self.list_mut().filter.clear();
                self.mode = Mode::Normal;
            }
            KeyCode::Enter => self.mode = Mode::Normal,
            KeyCode::Backspace => {
                self.list_mut().filter.pop();
            }
            KeyCode::Char(c) => self.list_mut().filter.push(c),
            _ => return,
        }
        self.invalidate_view();
    }

    fn on_command_key(&mut self, key: KeyEvent, mut text: String) -> Action {
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Backspace => {
                text.pop();
                self.mode = Mode::Command(text);
            }
            KeyCode::Char(c) => {
                text.push(c);
                self.mode = Mode::Command(text);
            }
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                return self.run_command_line(&text);
            }
            _ => {}
        }
        Action::None
    }

    fn on_prompt_key(&mut self, key: KeyEvent, mut prompt: Prompt) -> Action {
        match key.code {
            KeyCode::Esc => self.mode = Mode::Normal,
            KeyCode::Backspace => {
                prompt.input.pop();
                self.mode = Mode::Prompt(prompt);
            }
            KeyCode::Char(c) => {
                prompt.input.push(c);
                self.mode = Mode::Prompt(prompt);
            }
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                self.submit_prompt(prompt);
            }
            _ => {}
        }
        Action::None
    }

    pub(super) fn submit_prompt(&mut self, prompt: Prompt) {
        match prompt.kind {
            PromptKind::DrainDeadline(nodes) => match parse_deadline(&prompt.input) {
                Ok(deadline) => {
                    let when = match deadline {
                        Some(_) => format!("with a {} deadline", prompt.input.trim()),
                        None => "with no deadline".to_owned(),
                    };
                    let question = format!("drain {} {when}?", describe_nodes(self, &nodes));
                    self.mode =
                        Mode::Confirm(Confirm::new(question, Command::Drain { nodes, deadline }));
                }
                Err(e) => self.tell(e, Tone::Bad),
            },
            PromptKind::WorkerCount { server_id } => match prompt.input.trim().parse::<u32>() {
                Ok(count) => {
                    self.mode = Mode::Confirm(Confirm::new(
                        format!("run {count} worker(s) on server {server_id}?"),
                        Command::SetWorkerCount { server_id, count },
                    ));
                }
                Err(_) => self.tell(
                    format!(
                        "invalid worker count {:?}: use a whole number",
                        prompt.input
                    ),
                    Tone::Bad,
                ),
            },
        }
    }

    fn on_confirm_key(&mut self, key: KeyEvent, mut confirm: Confirm) -> Action {
        match key.code {
            KeyCode::Esc | KeyCode::Char('n') => self.mode = Mode::Normal,
            KeyCode::Left | KeyCode::Right | KeyCode::Tab | KeyCode::BackTab => {
                confirm.on_confirm = !confirm.on_confirm;
                self.mode = Mode::Confirm(confirm);
            }
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                if confirm.on_confirm {
                    return self.run(confirm.command);
                }
                self.tell("cancelled", Tone::Dim);
            }
            _ => {}
        }
        Action::None
    }

    pub(super) fn on_mouse(&mut self, mouse: MouseEvent) -> Action {
        if self.mode != Mode::Normal {
            return Action::None;
        }
        let areas = crate::ui::layout::areas(self);
        match mouse.kind {
            MouseEventKind::ScrollDown => self.list_mut().move_by(WHEEL_STEP),
            MouseEventKind::ScrollUp => self.list_mut().move_by(-WHEEL_STEP),
            MouseEventKind::Down(MouseButton::Left) => {
                let (x, y) = (mouse.column, mouse.row);
                let table = areas.table;
                if !table.contains((x, y).into()) {
                    if areas.tabs.contains((x, y).into()) {
                        if let Some(view) = crate::ui::layout::tab_at(areas.tabs, x) {
                            self.switch_to(view);
                            self.dirty = true;
                        }
                    }
                    return Action::None;
                }
                // Row 0 is the border, row 1 the column titles.
                let row = y.saturating_sub(table.y);
                if row == 1 {
                    let columns = crate::ui::table::layout(self, table);
                    if let Some(column) = crate::ui::table::column_at(&columns, table.x, x) {
                        self.list_mut().sort_by(column);
                        self.invalidate_view();
                    }
                } else if row >= 2 {
                    let index = self.list().offset + usize::from(row - 2);
                    if index < self.list().order.len() {
                        self.list_mut().select_index(index);
                    }
                }
            }
            _ => return Action::None,
        }
        self.dirty = true;
        Action::None
    }
}
