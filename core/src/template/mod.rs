//! Task templates (Nomad's `template` block): a subset of Go's `text/template` with the
//! functions Nomad gives templates that need no service catalogue.
//!
//! What it understands: text; actions between the template's delimiters (`{{ }}` unless
//! the block sets others) with Go's trim markers (`{{- ` and ` -}}`) and comments
//! (`{{/* ... */}}`); pipelines of commands joined by `|` (the value on the left is the last
//! argument of the command on the right); string literals (`"..."` with escapes, or
//! `` `raw` ``), integers, `true` and `false`, parenthesized pipelines; `if` / `else if` /
//! `else` / `end`; `range` / `else` / `end` over a list, whose items' fields the body reads
//! as `.Name`. Functions: `env "NAME"` (the task's environment, and node values as
//! Nomad names them: `node.unique.name`, `attr.<name>`, `meta.<key>`), `nomadService
//! "NAME"` (the running instances of a service in the task's namespace: `.Address`,
//! `.Port`, `.Name`, `.ID`, `.AllocID`, `.NodeID`, `.Tags`, `.Health`), `envOrDefault`,
//! `toUpper`, `toLower`, `trimSpace`, `eq`, `ne`, `not`, `and`, `or`, `printf` with `%s`,
//! `%d`, `%v` and `%q`.
//!
//! Parsing is separate from rendering so a job's inline templates are checked when the job
//! is submitted, and an error names the line and column of the template it is in.

mod parse;

pub use parse::parse;

use std::fmt;

/// A problem in a template, at a line and column of its text (both from 1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct TemplateError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

/// Where in the template text a node came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    fn error(self, message: impl Into<String>) -> TemplateError {
        TemplateError {
            line: self.line,
            col: self.col,
            message: message.into(),
        }
    }
}

/// A parsed template, ready to render any number of times.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Action(Pipeline),
    If {
        branches: Vec<(Pipeline, Vec<Node>)>,
        otherwise: Vec<Node>,
    },
    /// The body once per item of the list, with `.` the item; `otherwise` for none.
    Range {
        pos: Pos,
        list: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

/// Commands joined by `|`.
#[derive(Clone, Debug, PartialEq)]
struct Pipeline {
    commands: Vec<Command>,
}

/// A function and its arguments, or a lone operand.
#[derive(Clone, Debug, PartialEq)]
struct Command {
    pos: Pos,
    operands: Vec<Operand>,
}

#[derive(Clone, Debug, PartialEq)]
enum Operand {
    Function(Pos, Function),
    Literal(Value),
    Nested(Pipeline),
    /// `.Name` of the item `range` is at.
    Field(Pos, String),
}

/// The functions a template may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Function {
    Env,
    EnvOrDefault,
    ToUpper,
    ToLower,
    TrimSpace,
    Eq,
    Ne,
    Not,
    And,
    Or,
    Printf,
    NomadService,
}

impl Function {
    const ALL: [(&'static str, Function); 12] = [
        ("env", Function::Env),
        ("envOrDefault", Function::EnvOrDefault),
        ("toUpper", Function::ToUpper),
        ("toLower", Function::ToLower),
        ("trimSpace", Function::TrimSpace),
        ("eq", Function::Eq),
        ("ne", Function::Ne),
        ("not", Function::Not),
        ("and", Function::And),
        ("or", Function::Or),
        ("printf", Function::Printf),
        ("nomadService", Function::NomadService),
    ];

    fn named(name: &str) -> Option<Function> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }

    /// The number of arguments it takes: exactly `min` when `max` is the same, else a range.
    fn arity(self) -> (usize, usize) {
        match self {
            Function::Env
            | Function::ToUpper
            | Function::ToLower
            | Function::TrimSpace
            | Function::NomadService => (1, 1),
            Function::Not => (1, 1),
            Function::EnvOrDefault | Function::Eq | Function::Ne => (2, 2),
            Function::And | Function::Or => (1, usize::MAX),
            Function::Printf => (1, usize::MAX),
        }
    }
}

/// Why a function Nomad's templates offer is not here, named so a job written for Nomad
/// gets a reason rather than "not defined".
fn unsupported_function(name: &str) -> Option<&'static str> {
    Some(match name {
        "nomadVar" | "nomadVarList" | "nomadVarListSafe" | "nomadVarExists" => {
            "reads Nomad Variables, which drover does not store: pass the value in the task's env or meta, or fetch it with an artifact"
        }
        "nomadServices" => {
            "lists every service of the namespace, which drover's templates do not offer: name the service with nomadService"
        }
        "service" | "services" | "key" | "keyOrDefault" | "ls" | "tree" | "secret" | "secrets" => {
            "reads Consul or Vault, which drover does not integrate with: use nomadService for services"
        }
        _ => return None,
    })
}

/// A value in a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    /// What `range` walks: items of named fields.
    List(Vec<Record>),
}

/// One item of a list: its fields by name.
pub type Record = std::collections::BTreeMap<String, String>;

impl Value {
    /// Go's truth: empty strings, zero and false are false.
    fn truthy(&self) -> bool {
        match self {
            Value::Str(s) => !s.is_empty(),
            Value::Int(i) => *i != 0,
            Value::Bool(b) => *b,
            Value::List(items) => !items.is_empty(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => f.write_str(s),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::List(items) => write!(f, "[{} items]", items.len()),
        }
    }
}

/// What a template can read while it renders: the task's environment and the node's
/// values (`node.*`, `attr.*`, `meta.*`), through one lookup.
pub trait Lookup {
    fn get(&self, name: &str) -> Option<String>;

    /// The running instances of service `name` (`nomadService`), each as its fields;
    /// `None` where the renderer has no catalog (nothing is listed then).
    fn services(&self, name: &str) -> Option<Vec<Record>> {
        let _ = name;
        None
    }
}

impl<F: Fn(&str) -> Option<String>> Lookup for F {
    fn get(&self, name: &str) -> Option<String> {
        self(name)
    }
}

impl Template {
    /// Renders the template; a missing variable renders as the empty string (as Nomad's
    /// `env` does).
    pub fn render(&self, lookup: &dyn Lookup) -> Result<String, TemplateError> {
        let mut out = String::new();
        render_nodes(&self.nodes, lookup, None, &mut out)?;
        Ok(out)
    }
}

/// `.` while rendering: the item `range` is at, if any.
type Dot<'a> = Option<&'a Record>;

fn render_nodes(
    nodes: &[Node],
    lookup: &dyn Lookup,
    dot: Dot<'_>,
    out: &mut String,
) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Action(p) => out.push_str(&eval_pipeline(p, lookup, dot)?.to_string()),
            Node::Range {
                pos,
                list,
                body,
                otherwise,
            } => match eval_pipeline(list, lookup, dot)? {
                Value::List(items) if !items.is_empty() => {
                    for item in &items {
                        render_nodes(body, lookup, Some(item), out)?;
                    }
                }
                Value::List(_) => render_nodes(otherwise, lookup, dot, out)?,
                other => {
                    return Err(pos.error(format!("range needs a list, got {other:?}")));
                }
            },
            Node::If {
                branches,
                otherwise,
            } => {
                let mut taken = None;
                for (cond, body) in branches {
                    if eval_pipeline(cond, lookup, dot)?.truthy() {
                        taken = Some(body);
                        break;
                    }
                }
                render_nodes(taken.unwrap_or(otherwise), lookup, dot, out)?;
            }
        }
    }
    Ok(())
}

fn eval_pipeline(p: &Pipeline, lookup: &dyn Lookup, dot: Dot<'_>) -> Result<Value, TemplateError> {
    let mut carried: Option<Value> = None;
    for command in &p.commands {
        carried = Some(eval_command(command, carried.take(), lookup, dot)?);
    }
    // The parser never makes an empty pipeline.
    Ok(carried.unwrap_or(Value::Str(String::new())))
}

fn eval_command(
    c: &Command,
    piped: Option<Value>,
    lookup: &dyn Lookup,
    dot: Dot<'_>,
) -> Result<Value, TemplateError> {
    let (first, rest) = c
        .operands
        .split_first()
        .ok_or_else(|| c.pos.error("empty command"))?;
    let Operand::Function(pos, f) = first else {
        if !rest.is_empty() || piped.is_some() {
            return Err(c.pos.error("only a function can take arguments"));
        }
        return eval_operand(first, lookup, dot);
    };
    let mut args = rest
        .iter()
        .map(|o| eval_operand(o, lookup, dot))
        .collect::<Result<Vec<_>, _>>()?;
    args.extend(piped);
    call(*pos, *f, args, lookup)
}

fn eval_operand(o: &Operand, lookup: &dyn Lookup, dot: Dot<'_>) -> Result<Value, TemplateError> {
    match o {
        Operand::Literal(v) => Ok(v.clone()),
        Operand::Nested(p) => eval_pipeline(p, lookup, dot),
        Operand::Function(pos, f) => call(*pos, *f, Vec::new(), lookup),
        Operand::Field(pos, name) => {
            let item = dot.ok_or_else(|| {
                pos.error(format!(".{name} is only available inside {{{{range}}}}"))
            })?;
            item.get(name)
                .map(|v| Value::Str(v.clone()))
                .ok_or_else(|| {
                    let known: Vec<&str> = item.keys().map(String::as_str).collect();
                    pos.error(format!("no field .{name} (known: {})", known.join(", ")))
                })
        }
    }
}

fn call(
    pos: Pos,
    f: Function,
    args: Vec<Value>,
    lookup: &dyn Lookup,
) -> Result<Value, TemplateError> {
    let (min, max) = f.arity();
    if args.len() < min || args.len() > max {
        let wanted = if min == max {
            format!("{min}")
        } else {
            format!("at least {min}")
        };
        return Err(pos.error(format!(
            "{} takes {wanted} argument{}, got {}",
            f.name(),
            if min == 1 && max == 1 { "" } else { "s" },
            args.len()
        )));
    }
    let text = |i: usize| args[i].to_string();
    Ok(match f {
        Function::Env => Value::Str(lookup.get(&text(0)).unwrap_or_default()),
        Function::EnvOrDefault => Value::Str(
            lookup
                .get(&text(0))
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| text(1)),
        ),
        Function::ToUpper => Value::Str(text(0).to_uppercase()),
        Function::ToLower => Value::Str(text(0).to_lowercase()),
        Function::TrimSpace => Value::Str(text(0).trim().to_string()),
        Function::Eq => Value::Bool(args[0] == args[1]),
        Function::Ne => Value::Bool(args[0] != args[1]),
        Function::Not => Value::Bool(!args[0].truthy()),
        // Go's and/or return the deciding argument, not a boolean.
        Function::And => args
            .iter()
            .find(|v| !v.truthy())
            .or(args.last())
            .cloned()
            .unwrap_or(Value::Bool(true)),
        Function::Or => args
            .iter()
            .find(|v| v.truthy())
            .or(args.last())
            .cloned()
            .unwrap_or(Value::Bool(false)),
        Function::Printf => Value::Str(printf(pos, &text(0), &args[1..])?),
        Function::NomadService => Value::List(lookup.services(&text(0)).unwrap_or_default()),
    })
}

/// Go's `printf` for the verbs templates use: `%s`, `%d`, `%v`, `%q` and `%%`.
fn printf(pos: Pos, format: &str, args: &[Value]) -> Result<String, TemplateError> {
    let mut out = String::new();
    let mut next = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let verb = chars
            .next()
            .ok_or_else(|| pos.error("printf format ends in a lone %"))?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        let arg = next
            .next()
            .ok_or_else(|| pos.error(format!("printf %{verb} has no argument")))?;
        match (verb, arg) {
            ('s' | 'v', v) => out.push_str(&v.to_string()),
            ('d', Value::Int(i)) => out.push_str(&i.to_string()),
            ('d', other) => {
                return Err(pos.error(format!("printf %d needs an integer, got {other:?}")));
            }
            ('q', v) => out.push_str(&format!("{:?}", v.to_string())),
            (other, _) => return Err(pos.error(format!("printf verb %{other} is not supported"))),
        }
    }
    if next.next().is_some() {
        return Err(pos.error("printf has more arguments than its format uses"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
