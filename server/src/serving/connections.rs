//! The open connections of one listener, and the accept loop that admits them.
//!
//! A connection costs a file descriptor whether or not it ever sends a request, so a
//! client that opens many and sends nothing (or only the HTTP/2 preface) could hold every
//! descriptor the process has. Three rules keep the listener serving:
//!
//! - **A cap** ([`ConnectionLimits::max`]). At the cap, a new connection takes the place of
//!   the one that has done least: one that never carried a request (oldest first), else
//!   the one idle longest; a connection with a request in flight is never evicted. When
//!   every connection is busy the newcomer is closed, with one log line per second saying
//!   so.
//! - **A handshake timeout**: a connection that has not carried a request within it is
//!   closed. **An idle timeout**: one with no request in flight for that long is closed.
//!   (HTTP/2 keepalive pings, set on the listener, close connections whose peer is gone.)
//! - **No spinning on EMFILE**: when accepting fails for lack of descriptors, the loop
//!   evicts what it can and backs off (10 ms doubling to 1 s) instead of retrying at once.
//!
//! Requests are counted by [`super::activity`], which finds a request's connection by the
//! peer address tonic records for it.

use crate::log_limit::LogLimit;
use futures::task::AtomicWaker;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Bounds on one listener's connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max: usize,
    /// How long a connection may stay open before its first request.
    pub handshake_timeout: Duration,
    /// How long a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
}

/// Connections killed but not yet closed by their server: the accept loop waits rather
/// than let descriptors run past the cap by more than this.
const CLOSING_SLACK: usize = 64;
/// How often timeouts are checked.
const SWEEP_EVERY: Duration = Duration::from_millis(500);
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the accept loop and a connection share: whether it has been told to close.
#[derive(Debug, Default)]
struct Kill {
    killed: AtomicBool,
    read: AtomicWaker,
    write: AtomicWaker,
}

impl Kill {
    fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.read.wake();
        self.write.wake();
    }

    fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

#[derive(Debug)]
struct Entry {
    accepted: Instant,
    requests: u64,
    in_flight: u32,
    last_active: Instant,
    kill: Arc<Kill>,
}

impl Entry {
    /// The order connections are evicted in: never used before used, then least recently
    /// active first. `None`: never evicted (a request is in flight, or already closing).
    fn eviction_rank(&self) -> Option<(bool, Instant)> {
        (self.in_flight == 0 && !self.kill.is_killed())
            .then_some((self.requests > 0, self.last_active))
    }
}

/// One listener's open connections.
#[derive(Debug)]
pub struct Connections {
    /// The listener's name in log lines (`api`, `raft`).
    name: &'static str,
    limits: ConnectionLimits,
    table: Mutex<HashMap<SocketAddr, Entry>>,
    closed: Notify,
    /// "Limit reached" is logged once a second at most.
    full_log: LogLimit,
}

impl Connections {
    /// A table for the listener called `name`, with a task that closes connections past
    /// their timeouts for as long as the table lives.
    pub fn new(name: &'static str, limits: ConnectionLimits) -> Arc<Self> {
        let conns = Arc::new(Self {
            name,
            limits,
            table: Mutex::new(HashMap::new()),
            closed: Notify::new(),
            full_log: LogLimit::new(Duration::from_secs(1)),
        });
        let weak = Arc::downgrade(&conns);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            loop {
                tick.tick().await;
                let Some(conns) = weak.upgrade() else { return };
                conns.sweep(Instant::now());
            }
        });
        conns
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Entry>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().len()
    }

    /// Closes connections past the handshake or idle timeout at `now`.
    pub fn sweep(&self, now: Instant) {
        let table = self.lock();
        for entry in table.values() {
            let silent = entry.requests == 0
                && now.duration_since(entry.accepted) >= self.limits.handshake_timeout;
            let idle = entry.in_flight == 0
                && now.duration_since(entry.last_active) >= self.limits.idle_timeout;
            if (silent || idle) && !entry.kill.is_killed() {
                tracing::debug!(
                    listener = self.name,
                    silent,
                    idle,
                    "closing a connection past its timeout"
                );
                entry.kill.kill();
            }
        }
    }

    /// Admits the connection from `peer`, evicting the least used one at the cap; `None`
    /// (the connection is to be closed) when every open one is busy.
    fn admit(self: &Arc<Self>, io: TcpStream, peer: SocketAddr) -> Option<Tracked> {
        let mut table = self.lock();
        if table.len() >= self.limits.max {
            let victim = table
                .values()
                .filter_map(|e| e.eviction_rank().map(|r| (r, e.kill.clone())))
                .min_by_key(|(r, _)| *r);
            match victim {
                Some((_, kill)) => kill.kill(),
                None => {
                    drop(table);
                    self.warn_full(peer);
                    return None;
                }
            }
        }
        let now = Instant::now();
        let kill = Arc::new(Kill::default());
        table.insert(
            peer,
            Entry {
                accepted: now,
                requests: 0,
                in_flight: 0,
                last_active: now,
                kill: kill.clone(),
            },
        );
        Some(Tracked {
            io,
            kill,
            peer,
            table: Arc::downgrade(self),
        })
    }

    fn warn_full(&self, peer: SocketAddr) {
        if let Some(not_logged) = self.full_log.allow() {
            tracing::warn!(
                listener = self.name,
                max_connections = self.limits.max,
                %peer,
                refused_since_last_line = not_logged,
                "connection limit reached: every open connection is busy, refusing new ones (limits.max_connections)"
            );
        }
    }

    /// A request began on the connection from `peer`.
    pub fn request_started(&self, peer: SocketAddr) {
        if let Some(e) = self.lock().get_mut(&peer) {
            e.requests += 1;
            e.in_flight += 1;
            e.last_active = Instant::now();
        }
    }

    /// A request on the connection from `peer` finished (its response ended or was
    /// dropped).
    pub fn request_ended(&self, peer: SocketAddr) {
        if let Some(e) = self.lock().get_mut(&peer) {
            e.in_flight = e.in_flight.saturating_sub(1);
            e.last_active = Instant::now();
        }
    }

    fn evict_one(&self) -> bool {
        let table = self.lock();
        let victim = table
            .values()
            .filter_map(|e| e.eviction_rank().map(|r| (r, e.kill.clone())))
            .min_by_key(|(r, _)| *r);
        victim.is_some_and(|(_, kill)| {
            kill.kill();
            true
        })
    }

    /// The connections `listener` accepts, admitted under these limits, each with Nagle's
    /// algorithm off: tonic sets `TCP_NODELAY` only on listeners it binds itself, and with
    /// Nagle on a small response written while the previous one is unacknowledged waits for
    /// the peer's delayed ACK, about 40 ms (it was the whole tail of the latency bench).
    pub fn accept(
        self: Arc<Self>,
        listener: TcpListener,
    ) -> impl tokio_stream::Stream<Item = io::Result<Tracked>> {
        futures::stream::unfold((self, listener), |(conns, listener)| async move {
            let mut backoff = BACKOFF_MIN;
            loop {
                while conns.open() >= conns.limits.max + CLOSING_SLACK {
                    let _ =
                        tokio::time::timeout(Duration::from_millis(100), conns.closed.notified())
                            .await;
                }
                match listener.accept().await {
                    Ok((io, peer)) => {
                        backoff = BACKOFF_MIN;
                        if let Err(e) = io.set_nodelay(true) {
                            tracing::debug!(error = %e, "cannot turn Nagle off on a connection");
                        }
                        if let Some(tracked) = conns.admit(io, peer) {
                            return Some((Ok(tracked), (conns, listener)));
                        }
                    }
                    Err(e) if out_of_descriptors(&e) => {
                        let evicted = conns.evict_one();
                        tracing::warn!(
                            listener = conns.name,
                            error = %e,
                            open = conns.open(),
                            evicted,
                            backoff_ms = backoff.as_millis() as u64,
                            "out of file descriptors: backing off before accepting again"
                        );
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                    Err(e) => tracing::debug!(listener = conns.name, error = %e, "accept failed"),
                }
            }
        })
    }
}

fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == nix::libc::EMFILE || code == nix::libc::ENFILE
    )
}

/// An accepted connection: the stream itself, closed with an error once the table kills
/// it, and removed from the table when dropped.
#[derive(Debug)]
pub struct Tracked {
    io: TcpStream,
    kill: Arc<Kill>,
    peer: SocketAddr,
    table: Weak<Connections>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(conns) = self.table.upgrade() {
            let mut table = conns.lock();
            if table
                .get(&self.peer)
                .is_some_and(|e| Arc::ptr_eq(&e.kill, &self.kill))
            {
                table.remove(&self.peer);
            }
            drop(table);
            conns.closed.notify_waiters();
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection closed by the server's limits",
    )
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.kill.read.register(cx.waker());
        if self.kill.is_killed() {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.kill.write.register(cx.waker());
        if self.kill.is_killed() {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.kill.is_killed() {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The same connect info a plain `TcpStream` gives, so `remote_addr()` and
/// `peer_certs()` work on requests as before.
impl Connected for Tracked {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    fn limits(max: usize) -> ConnectionLimits {
        ConnectionLimits {
            max,
            handshake_timeout: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(3600),
        }
    }

    /// A listener admitting under `limits`, and its table.
    async fn listen(
        limits: ConnectionLimits,
    ) -> (
        SocketAddr,
        Arc<Connections>,
        tokio::sync::mpsc::UnboundedReceiver<Tracked>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Connections::new("test", limits);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let incoming = conns.clone().accept(listener);
        tokio::spawn(async move {
            let mut incoming = std::pin::pin!(incoming);
            while let Some(Ok(t)) = incoming.next().await {
                if tx.send(t).is_err() {
                    return;
                }
            }
        });
        (addr, conns, rx)
    }

    async fn is_closed(t: &mut Tracked) -> bool {
        use tokio::io::AsyncReadExt;
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), t.read(&mut b)).await,
            Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        let (addr, _conns, mut rx) = listen(limits(4)).await;
        let _client = TcpStream::connect(addr).await.unwrap();
        let accepted = rx.recv().await.unwrap();
        assert!(
            accepted.io.nodelay().unwrap(),
            "TCP_NODELAY is off on an accepted connection"
        );
    }

    #[tokio::test]
    async fn at_the_cap_the_least_used_connection_makes_room() {
        let (addr, conns, mut rx) = listen(limits(2)).await;
        let _a = TcpStream::connect(addr).await.unwrap();
        let mut first = rx.recv().await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let second = rx.recv().await.unwrap();
        conns.request_started(second.peer);
        let _c = TcpStream::connect(addr).await.unwrap();
        let _third = rx.recv().await.unwrap();
        assert!(
            is_closed(&mut first).await,
            "the never-used connection made room"
        );
        conns.request_ended(second.peer);
        assert!(
            !second.kill.is_killed(),
            "a used connection outranks an unused one"
        );
        drop(first);
        assert_eq!(conns.open(), 2);
    }

    #[tokio::test]
    async fn busy_connections_are_never_evicted() {
        let (addr, conns, mut rx) = listen(limits(1)).await;
        let _a = TcpStream::connect(addr).await.unwrap();
        let busy = rx.recv().await.unwrap();
        conns.request_started(busy.peer);
        let mut refused = TcpStream::connect(addr).await.unwrap();
        use tokio::io::AsyncReadExt;
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), refused.read(&mut b))
            .await
            .expect("the newcomer is closed")
            .unwrap_or(0);
        assert_eq!(n, 0, "closed without a byte");
        assert!(!busy.kill.is_killed());
    }

    #[tokio::test]
    async fn silent_and_idle_connections_are_closed_by_the_sweep() {
        let (addr, conns, mut rx) = listen(ConnectionLimits {
            max: 10,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        })
        .await;
        let _a = TcpStream::connect(addr).await.unwrap();
        let mut silent = rx.recv().await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let mut used = rx.recv().await.unwrap();
        conns.request_started(used.peer);
        let start = Instant::now();
        conns.sweep(start + Duration::from_secs(11));
        assert!(
            is_closed(&mut silent).await,
            "no request within the handshake timeout"
        );
        assert!(!used.kill.is_killed(), "a request in flight keeps it open");
        conns.request_ended(used.peer);
        conns.sweep(start + Duration::from_secs(30));
        assert!(!used.kill.is_killed(), "not idle long enough yet");
        conns.sweep(Instant::now() + Duration::from_secs(61));
        assert!(is_closed(&mut used).await, "idle past the idle timeout");
    }
}
