//! Which server the client commands talk to, and the connection to it.

use crate::error::{CliError, connect_failure};
use drover_proto::bearer::BearerChannel;
use drover_proto::tls::TlsFiles;
use drover_proto::v1::acl_service_client::AclServiceClient;
use drover_proto::v1::alloc_service_client::AllocServiceClient;
use drover_proto::v1::cluster_service_client::ClusterServiceClient;
use drover_proto::v1::deployment_service_client::DeploymentServiceClient;
use drover_proto::v1::eval_service_client::EvalServiceClient;
use drover_proto::v1::event_service_client::EventServiceClient;
use drover_proto::v1::job_service_client::JobServiceClient;
use drover_proto::v1::operator_service_client::OperatorServiceClient;
use drover_proto::v1::search_service_client::SearchServiceClient;
use drover_proto::v1::service_service_client::ServiceServiceClient;
use drover_proto::v1::status_service_client::StatusServiceClient;
use drover_proto::v1::worker_service_client::WorkerServiceClient;
use std::path::PathBuf;
use std::time::Duration;
use tonic::transport::Channel;

/// Where the client commands look for a server unless `--address` or `DROVER_ADDR` say
/// otherwise: the server's default bind address (`ServerConfig::new`), on loopback.
pub const DEFAULT_ADDRESS: &str = "http://127.0.0.1:4647";

/// The environment variable that names the server, like Nomad's `NOMAD_ADDR`.
pub const ADDRESS_ENV: &str = "DROVER_ADDR";

/// How long a server of several may take to show it reaches a leader.
const LEADER_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Asks a server to have the leader answer a read (the server's `forward.rs`).
const CONSISTENCY_HEADER: &str = "drover-consistency";

/// How long connecting may take before the command gives up with a clear error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a call may wait for its answer unless `--timeout` says otherwise: far above
/// any answer a healthy server gives (a committed write, a list of ten thousand nodes), so
/// only a server that accepted the call and then hung runs into it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Answers larger than tonic's 4 MiB default are normal for big clusters (a node list of
/// ten thousand nodes).
const MAX_ANSWER_BYTES: usize = 256 * 1024 * 1024;

/// The options every client command takes.
#[derive(Clone, Debug, clap::Args)]
pub struct ClientArgs {
    /// The server's gRPC address (`http://host:port`; `host:port` is read as http); a
    /// comma-separated list names several servers of one cluster, tried in order
    #[arg(long, global = true, env = ADDRESS_ENV, default_value = DEFAULT_ADDRESS)]
    pub address: String,
    /// How long each call waits for the server's answer (`30s`, `2m`); streams that follow
    /// the cluster (`event stream`) are not cut by it
    #[arg(long, global = true, env = "DROVER_TIMEOUT", default_value = "30s",
          value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// The namespace of the jobs (and their allocations and evaluations) a command acts
    /// on; `*` lists every namespace [default: default]
    #[arg(long, global = true, env = "DROVER_NAMESPACE")]
    pub namespace: Option<String>,
    /// The cluster CA's certificate: talk TLS and trust servers it signed
    #[arg(
        long = "ca-cert",
        global = true,
        env = "DROVER_CACERT",
        value_name = "FILE"
    )]
    pub ca_cert: Option<PathBuf>,
    /// This operator's certificate, for servers that verify incoming connections
    #[arg(
        long = "client-cert",
        global = true,
        env = "DROVER_CLIENT_CERT",
        value_name = "FILE"
    )]
    pub client_cert: Option<PathBuf>,
    /// The key of --client-cert
    #[arg(
        long = "client-key",
        global = true,
        env = "DROVER_CLIENT_KEY",
        value_name = "FILE"
    )]
    pub client_key: Option<PathBuf>,
    /// The ACL token's secret, sent with every call (needed once the cluster has
    /// `acl { enabled = true }`)
    #[arg(
        long,
        global = true,
        env = "DROVER_TOKEN",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

impl ClientArgs {
    /// The TLS files given; servers' certificates are checked for the server role.
    pub fn tls(&self) -> TlsFiles {
        TlsFiles {
            ca_file: self.ca_cert.clone(),
            cert_file: self.client_cert.clone(),
            key_file: self.client_key.clone(),
            verify_server_hostname: true,
        }
    }
}

/// A connection to one drover server, with a typed client per service.
#[derive(Clone, Debug)]
pub struct Client {
    /// Unary calls, each with the deadline and the token.
    channel: BearerChannel,
    /// Long-lived streams, without the deadline; opened on first use.
    streams: BearerChannel,
    /// The same two without the token, for [`Client::with_token`].
    raw: (Channel, Channel),
    address: String,
    /// As the operator gave it (`-namespace`, `DROVER_NAMESPACE`); `None`: not given.
    namespace: Option<String>,
}

impl Client {
    /// Connects at once, so an unreachable or mistyped address fails here with one line
    /// naming it, instead of as an opaque transport error from the first call.
    pub async fn connect(address: &str) -> Result<Client, CliError> {
        Self::connect_with(address, DEFAULT_TIMEOUT, &TlsFiles::default()).await
    }

    /// [`Self::connect`] with a deadline of `timeout` on every unary call, over TLS when
    /// `tls` names a CA. `address` may list several servers separated by commas (as
    /// `DROVER_ADDR` does for a cluster): they are tried in order and the first that
    /// accepts the connection and reaches a leader is used, so a server that is down, or
    /// cut off from its peers (it answers, but can neither lead nor forward), does not stop
    /// the command (any server answers; followers forward to the leader). When none
    /// reaches a leader, the first that connected is used, and says so in its answer.
    pub async fn connect_with(
        address: &str,
        timeout: Duration,
        tls: &TlsFiles,
    ) -> Result<Client, CliError> {
        let addresses: Vec<&str> = address
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let mut failures = Vec::new();
        let mut fallback = None;
        for one in &addresses {
            match Self::connect_one(one, timeout, tls).await {
                Ok(client) if addresses.len() == 1 || client.reaches_a_leader().await => {
                    return Ok(client);
                }
                Ok(client) => {
                    fallback.get_or_insert(client);
                }
                Err(CliError::Connect { address, reason }) if addresses.len() > 1 => {
                    failures.push(format!("{address} ({reason})"));
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(client) = fallback {
            return Ok(client);
        }
        Err(CliError::Connect {
            address: if addresses.is_empty() {
                format!("{address:?}")
            } else {
                addresses.join(",")
            },
            reason: if failures.is_empty() {
                "no server address given".to_string()
            } else {
                format!("no server answers: {}", failures.join("; "))
            },
        })
    }

    /// Whether this server reaches a leader: it is asked who leads with a consistent read,
    /// which it must forward to the leader it knows (or answer as the leader), under a short
    /// deadline. A server cut off from its peers may still name a leader it cannot reach;
    /// every call it took would wait for that leader until its deadline. An answer that is
    /// an error other than UNAVAILABLE or a deadline (a token it wants) says nothing about
    /// the cluster, so that server is not passed over.
    async fn reaches_a_leader(&self) -> bool {
        let mut status = self.status();
        let mut request = tonic::Request::new(drover_proto::v1::LeaderRequest {});
        request.metadata_mut().insert(
            CONSISTENCY_HEADER,
            tonic::metadata::MetadataValue::from_static("consistent"),
        );
        request.set_timeout(LEADER_PROBE_TIMEOUT);
        match tokio::time::timeout(LEADER_PROBE_TIMEOUT, status.leader(request)).await {
            Ok(Ok(answer)) => !answer.get_ref().leader_id.is_empty(),
            Ok(Err(e)) => !matches!(
                e.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
            ),
            Err(_) => false,
        }
    }

    async fn connect_one(
        address: &str,
        timeout: Duration,
        tls: &TlsFiles,
    ) -> Result<Client, CliError> {
        let address = drover_proto::tls::url(address, tls);
        let unreachable = |reason: String| CliError::Connect {
            address: address.clone(),
            reason,
        };
        let endpoint = drover_proto::tls::endpoint(&address, tls)
            .map_err(|e| unreachable(e.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT);
        let streams = endpoint.connect_lazy();
        let channel = endpoint
            .timeout(timeout)
            .connect()
            .await
            .map_err(|e| unreachable(connect_failure(&e, tls)))?;
        Ok(Client {
            channel: BearerChannel::plain(channel.clone()),
            streams: BearerChannel::plain(streams.clone()),
            raw: (channel, streams),
            address,
            namespace: None,
        })
    }

    /// The client presenting the ACL token `token` on every call.
    pub fn with_token(mut self, token: Option<&str>) -> Result<Client, CliError> {
        let bad = |e: drover_proto::bearer::BadCredential| CliError::Usage(format!("--token: {e}"));
        self.channel = BearerChannel::new(self.raw.0.clone(), token).map_err(bad)?;
        self.streams = BearerChannel::new(self.raw.1.clone(), token).map_err(bad)?;
        Ok(self)
    }

    /// The client for the namespace `namespace` (`*`: every namespace, for lists; `None`:
    /// the operator named none, the default one applies).
    pub fn with_namespace(mut self, namespace: Option<&str>) -> Client {
        self.namespace = namespace
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        self
    }

    /// The namespace single-job commands act in; `*` means the default one there.
    pub fn namespace(&self) -> &str {
        match self.namespace.as_deref() {
            None | Some("*") => drover_core::DEFAULT_NAMESPACE,
            Some(ns) => ns,
        }
    }

    /// The namespace the operator named (`-namespace` or `DROVER_NAMESPACE`), if any.
    pub fn named_namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The namespace filter of list requests: empty (every namespace) for `*`.
    pub fn namespace_filter(&self) -> String {
        match self.namespace.as_deref().unwrap_or_default() {
            "*" => String::new(),
            _ => self.namespace().to_string(),
        }
    }

    /// The address connected to, with its scheme.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn jobs(&self) -> JobServiceClient<BearerChannel> {
        JobServiceClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_ANSWER_BYTES)
            .max_encoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn services(&self) -> ServiceServiceClient<BearerChannel> {
        ServiceServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn evals(&self) -> EvalServiceClient<BearerChannel> {
        EvalServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn deployments(&self) -> DeploymentServiceClient<BearerChannel> {
        DeploymentServiceClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn operator(&self) -> OperatorServiceClient<BearerChannel> {
        OperatorServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn workers(&self) -> WorkerServiceClient<BearerChannel> {
        WorkerServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn search(&self) -> SearchServiceClient<BearerChannel> {
        SearchServiceClient::new(self.channel.clone())
    }

    pub fn status(&self) -> StatusServiceClient<BearerChannel> {
        StatusServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    /// The Raft membership (answered by the leader).
    pub fn cluster(&self) -> ClusterServiceClient<BearerChannel> {
        ClusterServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    pub fn acl(&self) -> AclServiceClient<BearerChannel> {
        AclServiceClient::new(self.channel.clone())
    }

    /// Stopping and restarting allocations.
    pub fn allocs(&self) -> AllocServiceClient<BearerChannel> {
        AllocServiceClient::new(self.channel.clone())
    }

    /// Task logs, which `-f` follows for as long as the operator wants: no deadline.
    pub fn alloc_logs(&self) -> AllocServiceClient<BearerChannel> {
        AllocServiceClient::new(self.streams.clone())
    }

    /// The event stream follows the cluster for as long as the operator wants: no deadline.
    pub fn events(&self) -> EventServiceClient<BearerChannel> {
        EventServiceClient::new(self.streams.clone()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }
}

/// `host:port` without a scheme is taken as plain http, as operators type it.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_without_a_scheme_are_http() {
        let cases = [
            ("127.0.0.1:4647", "http://127.0.0.1:4647"),
            ("http://10.0.0.1:80", "http://10.0.0.1:80"),
            (" https://drover:4647 ", "https://drover:4647"),
        ];
        for (given, want) in cases {
            assert_eq!(
                drover_proto::tls::url(given, &TlsFiles::default()),
                want,
                "{given:?}"
            );
        }
    }

    /// The client's default must be where a default server listens.
    #[test]
    fn default_address_is_the_server_default_bind() {
        let server = drover_server::ServerConfig::new("unused");
        assert_eq!(DEFAULT_ADDRESS, format!("http://{}", server.bind_addr));
    }
}
