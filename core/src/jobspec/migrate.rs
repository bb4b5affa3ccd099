//! A group's `migrate` block: how a node drain moves its allocations.

use super::decoder::Decoder;
use super::job::one_of;
use super::reader::{Item, Shape, walk};
use crate::types::{HealthCheck, MigrateStrategy};
use hcl::edit::structure::Block;

const MIGRATE_FIELDS: &[(&str, Shape)] = &[
    ("max_parallel", Shape::Attr),
    ("health_check", Shape::Attr),
    ("min_healthy_time", Shape::Attr),
    ("healthy_deadline", Shape::Attr),
];

/// `m` with what `block` sets (at `path`, e.g. `groups[0].migrate`).
pub(super) fn migrate(
    d: &mut Decoder<'_>,
    path: &str,
    block: &Block,
    mut m: MigrateStrategy,
) -> MigrateStrategy {
    d.mark(path.to_owned(), Item::Block(block).at());
    for (name, item) in walk(d, &block.body, "migrate", MIGRATE_FIELDS) {
        let Item::Attr(a) = item else { continue };
        match name {
            "max_parallel" => {
                m.max_parallel = d.read(path, a, |v, f| v.whole(f)).unwrap_or(m.max_parallel)
            }
            "min_healthy_time" => {
                m.min_healthy_time = d
                    .read(path, a, |v, f| v.duration(f))
                    .unwrap_or(m.min_healthy_time)
            }
            "healthy_deadline" => {
                m.healthy_deadline = d
                    .read(path, a, |v, f| v.duration(f))
                    .unwrap_or(m.healthy_deadline)
            }
            "health_check" => {
                let check = d.read(path, a, |v, f| {
                    let text = v.string(f)?;
                    HealthCheck::parse(&text)
                        .ok_or_else(|| (v.at, one_of(f, &text, &["checks", "task_states"])))
                });
                m.health_check = check.unwrap_or(m.health_check);
            }
            _ => {}
        }
    }
    m
}
