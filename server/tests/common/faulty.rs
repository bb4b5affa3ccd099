//! A Raft transport with faults laid over it, for the simulations: messages lost at a
//! rate, servers cut off both ways, servers whose own calls are lost (one way), servers
//! whose calls arrive but whose answers are lost (the other way), and log entries lost
//! while heartbeats and votes pass.

use drover_server::raft::codec::decode_rpc;
use drover_server::raft::types::TypeConfig;
use drover_server::raft::{RaftRpc, RaftTransport, RpcFuture, ServerId, TransportError};
use openraft::raft::AppendEntriesRequest;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// What the seed's schedule does to the Raft transport right now.
#[derive(Debug, Default)]
pub struct Faults {
    /// Messages lost, per thousand, on the way out or on the way back.
    pub loss_per_mille: AtomicU32,
    /// Servers cut off from the others, both ways.
    pub isolated: Mutex<BTreeSet<ServerId>>,
    /// Servers whose own calls to the others are lost (they still answer calls made to
    /// them): a one-way partition.
    pub muted: Mutex<BTreeSet<ServerId>>,
    /// Servers whose own calls arrive but whose answers are lost: the others hear them,
    /// they hear nothing back.
    pub deaf: Mutex<BTreeSet<ServerId>>,
    /// Every `AppendEntries` that carries entries is lost, while heartbeats (empty ones)
    /// and votes pass: a leader can be elected and confirmed but commits nothing.
    pub entries_lost: AtomicBool,
    /// Drives the losses (the schedule has its own generator).
    pub rng: Mutex<Option<ChaCha8Rng>>,
}

impl Faults {
    fn lose(&self) -> bool {
        let p = self.loss_per_mille.load(Ordering::SeqCst);
        p > 0
            && self
                .rng
                .lock()
                .unwrap()
                .as_mut()
                .is_some_and(|r| r.random_range(0..1000) < p)
    }

    /// Whether a call from `a` to `b` is lost to a partition.
    fn cut(&self, a: ServerId, b: ServerId) -> bool {
        let isolated = self.isolated.lock().unwrap();
        isolated.contains(&a) || isolated.contains(&b) || self.muted.lock().unwrap().contains(&a)
    }
}

/// One server's Raft transport with the faults laid over it.
#[derive(Debug)]
pub struct FaultyTransport {
    pub from: ServerId,
    pub inner: Arc<dyn RaftTransport>,
    pub faults: Arc<Faults>,
}

impl RaftTransport for FaultyTransport {
    fn call<'a>(
        &'a self,
        rpc: RaftRpc,
        target: ServerId,
        addr: &'a str,
        payload: Vec<u8>,
    ) -> RpcFuture<'a> {
        Box::pin(async move {
            let lost = |why: &str| TransportError::Failed {
                target,
                addr: addr.to_string(),
                reason: format!("simulated: {why}"),
            };
            if self.faults.cut(self.from, target) {
                return Err(TransportError::Unreachable {
                    target,
                    addr: addr.to_string(),
                    reason: "simulated partition".into(),
                });
            }
            if self.faults.lose() {
                return Err(lost("request lost"));
            }
            if rpc == RaftRpc::AppendEntries
                && self.faults.entries_lost.load(Ordering::SeqCst)
                && carries_entries(&payload)
            {
                return Err(lost("entries lost"));
            }
            let answer = self.inner.call(rpc, target, addr, payload).await;
            if self.faults.deaf.lock().unwrap().contains(&self.from) {
                return Err(lost("answer lost to a one-way partition"));
            }
            if self.faults.lose() {
                return Err(lost("answer lost"));
            }
            answer
        })
    }
}

fn carries_entries(payload: &[u8]) -> bool {
    decode_rpc::<AppendEntriesRequest<TypeConfig>>("append entries", payload)
        .is_ok_and(|rpc| !rpc.entries.is_empty())
}
