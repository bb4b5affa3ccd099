//! The background tasks that talk to the servers. They never touch the screen: everything
//! they learn goes to the state as an [`Update`] over a channel, and commands come in over
//! another.
//!
//! The console may be given several servers of one cluster ([`Servers`]). It follows one
//! ([`follow`]): loads the cluster from its read RPCs, then applies its event stream. When
//! that server goes away the follower moves on to the next at once and resumes the stream
//! there from the last index it applied, with no reload; only when no listed server
//! answers does it say the connection is lost, and it retries with exponential backoff.
//!
//! Public for the runtime ([`crate::run`]) and for tests that drive an
//! [`App`](crate::app::App) against stand-in servers, and for `drover bench`'s timed load.

mod commands;
mod follow;
pub mod load;
pub(crate) mod logs;
mod permissions;
mod poll;
mod servers;

pub use commands::execute;
pub use follow::follow;
pub(crate) use permissions::token_permissions;
pub use servers::{Server, Servers};

/// Answers far above tonic's 4 MiB default are normal for big clusters: the node list of
/// ten thousand nodes, the allocations of a large job.
const MAX_ANSWER_BYTES: usize = 256 * 1024 * 1024;

/// Why a call failed, for the status bar and the header. A failed connection reads as
/// what is wrong (a TLS misconfiguration named, knowing what the console was given as
/// `tls`, or the innermost cause, "Connection refused", rather than tonic's generic
/// "transport error"), worded as the CLI words it; a server's refusal reads as the
/// server's message.
fn describe(status: &tonic::Status, tls: &drover_proto::tls::TlsFiles) -> String {
    let text = if std::error::Error::source(status).is_some() {
        drover_proto::tls::describe_connect_error_given(status, tls)
    } else {
        status.message().to_owned()
    };
    match text.lines().next() {
        Some(line) if !line.is_empty() => line.to_owned(),
        _ => format!("{:?}", status.code()).to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrong address must read as such, not as a generic transport error.
    #[tokio::test]
    async fn an_address_nobody_listens_on_is_described_by_its_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = listener.local_addr().expect("its address").to_string();
        drop(listener);
        let servers = Servers::new(&address, &Default::default(), None).expect("a valid address");
        let status = load::snapshot(&servers.current().1.unary)
            .await
            .expect_err("nobody listens");
        let reason = describe(&status, servers.tls()).to_lowercase();
        assert!(reason.contains("refused"), "{reason}");
    }
}
