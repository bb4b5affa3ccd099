//! Typed events the FSM emits for every applied command; the event stream publishes them.

use crate::types::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum Topic {
    Job,
    Node,
    Evaluation,
    Allocation,
    Operator,
    Service,
    Deployment,
}

impl Topic {
    pub const ALL: [Topic; 7] = [
        Topic::Job,
        Topic::Node,
        Topic::Evaluation,
        Topic::Allocation,
        Topic::Operator,
        Topic::Service,
        Topic::Deployment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Job => "Job",
            Topic::Node => "Node",
            Topic::Evaluation => "Evaluation",
            Topic::Allocation => "Allocation",
            Topic::Operator => "Operator",
            Topic::Service => "Service",
            Topic::Deployment => "Deployment",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum EventType {
    JobRegistered,
    JobDeregistered,
    JobStatusChanged,
    NodeRegistration,
    NodeDeregistration,
    NodeStatus,
    NodeEligibility,
    NodeDrain,
    NodeHealth,
    NodeSnapshot,
    EvaluationUpdated,
    EvaluationDeleted,
    AllocationUpdated,
    AllocationClientUpdated,
    AllocationDeleted,
    PlanResult,
    SchedulerConfigUpdated,
    ServiceRegistered,
    ServiceDeregistered,
    DeploymentStatusUpdate,
    DeploymentPromotion,
    DeploymentAllocHealth,
}

/// The object an event is about, as it is after the change (shared, not copied).
#[derive(Clone, PartialEq, Debug)]
pub enum EventPayload {
    Job(Arc<Job>),
    JobKey(JobKey),
    Node(Arc<Node>),
    NodeId(NodeId),
    Evaluation(Arc<Evaluation>),
    EvalId(EvalId),
    Allocation(Arc<Allocation>),
    AllocId(AllocId),
    SchedulerConfig(Arc<SchedulerConfig>),
    Service(Arc<ServiceRegistration>),
    Deployment(Arc<Deployment>),
}

#[derive(Clone, PartialEq, Debug)]
pub struct Event {
    pub topic: Topic,
    pub event_type: EventType,
    /// The object's id (job id, node id, ...), what subscribers filter on.
    pub key: String,
    /// The Raft index of the command that produced it.
    pub index: Index,
    pub payload: EventPayload,
}

impl Event {
    pub fn job(index: Index, t: EventType, job: &Arc<Job>) -> Self {
        Self {
            topic: Topic::Job,
            event_type: t,
            key: job.id.to_string(),
            index,
            payload: EventPayload::Job(job.clone()),
        }
    }

    pub fn node(index: Index, t: EventType, node: &Arc<Node>) -> Self {
        Self {
            topic: Topic::Node,
            event_type: t,
            key: node.id.to_string(),
            index,
            payload: EventPayload::Node(node.clone()),
        }
    }

    pub fn eval(index: Index, eval: &Arc<Evaluation>) -> Self {
        Self {
            topic: Topic::Evaluation,
            event_type: EventType::EvaluationUpdated,
            key: eval.id.to_string(),
            index,
            payload: EventPayload::Evaluation(eval.clone()),
        }
    }

    pub fn service(index: Index, t: EventType, r: &Arc<ServiceRegistration>) -> Self {
        Self {
            topic: Topic::Service,
            event_type: t,
            key: r.service_name.clone(),
            index,
            payload: EventPayload::Service(r.clone()),
        }
    }

    pub fn deployment(index: Index, t: EventType, d: &Arc<Deployment>) -> Self {
        Self {
            topic: Topic::Deployment,
            event_type: t,
            key: d.id.to_string(),
            index,
            payload: EventPayload::Deployment(d.clone()),
        }
    }

    pub fn alloc(index: Index, t: EventType, alloc: &Arc<Allocation>) -> Self {
        Self {
            topic: Topic::Allocation,
            event_type: t,
            key: alloc.id.to_string(),
            index,
            payload: EventPayload::Allocation(alloc.clone()),
        }
    }
}

impl Event {
    /// The namespace of the job, evaluation or allocation the event is about, when the
    /// payload says (not for events naming only a deleted object's id, nor for nodes).
    pub fn namespace(&self) -> Option<&str> {
        match &self.payload {
            EventPayload::Job(j) => Some(&j.namespace),
            EventPayload::JobKey(k) => Some(&k.namespace),
            EventPayload::Evaluation(e) => Some(&e.namespace),
            EventPayload::Allocation(a) => Some(&a.namespace),
            EventPayload::Service(r) => Some(&r.namespace),
            EventPayload::Deployment(d) => Some(&d.namespace),
            EventPayload::Node(_)
            | EventPayload::NodeId(_)
            | EventPayload::EvalId(_)
            | EventPayload::AllocId(_)
            | EventPayload::SchedulerConfig(_) => None,
        }
    }
}
