//! The embedded descriptor set (what gRPC reflection serves) decodes, holds every service
//! with every RPC, and carries the documentation of each.

use drover_proto::{AGENT_SERVICE_NAME, FILE_DESCRIPTOR_SET, SERVICE_NAMES};
use prost::Message;
use prost_types::FileDescriptorSet;
use std::collections::{BTreeMap, BTreeSet};

/// The services and RPCs of `drover.v1`, as issue 5 and the CLI and console rely on them.
const EXPECTED: &[(&str, &[&str])] = &[
    (
        "JobService",
        &[
            "Register",
            "Plan",
            "Deregister",
            "Get",
            "List",
            "Versions",
            "Allocations",
            "Evaluations",
            "Summary",
            "Dispatch",
            "PeriodicForce",
        ],
    ),
    (
        "EvalService",
        &[
            "List",
            "Get",
            "BlockedList",
            "BrokerStats",
            "PlanQueueStats",
        ],
    ),
    (
        "NodeService",
        &[
            "Register",
            "UpdateStatus",
            "Heartbeats",
            "WatchAllocations",
            "UpdateAllocations",
        ],
    ),
    (
        "OperatorService",
        &[
            "NodeList",
            "NodeGet",
            "NodeOffline",
            "NodeOnline",
            "NodeDrain",
            "NodeEligibility",
            "NodePurge",
            "SchedulerGetConfig",
            "SchedulerSetConfig",
            "AllocGet",
            "AllocList",
        ],
    ),
    (
        "WorkerService",
        &["List", "Pause", "Resume", "GetConfig", "SetConfig"],
    ),
    ("EventService", &["Subscribe"]),
    (
        "StatusService",
        &["Leader", "Peers", "ClusterStatus", "Members"],
    ),
    (
        "RaftService",
        &[
            "AppendEntries",
            "Vote",
            "InstallSnapshot",
            "Info",
            "Join",
            "StartElection",
            "Scheduling",
        ],
    ),
    (
        "ClusterService",
        &["ListPeers", "AddPeer", "RemovePeer", "TransferLeadership"],
    ),
    ("SearchService", &["PrefixSearch"]),
    (
        "AclService",
        &[
            "Bootstrap",
            "TokenSelf",
            "TokenCreate",
            "TokenList",
            "TokenGet",
            "TokenDelete",
            "PolicyApply",
            "PolicyList",
            "PolicyGet",
            "PolicyDelete",
        ],
    ),
    ("AllocService", &["Logs", "Restart", "Stop"]),
    (
        "DeploymentService",
        &[
            "List", "Get", "Promote", "Fail", "Pause", "Resume", "Unblock",
        ],
    ),
    ("AgentService", &["Logs", "Restart"]),
    ("ServiceService", &["List", "Info"]),
];

fn descriptors() -> FileDescriptorSet {
    FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("the embedded descriptor set decodes")
}

#[test]
fn every_service_and_rpc_is_in_the_descriptor_set() {
    let fds = descriptors();
    let mut found = BTreeMap::<String, Vec<String>>::new();
    for file in &fds.file {
        assert_eq!(file.package(), "drover.v1", "{}", file.name());
        for service in &file.service {
            let methods = service.method.iter().map(|m| m.name().to_owned()).collect();
            found.insert(format!("drover.v1.{}", service.name()), methods);
        }
    }
    let expected: BTreeMap<String, Vec<String>> = EXPECTED
        .iter()
        .map(|(s, ms)| {
            (
                format!("drover.v1.{s}"),
                ms.iter().map(|m| (*m).to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(found, expected);
    let mut exported: BTreeSet<&str> = SERVICE_NAMES.into_iter().collect();
    assert!(
        exported.insert(AGENT_SERVICE_NAME),
        "agents serve AgentService, servers never"
    );
    let described: BTreeSet<&str> = found.keys().map(String::as_str).collect();
    assert_eq!(
        exported, described,
        "SERVICE_NAMES lists every service once"
    );
}

#[test]
fn every_proto_file_is_compiled_one_area_each() {
    let names: BTreeSet<String> = descriptors()
        .file
        .iter()
        .map(|f| f.name().to_owned())
        .collect();
    let expected: BTreeSet<String> = [
        "types",
        "jobs",
        "evals",
        "nodes",
        "operator",
        "workers",
        "events",
        "status",
        "raft",
        "search",
        "acl",
        "allocs",
        "cluster",
        "service",
        "service_catalog",
        "deployments",
    ]
    .iter()
    .map(|a| format!("drover/v1/{a}.proto"))
    .collect();
    assert_eq!(names, expected);
}

/// Source info is kept in the set, so reflection clients show each RPC's documentation;
/// this also holds the .proto files to "every RPC is documented".
#[test]
fn every_service_and_rpc_carries_its_documentation() {
    // Paths in source info: 6 = FileDescriptorProto.service, 2 = ServiceDescriptorProto.method.
    const SERVICE: i32 = 6;
    const METHOD: i32 = 2;
    let mut undocumented = Vec::new();
    for file in descriptors().file {
        let info = file.source_code_info.clone().unwrap_or_default();
        let comment = |path: &[i32]| {
            info.location
                .iter()
                .find(|l| l.path == path)
                .and_then(|l| l.leading_comments.clone())
                .map(|c| c.trim().to_owned())
                .unwrap_or_default()
        };
        for (s, service) in file.service.iter().enumerate() {
            let s = s as i32;
            if comment(&[SERVICE, s]).is_empty() {
                undocumented.push(service.name().to_owned());
            }
            for (m, method) in service.method.iter().enumerate() {
                if comment(&[SERVICE, s, METHOD, m as i32]).is_empty() {
                    undocumented.push(format!("{}.{}", service.name(), method.name()));
                }
            }
        }
    }
    assert!(undocumented.is_empty(), "undocumented: {undocumented:?}");
}

/// The RPCs that stream, each way: a new stream is a decision (what bounds it, how a
/// follower serves it), so it is listed here.
#[test]
fn streaming_rpcs_are_the_listed_ones() {
    let mut from_clients = Vec::new();
    let mut streams = Vec::new();
    for file in descriptors().file {
        for service in &file.service {
            for m in &service.method {
                let name = format!("{}.{}", service.name(), m.name());
                if m.client_streaming() {
                    from_clients.push(name.clone());
                }
                if m.server_streaming() {
                    streams.push(name);
                }
            }
        }
    }
    streams.sort();
    assert_eq!(
        from_clients,
        vec!["NodeService.Heartbeats"],
        "only the heartbeat stream streams from the client"
    );
    assert_eq!(
        streams,
        vec![
            "AgentService.Logs",
            "AllocService.Logs",
            "EventService.Subscribe",
            "NodeService.Heartbeats",
            "NodeService.WatchAllocations"
        ]
    );
}
