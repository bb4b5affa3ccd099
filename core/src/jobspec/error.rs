//! Problems found in a job file, each tied to where in the file it is.

use std::fmt;

/// A place in a job file: 1-based line, and 1-based column counted in characters (a tab is
/// one column), which is what editors jump to from `file:line:column`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One thing wrong with a job file. `position` is `None` only for problems about the file as
/// a whole that no single place can be blamed for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Problem {
    pub position: Option<Position>,
    /// Lowercase, no trailing period, naming the offending field and value.
    pub message: String,
}

/// Why a job file could not be turned into a job.
#[derive(Debug, thiserror::Error)]
pub enum JobspecError {
    /// Every problem found, sorted by position; never empty. Displays as one line per
    /// problem, `file:line:column: message`.
    #[error("{}", ProblemLines::new(.file, .problems))]
    Invalid {
        file: String,
        problems: Vec<Problem>,
    },
}

impl JobspecError {
    /// The problems found in the file's content.
    pub fn problems(&self) -> &[Problem] {
        match self {
            JobspecError::Invalid { problems, .. } => problems,
        }
    }
}

struct ProblemLines<'a> {
    file: &'a str,
    problems: &'a [Problem],
}

impl<'a> ProblemLines<'a> {
    fn new(file: &'a str, problems: &'a [Problem]) -> Self {
        Self { file, problems }
    }
}

impl fmt::Display for ProblemLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            match p.position {
                Some(at) => write!(f, "{}:{at}: {}", self.file, p.message)?,
                None => write!(f, "{}: {}", self.file, p.message)?,
            }
        }
        Ok(())
    }
}

/// Turns byte offsets into line and column positions for one source text.
#[derive(Debug)]
pub(super) struct LineIndex<'s> {
    src: &'s str,
    /// Byte offset at which each line starts; the first is always 0.
    starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub(super) fn new(src: &'s str) -> Self {
        let starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { src, starts }
    }

    /// The position of byte `offset`; offsets past the end land on the last character, and
    /// an offset inside a multi-byte character counts as that character.
    pub(super) fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.src.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = self.src[start..]
            .char_indices()
            .take_while(|(i, _)| start + i < offset)
            .count()
            + 1;
        Position { line, column }
    }
}

/// Collects problems while a file is decoded, so one run reports all of them.
#[derive(Debug)]
pub(super) struct Problems<'s> {
    pub(super) lines: LineIndex<'s>,
    list: Vec<Problem>,
}

impl<'s> Problems<'s> {
    pub(super) fn new(src: &'s str) -> Self {
        Self {
            lines: LineIndex::new(src),
            list: Vec::new(),
        }
    }

    /// Records a problem at byte `offset` of the source.
    pub(super) fn at(&mut self, offset: usize, message: impl Into<String>) {
        let position = Some(self.lines.position(offset));
        self.list.push(Problem {
            position,
            message: message.into(),
        });
    }

    pub(super) fn push(&mut self, problem: Problem) {
        self.list.push(problem);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The collected problems as an error, sorted by position (whole-file problems first),
    /// or `Ok` when there are none.
    pub(super) fn finish(mut self, file: &str) -> Result<(), JobspecError> {
        if self.list.is_empty() {
            return Ok(());
        }
        self.list.sort_by_key(|p| p.position);
        self.list.dedup();
        Err(JobspecError::Invalid {
            file: file.to_owned(),
            problems: self.list,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let index = LineIndex::new("ab\n\tcé d\n\nz");
        for (offset, line, column) in [
            (0, 1, 1),
            (1, 1, 2),
            (2, 1, 3),
            (3, 2, 1),
            (4, 2, 2),
            (5, 2, 3),
            // `é` is two bytes; the space after it is the fourth character.
            (7, 2, 4),
            (10, 3, 1),
            (11, 4, 1),
            (99, 4, 2),
        ] {
            assert_eq!(
                index.position(offset),
                Position { line, column },
                "offset {offset}"
            );
        }
    }
}
