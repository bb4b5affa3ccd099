//! Walking an HCL body against the names a block allows: every attribute and block is
//! either known, known to Nomad but unsupported by drover, or unknown — and the last two are
//! reported with a position (and, for unknown names, the closest known one). Nothing a job
//! file says is ever skipped.

use super::decoder::Decoder;
use hcl::edit::Span as _;
use hcl::edit::structure::{Attribute, Block, Body, Structure};
use std::collections::HashMap;

/// How a name may appear in a block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Shape {
    /// `name = value`, at most once.
    Attr,
    /// `name = { … }` or `name { … }`, at most once: a map of strings.
    Map,
    /// `name { … }`, at most once.
    Block,
    /// `name { … }`, any number of times.
    Blocks,
    /// `name "label" { … }`, any number of times.
    Labeled,
    /// A Nomad feature drover does not have: refused rather than ignored.
    Unsupported,
}

/// One name a block allows.
pub(super) type Field = (&'static str, Shape);

/// One attribute or block of a body.
#[derive(Clone, Copy, Debug)]
pub(super) enum Item<'b> {
    Attr(&'b Attribute),
    Block(&'b Block),
}

impl Item<'_> {
    /// Where the item's name is written.
    pub(super) fn at(&self) -> usize {
        match self {
            Item::Attr(a) => a.key.span().map_or(0, |s| s.start),
            Item::Block(b) => b.ident.span().map_or(0, |s| s.start),
        }
    }
}

/// Checks every structure of `body` against `fields`, reporting unknown, unsupported,
/// misshapen and duplicate ones, and returns the acceptable ones in written order.
/// `context` names the enclosing block in messages (`resources`, `task "web"`).
pub(super) fn walk<'b>(
    d: &mut Decoder<'_>,
    body: &'b Body,
    context: &str,
    fields: &[Field],
) -> Vec<(&'static str, Item<'b>)> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut accepted = Vec::new();
    for structure in body.iter() {
        let (name, item) = match structure {
            Structure::Attribute(a) => (a.key.as_str(), Item::Attr(a)),
            Structure::Block(b) => (b.ident.as_str(), Item::Block(b)),
        };
        let noun = match item {
            Item::Attr(_) => "attribute",
            Item::Block(_) => "block",
        };
        let at = item.at();
        let Some(&(known, shape)) = fields.iter().find(|(n, _)| *n == name) else {
            let hint = closest(name, fields)
                .map(|c| format!("; did you mean {c:?}?"))
                .unwrap_or_default();
            d.problems
                .at(at, format!("unknown {noun} {name:?} in {context}{hint}"));
            continue;
        };
        if !shape_fits(d, name, shape, item, context) {
            continue;
        }
        if !matches!(shape, Shape::Blocks | Shape::Labeled) {
            if let Some(&first) = seen.get(name) {
                let first = d.problems.lines.position(first);
                d.problems.at(
                    at,
                    format!("duplicate {noun} {name:?} in {context} (first set at {first})"),
                );
                continue;
            }
            seen.insert(name, at);
        }
        accepted.push((known, item));
    }
    accepted
}

/// Reports and refuses an item whose shape does not match what its name allows.
fn shape_fits(
    d: &mut Decoder<'_>,
    name: &str,
    shape: Shape,
    item: Item<'_>,
    context: &str,
) -> bool {
    let at = item.at();
    let wrong = match (shape, item) {
        (Shape::Unsupported, _) => Some(format!(
            "{name:?} in {context} is a Nomad feature drover does not support"
        )),
        (Shape::Attr, Item::Block(_)) => Some(format!(
            "{name:?} in {context} is an attribute: write `{name} = …`, not a block"
        )),
        (Shape::Block | Shape::Blocks | Shape::Labeled, Item::Attr(_)) => Some(format!(
            "{name:?} in {context} is a block: write `{name} {{ … }}`, not `{name} = …`"
        )),
        (Shape::Labeled, Item::Block(b)) if b.labels.len() != 1 => Some(format!(
            "{name} block in {context} needs exactly one label, its name: {name} \"…\" {{ … }}"
        )),
        (Shape::Map | Shape::Block | Shape::Blocks, Item::Block(b)) if !b.labels.is_empty() => {
            Some(format!("{name} block in {context} takes no label"))
        }
        _ => None,
    };
    match wrong {
        Some(message) => {
            d.problems.at(at, message);
            false
        }
        None => true,
    }
}

/// The supported name closest to a misspelt one, if any is close enough to be a likely typo.
pub(super) fn closest<'f>(name: &str, fields: &[(&'f str, Shape)]) -> Option<&'f str> {
    closest_of(
        name,
        fields
            .iter()
            .filter(|(_, shape)| *shape != Shape::Unsupported)
            .map(|(n, _)| *n),
    )
}

/// The candidate within a few edits of `name`, ignoring case (a transposition counts as one
/// edit); the nearest wins.
pub(super) fn closest_of<'f>(
    name: &str,
    candidates: impl Iterator<Item = &'f str>,
) -> Option<&'f str> {
    let lowered = name.to_ascii_lowercase();
    candidates
        .map(|c| {
            (
                strsim::damerau_levenshtein(&lowered, &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|&(distance, c)| distance <= 2.max(c.len() / 3) && distance < c.len())
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest_of;

    #[test]
    fn hints_only_near_misses() {
        let names = [
            "cpu",
            "memory",
            "disk",
            "command",
            "args",
            "resources",
            "max_parallel",
        ];
        for (typo, want) in [
            ("cpus", Some("cpu")),
            ("CPU", Some("cpu")),
            ("memroy", Some("memory")),
            ("comand", Some("command")),
            ("arg", Some("args")),
            ("resource", Some("resources")),
            ("maxparallel", Some("max_parallel")),
            ("image", None),
            ("x", None),
            ("network", None),
        ] {
            assert_eq!(closest_of(typo, names.into_iter()), want, "{typo}");
        }
    }
}
