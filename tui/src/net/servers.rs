//! The servers the console was given (`--address` / `DROVER_ADDR`, comma-separated, as the
//! CLI takes them) and moving between them. Any server of a cluster answers, so when the
//! one the console follows goes away the console carries on with the next that answers;
//! only when none does is the connection lost.
//!
//! Each server has its own channels, connected on first use: calls go to one server at a
//! time, never balanced over several, so a server that died cannot take a share of the
//! calls (tonic's balanced channel kept routing to a killed leader for tens of seconds).

use crate::error::ConsoleError;
use drover_proto::bearer::BearerChannel as Channel;
use drover_proto::tls::TlsFiles;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Longest wait for a unary call before it counts as a lost connection.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a server to accept a connection: a server that is down refuses at
/// once, but one behind a dead link or a full backlog says nothing.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How much of one answer the server may send before the console acknowledges it. HTTP/2's
/// default (64 KiB) holds a page of allocations (a few hundred KiB) back for several round
/// trips; a load reads eight such pages at once, hence the connection's eight.
const ANSWER_WINDOW: u32 = 1 << 20;

/// One server the console was given.
#[derive(Clone, Debug)]
pub struct Server {
    /// Its URL as it is dialed: with `https://` when TLS is on, whatever was typed.
    pub url: String,
    /// For unary calls, which time out.
    pub(crate) unary: Channel,
    /// For streams (events, logs), which must not.
    pub(crate) stream: Channel,
}

/// Invariant: `list` is not empty and `current` is an index into it.
#[derive(Clone, Debug)]
pub struct Servers {
    list: Arc<[Server]>,
    /// What the console was given to talk TLS with, which failures are read by.
    tls: Arc<TlsFiles>,
    /// The server the console follows now; calls try it first.
    current: Arc<AtomicUsize>,
}

impl Servers {
    /// The servers of `address` (one, or several comma-separated), with `tls` applied and
    /// `token` presented on every call. Nothing is dialed yet.
    pub fn new(address: &str, tls: &TlsFiles, token: Option<&str>) -> Result<Self, ConsoleError> {
        let mut listed: Vec<&str> = address
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        if listed.is_empty() {
            // Nothing to try: let the address itself be refused, naming it.
            listed.push(address);
        }
        let with_token =
            |channel| Channel::new(channel, token).map_err(|e| ConsoleError::Token(e.to_string()));
        let list = listed
            .into_iter()
            .map(|one| {
                let endpoint = drover_proto::tls::endpoint(one, tls)
                    .map_err(|source| ConsoleError::Address {
                        address: one.to_owned(),
                        source,
                    })?
                    .connect_timeout(CONNECT_TIMEOUT)
                    .initial_stream_window_size(Some(ANSWER_WINDOW))
                    .initial_connection_window_size(Some(ANSWER_WINDOW * 8));
                Ok(Server {
                    url: drover_proto::tls::url(one, tls),
                    unary: with_token(endpoint.clone().timeout(CALL_TIMEOUT).connect_lazy())?,
                    stream: with_token(endpoint.connect_lazy())?,
                })
            })
            .collect::<Result<Vec<_>, ConsoleError>>()?;
        Ok(Servers {
            list: list.into(),
            tls: Arc::new(tls.clone()),
            current: Arc::default(),
        })
    }

    /// The servers as they are dialed, comma-separated: what to name them by before one
    /// answers (with the scheme TLS gives them, whatever was typed).
    pub fn address(&self) -> String {
        let urls: Vec<&str> = self.list.iter().map(|s| s.url.as_str()).collect();
        urls.join(",")
    }

    /// What the console was given to talk TLS with.
    pub fn tls(&self) -> &TlsFiles {
        &self.tls
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every server, in the order given.
    pub fn all(&self) -> &[Server] {
        &self.list
    }

    /// The server the console follows now, with its place in the list.
    pub fn current(&self) -> (usize, &Server) {
        let at = self.current.load(Ordering::Relaxed) % self.list.len();
        (at, &self.list[at])
    }

    /// Makes the server after `at` (in the order given, wrapping) the one to follow, and
    /// returns it.
    pub(crate) fn move_past(&self, at: usize) -> &Server {
        let next = (at + 1) % self.list.len();
        self.current.store(next, Ordering::Relaxed);
        &self.list[next]
    }

    /// The current server, then the others in the order given after it.
    fn in_turn(&self) -> impl Iterator<Item = &Server> {
        let (at, _) = self.current();
        (0..self.list.len()).map(move |i| &self.list[(at + i) % self.list.len()])
    }

    /// Runs `call` on the current server's unary channel, then on the next servers' for as
    /// long as the answer says only that the server was not reached (or, with `move_on`,
    /// anything else it accepts). The last answer is returned.
    pub(crate) async fn call<T, F, Fut>(&self, call: F) -> Result<T, tonic::Status>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        self.call_until(call, |_| false).await
    }

    /// [`Servers::call`], moving on also from answers `move_on` accepts (a worker command
    /// that names another server's worker, which only that server knows).
    pub(crate) async fn call_until<T, F, Fut>(
        &self,
        call: F,
        move_on: impl Fn(&tonic::Status) -> bool,
    ) -> Result<T, tonic::Status>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        self.in_turn_on(|s| &s.unary, call, move_on).await
    }

    /// [`Servers::call`] on the servers' stream channels, for a stream that follows for
    /// as long as it is read (task logs).
    pub(crate) async fn open<T, F, Fut>(&self, open: F) -> Result<T, tonic::Status>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        self.in_turn_on(|s| &s.stream, open, |_| false).await
    }

    /// Runs `call` on each server's `channel` in turn (see [`Servers::call_until`]).
    async fn in_turn_on<T, F, Fut>(
        &self,
        channel: impl Fn(&Server) -> &Channel,
        mut call: F,
        move_on: impl Fn(&tonic::Status) -> bool,
    ) -> Result<T, tonic::Status>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        let mut last = None;
        for server in self.in_turn() {
            match call(channel(server).clone()).await {
                Err(status) if unreached(&status) || move_on(&status) => last = Some(status),
                answer => return answer,
            }
        }
        Err(last.unwrap_or_else(|| tonic::Status::unavailable("no server was given")))
    }
}

/// Whether a failed call says only that its server was not reached, or went away or
/// stopped answering before it answered: another server of the cluster may well answer
/// the same call. A refusal (a bad token, a missing object, a bad argument) is the cluster's
/// answer, which every server would give.
pub(crate) fn unreached(status: &tonic::Status) -> bool {
    use tonic::Code;
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded => true,
        // A connection that broke mid-call, or a deadline the channel enforced.
        Code::Unknown | Code::Cancelled => {
            let mut cause = std::error::Error::source(status);
            while let Some(e) = cause {
                if e.is::<tonic::transport::Error>() {
                    return true;
                }
                cause = e.source();
            }
            status.message().contains("Timeout expired")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each listed server is kept with the URL it is dialed at (with TLS, always https:
    /// `tests/tls_errors.rs` has that case, which needs a CA file).
    /// Channels are made on a runtime, though nothing is dialed yet.
    #[tokio::test]
    async fn every_listed_server_is_kept_with_its_url() {
        let cases: [(&str, &[&str]); 3] = [
            ("127.0.0.1:4647", &["http://127.0.0.1:4647"]),
            (
                "10.0.0.1:4647, http://10.0.0.2:4647,",
                &["http://10.0.0.1:4647", "http://10.0.0.2:4647"],
            ),
            ("https://a:1,b:2", &["https://a:1", "http://b:2"]),
        ];
        for (address, want) in cases {
            let servers = match Servers::new(address, &TlsFiles::default(), None) {
                Ok(s) => s,
                Err(e) => panic!("{address}: {e}"),
            };
            let urls: Vec<&str> = servers.all().iter().map(|s| s.url.as_str()).collect();
            assert_eq!(urls, want, "{address}");
            assert_eq!(servers.current().1.url, want[0]);
        }
    }

    /// Only answers that say nothing of the call itself move it to another server.
    #[test]
    fn only_unreached_servers_are_moved_past() {
        use tonic::Status;
        let cases = [
            (Status::unavailable("tcp connect error"), true),
            (Status::deadline_exceeded("late"), true),
            (Status::cancelled("Timeout expired"), true),
            (Status::not_found("job web not found"), false),
            (Status::permission_denied("lacks read-job"), false),
            (Status::unknown("a bug"), false),
        ];
        for (status, moves) in cases {
            assert_eq!(unreached(&status), moves, "{status:?}");
        }
    }
}
