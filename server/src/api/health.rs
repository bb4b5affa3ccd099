//! The standard gRPC health service, following Raft: a client-facing service is SERVING
//! only while a leader is known and this server is not a learner, because without a leader
//! no write can commit (and a learner is not part of the quorum). The Raft transport is
//! always SERVING: it is what elects a leader, so it must answer while there is none.

use crate::raft::RaftMetrics;
use drover_proto::v1::raft_service_server::SERVICE_NAME as RAFT;
use openraft::ServerState;
use tokio::sync::watch;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The status client-facing services get for these Raft metrics.
fn status_for(m: &RaftMetrics) -> ServingStatus {
    if m.current_leader.is_some() && m.state != ServerState::Learner {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

/// Sets every client-facing service, and "" (the whole server, which checkers that name no
/// service ask about), to `status`.
async fn set_clients(reporter: &HealthReporter, status: ServingStatus) {
    let clients = drover_proto::SERVICE_NAMES
        .into_iter()
        .filter(|n| *n != RAFT);
    for name in std::iter::once("").chain(clients) {
        reporter.set_service_status(name, status).await;
    }
}

/// Reports the current status before the router serves, then spawns a task that follows
/// every change of Raft's metrics until Raft shuts down (its metrics channel closes).
pub(super) async fn follow_raft(
    reporter: HealthReporter,
    mut metrics: watch::Receiver<RaftMetrics>,
) {
    reporter
        .set_service_status(RAFT, ServingStatus::Serving)
        .await;
    let mut current = status_for(&metrics.borrow_and_update());
    set_clients(&reporter, current).await;
    tokio::spawn(async move {
        while metrics.changed().await.is_ok() {
            let (status, leader, state) = {
                let m = metrics.borrow_and_update();
                (status_for(&m), m.current_leader, m.state)
            };
            if status != current {
                tracing::info!(?status, ?leader, ?state, "gRPC health changed");
                set_clients(&reporter, status).await;
                current = status;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_needs_a_known_leader_and_a_voter() {
        let mut m = RaftMetrics::new_initial(1);
        m.state = ServerState::Follower;
        assert_eq!(status_for(&m), ServingStatus::NotServing, "no leader");
        m.current_leader = Some(2);
        assert_eq!(
            status_for(&m),
            ServingStatus::Serving,
            "a follower of a leader"
        );
        m.state = ServerState::Learner;
        assert_eq!(status_for(&m), ServingStatus::NotServing, "a learner");
        m.state = ServerState::Leader;
        m.current_leader = Some(1);
        assert_eq!(status_for(&m), ServingStatus::Serving, "the leader");
    }
}
