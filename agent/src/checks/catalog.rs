//! The service catalog as this node's templates see it (`nomadService "NAME"`): each name
//! a template asks for is watched with blocking `ServiceService.Info` reads (the node's own
//! identity), so a change reaches the next render (every few seconds) without polling
//! the servers. A name is watched from its first use for as long as the agent runs: the
//! set is bounded by the names this node's templates use.

use crate::rpc::Servers;
use drover_core::template::Record;
use drover_proto::v1 as pb;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one blocking read waits for a change before asking again.
const BLOCK_FOR: Duration = Duration::from_secs(60);
/// The pauses after failed reads in a row: from 1 s doubling to 30 s, jittered, so a
/// node whose servers are down does not ask once a second per watched service.
fn retry_delays() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(30))
        .without_max_times()
        .with_jitter()
        .build()
}

type Key = (String, String);

/// The watched services' instances, by (namespace, name).
#[derive(Debug)]
pub struct ServiceCatalog {
    servers: Arc<Servers>,
    known: Mutex<BTreeMap<Key, Vec<Record>>>,
}

impl ServiceCatalog {
    pub fn new(servers: Arc<Servers>) -> Arc<Self> {
        Arc::new(Self {
            servers,
            known: Mutex::new(BTreeMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Vec<Record>>> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The instances known now of service `name` in `namespace`; the first ask starts
    /// watching it (and answers none until the first read came back).
    pub fn instances(self: &Arc<Self>, namespace: &str, name: &str) -> Vec<Record> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut known = self.lock();
        if let Some(list) = known.get(&key) {
            return list.clone();
        }
        known.insert(key.clone(), Vec::new());
        drop(known);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(watch(self.clone(), key));
        }
        Vec::new()
    }
}

async fn watch(catalog: Arc<ServiceCatalog>, (namespace, name): Key) {
    let mut index = 0;
    let mut delays = retry_delays();
    loop {
        let read = catalog
            .servers
            .services()
            .info(pb::ServiceInfoRequest {
                query: None,
                namespace: namespace.clone(),
                name: name.clone(),
                wait_index: index,
                max_wait_ms: u64::try_from(BLOCK_FOR.as_millis()).unwrap_or(u64::MAX),
                job_id: String::new(),
                alloc_id: String::new(),
            })
            .await;
        match read {
            Ok(answer) => {
                let answer = answer.into_inner();
                index = answer.index;
                delays = retry_delays();
                let list = answer.instances.iter().map(record).collect();
                catalog
                    .lock()
                    .insert((namespace.clone(), name.clone()), list);
            }
            Err(status) => {
                tracing::debug!(%namespace, service = %name, error = %status.message(), "service watch failed; retrying");
                catalog.servers.on_error(&status);
                let delay = delays.next().unwrap_or(Duration::from_secs(30));
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// What a template reads of one instance.
fn record(r: &pb::ServiceRegistration) -> Record {
    Record::from([
        ("ID".to_owned(), r.id.clone()),
        ("Name".to_owned(), r.service_name.clone()),
        ("Namespace".to_owned(), r.namespace.clone()),
        ("JobID".to_owned(), r.job_id.clone()),
        ("AllocID".to_owned(), r.alloc_id.clone()),
        ("NodeID".to_owned(), r.node_id.clone()),
        ("Address".to_owned(), r.address.clone()),
        ("Port".to_owned(), r.port.to_string()),
        ("Tags".to_owned(), r.tags.join(",")),
        ("Health".to_owned(), health(r.health).to_owned()),
    ])
}

fn health(wire: i32) -> &'static str {
    match pb::ServiceHealth::try_from(wire) {
        Ok(pb::ServiceHealth::Passing) => "passing",
        Ok(pb::ServiceHealth::Warning) => "warning",
        Ok(pb::ServiceHealth::Critical) => "critical",
        _ => "",
    }
}
