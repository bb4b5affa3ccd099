//! What the engine does with the answer of each call: the heartbeat schedule, the
//! reconnect order, report retries, and the end of bring-up.

use super::{Call, Done, Engine, Phase, RETRY};
use crate::sim::SimError;
use crate::sim::calls;
use crate::sim::layout::Layout;
use drover_core::types::{AllocId, NodeId};
use drover_proto::v1 as pb;
use tonic::Code;

impl Engine {
    pub(super) fn on_done(&mut self, d: Done) {
        match d {
            Done::Heartbeat(n, result) => self.heartbeat_done(n, result),
            Done::Report(n, ids, result) => self.report_done(n, ids, result),
            Done::Register(n, result) => self.register_done(n, result),
            Done::ReadJob(key, job) => self.job_read(key, job),
        }
    }

    fn register_done(&mut self, n: u32, result: Result<(NodeId, pb::NodeAuth), SimError>) {
        self.registering -= 1;
        let node = &mut self.nodes[n as usize];
        node.heartbeat_in_flight = false;
        match result {
            Ok((id, auth)) => {
                self.ids[n as usize] = id;
                node.auth = auth;
            }
            Err(e) if node.phase == Phase::Starting => return self.fail_start(e),
            Err(e) => {
                // Heartbeats keep failing with NOT_FOUND and lead here again.
                tracing::warn!(node_id = %node.auth.node_id, error = %e, "simulated node could not register again");
            }
        }
        if node.phase != Phase::Silent {
            self.heartbeat_now(n);
        }
    }

    /// Bring-up cannot finish: tell the caller and end the loop.
    fn fail_start(&mut self, e: SimError) {
        if let Some((_, reply)) = self.starting.take() {
            let _ = reply.send(Err(e));
        }
        self.failed = true;
    }

    /// Node `n` is up; when it is the last, open every watch and answer the caller.
    fn node_started(&mut self, n: u32) {
        self.nodes[n as usize].phase = Phase::Connected;
        let Some((remaining, _)) = self.starting.as_mut() else {
            return;
        };
        *remaining -= 1;
        if *remaining > 0 {
            return;
        }
        if let Some((_, reply)) = self.starting.take() {
            for i in 0..self.nodes.len() {
                self.open_watch(u32::try_from(i).unwrap_or(u32::MAX));
            }
            tracing::info!(
                nodes = self.nodes.len(),
                "simulated nodes registered, ready and watching"
            );
            let _ = reply.send(Ok(self.ids.clone()));
        }
    }

    fn heartbeat_done(&mut self, n: u32, beat: calls::Beat) {
        self.heartbeating -= 1;
        let calls::Beat {
            result,
            stream,
            unsupported,
        } = beat;
        if unsupported && !self.unary_heartbeats {
            tracing::info!(
                "the servers have no heartbeat stream; simulated nodes heartbeat with unary calls"
            );
            self.unary_heartbeats = true;
        }
        let node = &mut self.nodes[n as usize];
        node.heartbeat_in_flight = false;
        if node.phase == Phase::Silent {
            return;
        }
        node.beat_stream = stream;
        match result {
            Ok(ttl) => {
                self.stats.heartbeats += 1;
                if node.phase == Phase::Starting {
                    self.node_started(n);
                } else if node.phase == Phase::Reconnecting {
                    node.phase = Phase::Resyncing;
                    if let Some(w) = node.watch.take() {
                        w.abort();
                    }
                    self.open_watch(n);
                } else if node.allocs.has_dirty() {
                    self.queue_report(n);
                }
                self.schedule_heartbeat(n, ttl);
            }
            Err(status) if status.code() == Code::NotFound => {
                // The servers forgot the node (lost past the grace): register it again with
                // the same id and secret, then go through the reconnect order.
                tracing::info!(node_id = %node.auth.node_id, "servers forgot the simulated node; registering again");
                self.stats.heartbeat_errors += 1;
                if node.phase != Phase::Starting {
                    node.phase = Phase::Reconnecting;
                }
                node.heartbeat_in_flight = true;
                self.call(Call::Register(n));
            }
            Err(status) if node.phase == Phase::Starting && !calls::transient(&status) => {
                let name = Layout::name(&self.config, n);
                self.fail_start(SimError::FirstHeartbeat { name, status });
            }
            Err(status) => {
                self.stats.heartbeat_errors += 1;
                tracing::debug!(node_id = %node.auth.node_id, error = %status, "heartbeat failed; retrying");
                let wait = self.jittered(RETRY);
                self.schedule_heartbeat_in(n, wait);
            }
        }
    }

    fn report_done(&mut self, n: u32, ids: Vec<AllocId>, result: Result<(), tonic::Status>) {
        let node = &mut self.nodes[n as usize];
        node.report_in_flight = false;
        match result {
            Ok(()) => self.stats.reports += 1,
            Err(status) => {
                self.stats.report_errors += 1;
                match status.code() {
                    // Collected meanwhile: nothing left to report about those that finished.
                    Code::NotFound if status.message().contains("allocation") => {
                        node.allocs.forget_finished(&ids);
                        node.allocs.redirty(&ids);
                    }
                    // The servers want a heartbeat first (after a disconnect).
                    Code::FailedPrecondition => {
                        node.allocs.redirty(&ids);
                        self.heartbeat_now(n);
                        return;
                    }
                    Code::PermissionDenied | Code::InvalidArgument => {
                        tracing::warn!(node_id = %node.auth.node_id, error = %status, "servers refused a report; dropping it");
                    }
                    _ => node.allocs.redirty(&ids),
                }
                tracing::debug!(node_id = %self.nodes[n as usize].auth.node_id, error = %status, "report failed");
            }
        }
        if self.nodes[n as usize].allocs.has_dirty() {
            self.queue_report(n);
        }
    }
}
