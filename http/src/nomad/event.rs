//! Nomad's event stream frames: `{"Index": N, "Events": [...]}` per batch, one JSON object
//! per line, and `{}` as a heartbeat.

use super::alloc::allocation;
use super::eval::Evaluation;
use super::job::NomadJob;
use drover_core::types::Job;
use drover_proto::v1 as pb;
use serde::Serialize;
use serde_json::{Value, json};

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Frame {
    pub index: u64,
    pub events: Vec<Event>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Event {
    pub topic: &'static str,
    #[serde(rename = "Type")]
    pub kind: &'static str,
    pub key: String,
    pub namespace: String,
    pub index: u64,
    pub payload: Value,
}

/// Nomad's topic names; drover's `Operator` has no Nomad twin and keeps its own.
pub fn topic_name(t: i32) -> &'static str {
    match pb::Topic::try_from(t).unwrap_or(pb::Topic::Unspecified) {
        pb::Topic::Job => "Job",
        pb::Topic::Node => "Node",
        pb::Topic::Evaluation => "Evaluation",
        pb::Topic::Allocation => "Allocation",
        pb::Topic::Operator => "Operator",
        pb::Topic::Service => "Service",
        pb::Topic::Deployment => "Deployment",
        pb::Topic::Unspecified => "",
    }
}

/// A topic as `?topic=` names it.
pub fn topic_of(name: &str) -> Option<pb::Topic> {
    Some(match name {
        "Job" => pb::Topic::Job,
        "Node" => pb::Topic::Node,
        "Evaluation" => pb::Topic::Evaluation,
        "Allocation" => pb::Topic::Allocation,
        "Operator" => pb::Topic::Operator,
        "Service" => pb::Topic::Service,
        "Deployment" => pb::Topic::Deployment,
        "*" => pb::Topic::Unspecified,
        _ => return None,
    })
}

fn type_name(t: i32) -> &'static str {
    use pb::EventType as T;
    match T::try_from(t).unwrap_or(T::Unspecified) {
        T::JobRegistered => "JobRegistered",
        T::JobDeregistered => "JobDeregistered",
        T::JobStatusChanged => "JobStatusChanged",
        T::NodeRegistration => "NodeRegistration",
        T::NodeDeregistration => "NodeDeregistration",
        T::NodeStatus => "NodeEvent",
        T::NodeEligibility => "NodeEligibility",
        T::NodeDrain => "NodeDrain",
        T::NodeHealth => "NodeHealth",
        T::NodeSnapshot => "NodeSnapshot",
        T::EvaluationUpdated => "EvaluationUpdated",
        T::EvaluationDeleted => "EvaluationDeleted",
        T::AllocationUpdated => "AllocationUpdated",
        T::AllocationClientUpdated => "AllocationUpdateDesiredStatus",
        T::AllocationDeleted => "AllocationDeleted",
        T::PlanResult => "PlanResult",
        T::SchedulerConfigUpdated => "SchedulerConfigUpdated",
        T::ServiceRegistered => "ServiceRegistration",
        T::ServiceDeregistered => "ServiceDeregistration",
        T::DeploymentStatusUpdate => "DeploymentStatusUpdate",
        T::DeploymentPromotion => "DeploymentPromotion",
        T::DeploymentAllocHealth => "DeploymentAllocHealth",
        T::Unspecified => "",
    }
}

impl From<&pb::Event> for Event {
    fn from(e: &pb::Event) -> Self {
        use pb::event::Payload as P;
        let (namespace, payload) = match &e.payload {
            Some(P::Job(j)) => (
                j.namespace.clone(),
                match Job::try_from(j.clone()) {
                    Ok(job) => json!({ "Job": NomadJob::from(&job) }),
                    Err(_) => Value::Null,
                },
            ),
            Some(P::JobRef(r)) => (r.namespace.clone(), json!({ "JobID": r.id })),
            Some(P::Node(n)) => (
                String::new(),
                json!({ "Node": super::node::node(&pb::NodeListEntry { node: Some(n.clone()), ..Default::default() }) }),
            ),
            Some(P::NodeId(id)) => (String::new(), json!({ "NodeID": id })),
            Some(P::Evaluation(ev)) => (
                ev.namespace.clone(),
                json!({ "Evaluation": Evaluation::from(ev) }),
            ),
            Some(P::EvalId(id)) => (String::new(), json!({ "EvalID": id })),
            Some(P::Allocation(a)) => (
                a.namespace.clone(),
                json!({ "Allocation": allocation(a, "", "") }),
            ),
            Some(P::AllocId(id)) => (String::new(), json!({ "AllocID": id })),
            Some(P::SchedulerConfig(c)) => (
                String::new(),
                json!({ "SchedulerConfig": super::misc::SchedulerConfig::from(c) }),
            ),
            Some(P::ServiceRegistration(r)) => (
                r.namespace.clone(),
                json!({ "Service": super::service::NomadServiceRegistration::from(r) }),
            ),
            Some(P::Deployment(d)) => (
                d.namespace.clone(),
                json!({ "Deployment": super::deployment::Deployment::from(d) }),
            ),
            None => (String::new(), Value::Null),
        };
        Event {
            topic: topic_name(e.topic),
            kind: type_name(e.event_type),
            key: e.key.clone(),
            namespace,
            index: e.index,
            payload,
        }
    }
}
