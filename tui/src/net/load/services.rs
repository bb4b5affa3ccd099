//! The service catalog: the services listed in every namespace the token may read, then
//! each one's instances. The catalog is not paged; a cluster has far fewer services than
//! registrations, so the instances of several services are read at once.

use super::{DecodeClock, keep};
use drover_core::ServiceRegistration;
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::service_service_client::ServiceServiceClient;
use tokio::task::JoinSet;

/// Services whose instances are read at once.
const INFO_READS: usize = 8;

/// Every registration, and the catalog's index they were read at (the lowest of the
/// answers; 0 when the catalog has never changed).
pub(super) struct ServicesRead {
    pub registrations: Vec<ServiceRegistration>,
    pub index: u64,
}

pub(super) async fn read_services(
    channel: Channel,
    clock: DecodeClock,
) -> Result<ServicesRead, tonic::Status> {
    let client =
        ServiceServiceClient::new(channel).max_decoding_message_size(crate::net::MAX_ANSWER_BYTES);
    let request = pb::ListServicesRequest {
        namespace: "*".to_owned(),
        ..Default::default()
    };
    let list = match client.clone().list(request).await {
        Ok(answer) => answer.into_inner(),
        Err(status) if super::optional_absent(&status, "the service catalog") => {
            return Ok(ServicesRead {
                registrations: Vec::new(),
                index: 0,
            });
        }
        Err(status) => return Err(status),
    };
    let mut read = ServicesRead {
        registrations: Vec::new(),
        index: list.index,
    };
    let mut entries = list.services.into_iter();
    let mut reads = JoinSet::new();
    loop {
        while reads.len() < INFO_READS
            && let Some(entry) = entries.next()
        {
            let mut client = client.clone();
            let request = pb::ServiceInfoRequest {
                namespace: entry.namespace,
                name: entry.name,
                ..Default::default()
            };
            reads.spawn(async move { client.info(request).await });
        }
        let Some(done) = reads.join_next().await else {
            return Ok(read);
        };
        let answer = done
            .map_err(|e| tonic::Status::internal(format!("a service read ended: {e}")))??
            .into_inner();
        read.index = read.index.min(answer.index);
        clock.time(|| {
            read.registrations
                .extend(answer.instances.into_iter().filter_map(|r| {
                    keep(
                        "service registration",
                        drover_proto::convert::service_registration(r),
                    )
                }))
        });
    }
}
