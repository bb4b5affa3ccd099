//! A listener whose address is taken: said once, with the flag that moves it, instead of
//! the chain of errors a start failure carries ("server does not start: cannot bind ...:
//! Address already in use: Address already in use").

use drover_server::StartError;
use drover_server::api::ServeError;

/// Which listener could not bind, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConflict {
    /// The flag that sets that listener's address.
    pub flag: &'static str,
    pub addr: String,
}

impl std::fmt::Display for PortConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let PortConflict { flag, addr } = self;
        write!(
            f,
            "address {addr} ({flag}) is already in use: another drover or another program \
             listens there; pick a free one, e.g. {flag} 127.0.0.1:0"
        )?;
        if *flag == "--metrics-addr" {
            write!(f, ", or turn metrics off with --no-metrics")?;
        }
        if *flag == "--http-addr" {
            write!(f, ", or turn the HTTP API off with --http-addr none")?;
        }
        Ok(())
    }
}

/// The port conflict somewhere in `error`'s chain, if that is why it failed.
pub fn port_conflict(error: &anyhow::Error) -> Option<PortConflict> {
    error.chain().find_map(|cause| {
        if let Some(ServeError::Http(drover_http::HttpError::Bind { addr, source })) =
            cause.downcast_ref::<ServeError>()
        {
            return in_use(source).then(|| PortConflict {
                flag: "--http-addr",
                addr: addr.clone(),
            });
        }
        if let Some(ServeError::Bind { addr, source }) = cause.downcast_ref::<ServeError>() {
            return in_use(source).then(|| PortConflict {
                flag: "--bind",
                addr: addr.clone(),
            });
        }
        if let Some(StartError::Bind {
            listener,
            addr,
            source,
        }) = cause.downcast_ref::<StartError>()
        {
            let flag = match *listener {
                "raft" => "--raft-addr",
                "metrics" => "--metrics-addr",
                _ => "--bind",
            };
            return in_use(source).then(|| PortConflict {
                flag,
                addr: addr.clone(),
            });
        }
        None
    })
}

fn in_use(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::AddrInUse
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;
    use std::io::{Error, ErrorKind};

    fn serve_bind(kind: ErrorKind) -> anyhow::Error {
        Err::<(), _>(ServeError::Bind {
            addr: "127.0.0.1:4647".into(),
            source: Error::from(kind),
        })
        .context("gRPC API does not start")
        .expect_err("an error")
    }

    fn start_bind(listener: &'static str, kind: ErrorKind) -> anyhow::Error {
        Err::<(), _>(StartError::Bind {
            listener,
            addr: "127.0.0.1:4646".into(),
            source: Error::from(kind),
        })
        .context("server does not start")
        .expect_err("an error")
    }

    #[test]
    fn conflicts_name_the_flag_that_moves_the_listener() {
        let cases = [
            (serve_bind(ErrorKind::AddrInUse), Some("--bind")),
            (
                start_bind("raft", ErrorKind::AddrInUse),
                Some("--raft-addr"),
            ),
            (
                start_bind("metrics", ErrorKind::AddrInUse),
                Some("--metrics-addr"),
            ),
            (serve_bind(ErrorKind::PermissionDenied), None),
            (anyhow::anyhow!("something else"), None),
        ];
        for (error, want) in cases {
            assert_eq!(port_conflict(&error).map(|c| c.flag), want, "for {error:#}");
        }
    }

    #[test]
    fn the_message_says_the_cause_once_with_a_hint() {
        let conflict = port_conflict(&serve_bind(ErrorKind::AddrInUse)).expect("a conflict");
        insta::assert_snapshot!(conflict.to_string(), @"address 127.0.0.1:4647 (--bind) is already in use: another drover or another program listens there; pick a free one, e.g. --bind 127.0.0.1:0");
        let conflict =
            port_conflict(&start_bind("metrics", ErrorKind::AddrInUse)).expect("a conflict");
        insta::assert_snapshot!(conflict.to_string(), @"address 127.0.0.1:4646 (--metrics-addr) is already in use: another drover or another program listens there; pick a free one, e.g. --metrics-addr 127.0.0.1:0, or turn metrics off with --no-metrics");
    }
}
