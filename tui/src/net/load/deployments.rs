//! The deployments of every namespace the token may read: one answer, newest first. The
//! servers keep a handful per job, so the list is bounded by the jobs.

use super::{DecodeClock, keep};
use drover_core::Deployment;
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::deployment_service_client::DeploymentServiceClient;

/// Every deployment, and the index the list was read at (0 when there is nothing to
/// replay: a server without deployments, or a token that may not read them).
pub(super) struct DeploymentsRead {
    pub deployments: Vec<Deployment>,
    pub index: u64,
}

pub(super) async fn read_deployments(
    channel: Channel,
    clock: DecodeClock,
) -> Result<DeploymentsRead, tonic::Status> {
    let mut client = DeploymentServiceClient::new(channel)
        .max_decoding_message_size(crate::net::MAX_ANSWER_BYTES);
    let request = pb::ListDeploymentsRequest {
        namespace: "*".to_owned(),
        ..Default::default()
    };
    let answer = match client.list(request).await {
        Ok(answer) => answer.into_inner(),
        Err(status) if super::optional_absent(&status, "deployments") => {
            return Ok(DeploymentsRead {
                deployments: Vec::new(),
                index: 0,
            });
        }
        Err(status) => return Err(status),
    };
    let deployments = clock.time(|| {
        answer
            .deployments
            .into_iter()
            .filter_map(|d| keep("deployment", Deployment::try_from(d)))
            .collect()
    });
    Ok(DeploymentsRead {
        deployments,
        index: answer.index,
    })
}
