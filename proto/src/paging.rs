//! Following the pages of list RPCs from a client: a list answers at most one page (see
//! `next_token` in the protos), so a caller that wants everything loops until the token
//! comes back empty.

use crate::bearer::BearerChannel as Channel;
use crate::v1 as pb;
use crate::v1::eval_service_client::EvalServiceClient;
use crate::v1::job_service_client::JobServiceClient;
use crate::v1::operator_service_client::OperatorServiceClient;
use tonic::Status;

/// Calls `$method` on a clone of `$client` with `$req`, then again with each `next_token`
/// until it comes back empty, gathering `$items` and keeping the lowest index read at.
macro_rules! follow {
    ($client:expr, $method:ident, $req:expr, $items:ident) => {{
        let mut client = $client.clone();
        let req = $req;
        let mut answer = client.$method(req.clone()).await?.into_inner();
        while !answer.next_token.is_empty() {
            let token = std::mem::take(&mut answer.next_token);
            let mut next = req.clone();
            next.next_token = token.clone();
            let page = client.$method(next).await?.into_inner();
            if page.next_token == token {
                return Err(Status::internal(format!(
                    "the server repeated the page token {token:?}"
                )));
            }
            answer.$items.extend(page.$items);
            answer.index = answer.index.min(page.index);
            answer.next_token = page.next_token;
        }
        Ok(answer)
    }};
}

/// `OperatorService.NodeList` with every page (the first page's counts and periods).
pub async fn node_list_all(
    client: &OperatorServiceClient<Channel>,
    req: pb::NodeListRequest,
) -> Result<pb::NodeListResponse, Status> {
    follow!(client, node_list, req, nodes)
}

/// `JobService.List` with every page.
pub async fn job_list_all(
    client: &JobServiceClient<Channel>,
    req: pb::ListJobsRequest,
) -> Result<pb::ListJobsResponse, Status> {
    follow!(client, list, req, jobs)
}

/// `JobService.Allocations` with every page.
pub async fn job_allocations_all(
    client: &JobServiceClient<Channel>,
    req: pb::JobAllocationsRequest,
) -> Result<pb::JobAllocationsResponse, Status> {
    follow!(client, allocations, req, allocations)
}

/// `EvalService.List` with every page (at most the request's `limit` in all).
pub async fn eval_list_all(
    client: &EvalServiceClient<Channel>,
    req: pb::ListEvalsRequest,
) -> Result<pb::ListEvalsResponse, Status> {
    follow!(client, list, req, evaluations)
}
