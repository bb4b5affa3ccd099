//! The write coalescer for nodes' allocation reports: reports that arrive while one is
//! being written wait and go into the next Raft entry together
//! ([`Command::AllocClientUpdates`]), so a burst of thousands of nodes reporting (after a
//! big placement, or when a restarted server comes back) costs a few entries and fsyncs
//! instead of one each.
//!
//! One write is in flight at a time; nothing waits on a timer, so a lone report is
//! written at once, as before. Each report still gets its own answer: the entry's index,
//! or the error that refused the entry. An entry holds at most
//! [`MAX_UPDATES_PER_ENTRY`] allocation updates, so it stays far below the transport's
//! message limit.

use crate::error::ServerError;
use crate::write::Writer;
use drover_core::fsm::{Command, NodeAllocUpdates};
use drover_core::{Index, Timestamp};
use tokio::sync::{mpsc, oneshot};

/// The most allocation updates one entry carries.
pub const MAX_UPDATES_PER_ENTRY: usize = 4_096;
/// Reports waiting for their entry; a full queue makes the next report wait (back
/// pressure on the nodes' calls, not memory).
const QUEUE: usize = 16_384;

struct Queued {
    part: NodeAllocUpdates,
    now: Timestamp,
    done: oneshot::Sender<Result<Index, ServerError>>,
}

/// The coalescer's queue; its task ends once this is dropped and the queue is written.
#[derive(Debug, Clone)]
pub struct ClientUpdates {
    queue: mpsc::Sender<Queued>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued")
            .field("node_id", &self.part.node_id)
            .finish_non_exhaustive()
    }
}

impl ClientUpdates {
    /// Starts the coalescer's task (on the current runtime), writing through `writer`.
    pub fn start(writer: Writer) -> ClientUpdates {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(writer, rx));
        ClientUpdates { queue }
    }

    /// Writes one node's report and returns the index of the entry that holds it.
    pub async fn write(
        &self,
        part: NodeAllocUpdates,
        now: Timestamp,
    ) -> Result<Index, ServerError> {
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Queued { part, now, done })
            .await
            .map_err(|_| ServerError::ShuttingDown)?;
        answer.await.map_err(|_| ServerError::ShuttingDown)?
    }
}

async fn run(writer: Writer, mut rx: mpsc::Receiver<Queued>) {
    while let Some(first) = rx.recv().await {
        let mut updates = first.part.updates.len();
        let mut batch = vec![first];
        while updates < MAX_UPDATES_PER_ENTRY {
            match rx.try_recv() {
                Ok(next) => {
                    updates += next.part.updates.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        let (command, answers) = entry(batch);
        let written = writer.write(command).await;
        for done in answers {
            let _ = done.send(written.clone());
        }
    }
}

/// The entry for `batch`: a lone report as the plain command (so its node's refusal is
/// its own) unless it carries service registrations, which only the coalesced command
/// holds; several as one coalesced command at the latest of their times.
fn entry(mut batch: Vec<Queued>) -> (Command, Vec<oneshot::Sender<Result<Index, ServerError>>>) {
    if batch.len() == 1 && batch[0].part.services.is_empty() {
        let Queued { part, now, done } = batch.remove(0);
        let command = Command::AllocClientUpdate {
            node_id: part.node_id,
            updates: part.updates,
            evals: part.evals,
            now,
        };
        return (command, vec![done]);
    }
    let now = batch.iter().map(|q| q.now).max().unwrap_or_default();
    let mut nodes = Vec::with_capacity(batch.len());
    let mut answers = Vec::with_capacity(batch.len());
    for Queued { part, done, .. } in batch {
        nodes.push(part);
        answers.push(done);
    }
    (Command::AllocClientUpdates { nodes, now }, answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    fn queued(node: u64, now: u64) -> (Queued, oneshot::Receiver<Result<Index, ServerError>>) {
        let (done, rx) = oneshot::channel();
        let part = NodeAllocUpdates {
            node_id: mock::node_id(node),
            updates: vec![],
            evals: vec![],
            services: vec![],
        };
        (
            Queued {
                part,
                now: Timestamp::from_millis(now),
                done,
            },
            rx,
        )
    }

    #[test]
    fn a_lone_report_is_its_own_command_and_several_share_one() {
        let (one, _rx) = queued(1, 5);
        match entry(vec![one]) {
            (Command::AllocClientUpdate { node_id, now, .. }, answers) => {
                assert_eq!(
                    (node_id, now),
                    (mock::node_id(1), Timestamp::from_millis(5))
                );
                assert_eq!(answers.len(), 1);
            }
            (other, _) => panic!("one report: {}", other.kind()),
        }
        let batch = vec![queued(1, 5).0, queued(2, 9).0, queued(3, 7).0];
        match entry(batch) {
            (Command::AllocClientUpdates { nodes, now }, answers) => {
                let ids: Vec<_> = nodes.iter().map(|n| n.node_id).collect();
                assert_eq!(ids, [1, 2, 3].map(mock::node_id));
                assert_eq!(now, Timestamp::from_millis(9), "the latest report's time");
                assert_eq!(answers.len(), 3);
            }
            (other, _) => panic!("three reports: {}", other.kind()),
        }
    }
}
