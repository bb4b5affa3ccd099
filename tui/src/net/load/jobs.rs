//! Every job and its allocations: the allocations of several jobs are read at once, each
//! job on a task of its own that decodes its pages as they arrive and hands their rows to
//! the load's task, which puts them in the one allocation table.

use super::{DecodeClock, keep, lean, next_page};
use crate::model::{
    AllocRow, AllocTable, JobRow, JobStrings, ListedAllocPage, decode_job_entry,
    decode_listed_alloc,
};
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::v1 as pb;
use pb::job_service_client::JobServiceClient;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Jobs whose allocations are read at once. A job's pages follow one another, so this is
/// what keeps the server and the connection busy when most allocations belong to a few
/// big jobs, and what saves a round trip per job when there are thousands of small ones;
/// few enough that a console does not flood a server it shares with the schedulers.
const ALLOC_READS: usize = 8;

/// Every job and every allocation.
pub(super) struct JobsRead {
    pub jobs: Vec<JobRow>,
    pub allocs: AllocTable,
    pub index: u64,
}

pub(super) async fn read_jobs(
    channel: &Channel,
    clock: &DecodeClock,
) -> Result<JobsRead, tonic::Status> {
    let client = JobServiceClient::new(channel.clone())
        .max_decoding_message_size(crate::net::MAX_ANSWER_BYTES);
    let list = drover_proto::paging::job_list_all(&client, pb::ListJobsRequest::default()).await?;
    let grpc = tonic::client::Grpc::new(channel.clone())
        .max_decoding_message_size(crate::net::MAX_ANSWER_BYTES);
    let expected: usize = list
        .jobs
        .iter()
        .filter_map(|entry| entry.summary.as_ref())
        .map(|summary| summary.total_allocs as usize)
        .sum();
    let mut read = JobsRead {
        jobs: Vec::with_capacity(list.jobs.len()),
        allocs: AllocTable::with_capacity(expected),
        index: list.index,
    };
    // Jobs in list order; a job purged before any of its allocations were read is left
    // out. (One purged between two pages keeps what was read: the event stream, followed
    // from the lowest index any answer was read at, deletes it again.)
    let mut listed: Vec<Option<JobRow>> = Vec::with_capacity(list.jobs.len());
    let mut found = vec![false; list.jobs.len()];
    let (pages_tx, mut pages) = mpsc::channel::<AllocPage>(ALLOC_READS);
    let mut reads = JoinSet::new();
    let mut entries = list.jobs.into_iter().enumerate();
    loop {
        while reads.len() < ALLOC_READS
            && let Some((at, entry)) = entries.next()
        {
            let request = pb::JobAllocationsRequest {
                namespace: entry.namespace.clone(),
                job_id: entry.id.clone(),
                // The rows keep no more (see `ListedAlloc`); an older server sends it all.
                list_fields_only: true,
                ..Default::default()
            };
            let row = keep("job", decode_job_entry(entry));
            let strings = row
                .as_ref()
                .map(|row| JobStrings::of(row.key.clone()))
                .unwrap_or_default();
            listed.push(row);
            let read = JobRead {
                job: at,
                grpc: grpc.clone(),
                clock: clock.clone(),
                pages: pages_tx.clone(),
            };
            reads.spawn(read.all(request, strings));
        }
        tokio::select! {
            Some(page) = pages.recv() => read.take(page, &mut found),
            done = reads.join_next() => match done {
                Some(done) => done.map_err(|e| tonic::Status::internal(e.to_string()))??,
                None => break,
            },
        }
    }
    // Every read has ended: what they sent is all in the channel.
    drop(pages_tx);
    while let Some(page) = pages.recv().await {
        read.take(page, &mut found);
    }
    read.jobs = listed
        .into_iter()
        .zip(found)
        .filter_map(|(row, found)| row.filter(|_| found))
        .collect();
    Ok(read)
}

impl JobsRead {
    /// Puts a page's rows in the table, on the load's own task: the table is one.
    fn take(&mut self, page: AllocPage, found: &mut [bool]) {
        found[page.job] = true;
        self.index = self.index.min(page.index);
        self.allocs.insert_batch(page.rows);
    }
}

/// One page of one job's allocations, decoded.
struct AllocPage {
    /// The job's position in the job list.
    job: usize,
    rows: Vec<AllocRow>,
    index: u64,
}

/// The read of one job's allocations, on a task of its own.
struct JobRead {
    job: usize,
    grpc: tonic::client::Grpc<Channel>,
    clock: DecodeClock,
    pages: mpsc::Sender<AllocPage>,
}

impl JobRead {
    /// Reads every page, decoding each as it arrives and handing its rows over. A job
    /// purged since it was listed ends the read quietly.
    async fn all(
        mut self,
        mut request: pb::JobAllocationsRequest,
        mut strings: JobStrings,
    ) -> Result<(), tonic::Status> {
        loop {
            let answer = lean::call(&mut self.grpc, lean::JOB_ALLOCATIONS, request.clone()).await;
            let page: ListedAllocPage = match answer {
                Ok(page) => page,
                Err(status) if status.code() == tonic::Code::NotFound => return Ok(()),
                Err(status) => return Err(status),
            };
            let rows = self.clock.time(|| {
                page.allocations
                    .iter()
                    .filter_map(|a| keep("allocation", decode_listed_alloc(a, &mut strings)))
                    .collect()
            });
            let decoded = AllocPage {
                job: self.job,
                rows,
                index: page.index,
            };
            if self.pages.send(decoded).await.is_err() {
                // The load ended without this read.
                return Ok(());
            }
            match next_page(&request.next_token, page.next_token)? {
                Some(token) => request.next_token = token,
                None => return Ok(()),
            }
        }
    }
}
