//! Starting calls inside the engine's loop, in the order [`CallQueue`] gives. A
//! report takes its node's updates when it starts, not when it is queued, so it always
//! carries the newest state.
//!
//! [`CallQueue`]: super::queue::CallQueue

use super::queue::Running;
use super::{Call, Done, Engine, Phase};
use crate::sim::ServiceWrite;
use crate::sim::calls;
use crate::sim::driver::NodeContext;
use crate::supervisor::{JobReadError, read_job_version};
use backon::Retryable;
use drover_proto::v1 as pb;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::time::Instant;

impl Engine {
    pub(super) fn call(&mut self, call: Call) {
        self.waiting.push(call);
        self.drain_backlog();
    }

    /// Starts waiting calls while there are free slots.
    pub(super) fn drain_backlog(&mut self) {
        loop {
            let running = Running {
                total: self.rpcs.len(),
                heartbeats: self.heartbeating,
                registrations: self.registering,
            };
            let Some(next) = self.waiting.next(running) else {
                break;
            };
            self.launch(next);
        }
    }

    pub(super) fn launch(&mut self, call: Call) {
        let conns = self.conns.clone();
        let fut: BoxFuture<'static, Done> = match call {
            Call::Heartbeat(n) => {
                self.heartbeating += 1;
                let node = &mut self.nodes[n as usize];
                let auth = node.auth.clone();
                let stream = node.beat_stream.take();
                let cancel_rate = self.config.cancel_rate;
                let unary = self.unary_heartbeats;
                Box::pin(async move {
                    let beat = calls::heartbeat(&conns, n, auth, cancel_rate, stream, unary).await;
                    Done::Heartbeat(n, beat)
                })
            }
            Call::Report(n) => {
                let context = NodeContext {
                    id: self.ids[n as usize],
                    datacenter: self.layout.datacenter(n),
                };
                let node = &mut self.nodes[n as usize];
                let (ids, updates) = node.allocs.take_batch(&context);
                if updates.is_empty() || node.phase != Phase::Connected {
                    node.allocs.redirty(&ids);
                    node.report_in_flight = false;
                    return;
                }
                let observer = self
                    .service_writes
                    .as_ref()
                    .filter(|tx| !tx.is_closed())
                    .filter(|_| updates.iter().any(|u| u.services.is_some()))
                    .cloned();
                let req = pb::UpdateAllocationsRequest {
                    auth: Some(node.auth.clone()),
                    updates,
                };
                Box::pin(async move {
                    let sent = Instant::now();
                    let result = conns.unary(n).update_allocations(req).await;
                    if let (Some(tx), Ok(answer)) = (observer, &result) {
                        let _ = tx.send(ServiceWrite {
                            index: answer.get_ref().index,
                            sent,
                            acknowledged: Instant::now(),
                        });
                    }
                    Done::Report(n, ids, result.map(|_| ()))
                })
            }
            Call::ReadJob(n, key) => {
                let auth = self.nodes[n as usize].auth.clone();
                Box::pin(async move {
                    let read = (|| {
                        read_job_version(
                            || conns.jobs(n, &auth),
                            &key.namespace,
                            &key.job_id,
                            key.version,
                            0,
                        )
                    })
                    .retry(calls::backoff())
                    .when(|e| matches!(e, JobReadError::Rpc(status) if calls::transient(status)))
                    .await;
                    let job = match read {
                        Ok(job) => Some(Arc::new(job)),
                        Err(e) => {
                            tracing::warn!(job_id = %key.job_id, version = key.version, error = %e, "simulated node cannot read an allocation's job; it registers no services");
                            None
                        }
                    };
                    Done::ReadJob(key, job)
                })
            }
            Call::Register(n) => {
                self.registering += 1;
                let config = self.config.clone();
                let layout = self.layout.clone();
                let previous = self.nodes[n as usize].auth.clone();
                Box::pin(async move {
                    let previous = (!previous.node_id.is_empty()).then_some(&previous);
                    let result = calls::register(&conns, &config, &layout, n, previous).await;
                    Done::Register(n, result)
                })
            }
        };
        self.rpcs.push(fut);
    }
}
