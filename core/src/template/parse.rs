//! From template text to a [`Template`]: split into text and actions (delimiters, trim
//! markers, comments), tokenize each action, then build the tree of `if` blocks.

use super::{Command, Function, Node, Operand, Pipeline, Pos, Template, TemplateError, Value};

/// Parses `text` with the delimiters `left` and `right` (`{{` and `}}` by default).
pub fn parse(text: &str, left: &str, right: &str) -> Result<Template, TemplateError> {
    let lines = LineIndex::new(text);
    let pieces = split(text, left, right, &lines)?;
    let mut parser = TreeParser {
        pieces: pieces.into_iter().peekable(),
        ranges: 0,
    };
    let (nodes, end) = parser.nodes()?;
    if let Some(end) = end {
        return Err(end.pos.error(format!("unexpected {{{{{}}}}}", end.word)));
    }
    Ok(Template { nodes })
}

/// Byte offsets to lines and columns (columns count characters, from 1).
struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { text, starts }
    }

    fn pos(&self, offset: usize) -> Pos {
        let line = self.starts.partition_point(|s| *s <= offset);
        let start = self.starts[line - 1];
        let col = self.text[start..offset].chars().count() + 1;
        Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
        }
    }
}

/// Text, or one action's tokens (comments are dropped).
enum Piece {
    Text(String),
    Action(Pos, Vec<Token>),
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `.Name`: a field of the value `range` is at.
    Field(String),
    Str(String),
    Int(i64),
    Pipe,
    Open,
    Close,
}

#[derive(Clone, Debug)]
struct Token {
    pos: Pos,
    tok: Tok,
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Splits the text at the delimiters, applying trim markers.
fn split(
    text: &str,
    left: &str,
    right: &str,
    lines: &LineIndex<'_>,
) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest_at = 0;
    let mut trim_next = false;
    while let Some(found) = text[rest_at..].find(left) {
        let open = rest_at + found;
        let mut before = &text[rest_at..open];
        if trim_next {
            before = before.trim_start_matches(is_space);
        }
        let mut inner_at = open + left.len();
        // `{{- ` trims the text before it; `{{-3}}` is the number -3.
        let after = &text[inner_at..];
        if after.starts_with('-') && after[1..].starts_with(is_space) {
            before = before.trim_end_matches(is_space);
            inner_at += 1;
        }
        if !before.is_empty() {
            pieces.push(Piece::Text(before.to_string()));
        }
        let close = find_close(text, inner_at, right).ok_or_else(|| {
            lines
                .pos(open)
                .error(format!("unclosed action: no {right}"))
        })?;
        let mut inner_end = close;
        trim_next = false;
        let inner = &text[inner_at..close];
        if inner.ends_with('-') && inner[..inner.len() - 1].ends_with(is_space) {
            inner_end -= 1;
            trim_next = true;
        }
        let body = text[inner_at..inner_end].trim_matches(is_space);
        if body.starts_with("/*") {
            if !body.ends_with("*/") || body.len() < 4 {
                return Err(lines
                    .pos(open)
                    .error("unclosed comment: no */ before the action ends"));
            }
        } else {
            let tokens = tokenize(text, inner_at, inner_end, lines)?;
            if tokens.is_empty() {
                return Err(lines.pos(open).error("empty action"));
            }
            pieces.push(Piece::Action(lines.pos(open), tokens));
        }
        rest_at = close + right.len();
    }
    let mut tail = &text[rest_at..];
    if trim_next {
        tail = tail.trim_start_matches(is_space);
    }
    if !tail.is_empty() {
        pieces.push(Piece::Text(tail.to_string()));
    }
    Ok(pieces)
}

/// The offset of the right delimiter closing the action that starts at `from`, skipping
/// string literals (which may hold the delimiter).
fn find_close(text: &str, from: usize, right: &str) -> Option<usize> {
    let mut i = from;
    let bytes = text.as_bytes();
    while i < text.len() {
        if text[i..].starts_with(right) {
            return Some(i);
        }
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < text.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'`' => {
                i += 1;
                while i < text.len() && bytes[i] != b'`' {
                    i += 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

fn tokenize(
    text: &str,
    start: usize,
    end: usize,
    lines: &LineIndex<'_>,
) -> Result<Vec<Token>, TemplateError> {
    let mut tokens = Vec::new();
    let src = &text[..end];
    let mut i = start;
    while i < end {
        let c = src[i..].chars().next().unwrap_or(' ');
        let pos = lines.pos(i);
        if is_space(c) {
            i += c.len_utf8();
            continue;
        }
        let (tok, len) = match c {
            '|' => (Tok::Pipe, 1),
            '(' => (Tok::Open, 1),
            ')' => (Tok::Close, 1),
            '"' => string(&src[i..]).map_err(|m| pos.error(m))?,
            '`' => {
                let close = src[i + 1..]
                    .find('`')
                    .ok_or_else(|| pos.error("unterminated raw string"))?;
                (Tok::Str(src[i + 1..i + 1 + close].to_string()), close + 2)
            }
            '-' | '0'..='9' => {
                let len = src[i + 1..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(end - i, |n| n + 1);
                let word = &src[i..i + len];
                let n = word
                    .parse::<i64>()
                    .map_err(|_| pos.error(format!("{word:?} is not a number")))?;
                (Tok::Int(n), len)
            }
            c if c.is_alphabetic() || c == '_' => {
                let len = src[i..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(end - i);
                (Tok::Ident(src[i..i + len].to_string()), len)
            }
            '.' => {
                let name_len = src[i + 1..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(end - i - 1);
                if name_len == 0 {
                    return Err(pos.error(
                        "a bare . is not available: name a field (.Address, .Port) inside {{range}}",
                    ));
                }
                (
                    Tok::Field(src[i + 1..i + 1 + name_len].to_string()),
                    name_len + 1,
                )
            }
            other => return Err(pos.error(format!("unexpected {other:?} in action"))),
        };
        tokens.push(Token { pos, tok });
        i += len;
    }
    Ok(tokens)
}

/// A `"..."` literal at the start of `s`: its value and its length in bytes.
fn string(s: &str) -> Result<(Tok, usize), String> {
    let mut value = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((Tok::Str(value), i + 1)),
            '\n' => break,
            '\\' => {
                let (_, e) = chars.next().ok_or("unterminated string")?;
                value.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' => '\\',
                    '"' => '"',
                    other => return Err(format!("unknown escape \\{other} in string")),
                });
            }
            c => value.push(c),
        }
    }
    Err("unterminated string".into())
}

/// An `{{else}}`, `{{else if}}` or `{{end}}` that closed a list of nodes.
struct End {
    pos: Pos,
    word: &'static str,
    /// `else if`'s condition.
    condition: Option<Pipeline>,
}

struct TreeParser {
    pieces: std::iter::Peekable<std::vec::IntoIter<Piece>>,
    /// How many `range` bodies the parser is in: fields (`.Name`) need at least one.
    ranges: usize,
}

impl TreeParser {
    /// Nodes up to the end of the text or an `else` / `end`, which is returned.
    fn nodes(&mut self) -> Result<(Vec<Node>, Option<End>), TemplateError> {
        let mut nodes = Vec::new();
        while let Some(piece) = self.pieces.next() {
            let (pos, tokens) = match piece {
                Piece::Text(t) => {
                    nodes.push(Node::Text(t));
                    continue;
                }
                Piece::Action(pos, tokens) => (pos, tokens),
            };
            if self.ranges == 0 {
                if let Some(t) = tokens.iter().find(|t| matches!(t.tok, Tok::Field(_))) {
                    let Tok::Field(name) = &t.tok else { continue };
                    return Err(t.pos.error(format!(
                        ".{name} is only available inside {{{{range}}}}: use env \"NAME\" for the task's environment and node values"
                    )));
                }
            }
            let keyword = match &tokens[0].tok {
                Tok::Ident(w) if matches!(w.as_str(), "if" | "else" | "end" | "range") => {
                    Some(w.clone())
                }
                Tok::Ident(w) if matches!(w.as_str(), "with" | "define" | "template" | "block") => {
                    // `{{ with nomadVar "path" }}` is how Nomad reads variables: the missing
                    // function is the news, not the missing `with`.
                    if let Some(Tok::Ident(f)) = tokens.get(1).map(|t| &t.tok)
                        && let Some(why) = super::unsupported_function(f)
                    {
                        return Err(tokens[1].pos.error(format!("function {f:?} {why}")));
                    }
                    return Err(tokens[0].pos.error(format!("{{{{{w}}}}} is not supported")));
                }
                _ => None,
            };
            match keyword.as_deref() {
                None => nodes.push(Node::Action(pipeline_of(pos, &tokens)?)),
                Some("if") => {
                    let condition = pipeline_of(pos, &tokens[1..])?;
                    nodes.push(self.if_block(pos, condition)?);
                }
                Some("range") => {
                    let list = pipeline_of(pos, &tokens[1..])?;
                    nodes.push(self.range_block(pos, list)?);
                }
                Some("end") => {
                    if tokens.len() > 1 {
                        return Err(tokens[1].pos.error("end takes nothing"));
                    }
                    return Ok((
                        nodes,
                        Some(End {
                            pos,
                            word: "end",
                            condition: None,
                        }),
                    ));
                }
                Some(_) => {
                    let condition = match tokens.get(1) {
                        None => None,
                        Some(Token {
                            tok: Tok::Ident(w), ..
                        }) if w == "if" => Some(pipeline_of(tokens[1].pos, &tokens[2..])?),
                        Some(t) => return Err(t.pos.error("else takes nothing but an if")),
                    };
                    return Ok((
                        nodes,
                        Some(End {
                            pos,
                            word: "else",
                            condition,
                        }),
                    ));
                }
            }
        }
        Ok((nodes, None))
    }

    /// `{{range LIST}} body {{else}} when empty {{end}}`.
    fn range_block(&mut self, pos: Pos, list: Pipeline) -> Result<Node, TemplateError> {
        self.ranges += 1;
        let body = self.nodes();
        self.ranges -= 1;
        let (body, end) = body?;
        let end = end.ok_or_else(|| pos.error("range has no {{end}}"))?;
        let otherwise = match (end.word, end.condition) {
            ("end", _) => Vec::new(),
            (_, Some(_)) => return Err(end.pos.error("range takes an else, not an else if")),
            (_, None) => match self.nodes()? {
                (otherwise, Some(End { word: "end", .. })) => otherwise,
                (_, Some(other)) => return Err(other.pos.error("else after the last else")),
                (_, None) => return Err(pos.error("range has no {{end}}")),
            },
        };
        Ok(Node::Range {
            pos,
            list,
            body,
            otherwise,
        })
    }

    fn if_block(&mut self, pos: Pos, condition: Pipeline) -> Result<Node, TemplateError> {
        let mut branches = Vec::new();
        let mut condition = condition;
        loop {
            let (body, end) = self.nodes()?;
            let end = end.ok_or_else(|| pos.error("if has no {{end}}"))?;
            branches.push((condition, body));
            match (end.word, end.condition) {
                ("end", _) => {
                    return Ok(Node::If {
                        branches,
                        otherwise: Vec::new(),
                    });
                }
                (_, Some(next)) => condition = next,
                (_, None) => {
                    let (otherwise, end) = self.nodes()?;
                    return match end {
                        Some(End { word: "end", .. }) => Ok(Node::If {
                            branches,
                            otherwise,
                        }),
                        Some(other) => Err(other.pos.error("else after the last else")),
                        None => Err(pos.error("if has no {{end}}")),
                    };
                }
            }
        }
    }
}

/// Parses tokens as a pipeline.
fn pipeline_of(pos: Pos, tokens: &[Token]) -> Result<Pipeline, TemplateError> {
    let mut at = 0;
    let p = pipeline(pos, tokens, &mut at)?;
    match tokens.get(at) {
        None => Ok(p),
        Some(t) => Err(t.pos.error("unexpected )")),
    }
}

fn pipeline(pos: Pos, tokens: &[Token], at: &mut usize) -> Result<Pipeline, TemplateError> {
    let mut commands = Vec::new();
    // Where an empty command is reported: the `|` before it, else the pipeline's start.
    let mut after = pos;
    loop {
        let start = tokens.get(*at).map_or(after, |t| t.pos);
        let mut operands = Vec::new();
        while let Some(t) = tokens.get(*at) {
            match &t.tok {
                Tok::Pipe | Tok::Close => break,
                Tok::Open => {
                    *at += 1;
                    let inner = pipeline(t.pos, tokens, at)?;
                    match tokens.get(*at) {
                        Some(Token {
                            tok: Tok::Close, ..
                        }) => *at += 1,
                        _ => return Err(t.pos.error("unclosed (")),
                    }
                    operands.push(Operand::Nested(inner));
                    continue;
                }
                Tok::Str(s) => operands.push(Operand::Literal(Value::Str(s.clone()))),
                Tok::Field(name) => operands.push(Operand::Field(t.pos, name.clone())),
                Tok::Int(n) => operands.push(Operand::Literal(Value::Int(*n))),
                Tok::Ident(w) if w == "true" || w == "false" => {
                    operands.push(Operand::Literal(Value::Bool(w == "true")));
                }
                Tok::Ident(w) => match Function::named(w) {
                    Some(f) if operands.is_empty() => operands.push(Operand::Function(t.pos, f)),
                    Some(_) => {
                        return Err(t.pos.error(format!(
                            "{w} must be called in parentheses to be an argument"
                        )));
                    }
                    None if let Some(why) = super::unsupported_function(w) => {
                        return Err(t.pos.error(format!("function {w:?} {why}")));
                    }
                    None => {
                        let known: Vec<_> = Function::ALL.iter().map(|(n, _)| *n).collect();
                        return Err(t.pos.error(format!(
                            "function {w:?} is not defined (known: {})",
                            known.join(", ")
                        )));
                    }
                },
            }
            *at += 1;
        }
        if operands.is_empty() {
            return Err(start.error("missing value in pipeline"));
        }
        if !commands.is_empty() && !matches!(operands[0], Operand::Function(..)) {
            return Err(start.error("a value cannot follow |: only a function can"));
        }
        commands.push(Command {
            pos: start,
            operands,
        });
        match tokens.get(*at) {
            Some(Token {
                tok: Tok::Pipe,
                pos,
            }) => {
                after = *pos;
                *at += 1;
            }
            _ => return Ok(Pipeline { commands }),
        }
    }
}
