//! Resources and constraints: the leaves jobs and nodes are built from.

use super::{Result, WireEnum, required};
use crate::v1 as pb;
use drover_core::{Constraint, Operator, Resources};

impl From<&Resources> for pb::Resources {
    fn from(r: &Resources) -> Self {
        pb::Resources {
            cpu_mhz: Some(r.cpu_mhz),
            memory_mb: Some(r.memory_mb),
            disk_mb: Some(r.disk_mb),
        }
    }
}

/// Every dimension must be present: a forgotten `cpu_mhz` is an error, not a request for
/// nothing (which would let a task run on a node without holding any of it). Errors name
/// the dimension as validation and job files do (`cpu`, `memory`, `disk`).
pub(crate) fn resources(p: pb::Resources) -> Result<Resources> {
    Ok(Resources {
        cpu_mhz: required("cpu", p.cpu_mhz)?,
        memory_mb: required("memory", p.memory_mb)?,
        disk_mb: required("disk", p.disk_mb)?,
    })
}

/// A required `Resources` field of a message.
pub(crate) fn required_resources(field: &str, p: Option<pb::Resources>) -> Result<Resources> {
    super::Within::within(resources(required(field, p)?), field)
}

super::rooted_try_from!(pb::Resources => Resources, "resources", resources);

impl From<&Constraint> for pb::Constraint {
    fn from(c: &Constraint) -> Self {
        pb::Constraint {
            l_target: c.l_target.clone(),
            operator: c.operator.to_wire(),
            r_target: c.r_target.clone(),
        }
    }
}

pub(crate) fn constraint(p: pb::Constraint) -> Result<Constraint> {
    Ok(Constraint {
        l_target: p.l_target,
        operator: Operator::from_wire("operator", p.operator)?,
        r_target: p.r_target,
    })
}

super::rooted_try_from!(pb::Constraint => Constraint, "constraint", constraint);

pub(crate) fn constraints(p: Vec<pb::Constraint>) -> Result<Vec<Constraint>> {
    super::each("constraints", p, constraint)
}

pub(crate) fn constraints_to(c: &[Constraint]) -> Vec<pb::Constraint> {
    c.iter().map(Into::into).collect()
}
