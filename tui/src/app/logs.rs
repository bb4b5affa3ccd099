//! The logs pane: an allocation's task output, streamed from its node's agent through the
//! server, kept as lines (the newest [`MAX_LINES`]) and scrolled by the operator. While it
//! follows, the newest line stays in sight; scrolling up stops following, `G` or `f`
//! resumes it.

use drover_core::AllocId;
use std::collections::VecDeque;

/// Lines kept; older ones are dropped as new ones arrive.
pub const MAX_LINES: usize = 5_000;

/// Lines the stream starts with before following (the file's last lines).
pub const TAIL_LINES: u64 = 500;

/// Which output of which task the pane shows; also what the runtime streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTarget {
    pub alloc_id: AllocId,
    /// `None`: the allocation's only task.
    pub task: Option<String>,
    pub stderr: bool,
}

/// What the stream tells the pane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogNews {
    Data(Vec<u8>),
    /// The stream ended: `Ok` when the task's output is complete, the reason otherwise.
    Ended(Result<(), String>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogPane {
    pub target: LogTarget,
    /// The allocation's tasks, when known (`t` cycles through them).
    pub tasks: Vec<String>,
    pub lines: VecDeque<String>,
    /// The last line while it has no newline yet.
    partial: String,
    /// Keep the newest line in sight.
    pub follow: bool,
    /// Lines between the bottom of the pane and the newest line.
    pub from_bottom: usize,
    /// How the stream ended, once it has.
    pub ended: Option<Result<(), String>>,
}

impl LogPane {
    pub fn new(target: LogTarget, tasks: Vec<String>) -> Self {
        Self {
            target,
            tasks,
            lines: VecDeque::new(),
            partial: String::new(),
            follow: true,
            from_bottom: 0,
            ended: None,
        }
    }

    pub fn apply(&mut self, news: LogNews) {
        match news {
            LogNews::Data(bytes) => self.push(&bytes),
            LogNews::Ended(result) => {
                if !self.partial.is_empty() {
                    let last = std::mem::take(&mut self.partial);
                    self.push_line(last);
                }
                self.ended = Some(result);
            }
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let mut rest: &str = &text;
        while let Some(at) = rest.find('\n') {
            let mut line = std::mem::take(&mut self.partial);
            line.push_str(rest[..at].trim_end_matches('\r'));
            self.push_line(line);
            rest = &rest[at + 1..];
        }
        self.partial.push_str(rest);
    }

    fn push_line(&mut self, line: String) {
        // Tabs and control characters would move the terminal's cursor.
        let line = line
            .replace('\t', "    ")
            .chars()
            .filter(|c| !c.is_control())
            .collect();
        self.lines.push_back(line);
        if self.lines.len() > MAX_LINES {
            self.lines.pop_front();
        }
        if !self.follow {
            // Keep the lines the operator is reading where they are.
            self.from_bottom = (self.from_bottom + 1).min(self.max_scroll());
        }
    }

    /// Every line, the one still being written included.
    pub fn all_lines(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .map(String::as_str)
            .chain((!self.partial.is_empty()).then_some(self.partial.as_str()))
    }

    fn line_count(&self) -> usize {
        self.lines.len() + usize::from(!self.partial.is_empty())
    }

    fn max_scroll(&self) -> usize {
        self.line_count().saturating_sub(1)
    }

    /// Scrolls `by` lines towards older output (negative: newer). Reaching the bottom
    /// follows again.
    pub fn scroll(&mut self, by: isize) {
        let next = self
            .from_bottom
            .saturating_add_signed(by)
            .min(self.max_scroll());
        self.from_bottom = next;
        self.follow = next == 0;
    }

    pub fn to_top(&mut self) {
        self.from_bottom = self.max_scroll();
        self.follow = false;
    }

    pub fn to_bottom(&mut self) {
        self.from_bottom = 0;
        self.follow = true;
    }

    /// The lines a pane `height` lines tall shows, oldest first.
    pub fn visible(&self, height: usize) -> Vec<&str> {
        let all: Vec<&str> = self.all_lines().collect();
        // Scrolled to the top, the pane is still full.
        let end = all
            .len()
            .saturating_sub(self.from_bottom)
            .max(height.min(all.len()));
        let start = end.saturating_sub(height);
        all[start..end].to_vec()
    }

    /// The next task after the shown one, if the allocation has several.
    pub fn next_task(&self) -> Option<String> {
        if self.tasks.len() < 2 {
            return None;
        }
        let at = self
            .target
            .task
            .as_ref()
            .and_then(|t| self.tasks.iter().position(|n| n == t))
            .unwrap_or(0);
        Some(self.tasks[(at + 1) % self.tasks.len()].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane() -> LogPane {
        LogPane::new(
            LogTarget {
                alloc_id: drover_core::mock::alloc_id(1),
                task: None,
                stderr: false,
            },
            vec![],
        )
    }

    #[test]
    fn chunks_become_lines_whatever_their_boundaries() {
        let mut p = pane();
        for chunk in ["one\ntw", "o\r\n", "thr", "ee\tx\x1b[31m\nfour"] {
            p.apply(LogNews::Data(chunk.as_bytes().to_vec()));
        }
        assert_eq!(
            p.all_lines().collect::<Vec<_>>(),
            ["one", "two", "three    x[31m", "four"]
        );
        p.apply(LogNews::Ended(Ok(())));
        assert_eq!(p.lines.len(), 4, "the unterminated last line is kept");
        assert_eq!(p.ended, Some(Ok(())));
    }

    #[test]
    fn scrolling_up_holds_the_view_and_the_bottom_follows_again() {
        let mut p = pane();
        let feed = |p: &mut LogPane, from: usize, to: usize| {
            let text: String = (from..to).map(|i| format!("{i}\n")).collect();
            p.apply(LogNews::Data(text.into_bytes()));
        };
        feed(&mut p, 0, 10);
        assert_eq!(p.visible(3), ["7", "8", "9"]);
        p.scroll(2);
        assert!(!p.follow);
        assert_eq!(p.visible(3), ["5", "6", "7"]);
        feed(&mut p, 10, 12);
        assert_eq!(
            p.visible(3),
            ["5", "6", "7"],
            "new lines do not move what is read"
        );
        p.scroll(-100);
        assert!(p.follow);
        assert_eq!(p.visible(3), ["9", "10", "11"]);
        p.to_top();
        assert_eq!(p.visible(3), ["0", "1", "2"]);
        p.to_bottom();
        feed(&mut p, 12, MAX_LINES + 20);
        assert_eq!(p.lines.len(), MAX_LINES);
        assert_eq!(p.visible(1), [(MAX_LINES + 19).to_string()]);
    }
}
