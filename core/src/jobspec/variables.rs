//! HCL2 variables in job files, as Nomad reads them: `variable "name" { type, default,
//! validation }` blocks (and the `variables { name = default }` shorthand), `locals`, values
//! from `-var name=value`, `-var-file`s and `NOMAD_VAR_<name>`, and the functions of
//! [`super::functions`].
//!
//! Core does no IO: the caller hands in what it read as [`Inputs`] (the flags, the var
//! files' text, the `NOMAD_VAR_*` environment and the text of every file the job's `file()`
//! calls name). Resolution gives a [`Scope`]; the decoder then evaluates every expression
//! that refers to `var.*` or `local.*`, or calls a function, in it. Everything else in a
//! string is left as written (`${attr.kernel.name}`, `${NOMAD_ALLOC_DIR}`) for the agent
//! and the scheduler, as before.
//!
//! Precedence, lowest first: a variable's default, `NOMAD_VAR_<name>`, the var files in the
//! order given, then `-var` flags in the order given.

use super::decoder::Decoder;
use super::error::{LineIndex, Problem};
use super::functions::kind;
use super::reader::{Item, Shape, walk};
use super::special_forms::Ids;
use hcl::edit::Span as _;
use hcl::edit::expr::Expression as EditExpr;
use hcl::edit::structure::{Block, Body, Structure};
use hcl::eval::{Context, Evaluate as _};
use hcl::expr::{Expression, Operation, TraversalOperator};
use hcl::{Map, Value};
use std::collections::BTreeMap;

/// What a job file's variables are given from outside it.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// `-var name=value`, in the order given (a later one wins).
    pub vars: Vec<(String, String)>,
    /// `-var-file`s as (label, text), in the order given.
    pub var_files: Vec<(String, String)>,
    /// `NOMAD_VAR_<name>` from the environment, as (name, value).
    pub env: Vec<(String, String)>,
    /// The text of each file the job's `file()` calls name, by the path as written.
    pub files: BTreeMap<String, String>,
    /// Where `uuid()` draws its ids from: core draws no randomness itself, so a caller
    /// that wants fresh ids each read (as Nomad's are) passes a random seed. The same seed
    /// gives the same ids.
    pub seed: u64,
}

/// What the job's expressions are evaluated in: the functions, `var` and `local`, and the
/// generator `uuid()` draws from.
#[derive(Debug)]
pub(super) struct Scope {
    ctx: Context<'static>,
    files: BTreeMap<String, String>,
    ids: Ids,
}

impl Default for Scope {
    fn default() -> Self {
        Self {
            ctx: super::functions::context(),
            files: BTreeMap::new(),
            ids: Ids::new(0),
        }
    }
}

impl Scope {
    /// Evaluates `expr`, with `file()` calls replaced by the text the caller read and
    /// `can()`/`try()` calls by their values (see `special_forms`).
    pub(super) fn eval(&self, expr: &Expression) -> Result<Value, String> {
        if let Some(name) = undeclared(expr, &self.ctx) {
            return Err(format!(
                "variable {name:?} is not declared (declare it in a variable \"{name}\" block)"
            ));
        }
        let mut expr = expr.clone();
        self.inline_files(&mut expr)?;
        super::special_forms::expand(&mut expr, &self.ctx, &self.ids)?;
        expr.evaluate(&self.ctx).map_err(|e| e.kind().to_string())
    }

    fn inline_files(&self, expr: &mut Expression) -> Result<(), String> {
        if let Expression::FuncCall(call) = expr
            && call.name.name.as_str() == "file"
        {
            let [arg] = call.args.as_mut_slice() else {
                return Err("file() takes one path".into());
            };
            self.inline_files(arg)?;
            let path = arg.evaluate(&self.ctx).map_err(|e| e.kind().to_string())?;
            let path = path.as_str().ok_or("file() takes a string path")?;
            let text = self.files.get(path).ok_or_else(|| {
                format!(
                    "file({path:?}): not read; drover reads the files a job names with a \
                     literal path, relative to the working directory"
                )
            })?;
            *expr = Expression::String(text.clone());
            return Ok(());
        }
        children_mut(expr).try_for_each(|e| self.inline_files(e))
    }
}

/// The name `expr` reads as `var.<name>` when no such variable is declared.
fn undeclared(expr: &Expression, ctx: &Context<'_>) -> Option<String> {
    let Expression::Traversal(t) = expr else {
        return None;
    };
    let (Expression::Variable(root), Some(TraversalOperator::GetAttr(name))) =
        (&t.expr, t.operators.first())
    else {
        return None;
    };
    if root.as_str() != "var" {
        return None;
    }
    let probe = Expression::Traversal(Box::new(hcl::expr::Traversal::new(
        Expression::Variable(root.clone()),
        [TraversalOperator::GetAttr(name.clone())],
    )));
    probe.evaluate(ctx).is_err().then(|| name.to_string())
}

/// Every literal path the job's `file()` calls name: what the caller should read.
pub fn file_references(src: &str) -> Vec<String> {
    let Ok(body) = hcl::edit::parser::parse_body(src) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut visit = |e: &EditExpr| {
        let mut expr = Expression::from(e.clone());
        collect_files(&mut expr, &mut out);
    };
    each_expression(&body, &mut visit);
    out.sort();
    out.dedup();
    out
}

fn collect_files(expr: &mut Expression, out: &mut Vec<String>) {
    if let Expression::FuncCall(call) = expr
        && call.name.name.as_str() == "file"
        && let [Expression::String(path)] = call.args.as_slice()
    {
        out.push(path.clone());
    }
    for child in children_mut(expr) {
        collect_files(child, out);
    }
}

fn each_expression(body: &Body, visit: &mut impl FnMut(&EditExpr)) {
    for structure in body.iter() {
        match structure {
            Structure::Attribute(a) => visit(&a.value),
            Structure::Block(b) => each_expression(&b.body, visit),
        }
    }
}

/// The sub-expressions of `expr` an evaluation may reach (`special_forms::expand` takes
/// a `for` expression and a conditional's branches itself).
pub(super) fn children_mut(
    expr: &mut Expression,
) -> Box<dyn Iterator<Item = &mut Expression> + '_> {
    match expr {
        Expression::Array(items) => Box::new(items.iter_mut()),
        Expression::Object(map) => Box::new(map.values_mut()),
        Expression::Parenthesis(inner) => Box::new(std::iter::once(inner.as_mut())),
        Expression::FuncCall(call) => Box::new(call.args.iter_mut()),
        Expression::Traversal(t) => Box::new(std::iter::once(&mut t.expr).chain(
            t.operators.iter_mut().filter_map(|op| match op {
                TraversalOperator::Index(e) => Some(e),
                _ => None,
            }),
        )),
        Expression::Conditional(c) => {
            Box::new([&mut c.cond_expr, &mut c.true_expr, &mut c.false_expr].into_iter())
        }
        Expression::Operation(op) => match op.as_mut() {
            Operation::Unary(u) => Box::new(std::iter::once(&mut u.expr)),
            Operation::Binary(b) => Box::new([&mut b.lhs_expr, &mut b.rhs_expr].into_iter()),
        },
        _ => Box::new(std::iter::empty()),
    }
}

/// Whether `expr` is the job file's to evaluate: it names `var` or `local`, or calls a
/// function. Anything else (`attr.*`, `node.*`, `NOMAD_*`) is the agent's.
pub(super) fn is_ours(expr: &Expression) -> bool {
    match expr {
        Expression::Variable(v) => matches!(v.as_str(), "var" | "local"),
        Expression::FuncCall(_) | Expression::ForExpr(_) => true,
        _ => {
            let mut expr = expr.clone();
            children_mut(&mut expr).any(|child| is_ours(child))
        }
    }
}

/// A variable's declared type.
#[derive(Clone, Debug, PartialEq)]
enum Type {
    Any,
    String,
    Number,
    Bool,
    List(Box<Type>),
    Map(Box<Type>),
    Object(BTreeMap<String, Type>),
}

impl std::fmt::Display for Type {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Type::Any => f.write_str("any"),
            Type::String => f.write_str("string"),
            Type::Number => f.write_str("number"),
            Type::Bool => f.write_str("bool"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Map(t) => write!(f, "map({t})"),
            Type::Object(_) => f.write_str("object"),
        }
    }
}

fn parse_type(expr: &Expression) -> Result<Type, String> {
    let inner = |args: &[Expression]| match args {
        [t] => parse_type(t).map(Box::new),
        _ => Err("takes one type".to_string()),
    };
    match expr {
        Expression::Variable(v) => match v.as_str() {
            "any" => Ok(Type::Any),
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            other => Err(format!("unknown type {other:?}")),
        },
        Expression::FuncCall(call) => match call.name.name.as_str() {
            "list" | "set" | "tuple" => inner(&call.args).map(Type::List),
            "map" => inner(&call.args).map(Type::Map),
            "object" => match call.args.as_slice() {
                [Expression::Object(fields)] => fields
                    .iter()
                    .map(|(k, t)| Ok((k.to_string(), parse_type(t)?)))
                    .collect::<Result<_, String>>()
                    .map(Type::Object),
                _ => Err("object() takes an object of types".into()),
            },
            other => Err(format!("unknown type {other:?}")),
        },
        _ => Err(
            "expected a type (string, number, bool, any, list(...), map(...), object({...}))"
                .into(),
        ),
    }
}

/// `v` converted to `t` as HCL converts (numbers and bools to and from strings).
fn conform(v: Value, t: &Type) -> Result<Value, String> {
    let mismatch = |v: &Value| Err(format!("expected {t}, got {}", kind(v)));
    match (t, v) {
        (Type::Any, v) => Ok(v),
        (_, Value::Null) => Ok(Value::Null),
        (Type::String, Value::String(s)) => Ok(Value::String(s)),
        (Type::String, Value::Number(n)) => Ok(Value::String(n.to_string())),
        (Type::String, Value::Bool(b)) => Ok(Value::String(b.to_string())),
        (Type::Number, Value::Number(n)) => Ok(Value::Number(n)),
        (Type::Number, Value::String(s)) => match s.trim().parse::<i64>() {
            Ok(i) => Ok(Value::from(i)),
            Err(_) => s
                .trim()
                .parse::<f64>()
                .map(Value::from)
                .map_err(|_| format!("expected number, got string {s:?}")),
        },
        (Type::Bool, Value::Bool(b)) => Ok(Value::Bool(b)),
        (Type::Bool, Value::String(s)) if s == "true" || s == "false" => {
            Ok(Value::Bool(s == "true"))
        }
        (Type::List(e), Value::Array(items)) => items
            .into_iter()
            .map(|i| conform(i, e))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        (Type::Map(e), Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| conform(v, e).map(|v| (k, v)))
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object),
        (Type::Object(fields), Value::Object(mut map)) => {
            let mut out = Map::new();
            for (name, ft) in fields {
                let v = map
                    .shift_remove(name)
                    .ok_or_else(|| format!("object lacks attribute {name:?}"))?;
                out.insert(name.clone(), conform(v, ft)?);
            }
            Ok(Value::Object(out))
        }
        (_, v) => mismatch(&v),
    }
}

/// A value given as text on the command line or in the environment: a string as it is
/// for `string` and `any`, parsed as an HCL expression for other types.
fn from_text(text: &str, t: &Type, funcs: &Context<'_>) -> Result<Value, String> {
    if matches!(t, Type::String | Type::Any) {
        return Ok(Value::String(text.to_string()));
    }
    let expr = hcl::edit::parser::parse_expr(text).map_err(|e| e.message().to_string())?;
    let value = Expression::from(expr)
        .evaluate(funcs)
        .map_err(|e| e.kind().to_string())?;
    conform(value, t)
}

/// One declared variable.
struct Declared {
    at: usize,
    ty: Type,
    value: Option<Value>,
    /// Its default was refused: already reported, so not "has no value" too.
    broken: bool,
    /// (condition, where it is written, error message).
    checks: Vec<(Expression, usize, String)>,
}

const VARIABLE_FIELDS: &[(&str, Shape)] = &[
    ("type", Shape::Attr),
    ("default", Shape::Attr),
    ("description", Shape::Attr),
    ("sensitive", Shape::Attr),
    ("nullable", Shape::Attr),
    ("validation", Shape::Blocks),
];
const VALIDATION_FIELDS: &[(&str, Shape)] =
    &[("condition", Shape::Attr), ("error_message", Shape::Attr)];

fn start(expr: &EditExpr) -> usize {
    expr.span().map_or(0, |s| s.start)
}

/// Reads the file's variable, variables and locals blocks, gives each variable its value,
/// checks them, and evaluates the locals. Problems go to `d`.
pub(super) fn resolve(d: &mut Decoder<'_>, body: &Body, inputs: &Inputs) -> Scope {
    let funcs = super::functions::context();
    let mut vars: BTreeMap<String, Declared> = BTreeMap::new();
    let mut locals: Vec<(String, usize, Expression)> = Vec::new();
    for structure in body.iter() {
        let Structure::Block(block) = structure else {
            continue;
        };
        match block.ident.as_str() {
            "variable" => declare(d, block, &funcs, &mut vars),
            "variables" | "locals" => {
                for s in block.body.iter() {
                    let Structure::Attribute(a) = s else {
                        d.problems.at(
                            Item::Block(block).at(),
                            format!("{} holds only `name = value` entries", block.ident.as_str()),
                        );
                        continue;
                    };
                    let name = a.key.as_str().to_string();
                    let at = start(&a.value);
                    let expr = Expression::from(a.value.clone());
                    if vars.contains_key(&name) || locals.iter().any(|(n, _, _)| *n == name) {
                        d.problems.at(at, format!("{name:?} is declared twice"));
                    } else if block.ident.as_str() == "locals" {
                        locals.push((name, at, expr));
                    } else {
                        let value = expr.evaluate(&funcs).map_err(|e| e.kind().to_string());
                        match value {
                            Ok(v) => {
                                let var = Declared {
                                    at,
                                    ty: Type::Any,
                                    value: Some(v),
                                    broken: false,
                                    checks: Vec::new(),
                                };
                                vars.insert(name, var);
                            }
                            Err(e) => d.problems.at(at, format!("variable {name:?}: {e}")),
                        }
                    }
                }
            }
            _ => {}
        }
    }
    assign(d, &mut vars, inputs, &funcs);
    let mut values = Map::new();
    for (name, var) in &vars {
        match &var.value {
            Some(v) => {
                values.insert(name.clone(), v.clone());
            }
            None if var.broken => {}
            None => d.problems.at(
                var.at,
                format!(
                    "variable {name:?} has no value: give it a default, -var {name}=..., a \
                     -var-file, or NOMAD_VAR_{name}"
                ),
            ),
        }
    }
    let mut scope = Scope {
        ctx: funcs,
        files: inputs.files.clone(),
        ids: Ids::new(inputs.seed),
    };
    scope.ctx.declare_var("var", Value::Object(values));
    // Checks and locals read the values: with a value missing or refused they would only
    // repeat that problem.
    if !d.problems.is_empty() {
        return scope;
    }
    for (name, var) in &vars {
        for (cond, at, message) in &var.checks {
            match scope.eval(cond) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => {
                    d.problems.at(*at, format!("variable {name:?}: {message}"));
                }
                Ok(other) => d.problems.at(
                    *at,
                    format!(
                        "variable {name:?}: a validation condition must be a bool, got {}",
                        kind(&other)
                    ),
                ),
                Err(e) => d.problems.at(*at, format!("variable {name:?}: {e}")),
            }
        }
    }
    if d.problems.is_empty() {
        let local = evaluate_locals(d, locals, &mut scope);
        scope.ctx.declare_var("local", Value::Object(local));
    }
    scope
}

fn declare(
    d: &mut Decoder<'_>,
    block: &Block,
    funcs: &Context<'_>,
    vars: &mut BTreeMap<String, Declared>,
) {
    let at = Item::Block(block).at();
    let [label] = block.labels.as_slice() else {
        d.problems
            .at(at, "a variable block takes one label: its name");
        return;
    };
    let name = label.as_str().to_string();
    if vars.contains_key(&name) {
        d.problems
            .at(at, format!("variable {name:?} is declared twice"));
        return;
    }
    let mut var = Declared {
        at,
        ty: Type::Any,
        value: None,
        broken: false,
        checks: Vec::new(),
    };
    let items = walk(
        d,
        &block.body,
        &format!("variable {name:?}"),
        VARIABLE_FIELDS,
    );
    let mut default = None;
    for (field, item) in items {
        match (field, item) {
            ("type", Item::Attr(a)) => match parse_type(&Expression::from(a.value.clone())) {
                Ok(t) => var.ty = t,
                Err(e) => d
                    .problems
                    .at(start(&a.value), format!("variable {name:?}: type: {e}")),
            },
            ("default", Item::Attr(a)) => default = Some(a),
            ("validation", Item::Block(v)) => {
                let mut cond = None;
                let mut message = "the value is not valid".to_string();
                for (f, item) in walk(d, &v.body, "validation", VALIDATION_FIELDS) {
                    let Item::Attr(a) = item else { continue };
                    if f == "condition" {
                        cond = Some((Expression::from(a.value.clone()), start(&a.value)));
                    } else {
                        match Expression::from(a.value.clone()).evaluate(funcs) {
                            Ok(Value::String(s)) => message = s,
                            _ => d
                                .problems
                                .at(start(&a.value), "error_message: expected a string"),
                        }
                    }
                }
                match cond {
                    Some((c, at)) => var.checks.push((c, at, message)),
                    None => d
                        .problems
                        .at(Item::Block(v).at(), "a validation block needs a condition"),
                }
            }
            _ => {}
        }
    }
    if let Some(a) = default {
        let value = Expression::from(a.value.clone())
            .evaluate(funcs)
            .map_err(|e| e.kind().to_string())
            .and_then(|v| conform(v, &var.ty));
        match value {
            Ok(v) => var.value = Some(v),
            Err(e) => {
                var.broken = true;
                d.problems
                    .at(start(&a.value), format!("variable {name:?}: default: {e}"));
            }
        }
    }
    vars.insert(name, var);
}

/// Lays the values from outside over the defaults, in precedence order.
fn assign(
    d: &mut Decoder<'_>,
    vars: &mut BTreeMap<String, Declared>,
    inputs: &Inputs,
    funcs: &Context<'_>,
) {
    let problem = |d: &mut Decoder<'_>, message: String| {
        d.problems.push(Problem {
            position: None,
            message,
        });
    };
    // The environment may hold variables for other jobs: undeclared ones are ignored.
    for (name, text) in &inputs.env {
        if let Some(var) = vars.get_mut(name) {
            match from_text(text, &var.ty, funcs) {
                Ok(v) => var.value = Some(v),
                Err(e) => {
                    var.broken = true;
                    problem(d, format!("NOMAD_VAR_{name}: {e}"));
                }
            }
        }
    }
    for (label, text) in &inputs.var_files {
        let lines = LineIndex::new(text);
        let body = match hcl::edit::parser::parse_body(text) {
            Ok(body) => body,
            Err(e) => {
                let at = e.location();
                problem(
                    d,
                    format!(
                        "{label}:{}:{}: invalid hcl: {}",
                        at.line(),
                        at.column(),
                        e.message()
                    ),
                );
                continue;
            }
        };
        for structure in body.iter() {
            let (name, at, expr) = match structure {
                Structure::Attribute(a) => (a.key.as_str(), start(&a.value), &a.value),
                Structure::Block(b) => {
                    let at = lines.position(Item::Block(b).at());
                    problem(
                        d,
                        format!("{label}:{at}: a var file holds only `name = value` entries"),
                    );
                    continue;
                }
            };
            let pos = lines.position(at);
            let Some(var) = vars.get_mut(name) else {
                problem(d, format!("{label}:{pos}: undeclared variable {name:?}"));
                continue;
            };
            let value = Expression::from(expr.clone())
                .evaluate(funcs)
                .map_err(|e| e.kind().to_string())
                .and_then(|v| conform(v, &var.ty));
            match value {
                Ok(v) => var.value = Some(v),
                Err(e) => {
                    var.broken = true;
                    problem(d, format!("{label}:{pos}: variable {name:?}: {e}"));
                }
            }
        }
    }
    for (name, text) in &inputs.vars {
        let Some(var) = vars.get_mut(name) else {
            problem(d, format!("-var {name}: undeclared variable {name:?}"));
            continue;
        };
        match from_text(text, &var.ty, funcs) {
            Ok(v) => var.value = Some(v),
            Err(e) => {
                var.broken = true;
                problem(d, format!("-var {name}: {e}"));
            }
        }
    }
}

/// Evaluates the locals in whatever order their references allow; what never evaluates
/// (a reference to nothing, or a cycle) is reported where it is written.
fn evaluate_locals(
    d: &mut Decoder<'_>,
    mut pending: Vec<(String, usize, Expression)>,
    scope: &mut Scope,
) -> Map<String, Value> {
    let mut done = Map::new();
    while !pending.is_empty() {
        scope.ctx.declare_var("local", Value::Object(done.clone()));
        let before = done.len();
        let mut left = Vec::new();
        let mut errors = Vec::new();
        for (name, at, expr) in pending {
            match scope.eval(&expr) {
                Ok(v) => {
                    done.insert(name, v);
                }
                Err(e) => {
                    errors.push((at, format!("local {name:?}: {e}")));
                    left.push((name, at, expr));
                }
            }
        }
        if done.len() == before {
            for (at, message) in errors {
                d.problems.at(at, message);
            }
            break;
        }
        pending = left;
    }
    done
}
