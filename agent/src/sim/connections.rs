//! The HTTP/2 connections every virtual node shares.
//!
//! Watch streams are long-lived, and a server caps the streams open on one connection, so
//! each watch connection carries at most `streams_per_connection` of them (node `i` watches on
//! connection `i / streams_per_connection`). Heartbeat streams are long-lived too, and go
//! the same way over connections of their own, so a watch's large messages never hold a
//! heartbeat back. Unary calls go over their own few connections so a full watch
//! connection never delays a heartbeat, and unary heartbeats (against servers without the
//! stream) over theirs: a server serves a bounded number of calls of one connection at
//! once, and reports waiting for a commit must not hold a heartbeat back (a real node has a
//! connection of its own). With several servers every channel
//! balances over all of them, so a server that is down is skipped.

use super::{SimConfig, SimError};
use backon::{ExponentialBuilder, Retryable};
use drover_proto::bearer::BearerChannel;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_proto::v1::node_service_client::NodeServiceClient;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// How long to wait for a TCP connection to a server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(crate) struct Connections {
    rpc: Vec<BearerChannel>,
    heartbeats: Vec<BearerChannel>,
    /// Node `i`'s heartbeat stream goes over `beat_streams[i / streams_per_connection]`.
    beat_streams: Vec<BearerChannel>,
    /// The same connections without the join token: job reads present a node's identity.
    rpc_plain: Vec<Channel>,
    watch: Vec<BearerChannel>,
    streams_per_connection: usize,
}

fn endpoints(config: &SimConfig) -> Result<Vec<Endpoint>, SimError> {
    config
        .servers
        .iter()
        .map(|url| {
            drover_proto::tls::endpoint(url, &config.tls)
                .map(|e| {
                    e.connect_timeout(CONNECT_TIMEOUT)
                        .tcp_nodelay(true)
                        .http2_keep_alive_interval(Duration::from_secs(30))
                        .keep_alive_while_idle(false)
                })
                .map_err(|e| SimError::ServerUrl {
                    url: url.clone(),
                    reason: e.to_string(),
                })
        })
        .collect()
}

/// A channel over `endpoints` that presents the join token, if any. The calls that need no
/// token (heartbeats, watches, reports) are authenticated by the node's secret in the
/// request, so one channel serves them all.
fn channel(endpoints: &[Endpoint], token: Option<&str>) -> Result<BearerChannel, SimError> {
    with_token(raw_channel(endpoints), token)
}

fn raw_channel(endpoints: &[Endpoint]) -> Channel {
    match endpoints {
        [one] => one.connect_lazy(),
        many => Channel::balance_list(many.iter().cloned()),
    }
}

fn with_token(channel: Channel, token: Option<&str>) -> Result<BearerChannel, SimError> {
    BearerChannel::new(channel, token).map_err(|e| SimError::Config {
        field: "token",
        reason: e.to_string(),
    })
}

impl Connections {
    /// Opens the channels (lazily), after checking that at least one server answers. A
    /// server that is not up yet (started at the same time, or restarting) is waited for
    /// with the real agent's backoff: 10 tries, 200 ms doubling to 5 s, about half a
    /// minute in all.
    pub(crate) async fn open(config: &SimConfig) -> Result<Connections, SimError> {
        let endpoints = endpoints(config)?;
        let reach_one = || async {
            let mut last_error = None;
            for e in &endpoints {
                match e.connect().await {
                    Ok(_) => return Ok(()),
                    Err(source) => last_error = Some(source),
                }
            }
            Err(last_error.expect("a simulator has at least one server"))
        };
        reach_one
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_secs(5))
                    .with_max_times(10)
                    .with_jitter(),
            )
            .notify(|error, wait| {
                tracing::info!(servers = %config.servers.join(","), %error, retry_in_ms = wait.as_millis() as u64, "no server answers yet")
            })
            .await
            .map_err(|source| SimError::Connect {
                urls: config.servers.join(","),
                source,
            })?;
        let watch_count = config.nodes.div_ceil(config.streams_per_connection);
        let token = config.token.as_deref();
        let rpc_plain: Vec<Channel> = (0..config.rpc_connections)
            .map(|_| raw_channel(&endpoints))
            .collect();
        Ok(Connections {
            rpc: rpc_plain
                .iter()
                .map(|c| with_token(c.clone(), token))
                .collect::<Result<_, _>>()?,
            rpc_plain,
            heartbeats: (0..config.rpc_connections.div_ceil(2))
                .map(|_| channel(&endpoints, token))
                .collect::<Result<_, _>>()?,
            watch: (0..watch_count)
                .map(|_| channel(&endpoints, token))
                .collect::<Result<_, _>>()?,
            beat_streams: (0..watch_count)
                .map(|_| channel(&endpoints, token))
                .collect::<Result<_, _>>()?,
            streams_per_connection: config.streams_per_connection,
        })
    }

    /// The client for node `node`'s unary calls.
    pub(crate) fn unary(&self, node: u32) -> NodeServiceClient<BearerChannel> {
        NodeServiceClient::new(self.rpc[node as usize % self.rpc.len()].clone())
    }

    /// The client for node `node`'s heartbeat stream.
    pub(crate) fn beat_stream(&self, node: u32) -> NodeServiceClient<BearerChannel> {
        let i = (node as usize / self.streams_per_connection).min(self.beat_streams.len() - 1);
        NodeServiceClient::new(self.beat_streams[i].clone())
    }

    /// The client for node `node`'s unary heartbeats (and abandoned decoys).
    pub(crate) fn heartbeats(&self, node: u32) -> NodeServiceClient<BearerChannel> {
        NodeServiceClient::new(self.heartbeats[node as usize % self.heartbeats.len()].clone())
    }

    /// Job reads as node `node`, presenting its id and secret (as the real agent reads the
    /// jobs of its allocations).
    pub(crate) fn jobs(
        &self,
        node: u32,
        auth: &drover_proto::v1::NodeAuth,
    ) -> JobServiceClient<BearerChannel> {
        let channel = self.rpc_plain[node as usize % self.rpc_plain.len()].clone();
        let channel = BearerChannel::for_node(channel.clone(), &auth.node_id, &auth.secret_id)
            .unwrap_or_else(|_| BearerChannel::plain(channel));
        JobServiceClient::new(channel).max_decoding_message_size(64 << 20)
    }

    /// The client for node `node`'s watch stream.
    pub(crate) fn watch(&self, node: u32) -> NodeServiceClient<BearerChannel> {
        let i = (node as usize / self.streams_per_connection).min(self.watch.len() - 1);
        NodeServiceClient::new(self.watch[i].clone())
    }
}
