//! Attribute values: HCL expressions reduced to plain data, each part remembering where it
//! was written, and the conversions the decoder asks for (string, number, duration…).
//!
//! Literals, lists and objects are read directly. Other expressions (`256 * 4`, `true ?
//! 1 : 2`, `var.count`, `upper(local.name)`) are evaluated by hcl-rs in the file's
//! [`Scope`]: its functions, `var` and `local` (see [`super::variables`]). In strings,
//! `${…}` that name `var` or `local` or call a function are evaluated the same way; every
//! other one is kept as written: Nomad leaves `${NOMAD_ALLOC_DIR}`, `${attr.kernel.name}`
//! and friends for the agent and the scheduler to interpolate, and so does drover.

use super::variables::{Scope, is_ours};
use hcl::edit::Span as _;
use hcl::edit::expr::{Expression, ObjectKey};
use hcl::edit::template::{Element, Template};

/// A value as written, with the byte offset it starts at.
#[derive(Clone, Debug)]
pub(super) struct Value {
    pub(super) at: usize,
    pub(super) kind: Kind,
}

#[derive(Clone, Debug)]
pub(super) enum Kind {
    Null,
    Bool(bool),
    Number(hcl::Number),
    String(String),
    List(Vec<Value>),
    /// Entries in written order, each with the offset of its key.
    Map(Vec<(String, usize, Value)>),
}

/// A problem with a value: where and why.
pub(super) type Fault = (usize, String);

/// Reduces `expr` to a [`Value`]; `src` is the text it was parsed from, used to keep
/// interpolations exactly as written.
pub(super) fn evaluate(expr: &Expression, src: &str, scope: &Scope) -> Result<Value, Fault> {
    let at = start(expr);
    let kind = match expr {
        Expression::Null(_) => Kind::Null,
        Expression::Bool(b) => Kind::Bool(*b.value()),
        Expression::Number(n) => Kind::Number(*n.value()),
        Expression::String(s) => Kind::String(s.value().clone()),
        Expression::StringTemplate(t) => Kind::String(render(t, src, scope)?),
        Expression::HeredocTemplate(h) => Kind::String(render(&h.template, src, scope)?),
        Expression::Array(items) => Kind::List(
            items
                .iter()
                .map(|item| evaluate(item, src, scope))
                .collect::<Result<_, _>>()?,
        ),
        Expression::Object(object) => {
            let mut entries = Vec::new();
            for (key, value) in object.iter() {
                let (name, key_at) = object_key(key, src, scope)?;
                entries.push((name, key_at, evaluate(value.expr(), src, scope)?));
            }
            Kind::Map(entries)
        }
        Expression::Parenthesis(inner) => return evaluate(inner.inner(), src, scope),
        _ => computed(expr, src, scope)?,
    };
    Ok(Value { at, kind })
}

/// Where an expression starts; parsed expressions always carry a span.
pub(super) fn start(expr: &Expression) -> usize {
    expr.span().map_or(0, |s| s.start)
}

fn object_key(key: &ObjectKey, src: &str, scope: &Scope) -> Result<(String, usize), Fault> {
    match key {
        ObjectKey::Ident(ident) => Ok((
            ident.as_str().to_owned(),
            ident.span().map_or(0, |s| s.start),
        )),
        ObjectKey::Expression(expr) => {
            let value = evaluate(expr, src, scope)?;
            let at = value.at;
            match value.kind {
                Kind::String(s) => Ok((s, at)),
                Kind::Number(n) => Ok((n.to_string(), at)),
                Kind::Bool(b) => Ok((b.to_string(), at)),
                other => Err((
                    at,
                    format!("an object key must be a string, not {}", kind_name(&other)),
                )),
            }
        }
    }
}

/// A template's text with literal parts unescaped, the file's own `${…}` evaluated and
/// every other one kept verbatim.
fn render(template: &Template, src: &str, scope: &Scope) -> Result<String, Fault> {
    let mut out = String::new();
    for element in template.iter() {
        match element {
            Element::Literal(text) => out.push_str(text.value()),
            Element::Interpolation(interpolation) => {
                let span = interpolation.span().unwrap_or(0..0);
                let expr = hcl::Expression::from(interpolation.expr.clone());
                if is_ours(&expr) {
                    let at = span.start;
                    match evaluate_in(&expr, at, src.get(span.clone()), scope)? {
                        Kind::String(s) => out.push_str(&s),
                        Kind::Number(n) => out.push_str(&n.to_string()),
                        Kind::Bool(b) => out.push_str(&b.to_string()),
                        other => {
                            return Err((
                                at,
                                format!("cannot put a {} into a string", kind_name(&other)),
                            ));
                        }
                    }
                    continue;
                }
                match src.get(span) {
                    Some(text) => out.push_str(text),
                    None => return Err((0, "interpolation outside the source text".into())),
                }
            }
            Element::Directive(directive) => {
                let at = directive.span().map_or(0, |s| s.start);
                return Err((
                    at,
                    "template directives (%{ if }, %{ for }) are not supported".into(),
                ));
            }
        }
    }
    Ok(out)
}

/// Evaluates an operation, conditional, reference or function call with hcl-rs in the
/// file's scope.
fn computed(expr: &Expression, src: &str, scope: &Scope) -> Result<Kind, Fault> {
    let written = expr.span().and_then(|s| src.get(s));
    evaluate_in(
        &hcl::Expression::from(expr.clone()),
        start(expr),
        written,
        scope,
    )
}

fn evaluate_in(
    expr: &hcl::Expression,
    at: usize,
    written: Option<&str>,
    scope: &Scope,
) -> Result<Kind, Fault> {
    let written = written.unwrap_or("expression").trim();
    let value = scope
        .eval(expr)
        .map_err(|e| (at, format!("cannot evaluate `{written}`: {e}")))?;
    Ok(from_hcl(value, at))
}

fn from_hcl(value: hcl::Value, at: usize) -> Kind {
    match value {
        hcl::Value::Null => Kind::Null,
        hcl::Value::Bool(b) => Kind::Bool(b),
        hcl::Value::Number(n) => Kind::Number(n),
        hcl::Value::String(s) => Kind::String(s),
        hcl::Value::Array(items) => Kind::List(
            items
                .into_iter()
                .map(|v| Value {
                    at,
                    kind: from_hcl(v, at),
                })
                .collect(),
        ),
        hcl::Value::Object(map) => Kind::Map(
            map.into_iter()
                .map(|(k, v)| {
                    let kind = from_hcl(v, at);
                    (k, at, Value { at, kind })
                })
                .collect(),
        ),
    }
}

/// How a kind of value is named in type errors.
pub(super) fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Null => "null",
        Kind::Bool(_) => "bool",
        Kind::Number(_) => "number",
        Kind::String(_) => "string",
        Kind::List(_) => "list",
        Kind::Map(_) => "object",
    }
}

impl Value {
    /// "got string \"abc\"" / "got list": what a type error says it found.
    fn got(&self) -> String {
        match &self.kind {
            Kind::String(s) => format!("got string {s:?}"),
            Kind::Number(n) => format!("got number {n}"),
            Kind::Bool(b) => format!("got bool {b}"),
            other => format!("got {}", kind_name(other)),
        }
    }

    fn mismatch(&self, field: &str, expected: &str) -> Fault {
        (
            self.at,
            format!("{field}: expected {expected}, {}", self.got()),
        )
    }

    /// A string; numbers and bools convert as HCL converts them to strings.
    pub(super) fn string(&self, field: &str) -> Result<String, Fault> {
        match &self.kind {
            Kind::String(s) => Ok(s.clone()),
            Kind::Number(n) => Ok(n.to_string()),
            Kind::Bool(b) => Ok(b.to_string()),
            _ => Err(self.mismatch(field, "a string")),
        }
    }

    /// A bool; the strings `"true"` and `"false"` convert as HCL converts them.
    pub(super) fn bool(&self, field: &str) -> Result<bool, Fault> {
        match &self.kind {
            Kind::Bool(b) => Ok(*b),
            Kind::String(s) if s == "true" => Ok(true),
            Kind::String(s) if s == "false" => Ok(false),
            _ => Err(self.mismatch(field, "a bool (true or false)")),
        }
    }

    /// A whole number in `T`'s range; a string holding a number converts as HCL converts
    /// it, a fraction or an out-of-range number is refused.
    pub(super) fn whole<T: TryFrom<u64>>(&self, field: &str) -> Result<T, Fault> {
        let number = match &self.kind {
            Kind::Number(n) => match n.as_u64() {
                Some(whole) => {
                    return T::try_from(whole)
                        .map_err(|_| (self.at, format!("{field}: {whole} is too large")));
                }
                None => n.as_f64().unwrap_or(f64::NAN),
            },
            Kind::String(s) => match s.trim().parse::<f64>() {
                Ok(n) if n.is_finite() => n,
                _ => return Err(self.mismatch(field, "a whole number")),
            },
            _ => return Err(self.mismatch(field, "a whole number")),
        };
        let why = if number < 0.0 {
            "it must not be negative"
        } else if number.fract() != 0.0 {
            "it must be a whole number"
        } else if number > u64::MAX as f64 {
            "it is too large"
        } else {
            // Whole, non-negative and in range: the cast is exact for integers below 2^53
            // and rounds like HCL's own number conversion above.
            let whole = number as u64;
            return T::try_from(whole)
                .map_err(|_| (self.at, format!("{field}: {whole} is too large")));
        };
        Err((self.at, format!("{field}: {number} is invalid: {why}")))
    }

    /// A Go-syntax duration string (`"30s"`, `"1h30m"`).
    pub(super) fn duration(&self, field: &str) -> Result<std::time::Duration, Fault> {
        match &self.kind {
            Kind::String(s) => super::duration::parse_duration(s)
                .map_err(|why| (self.at, format!("{field}: {why}"))),
            _ => Err(self.mismatch(field, "a duration string like \"30s\" or \"1h30m\"")),
        }
    }

    /// A list of strings; each element converts as [`Value::string`] does.
    pub(super) fn strings(&self, field: &str) -> Result<Vec<String>, Fault> {
        match &self.kind {
            Kind::List(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| item.string(&format!("{field}[{i}]")))
                .collect(),
            _ => Err(self.mismatch(field, "a list of strings")),
        }
    }

    /// An object of strings, as `(key, key offset, value)` in written order.
    pub(super) fn string_map(&self, field: &str) -> Result<Vec<(String, usize, String)>, Fault> {
        match &self.kind {
            Kind::Map(entries) => entries
                .iter()
                .map(|(key, key_at, value)| {
                    Ok((
                        key.clone(),
                        *key_at,
                        value.string(&format!("{field}[{key}]"))?,
                    ))
                })
                .collect(),
            _ => Err(self.mismatch(field, "an object of strings")),
        }
    }
}
