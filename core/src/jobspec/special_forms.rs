//! `can(expr)` and `try(expr...)`, which must see their arguments fail: `can` answers
//! whether its argument evaluates without an error, `try` the first argument that does.
//! And `uuid()` (`uuidv4()`), which needs a generator: hcl-rs's functions are plain `fn`s
//! with no state, and core draws no randomness of its own, so its ids come from [`Ids`],
//! seeded by the caller.
//!
//! hcl-rs evaluates every argument of a call before it calls the function (an argument's
//! error ends the evaluation there), so these cannot be functions of its context. They are
//! special forms instead: before hcl-rs evaluates an expression, [`expand`] evaluates each
//! `can`/`try` call in it here, one argument at a time, and puts the answer in the call's
//! place. A `for` expression whose body calls them is evaluated here too, element by
//! element, since the body reads the loop's variables, which exist only per element; so
//! is a template (`"${try(...)}-x"`) that calls them. In a `%{ for }` directive's body
//! they are the eager fallbacks of `functions`: right whenever every argument evaluates.

use super::variables::children_mut;
use hcl::Value;
use hcl::eval::{Context, Evaluate as _};
use hcl::expr::{Expression, ForExpr};
use hcl::template::{Directive, Element, Template};
use rand::{RngCore as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;

/// Replaces every `can`/`try`/`uuid` call in `expr` (and every `for` expression whose body
/// holds one) by its value in `ctx`.
pub(super) fn expand(expr: &mut Expression, ctx: &Context<'_>, ids: &Ids) -> Result<(), String> {
    match expr {
        Expression::FuncCall(call) if is_special(call.name.name.as_str()) => {
            let name = call.name.name.to_string();
            let value = match name.as_str() {
                "can" => can(&call.args, ctx, ids)?,
                "try" => attempt(&call.args, ctx, ids)?,
                _ if call.args.is_empty() => Value::from(ids.next()),
                _ => {
                    return Err(format!(
                        "{name}: takes no arguments, got {}",
                        call.args.len()
                    ));
                }
            };
            *expr = Expression::from(value);
            Ok(())
        }
        Expression::ForExpr(f) if body_has_special(f) => {
            let value = for_each(f, ctx, ids)?;
            *expr = Expression::from(value);
            Ok(())
        }
        Expression::ForExpr(f) => expand(&mut f.collection_expr, ctx, ids),
        Expression::TemplateExpr(t) => {
            // A template that does not parse is left for hcl-rs to report.
            let Ok(mut template) = Template::from_expr(t) else {
                return Ok(());
            };
            if !template_has_special(&template) {
                return Ok(());
            }
            expand_template(&mut template, ctx, ids)?;
            let value = match template.elements() {
                // `"${x}"` alone is x's value, as HCL unwraps it.
                [Element::Interpolation(only)] => only.expr.evaluate(ctx),
                _ => template.evaluate(ctx).map(Value::String),
            };
            *expr = Expression::from(value.map_err(|e| e.kind().to_string())?);
            Ok(())
        }
        // Only the branch taken is expanded: a `try` that fails in the other is no error,
        // as it would not be evaluated.
        Expression::Conditional(c) => {
            expand(&mut c.cond_expr, ctx, ids)?;
            match c.cond_expr.evaluate(ctx) {
                Ok(Value::Bool(true)) => expand(&mut c.true_expr, ctx, ids),
                Ok(Value::Bool(false)) => expand(&mut c.false_expr, ctx, ids),
                _ => {
                    expand(&mut c.true_expr, ctx, ids)?;
                    expand(&mut c.false_expr, ctx, ids)
                }
            }
        }
        _ => children_mut(expr).try_for_each(|child| expand(child, ctx, ids)),
    }
}

fn is_special(name: &str) -> bool {
    matches!(name, "can" | "try" | "uuid" | "uuidv4")
}

/// The ids `uuid()` answers: version 4 UUIDs from a generator seeded by the caller.
#[derive(Debug)]
pub(super) struct Ids(RefCell<ChaCha8Rng>);

impl Ids {
    pub(super) fn new(seed: u64) -> Self {
        Self(RefCell::new(ChaCha8Rng::seed_from_u64(seed)))
    }

    fn next(&self) -> String {
        let mut bytes = [0u8; 16];
        self.0.borrow_mut().fill_bytes(&mut bytes);
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }
}

/// The value of `expr` in `ctx`, its own special forms expanded first.
fn value(expr: &Expression, ctx: &Context<'_>, ids: &Ids) -> Result<Value, String> {
    let mut expr = expr.clone();
    expand(&mut expr, ctx, ids)?;
    expr.evaluate(ctx).map_err(|e| e.kind().to_string())
}

fn can(args: &[Expression], ctx: &Context<'_>, ids: &Ids) -> Result<Value, String> {
    let [arg] = args else {
        return Err(format!("can: takes one argument, got {}", args.len()));
    };
    Ok(Value::Bool(value(arg, ctx, ids).is_ok()))
}

fn attempt(args: &[Expression], ctx: &Context<'_>, ids: &Ids) -> Result<Value, String> {
    if args.is_empty() {
        return Err("try: takes at least one argument, got 0".into());
    }
    let mut errors = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        match value(arg, ctx, ids) {
            Ok(v) => return Ok(v),
            Err(e) => errors.push(format!("argument {}: {e}", i + 1)),
        }
    }
    Err(format!(
        "try: no argument evaluated without an error ({})",
        errors.join("; ")
    ))
}

/// Expands the interpolations of `template` and of its `%{ if }` directives. A
/// `%{ for }` directive's body reads its loop's variables, so only its collection is
/// expanded; a `can`/`try` in its body is the plain function of `functions` (right
/// unless an argument fails).
fn expand_template(template: &mut Template, ctx: &Context<'_>, ids: &Ids) -> Result<(), String> {
    for element in template.elements_mut() {
        match element {
            Element::Literal(_) => {}
            Element::Interpolation(i) => expand(&mut i.expr, ctx, ids)?,
            Element::Directive(d) => match d.as_mut() {
                Directive::If(d) => {
                    expand(&mut d.cond_expr, ctx, ids)?;
                    expand_template(&mut d.true_template, ctx, ids)?;
                    if let Some(f) = &mut d.false_template {
                        expand_template(f, ctx, ids)?;
                    }
                }
                Directive::For(d) => expand(&mut d.collection_expr, ctx, ids)?,
            },
        }
    }
    Ok(())
}

fn template_has_special(template: &Template) -> bool {
    template.elements().iter().any(|element| match element {
        Element::Literal(_) => false,
        Element::Interpolation(i) => has_special(&i.expr),
        Element::Directive(d) => match d.as_ref() {
            Directive::If(d) => {
                has_special(&d.cond_expr)
                    || template_has_special(&d.true_template)
                    || d.false_template.as_ref().is_some_and(template_has_special)
            }
            Directive::For(d) => has_special(&d.collection_expr),
        },
    })
}

/// Whether a `for` expression's per-element parts call `can` or `try`.
fn body_has_special(f: &ForExpr) -> bool {
    [
        Some(&f.value_expr),
        f.key_expr.as_ref(),
        f.cond_expr.as_ref(),
    ]
    .into_iter()
    .flatten()
    .any(has_special)
}

fn has_special(expr: &Expression) -> bool {
    match expr {
        Expression::FuncCall(call) if is_special(call.name.name.as_str()) => true,
        Expression::ForExpr(f) => has_special(&f.collection_expr) || body_has_special(f),
        Expression::TemplateExpr(t) => {
            Template::from_expr(t).is_ok_and(|template| template_has_special(&template))
        }
        _ => {
            let mut expr = expr.clone();
            children_mut(&mut expr).any(|child| has_special(child))
        }
    }
}

/// A `for` expression as HCL evaluates it: over a list's (index, item) or an object's
/// (key, value) pairs, filtered by `if`, into a list, or into an object (grouping values
/// by key with `...`; a repeated key without it is an error).
fn for_each(f: &ForExpr, ctx: &Context<'_>, ids: &Ids) -> Result<Value, String> {
    let pairs: Vec<(Value, Value)> = match value(&f.collection_expr, ctx, ids)? {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| (Value::from(i as u64), v))
            .collect(),
        Value::Object(map) => map.into_iter().map(|(k, v)| (Value::from(k), v)).collect(),
        other => {
            return Err(format!(
                "a for expression cannot iterate over a {}",
                super::functions::kind(&other)
            ));
        }
    };
    let mut list = Vec::new();
    let mut object = hcl::Map::new();
    for (key, item) in pairs {
        let mut element = ctx.clone();
        if let Some(key_var) = &f.key_var {
            element.declare_var(key_var.clone(), key);
        }
        element.declare_var(f.value_var.clone(), item);
        if let Some(cond) = &f.cond_expr {
            match value(cond, &element, ids)? {
                Value::Bool(true) => {}
                Value::Bool(false) => continue,
                other => {
                    return Err(format!(
                        "a for expression's condition must be a bool, not {}",
                        super::functions::kind(&other)
                    ));
                }
            }
        }
        let v = value(&f.value_expr, &element, ids)?;
        let Some(key_expr) = &f.key_expr else {
            list.push(v);
            continue;
        };
        let k = match value(key_expr, &element, ids)? {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                return Err(format!(
                    "a for expression's key must be a string, not {}",
                    super::functions::kind(&other)
                ));
            }
        };
        if f.grouping {
            let group = object.entry(k).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = group {
                items.push(v);
            }
        } else if object.insert(k.clone(), v).is_some() {
            return Err(format!("a for expression makes key {k:?} twice"));
        }
    }
    Ok(match f.key_expr {
        Some(_) => Value::Object(object),
        None => Value::Array(list),
    })
}
