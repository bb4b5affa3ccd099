//! Allocation status reports: runners hand in their newest status per allocation; the
//! reporter sends what is pending in one batch at most `report_interval` after it changed,
//! and keeps retrying until the servers accept it. A newer status of an allocation replaces
//! an unsent older one, so retries never send stale states.
//!
//! Updates go out only while the node is ready on the servers (its last heartbeat said so):
//! after a disconnect the servers refuse them with FAILED_PRECONDITION until the node has
//! heartbeated, so on that refusal the reporter asks for a heartbeat at once and waits.

use crate::heartbeat::Link;
use crate::rpc::{Servers, request};
use crate::state::NodeIdentity;
use drover_core::types::AllocId;
use drover_proto::convert::ClientAllocUpdate;
use drover_proto::v1 as pb;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tonic::Code;

/// The longest wait between retries of a refused batch.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
struct Pending {
    updates: Mutex<BTreeMap<AllocId, ClientAllocUpdate>>,
    wake: Notify,
}

/// The runners' side: hand in updates.
#[derive(Clone, Debug, Default)]
pub struct Reporter {
    pending: Arc<Pending>,
}

impl Reporter {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<AllocId, ClientAllocUpdate>> {
        self.pending
            .updates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues the newest status of an allocation, replacing any unsent one.
    pub fn submit(&self, update: ClientAllocUpdate) {
        self.lock().insert(update.update.alloc_id, update);
        self.pending.wake.notify_one();
    }

    /// Drops an unsent update (the servers already consider the allocation terminal).
    pub fn forget(&self, alloc: AllocId) {
        self.lock().remove(&alloc);
    }

    /// Updates not yet accepted by the servers.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    fn take(&self) -> Vec<ClientAllocUpdate> {
        std::mem::take(&mut *self.lock()).into_values().collect()
    }

    /// Puts back a batch that was not accepted, except where a newer update arrived.
    fn put_back(&self, batch: Vec<ClientAllocUpdate>) {
        let mut pending = self.lock();
        for u in batch {
            pending.entry(u.update.alloc_id).or_insert(u);
        }
    }
}

/// Sends pending updates until the task is aborted.
pub async fn run(
    reporter: Reporter,
    servers: Arc<Servers>,
    identity: NodeIdentity,
    link: Arc<Link>,
    interval: Duration,
) {
    let mut ready = link.ready.subscribe();
    let mut failures: u32 = 0;
    loop {
        if reporter.pending() == 0 {
            reporter.pending.wake.notified().await;
            continue;
        }
        if ready.wait_for(|r| *r).await.is_err() {
            return;
        }
        tokio::time::sleep(interval).await;
        let batch = reporter.take();
        if batch.is_empty() {
            continue;
        }
        match send(&servers, &identity, &batch).await {
            Ok(()) => failures = 0,
            Err(status) if status.code() == Code::NotFound => {
                // One allocation of the batch is gone (garbage collected): send them one by
                // one so the others still land, dropping those the servers do not know.
                for u in batch {
                    match send(&servers, &identity, std::slice::from_ref(&u)).await {
                        Ok(()) => {}
                        Err(s) if s.code() == Code::NotFound => {
                            tracing::info!(alloc_id = %u.update.alloc_id, "dropping update of an allocation the servers no longer have");
                        }
                        Err(_) => reporter.put_back(vec![u]),
                    }
                }
            }
            Err(status) => {
                failures = failures.saturating_add(1);
                reporter.put_back(batch);
                if status.code() == Code::FailedPrecondition {
                    tracing::info!(
                        message = status.message(),
                        "servers want a heartbeat before allocation updates"
                    );
                    link.ready.send_replace(false);
                    link.beat_now.notify_one();
                } else {
                    servers.on_error(&status);
                    tracing::warn!(code = ?status.code(), message = status.message(), "allocation updates not accepted; retrying");
                }
                let wait = interval
                    .saturating_mul(1 << failures.min(4))
                    .min(MAX_RETRY_WAIT);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

async fn send(
    servers: &Servers,
    identity: &NodeIdentity,
    batch: &[ClientAllocUpdate],
) -> Result<(), tonic::Status> {
    let req = pb::UpdateAllocationsRequest {
        auth: Some(auth(identity)),
        updates: batch.iter().map(Into::into).collect(),
    };
    servers
        .nodes()
        .update_allocations(request(req))
        .await
        .map(|_| ())
}

/// The proof of identity every call after registration carries.
pub fn auth(identity: &NodeIdentity) -> pb::NodeAuth {
    pb::NodeAuth {
        node_id: identity.node_id.to_string(),
        secret_id: identity.secret_id.clone(),
    }
}
