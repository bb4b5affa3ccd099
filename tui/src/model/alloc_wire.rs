//! Allocations as the servers send them, decoded into the rows the console keeps. A load
//! decodes a million of them, so only what a row keeps is read (see [`ListedAlloc`]), and
//! the rows of one job share its strings from the start.

use super::alloc_name::AllocName;
use super::change::DecodeError;
use super::rows::{AllocRow, DeploymentPart};
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

/// The fields of `drover.v1.Allocation` that a row keeps, under that message's own tags. A
/// load reads its answers as these: everything else (task states, history, metrics, most
/// of an allocation's bytes) is skipped as it is read rather than built and thrown away,
/// and the text fields stay slices of the answer until the row is made.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListedAlloc {
    #[prost(bytes = "bytes", tag = "1")]
    pub id: prost::bytes::Bytes,
    #[prost(bytes = "bytes", tag = "3")]
    pub name: prost::bytes::Bytes,
    #[prost(bytes = "bytes", tag = "4")]
    pub namespace: prost::bytes::Bytes,
    #[prost(bytes = "bytes", tag = "5")]
    pub job_id: prost::bytes::Bytes,
    #[prost(bytes = "bytes", tag = "7")]
    pub task_group: prost::bytes::Bytes,
    #[prost(bytes = "bytes", tag = "8")]
    pub node_id: prost::bytes::Bytes,
    #[prost(int32, tag = "9")]
    pub desired_status: i32,
    #[prost(int32, tag = "11")]
    pub client_status: i32,
    #[prost(message, optional, tag = "21")]
    pub resources: Option<pb::Resources>,
    #[prost(uint64, tag = "24")]
    pub modify_index: u64,
    #[prost(uint64, tag = "26")]
    pub create_time_unix_ms: u64,
    #[prost(bytes = "bytes", tag = "32")]
    pub deployment_id: prost::bytes::Bytes,
    #[prost(bool, tag = "33")]
    pub canary: bool,
    #[prost(message, optional, tag = "34")]
    pub deployment_health: Option<pb::AllocDeploymentHealth>,
}

/// `drover.v1.JobAllocationsResponse`, its allocations read as [`ListedAlloc`]s.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListedAllocPage {
    #[prost(message, repeated, tag = "1")]
    pub allocations: Vec<ListedAlloc>,
    #[prost(uint64, tag = "2")]
    pub index: u64,
    #[prost(string, tag = "3")]
    pub next_token: String,
}

/// An allocation's fields as either message gives them.
struct Fields<'a> {
    id: &'a str,
    name: &'a str,
    namespace: &'a str,
    job_id: &'a str,
    task_group: &'a str,
    node_id: &'a str,
    desired_status: i32,
    client_status: i32,
    resources: Option<pb::Resources>,
    create_time_unix_ms: u64,
    modify_index: u64,
    deployment_id: &'a str,
    canary: bool,
    deployment_healthy: Option<bool>,
}

/// The row of an allocation as the servers send it, sharing `strings` with the rows decoded
/// before it. Only what the row keeps is read: the task states, history and metrics of a
/// million allocations are not the lists' concern (the detail fetches them).
pub fn decode_alloc_with(
    p: pb::Allocation,
    strings: &mut JobStrings,
) -> Result<AllocRow, DecodeError> {
    let fields = Fields {
        id: &p.id,
        name: &p.name,
        namespace: &p.namespace,
        job_id: &p.job_id,
        task_group: &p.task_group,
        node_id: &p.node_id,
        desired_status: p.desired_status,
        client_status: p.client_status,
        resources: p.resources,
        create_time_unix_ms: p.create_time_unix_ms,
        modify_index: p.modify_index,
        deployment_id: &p.deployment_id,
        canary: p.canary,
        deployment_healthy: p.deployment_health.map(|h| h.healthy),
    };
    row(fields, strings)
}

pub fn decode_alloc(p: pb::Allocation) -> Result<AllocRow, DecodeError> {
    decode_alloc_with(p, &mut JobStrings::default())
}

/// The row of an allocation as a load reads it, sharing `strings` with the rows before it.
pub fn decode_listed_alloc(
    a: &ListedAlloc,
    strings: &mut JobStrings,
) -> Result<AllocRow, DecodeError> {
    let fields = Fields {
        id: text("id", &a.id)?,
        name: text("name", &a.name)?,
        namespace: text("namespace", &a.namespace)?,
        job_id: text("job_id", &a.job_id)?,
        task_group: text("task_group", &a.task_group)?,
        node_id: text("node_id", &a.node_id)?,
        desired_status: a.desired_status,
        client_status: a.client_status,
        resources: a.resources,
        create_time_unix_ms: a.create_time_unix_ms,
        modify_index: a.modify_index,
        deployment_id: text("deployment_id", &a.deployment_id)?,
        canary: a.canary,
        deployment_healthy: a.deployment_health.map(|h| h.healthy),
    };
    row(fields, strings)
}

/// A text field of a [`ListedAlloc`] (`string` on the wire, so UTF-8 from a sound server).
fn text<'a>(field: &str, bytes: &'a prost::bytes::Bytes) -> Result<&'a str, ConvertError> {
    std::str::from_utf8(bytes)
        .map_err(|_| ConvertError::new(field, Problem::Invalid("not utf-8")).within("alloc"))
}

fn row(p: Fields, strings: &mut JobStrings) -> Result<AllocRow, DecodeError> {
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
        id: drover_proto::convert::parse_id("id", p.id).map_err(within)?,
        name: AllocName::new(p.name, p.job_id, p.task_group),
        job: strings.job(p.namespace, p.job_id),
        task_group: strings.group(p.task_group),
        node_id: drover_proto::convert::parse_id("node_id", p.node_id).map_err(within)?,
        desired: DesiredStatus::from_wire("desired_status", p.desired_status).map_err(within)?,
        client: ClientStatus::from_wire("client_status", p.client_status).map_err(within)?,
        resources,
        create_time: Timestamp::from_millis(p.create_time_unix_ms),
        modify_index: p.modify_index,
        deployment: if p.deployment_id.is_empty() {
            None
        } else {
            Some(DeploymentPart {
                id: drover_proto::convert::parse_id("deployment_id", p.deployment_id)
                    .map_err(within)?,
                canary: p.canary,
                healthy: p.deployment_healthy,
            })
        },
    })
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

    /// Read as a load reads them, allocations with everything an agent reports give the
    /// same rows as their full conversion: the lean message's tags are the full one's, and
    /// the server's listed fields (`list_fields_only`) are all the row needs.
    #[test]
    fn listed_allocations_decode_to_the_rows_of_their_full_conversion() {
        use prost::Message;
        let job = mock::batch_job("batch", 3);
        let mut strings = JobStrings::default();
        for n in 0..3 {
            let mut alloc = mock::alloc(n, &job, mock::node_id(n), n as u32);
            alloc.desired_status = DesiredStatus::Stop;
            alloc.client_status = ClientStatus::Complete;
            alloc.create_time = Timestamp::from_millis(7_000 + n);
            alloc.modify_index = 40 + n;
            alloc.client_description = "all tasks ran".into();
            // One placed by a deployment, as its canary, and found healthy.
            if n == 1 {
                alloc.links = drover_core::Links::new(drover_core::AllocLinks {
                    deployment: Some(drover_core::AllocDeployment {
                        id: drover_core::DeploymentId::from_bytes([7; 16]),
                        canary: true,
                        health: Some(drover_core::DeploymentHealth {
                            healthy: true,
                            time: Timestamp::from_millis(9_000),
                        }),
                    }),
                    ..Default::default()
                });
            }
            alloc.task_states.insert(
                "server",
                drover_core::TaskState {
                    state: drover_core::TaskRunState::Dead,
                    events: vec![
                        drover_core::TaskEvent::new(
                            Timestamp::from_millis(8_000),
                            "Terminated",
                            "exit 0",
                        )
                        .with_exit_code(Some(0)),
                    ],
                    ..Default::default()
                },
            );
            // As a server sends it in full, and with the listed fields only (as the load
            // asks): the same row either way.
            let full = pb::Allocation::from(&alloc);
            let listed = drover_proto::convert::listed_allocation(&alloc);
            for wire in [full, listed] {
                let answer = pb::JobAllocationsResponse {
                    allocations: vec![wire],
                    index: 9,
                    next_token: "next".into(),
                };
                let page = ListedAllocPage::decode(answer.encode_to_vec().as_slice())
                    .expect("the same wire format");
                assert_eq!((page.index, page.next_token.as_str()), (9, "next"));
                let row = decode_listed_alloc(&page.allocations[0], &mut strings)
                    .expect("a well-formed allocation");
                assert_eq!(row, alloc_row(&alloc));
                assert_eq!(row.deployment.is_some(), n == 1);
            }
        }
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
