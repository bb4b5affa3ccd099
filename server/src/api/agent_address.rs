//! Where a registering node says its agent's endpoint is, checked before servers ever call
//! it (threat model: ARCHITECTURE.md, "Trust").
//!
//! The address is only ever changed by a registration the node's own secret (or a join
//! credential, for a new node) proves, and under TLS the agent's certificate must name the
//! node before a server talks to it. Here the server refuses what it can tell is not the
//! node's own: an address that is not `http(s)://host:port`, an unspecified or multicast
//! address, an address outside the interfaces the node reports, and a loopback address
//! from a node that registered from another host (it would point the server at itself).

use drover_proto::{AGENT_ADDRESS_ATTRIBUTE, AGENT_INTERFACES_ATTRIBUTE};
use std::collections::BTreeMap;
use std::net::IpAddr;
use tonic::Status;

fn refused(address: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!(
        "attributes[{AGENT_ADDRESS_ATTRIBUTE}]: {address:?} {why}"
    ))
}

/// OK when the agent address in `attributes` (if any) can be the node's own, as seen from
/// `peer`, the address the registration came from (`None`: not known, or forwarded by
/// another server).
pub fn check(attributes: &BTreeMap<String, String>, peer: Option<IpAddr>) -> Result<(), Status> {
    let Some(address) = attributes.get(AGENT_ADDRESS_ATTRIBUTE) else {
        return Ok(());
    };
    let rest = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
        .ok_or_else(|| refused(address, "is not an http:// or https:// address"))?;
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| refused(address, "has no port"))?;
    if port.parse::<u16>().is_err() {
        return Err(refused(address, "has no valid port"));
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.contains(['/', '@', '?', '#']) {
        return Err(refused(address, "is not host:port"));
    }
    let Ok(ip) = host.parse::<IpAddr>() else {
        // A name: nothing here can tell whose it is; TLS (the certificate names the node)
        // is what binds it.
        return Ok(());
    };
    if ip.is_unspecified() || ip.is_multicast() {
        return Err(refused(address, "is not an address a server can reach"));
    }
    if ip.is_loopback() && peer.is_some_and(|p| !p.is_loopback()) {
        return Err(refused(
            address,
            format_args!(
                "is loopback, but the node registered from {}",
                peer.unwrap_or(ip)
            ),
        ));
    }
    if let Some(list) = attributes.get(AGENT_INTERFACES_ATTRIBUTE) {
        let own = list
            .split(',')
            .filter_map(|a| a.trim().parse::<IpAddr>().ok())
            .any(|a| a == ip);
        if !own {
            return Err(refused(
                address,
                format_args!("is not on the node's own interfaces ({list})"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_addresses_must_be_the_nodes_own() {
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let remote: IpAddr = "10.0.0.9".parse().unwrap();
        let rows: [(&str, Option<&str>, Option<IpAddr>, Option<&str>); 13] = [
            ("http://127.0.0.1:4000", None, Some(local), None),
            (
                "https://10.0.0.9:4648",
                Some("10.0.0.9,127.0.0.1"),
                Some(remote),
                None,
            ),
            (
                "http://agent.example:4648",
                Some("10.0.0.9"),
                Some(remote),
                None,
            ),
            ("http://[::1]:4000", None, None, None),
            (
                "http://127.0.0.1:4000",
                None,
                Some(remote),
                Some("is loopback, but the node registered from 10.0.0.9"),
            ),
            (
                "http://10.0.0.7:4648",
                Some("10.0.0.9,127.0.0.1"),
                Some(remote),
                Some("is not on the node's own interfaces"),
            ),
            (
                "http://0.0.0.0:4648",
                None,
                None,
                Some("is not an address a server can reach"),
            ),
            (
                "http://224.0.0.1:4648",
                None,
                None,
                Some("is not an address a server can reach"),
            ),
            (
                "ftp://10.0.0.9:21",
                None,
                None,
                Some("is not an http:// or https:// address"),
            ),
            ("http://10.0.0.9", None, None, Some("has no port")),
            (
                "http://10.0.0.9:99999",
                None,
                None,
                Some("has no valid port"),
            ),
            (
                "http://user@10.0.0.9:80",
                None,
                None,
                Some("is not host:port"),
            ),
            ("http://:80", None, None, Some("is not host:port")),
        ];
        for (address, interfaces, peer, want) in rows {
            let mut attributes = BTreeMap::new();
            attributes.insert(AGENT_ADDRESS_ATTRIBUTE.to_string(), address.to_string());
            if let Some(list) = interfaces {
                attributes.insert(AGENT_INTERFACES_ATTRIBUTE.to_string(), list.to_string());
            }
            let got = check(&attributes, peer);
            match want {
                None => assert!(got.is_ok(), "{address}: {got:?}"),
                Some(why) => {
                    let status = got.expect_err(address);
                    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{address}");
                    assert!(
                        status.message().contains(why),
                        "{address}: {}",
                        status.message()
                    );
                }
            }
        }
        assert!(
            check(&BTreeMap::new(), Some(remote)).is_ok(),
            "no endpoint, nothing to check"
        );
    }
}
