//! Events of the event stream, and the subscription filter.

use super::allocs::allocation;
use super::evals::evaluation;
use super::jobs::job_ref;
use super::nodes::node;
use super::operator::scheduler_config;
use super::{ConvertError, Problem, Result, WireEnum, Within, parse_id, required};
use crate::v1 as pb;
use drover_core::Index;
use drover_core::fsm::{Event, EventPayload, EventType, Topic};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl From<&EventPayload> for pb::event::Payload {
    fn from(p: &EventPayload) -> Self {
        use pb::event::Payload as P;
        match p {
            EventPayload::Job(j) => P::Job(j.as_ref().into()),
            EventPayload::JobKey(k) => P::JobRef(k.into()),
            EventPayload::Node(n) => P::Node(n.as_ref().into()),
            EventPayload::NodeId(id) => P::NodeId(id.to_string()),
            EventPayload::Evaluation(e) => P::Evaluation(e.as_ref().into()),
            EventPayload::EvalId(id) => P::EvalId(id.to_string()),
            EventPayload::Allocation(a) => P::Allocation(a.as_ref().into()),
            EventPayload::AllocId(id) => P::AllocId(id.to_string()),
            EventPayload::SchedulerConfig(c) => P::SchedulerConfig(c.as_ref().into()),
            EventPayload::Service(r) => P::ServiceRegistration(r.as_ref().into()),
            EventPayload::Deployment(d) => P::Deployment(d.as_ref().into()),
        }
    }
}

impl From<&Event> for pb::Event {
    fn from(e: &Event) -> Self {
        pb::Event {
            topic: e.topic.to_wire(),
            event_type: e.event_type.to_wire(),
            key: e.key.clone(),
            index: e.index,
            payload: Some((&e.payload).into()),
        }
    }
}

fn payload(p: pb::event::Payload) -> Result<EventPayload> {
    use pb::event::Payload as P;
    Ok(match p {
        P::Job(j) => EventPayload::Job(Arc::new(super::jobs::job(j).within("job")?)),
        P::JobRef(r) => EventPayload::JobKey(job_ref(r).within("job_ref")?),
        P::Node(n) => EventPayload::Node(Arc::new(node(n).within("node")?)),
        P::NodeId(id) => EventPayload::NodeId(parse_id("node_id", &id)?),
        P::Evaluation(e) => EventPayload::Evaluation(Arc::new(evaluation(e).within("evaluation")?)),
        P::EvalId(id) => EventPayload::EvalId(parse_id("eval_id", &id)?),
        P::Allocation(a) => EventPayload::Allocation(Arc::new(allocation(a).within("allocation")?)),
        P::AllocId(id) => EventPayload::AllocId(parse_id("alloc_id", &id)?),
        P::SchedulerConfig(c) => {
            EventPayload::SchedulerConfig(Arc::new(scheduler_config(c).within("scheduler_config")?))
        }
        P::ServiceRegistration(r) => EventPayload::Service(Arc::new(
            super::service::service_registration(r).within("service_registration")?,
        )),
        P::Deployment(d) => EventPayload::Deployment(Arc::new(
            super::deployments::deployment(d).within("deployment")?,
        )),
    })
}

fn event(p: pb::Event) -> Result<Event> {
    Ok(Event {
        topic: Topic::from_wire("topic", p.topic)?,
        event_type: EventType::from_wire("event_type", p.event_type)?,
        key: p.key,
        index: p.index,
        payload: payload(required("payload", p.payload)?)?,
    })
}

super::rooted_try_from!(pb::Event => Event, "event", event);

/// Which keys of one topic a subscriber wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyFilter {
    Any,
    Keys(BTreeSet<String>),
}

impl KeyFilter {
    fn matches(&self, key: &str) -> bool {
        match self {
            KeyFilter::Any => true,
            KeyFilter::Keys(keys) => keys.contains(key),
        }
    }

    /// Two filters of one topic unite: either may let an event through.
    fn merge(&mut self, other: KeyFilter) {
        match (&mut *self, other) {
            (KeyFilter::Any, _) => {}
            (_, KeyFilter::Any) => *self = KeyFilter::Any,
            (KeyFilter::Keys(mine), KeyFilter::Keys(theirs)) => mine.extend(theirs),
        }
    }
}

/// A decoded `EventService.Subscribe` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFilter {
    /// The first index to deliver; 0: only events applied after the subscription starts.
    pub from_index: Index,
    /// Topic -> keys wanted. `None`: every event of every topic.
    pub topics: Option<BTreeMap<Topic, KeyFilter>>,
}

impl EventFilter {
    /// Whether the subscriber wants `event` (the index bound is the stream's to apply).
    pub fn matches(&self, event: &Event) -> bool {
        match &self.topics {
            None => true,
            Some(topics) => topics
                .get(&event.topic)
                .is_some_and(|keys| keys.matches(&event.key)),
        }
    }
}

impl TryFrom<pb::SubscribeRequest> for EventFilter {
    type Error = ConvertError;
    fn try_from(p: pb::SubscribeRequest) -> std::result::Result<Self, ConvertError> {
        let topics = if p.topics.is_empty() {
            None
        } else {
            let mut topics = BTreeMap::<Topic, KeyFilter>::new();
            for (i, f) in p.topics.into_iter().enumerate() {
                let topic =
                    Topic::from_wire("topic", f.topic).within(format_args!("topics[{i}]"))?;
                if f.keys.iter().any(String::is_empty) {
                    return Err(ConvertError::new(
                        format!("topics[{i}].keys"),
                        Problem::Invalid("keys must not be empty strings"),
                    ));
                }
                let keys = if f.keys.is_empty() {
                    KeyFilter::Any
                } else {
                    KeyFilter::Keys(f.keys.into_iter().collect())
                };
                match topics.get_mut(&topic) {
                    Some(existing) => existing.merge(keys),
                    None => {
                        topics.insert(topic, keys);
                    }
                }
            }
            Some(topics)
        };
        Ok(EventFilter {
            from_index: p.from_index,
            topics,
        })
    }
}
