//! The IP network functions: `cidrhost`, `cidrnetmask`, `cidrsubnet` and `cidrsubnets`, on
//! IPv4 and IPv6 prefixes as Nomad's HCL2 (and Terraform) compute them. Addresses are
//! held as 128-bit numbers with the family's width beside them; a prefix's host bits are
//! cleared before it is used, as theirs are.

use super::{Result, num, s};
use hcl::Value;
use hcl::eval::FuncArgs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A network: its first address, its prefix length and its family's width in bits.
#[derive(Clone, Copy, Debug)]
struct Net {
    base: u128,
    len: u32,
    width: u32,
}

impl Net {
    fn parse(function: &str, text: &str) -> std::result::Result<Net, String> {
        let bad = || format!("{function}: {text:?} is not an address prefix (like 10.0.0.0/16)");
        let (addr, len) = text.split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let len: u32 = len.parse().map_err(|_| bad())?;
        let (bits, width) = match addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        if len > width {
            return Err(bad());
        }
        Ok(Net {
            base: bits & !host_mask(len, width),
            len,
            width,
        })
    }

    /// How many addresses the network holds, as a power of two.
    fn host_bits(&self) -> u32 {
        self.width - self.len
    }

    fn address(&self, bits: u128) -> String {
        if self.width == 32 {
            Ipv4Addr::from(bits as u32).to_string()
        } else {
            Ipv6Addr::from(bits).to_string()
        }
    }

    fn prefix(&self) -> String {
        format!("{}/{}", self.address(self.base), self.len)
    }

    /// The `netnum`th subnet `newbits` longer than this network.
    fn subnet(
        &self,
        function: &str,
        newbits: f64,
        netnum: f64,
    ) -> std::result::Result<Net, String> {
        let newbits = whole(function, "newbits", newbits)?;
        if newbits < 0 || self.len as i128 + newbits > self.width as i128 {
            return Err(format!(
                "{function}: insufficient address space to extend prefix of {} by {newbits}",
                self.len
            ));
        }
        let newbits = newbits as u32;
        let netnum = whole(function, "netnum", netnum)?;
        if netnum < 0 || (newbits < 128 && netnum as u128 >= 1u128 << newbits) {
            return Err(format!(
                "{function}: prefix extension of {newbits} does not accommodate a subnet numbered {netnum}"
            ));
        }
        let len = self.len + newbits;
        let shift = self.width - len;
        let offset = if shift >= 128 {
            0
        } else {
            (netnum as u128) << shift
        };
        Ok(Net {
            base: self.base | offset,
            len,
            width: self.width,
        })
    }
}

/// The mask of the host bits of a `len`-bit prefix in a `width`-bit address.
fn host_mask(len: u32, width: u32) -> u128 {
    let host = width - len;
    if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    }
}

/// A whole number argument, named in the error when it is not one.
fn whole(function: &str, name: &str, n: f64) -> std::result::Result<i128, String> {
    if n.fract() != 0.0 || !n.is_finite() || n.abs() > 1e30 {
        return Err(format!("{function}: {name} {n} is not a whole number"));
    }
    Ok(n as i128)
}

/// `cidrhost(prefix, hostnum)`: the `hostnum`th address of the network; a negative
/// number counts back from its last address.
pub(super) fn cidrhost(a: FuncArgs) -> Result {
    let net = Net::parse("cidrhost", s(&a[0]))?;
    let hostnum = whole("cidrhost", "hostnum", num(&a[1]))?;
    let size: i128 = if net.host_bits() >= 127 {
        i128::MAX
    } else {
        1i128 << net.host_bits()
    };
    let index = if hostnum < 0 { size + hostnum } else { hostnum };
    if index < 0 || index >= size {
        return Err(format!(
            "cidrhost: prefix of {} does not accommodate a host numbered {hostnum}",
            net.len
        ));
    }
    Ok(net.address(net.base | index as u128).into())
}

/// `cidrnetmask(prefix)`: an IPv4 prefix's mask in dotted form.
pub(super) fn cidrnetmask(a: FuncArgs) -> Result {
    let net = Net::parse("cidrnetmask", s(&a[0]))?;
    if net.width != 32 {
        return Err(format!(
            "cidrnetmask: {:?} is IPv6; only IPv4 networks have a netmask",
            s(&a[0])
        ));
    }
    let mask = !host_mask(net.len, 32) & u128::from(u32::MAX);
    Ok(net.address(mask).into())
}

/// `cidrsubnet(prefix, newbits, netnum)`.
pub(super) fn cidrsubnet(a: FuncArgs) -> Result {
    let net = Net::parse("cidrsubnet", s(&a[0]))?;
    Ok(net
        .subnet("cidrsubnet", num(&a[1]), num(&a[2]))?
        .prefix()
        .into())
}

/// `cidrsubnets(prefix, newbits...)`: consecutive subnets of the given sizes, each at the
/// first address after the previous one that its size aligns to.
pub(super) fn cidrsubnets(a: FuncArgs) -> Result {
    let net = Net::parse("cidrsubnets", s(&a[0]))?;
    let end = net.base | host_mask(net.len, net.width);
    let mut next = Some(net.base);
    let mut out = Vec::new();
    for (i, newbits) in a.iter().skip(1).map(num).enumerate() {
        // Checks newbits against the network's room, as cidrsubnet does.
        let first = net.subnet("cidrsubnets", newbits, 0.0)?;
        let mask = host_mask(first.len, net.width);
        let start = next
            .and_then(|n| n.checked_add(mask))
            .map(|n| n & !mask)
            .filter(|start| *start <= end && start.saturating_add(mask) <= end)
            .ok_or_else(|| {
                format!(
                    "cidrsubnets: not enough room in {} for subnet {} (newbits {newbits})",
                    net.prefix(),
                    i + 1
                )
            })?;
        let subnet = Net {
            base: start,
            len: first.len,
            width: net.width,
        };
        out.push(Value::from(subnet.prefix()));
        next = (start | mask).checked_add(1);
    }
    Ok(Value::Array(out))
}
