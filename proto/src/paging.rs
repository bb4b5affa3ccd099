//! Following the pages of list RPCs from a client: a list answers at most one page (see
//! `next_token` in the protos), so a caller that wants everything loops until the token
//! comes back empty.

use crate::v1 as pb;
use crate::v1::operator_service_client::OperatorServiceClient;
use tonic::Status;
use tonic::transport::Channel;

/// Calls `page` with each `next_token` in turn (empty first) and gathers the items, until
/// a page comes back with an empty token. A server that repeats a token is an error rather
/// than an endless loop.
pub async fn all_pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, Status>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), Status>>,
{
    let mut all = Vec::new();
    let mut token = String::new();
    loop {
        let (items, next) = page(token.clone()).await?;
        all.extend(items);
        if next.is_empty() {
            return Ok(all);
        }
        if next == token {
            return Err(Status::internal(format!(
                "the server repeated the page token {next:?}"
            )));
        }
        token = next;
    }
}

/// `NodeList` with every page: the nodes of all pages, with the first page's counts and
/// periods and the lowest index any page was read at.
pub async fn node_list_all(
    client: &OperatorServiceClient<Channel>,
    req: pb::NodeListRequest,
) -> Result<pb::NodeListResponse, Status> {
    let mut client = client.clone();
    let mut answer = client.node_list(req.clone()).await?.into_inner();
    while !answer.next_token.is_empty() {
        let token = std::mem::take(&mut answer.next_token);
        let page = client
            .node_list(pb::NodeListRequest {
                next_token: token.clone(),
                ..req.clone()
            })
            .await?
            .into_inner();
        if page.next_token == token {
            return Err(Status::internal(format!(
                "the server repeated the page token {token:?}"
            )));
        }
        answer.nodes.extend(page.nodes);
        answer.index = answer.index.min(page.index);
        answer.next_token = page.next_token;
    }
    Ok(answer)
}
