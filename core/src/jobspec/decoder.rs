//! State shared while one HCL job file is decoded: the source, the problems found so far,
//! and where each field of the job was written (so validation errors, which name fields by
//! path, can point back into the file).

use super::error::Problems;
use super::reader::Item;
use super::value::{self, Fault, Value};
use super::variables::Scope;
use hcl::edit::structure::{Attribute, Structure};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug)]
pub(super) struct Decoder<'s> {
    pub(super) src: &'s str,
    pub(super) problems: Problems<'s>,
    /// Byte offset of every field by its validation path, with groups and tasks addressed by
    /// index (`groups[0].tasks[1].resources.cpu`).
    positions: HashMap<String, usize>,
    /// What expressions naming `var.*`, `local.*` or a function are evaluated in.
    pub(super) scope: Scope,
}

/// `prefix.field`, or `field` alone at the top.
pub(super) fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

impl<'s> Decoder<'s> {
    pub(super) fn new(src: &'s str) -> Self {
        Self {
            src,
            problems: Problems::new(src),
            positions: HashMap::new(),
            scope: Scope::default(),
        }
    }

    /// Remembers that the field at `path` was written at `at`.
    pub(super) fn mark(&mut self, path: String, at: usize) {
        self.positions.entry(path).or_insert(at);
    }

    /// Where the field at `path` was written, or failing that its nearest written parent
    /// (a defaulted `resources.cpu` points at its task).
    pub(super) fn locate(&self, path: &str) -> Option<usize> {
        let mut path = path;
        loop {
            if let Some(&at) = self.positions.get(path) {
                return Some(at);
            }
            if path.is_empty() {
                return None;
            }
            path = parent(path);
        }
    }

    pub(super) fn fault(&mut self, (at, message): Fault) {
        self.problems.at(at, message);
    }

    /// Evaluates an attribute at `prefix.<key>` and converts it, reporting any problem.
    pub(super) fn read<T>(
        &mut self,
        prefix: &str,
        attr: &Attribute,
        convert: impl FnOnce(&Value, &str) -> Result<T, Fault>,
    ) -> Option<T> {
        let key = attr.key.as_str();
        self.mark(join(prefix, key), value::start(&attr.value));
        match value::evaluate(&attr.value, self.src, &self.scope).and_then(|v| convert(&v, key)) {
            Ok(t) => Some(t),
            Err(fault) => {
                self.fault(fault);
                None
            }
        }
    }

    /// A map of strings written as `name = { … }` or `name { … }`, at `prefix.<name>`.
    pub(super) fn map(
        &mut self,
        prefix: &str,
        name: &str,
        item: Item<'_>,
    ) -> BTreeMap<String, String> {
        let path = join(prefix, name);
        self.mark(path.clone(), item.at());
        let entries = match item {
            Item::Attr(attr) => self
                .read(prefix, attr, |v, field| v.string_map(field))
                .unwrap_or_default(),
            Item::Block(block) => {
                let mut entries = Vec::new();
                for structure in block.body.iter() {
                    match structure {
                        Structure::Attribute(attr) => {
                            let key = attr.key.as_str().to_owned();
                            let at = super::reader::Item::Attr(attr).at();
                            let field = format!("{name}[{key}]");
                            if let Some(v) = self.read(&path, attr, |v, _| v.string(&field)) {
                                entries.push((key, at, v));
                            }
                        }
                        Structure::Block(inner) => {
                            let at = Item::Block(inner).at();
                            self.problems.at(
                                at,
                                format!(
                                    "{name} holds only `key = value` entries, not a {:?} block",
                                    inner.ident.as_str()
                                ),
                            );
                        }
                    }
                }
                entries
            }
        };
        let mut map = BTreeMap::new();
        let mut first_at = HashMap::new();
        for (key, at, value) in entries {
            if let Some(&first) = first_at.get(&key) {
                let first = self.problems.lines.position(first);
                self.problems.at(
                    at,
                    format!("duplicate key {key:?} in {name} (first set at {first})"),
                );
                continue;
            }
            first_at.insert(key.clone(), at);
            self.mark(format!("{path}[{key}]"), at);
            map.insert(key, value);
        }
        map
    }
}

/// A path without its last part: `a.b[c]` → `a.b` → `a` → ``.
fn parent(path: &str) -> &str {
    if path.ends_with(']') {
        if let Some(open) = path.rfind('[') {
            return &path[..open];
        }
    }
    match path.rfind('.') {
        Some(dot) => &path[..dot],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::parent;

    #[test]
    fn parents_drop_one_part() {
        for (path, want) in [
            (
                "groups[0].tasks[1].resources.cpu",
                "groups[0].tasks[1].resources",
            ),
            ("groups[0].tasks[1]", "groups[0].tasks"),
            ("groups[0].tasks", "groups[0]"),
            ("groups[0]", "groups"),
            ("env[A.B]", "env"),
            ("priority", ""),
        ] {
            assert_eq!(parent(path), want, "{path}");
        }
    }
}
