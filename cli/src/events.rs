//! `drover event stream`: follows the server's event stream and prints one JSON object
//! per event and line, for `jq` and scripts.

use crate::client::Client;
use crate::error::{CliError, Exit, rpc_failed};
use drover_core::fsm::{Event, EventPayload, EventType, Topic};
use drover_proto::WireEnum;
use drover_proto::v1 as pb;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum EventCommand {
    /// Print events as JSON lines until interrupted
    Stream {
        /// Topics to follow, as `Topic` or `Topic:key` (Job, Node, Evaluation, Allocation,
        /// Operator, Deployment); repeat for several. Every event when absent
        #[arg(long = "topic", value_name = "TOPIC[:KEY]")]
        topics: Vec<String>,
        /// Start from this Raft index instead of from now
        #[arg(long, default_value_t = 0)]
        index: u64,
    },
}

pub async fn run(
    client: &Client,
    cmd: EventCommand,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let EventCommand::Stream { topics, index } = cmd;
    let request = pb::SubscribeRequest {
        from_index: index,
        topics: parse_topics(&topics)?,
    };
    let mut stream = client
        .events()
        .subscribe(request)
        .await
        .map_err(rpc_failed("subscribing to events"))?
        .into_inner();
    while let Some(batch) = stream
        .message()
        .await
        .map_err(rpc_failed("following events"))?
    {
        for event in batch.events {
            let event = Event::try_from(event)?;
            serde_json::to_writer(&mut *out, &EventLine::from(&event))?;
            writeln!(out)?;
        }
        out.flush()?;
    }
    Ok(Exit::OK)
}

/// `Topic` and `Topic:key` filters; several keys of one topic are merged.
fn parse_topics(specs: &[String]) -> Result<Vec<pb::TopicFilter>, CliError> {
    let mut by_topic: BTreeMap<Topic, Vec<String>> = BTreeMap::new();
    let mut whole: Vec<Topic> = Vec::new();
    for spec in specs {
        let (name, key) = match spec.split_once(':') {
            Some((name, key)) => (name, Some(key)),
            None => (spec.as_str(), None),
        };
        let topic = Topic::parse(name).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown topic {name:?} (Job, Node, Evaluation, Allocation, Operator, Deployment)"
            ))
        })?;
        match key {
            Some(key) if !key.is_empty() && key != "*" => {
                by_topic.entry(topic).or_default().push(key.to_string())
            }
            _ => whole.push(topic),
        }
    }
    for topic in whole {
        by_topic.insert(topic, Vec::new());
    }
    Ok(by_topic
        .into_iter()
        .map(|(topic, keys)| pb::TopicFilter {
            topic: topic.to_wire(),
            keys,
        })
        .collect())
}

/// One event as a JSON line: what happened, to which object, at which index, and the
/// object as it is after the change.
#[derive(Debug, Serialize)]
pub struct EventLine<'a> {
    pub topic: Topic,
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub key: &'a str,
    pub index: u64,
    pub payload: Payload<'a>,
}

/// The payload under the name of its kind (`{"Job": {...}}`, `{"NodeId": "..."}`).
#[derive(Debug, Serialize)]
pub enum Payload<'a> {
    Job(&'a drover_core::Job),
    JobKey(&'a drover_core::JobKey),
    Node(&'a drover_core::Node),
    NodeId(String),
    Evaluation(&'a drover_core::Evaluation),
    EvalId(String),
    Allocation(&'a drover_core::Allocation),
    AllocId(String),
    SchedulerConfig(&'a drover_core::SchedulerConfig),
    Service(&'a drover_core::ServiceRegistration),
    Deployment(&'a drover_core::Deployment),
}

impl<'a> From<&'a Event> for EventLine<'a> {
    fn from(e: &'a Event) -> Self {
        let payload = match &e.payload {
            EventPayload::Job(j) => Payload::Job(j),
            EventPayload::JobKey(k) => Payload::JobKey(k),
            EventPayload::Node(n) => Payload::Node(n),
            EventPayload::NodeId(id) => Payload::NodeId(id.to_string()),
            EventPayload::Evaluation(ev) => Payload::Evaluation(ev),
            EventPayload::EvalId(id) => Payload::EvalId(id.to_string()),
            EventPayload::Allocation(a) => Payload::Allocation(a),
            EventPayload::AllocId(id) => Payload::AllocId(id.to_string()),
            EventPayload::SchedulerConfig(c) => Payload::SchedulerConfig(c),
            EventPayload::Service(r) => Payload::Service(r),
            EventPayload::Deployment(d) => Payload::Deployment(d),
        };
        EventLine {
            topic: e.topic,
            event_type: e.event_type,
            key: &e.key,
            index: e.index,
            payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_filters_merge_keys() {
        let specs = ["Job:web".to_string(), "job:api".into(), "Node".into()];
        let filters = parse_topics(&specs).expect("valid");
        assert_eq!(
            filters,
            vec![
                pb::TopicFilter {
                    topic: Topic::Job.to_wire(),
                    keys: vec!["web".into(), "api".into()],
                },
                pb::TopicFilter {
                    topic: Topic::Node.to_wire(),
                    keys: Vec::new(),
                },
            ]
        );
        let newer = parse_topics(&["Deployment".into(), "service".into()]).expect("valid");
        let mut topics: Vec<i32> = newer.iter().map(|f| f.topic).collect();
        topics.sort_unstable();
        let mut wanted = vec![Topic::Deployment.to_wire(), Topic::Service.to_wire()];
        wanted.sort_unstable();
        assert_eq!(topics, wanted);
        let err = parse_topics(&["Volume".into()]).expect_err("unknown topic");
        assert!(err.to_string().contains("\"Volume\""), "{err}");
    }

    #[test]
    fn an_event_is_one_json_line() {
        let event = Event {
            topic: Topic::Node,
            event_type: EventType::NodeDeregistration,
            key: "n1".into(),
            index: 42,
            payload: EventPayload::NodeId(drover_core::NodeId::from_bytes([1; 16])),
        };
        let line = serde_json::to_string(&EventLine::from(&event)).expect("encodes");
        insta::assert_snapshot!(line);
    }
}
