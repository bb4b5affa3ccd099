//! Allocations as the servers send them, decoded into the rows the console keeps. A load
//! decodes a million of them, so only what a row keeps is read, and the rows of one job
//! share its strings from the start.

use super::alloc_name::AllocName;
use super::change::DecodeError;
use super::rows::AllocRow;
use drover_core::{ClientStatus, DesiredStatus, JobKey, Resources, Timestamp};
use drover_proto::v1 as pb;
use drover_proto::{ConvertError, Problem, WireEnum};
use std::sync::Arc;

/// What the allocations of one job have in common, so that the rows decoded from one
/// answer share one copy of it instead of each holding its own.
#[derive(Clone, Debug, Default)]
pub struct JobStrings {
    job: Option<JobKey>,
    /// The job's group names seen so far (a job has a handful).
    groups: Vec<Arc<str>>,
}

impl JobStrings {
    /// For the allocations of `job` (its key as the job list gave it).
    pub fn of(job: JobKey) -> Self {
        JobStrings {
            job: Some(job),
            groups: Vec::new(),
        }
    }

    fn job(&mut self, namespace: &str, job_id: &str) -> JobKey {
        match &self.job {
            Some(key) if *key.namespace == *namespace && key.id.as_str() == job_id => key.clone(),
            _ => {
                let key = JobKey {
                    namespace: namespace.into(),
                    id: drover_core::JobId::new(job_id),
                };
                self.job = Some(key.clone());
                key
            }
        }
    }

    fn group(&mut self, name: &str) -> Arc<str> {
        if let Some(held) = self.groups.iter().find(|g| ***g == *name) {
            return held.clone();
        }
        let held: Arc<str> = name.into();
        self.groups.push(held.clone());
        held
    }
}

/// The row of an allocation as the servers send it, sharing `strings` with the rows decoded
/// before it. Only what the row keeps is read: the task states, history and metrics of a
/// million allocations are not the lists' concern (the detail fetches them).
pub fn decode_alloc_with(
    p: pb::Allocation,
    strings: &mut JobStrings,
) -> Result<AllocRow, DecodeError> {
    let within = |e: ConvertError| e.within("alloc");
    if p.job_id.is_empty() {
        return Err(within(ConvertError::new("job_id", Problem::Missing)).into());
    }
    let resources = p
        .resources
        .ok_or_else(|| ConvertError::new("resources", Problem::Missing))
        // Roots its errors at `resources` itself.
        .and_then(Resources::try_from)
        .map_err(within)?;
    Ok(AllocRow {
        id: drover_proto::convert::parse_id("id", &p.id).map_err(within)?,
        name: AllocName::new(&p.name, &p.job_id, &p.task_group),
        job: strings.job(&p.namespace, &p.job_id),
        task_group: strings.group(&p.task_group),
        node_id: drover_proto::convert::parse_id("node_id", &p.node_id).map_err(within)?,
        desired: DesiredStatus::from_wire("desired_status", p.desired_status).map_err(within)?,
        client: ClientStatus::from_wire("client_status", p.client_status).map_err(within)?,
        resources,
        create_time: Timestamp::from_millis(p.create_time_unix_ms),
        modify_index: p.modify_index,
    })
}

pub fn decode_alloc(p: pb::Allocation) -> Result<AllocRow, DecodeError> {
    decode_alloc_with(p, &mut JobStrings::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alloc_row;
    use drover_core::mock;

    /// The lean decoding reads exactly the row the full conversion gives, and rows of one
    /// job decoded together share its strings.
    #[test]
    fn allocations_decode_to_the_rows_of_their_full_conversion() {
        let job = mock::service_job("web", 3);
        let mut strings = JobStrings::of(JobKey::default_ns("web"));
        let rows: Vec<AllocRow> = (0..3)
            .map(|n| {
                let mut alloc = mock::alloc(n, &job, mock::node_id(n), n as u32);
                alloc.client_status = ClientStatus::Failed;
                alloc.create_time = Timestamp::from_millis(1_000 + n);
                let wire = pb::Allocation::from(&alloc);
                let row = decode_alloc_with(wire, &mut strings).expect("a well-formed allocation");
                assert_eq!(row, alloc_row(&alloc));
                assert_eq!(row.name(), alloc.name);
                row
            })
            .collect();
        assert!(Arc::ptr_eq(&rows[0].job.id.0, &rows[2].job.id.0));
        assert!(Arc::ptr_eq(&rows[0].task_group, &rows[2].task_group));
    }

    #[test]
    fn a_malformed_allocation_is_refused_naming_the_field() {
        let alloc = mock::alloc(1, &mock::service_job("web", 3), mock::node_id(1), 1);
        let cases: [(fn(&mut pb::Allocation), &str); 4] = [
            (|a| a.resources = None, "alloc.resources: missing"),
            (
                |a| a.node_id = "nope".into(),
                "alloc.node_id: \"nope\" is not a uuid",
            ),
            (|a| a.job_id.clear(), "alloc.job_id: missing"),
            (
                |a| a.client_status = 99,
                "alloc.client_status: unknown value 99",
            ),
        ];
        for (spoil, want) in cases {
            let mut wire = pb::Allocation::from(&alloc);
            spoil(&mut wire);
            let error = decode_alloc(wire).expect_err(want);
            assert_eq!(error.to_string(), want);
        }
    }
}
