//! Which datacenter, class and operating system each virtual node has, and the registration
//! it sends. Proportions are exact (largest remainder) and independent of one another: each
//! attribute is shuffled on its own by the seed, so `dc` and `class` mixes do not line up.

use super::config::{Mix, NodeResources, SimConfig};
use drover_proto::v1 as pb;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Every node's choices as small indexes into the mixes' value lists (two bytes each, so
/// the layout of 10,000 nodes is 60 KB).
#[derive(Debug)]
pub(crate) struct Layout {
    datacenters: Vec<String>,
    classes: Vec<String>,
    oses: Vec<String>,
    dc_of: Vec<u16>,
    class_of: Vec<u16>,
    os_of: Vec<u16>,
}

/// How many of `n` items each weight gets: proportional, rounded by largest remainder, so
/// the counts always sum to `n`.
pub(crate) fn apportion(weights: &[u32], n: usize) -> Vec<usize> {
    let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<(usize, u128)> = weights
        .iter()
        .map(|&w| {
            let share = u128::from(w) * n as u128;
            ((share / total) as usize, share % total)
        })
        .collect();
    let mut counts: Vec<usize> = exact.iter().map(|(c, _)| *c).collect();
    let left = n - counts.iter().sum::<usize>();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties go to the value written first.
    by_remainder.sort_by(|&a, &b| exact[b].1.cmp(&exact[a].1).then(a.cmp(&b)));
    for &i in by_remainder.iter().take(left) {
        counts[i] += 1;
    }
    counts
}

fn spread(mix: &Mix, n: usize, rng: &mut ChaCha8Rng) -> (Vec<String>, Vec<u16>) {
    let weights: Vec<u32> = mix.entries().iter().map(|(_, w)| *w).collect();
    let mut of = Vec::with_capacity(n);
    for (i, count) in apportion(&weights, n).into_iter().enumerate() {
        let i = u16::try_from(i).unwrap_or(u16::MAX);
        of.extend(std::iter::repeat_n(i, count));
    }
    of.shuffle(rng);
    let values = mix.entries().iter().map(|(v, _)| v.clone()).collect();
    (values, of)
}

fn resources(r: NodeResources) -> pb::Resources {
    pb::Resources {
        cpu_mhz: Some(r.cpu_mhz),
        memory_mb: Some(r.memory_mb),
        disk_mb: Some(r.disk_mb),
    }
}

impl Layout {
    pub(crate) fn new(config: &SimConfig) -> Layout {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let (datacenters, dc_of) = spread(&config.datacenters, config.nodes, &mut rng);
        let (classes, class_of) = spread(&config.classes, config.nodes, &mut rng);
        let (oses, os_of) = spread(&config.operating_systems, config.nodes, &mut rng);
        Layout {
            datacenters,
            classes,
            oses,
            dc_of,
            class_of,
            os_of,
        }
    }

    pub(crate) fn name(config: &SimConfig, node: u32) -> String {
        format!("{}-{node:05}", config.name_prefix)
    }

    /// The datacenter node `node` registers in.
    pub(crate) fn datacenter(&self, node: u32) -> &str {
        &self.datacenters[usize::from(self.dc_of[node as usize])]
    }

    /// What node `node` registers as. A first registration carries no id; `previous` is the
    /// id and secret of an earlier one (after the servers forgot the node).
    pub(crate) fn registration(
        &self,
        config: &SimConfig,
        node: u32,
        previous: Option<(String, String)>,
    ) -> pb::NodeRegistration {
        let i = node as usize;
        let name = Self::name(config, node);
        let os = self.oses[usize::from(self.os_of[i])].clone();
        let cores = (config.resources.cpu_mhz / 1000).max(1).to_string();
        let mut attributes: BTreeMap<String, String> = [
            ("kernel.name", os.as_str()),
            ("os.name", os.as_str()),
            ("cpu.arch", "amd64"),
            ("cpu.numcores", cores.as_str()),
            ("unique.hostname", name.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for driver in &config.drivers {
            attributes.insert(format!("driver.{driver}"), "1".into());
            attributes.insert(format!("driver.{driver}.detected"), "true".into());
            attributes.insert(format!("driver.{driver}.healthy"), "true".into());
        }
        let meta = BTreeMap::from([("simulated".to_string(), "true".to_string())]);
        let (node_id, secret_id) = previous.unwrap_or_default();
        pb::NodeRegistration {
            node_id,
            secret_id,
            name,
            datacenter: self.datacenter(node).to_owned(),
            node_class: self.classes[usize::from(self.class_of[i])].clone(),
            attributes,
            meta,
            resources: Some(resources(config.resources)),
            reserved: Some(resources(config.reserved)),
            networks: Some(networks(node)),
        }
    }
}

/// A virtual node's ports: one address of its own in `10.128.0.0/9` (distinct for every
/// index the simulator can run), the default dynamic range, nothing reserved. Nothing binds
/// them; they make placements with ports as real as the scheduler and applier see them.
fn networks(node: u32) -> pb::NodeNetworks {
    let [_, b, c, d] = node.to_be_bytes();
    let address = std::net::Ipv4Addr::new(10, 128 | (b & 0x7f), c, d);
    let defaults = drover_core::types::NodeNetworks::default();
    pb::NodeNetworks {
        addresses: vec![pb::HostAddress {
            host_network: drover_core::types::DEFAULT_HOST_NETWORK.into(),
            address: address.to_string(),
            interface: "sim0".into(),
        }],
        reserved_ports: String::new(),
        min_dynamic_port: defaults.min_dynamic_port.into(),
        max_dynamic_port: defaults.max_dynamic_port.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn apportion_is_exact_for_simple_mixes() {
        let cases: &[(&[u32], usize, &[usize])] = &[
            (&[3, 1], 4, &[3, 1]),
            (&[3, 1], 1000, &[750, 250]),
            (&[1, 1, 1], 2, &[1, 1, 0]),
            (&[1, 2], 1, &[0, 1]),
            (&[5], 7, &[7]),
        ];
        for (weights, n, want) in cases {
            assert_eq!(apportion(weights, *n), *want, "{weights:?} over {n}");
        }
    }

    proptest! {
        #[test]
        fn apportion_sums_to_n_and_stays_within_one_of_exact(
            weights in proptest::collection::vec(1u32..1000, 1..8),
            n in 0usize..20_000,
        ) {
            let counts = apportion(&weights, n);
            prop_assert_eq!(counts.iter().sum::<usize>(), n);
            let total: f64 = weights.iter().map(|&w| f64::from(w)).sum();
            for (c, w) in counts.iter().zip(&weights) {
                let exact = f64::from(*w) * n as f64 / total;
                prop_assert!((*c as f64 - exact).abs() < 1.0 + 1e-9);
            }
        }
    }

    #[test]
    fn registrations_follow_the_mixes() {
        let config = SimConfig {
            nodes: 8,
            datacenters: "dc1:3,dc2:1".parse().expect("mix"),
            classes: "gpu:1,:1".parse().expect("mix"),
            ..SimConfig::default()
        };
        let layout = Layout::new(&config);
        let regs: Vec<_> = (0..8)
            .map(|i| layout.registration(&config, i, None))
            .collect();
        let count =
            |f: &dyn Fn(&pb::NodeRegistration) -> bool| regs.iter().filter(|r| f(r)).count();
        assert_eq!(count(&|r| r.datacenter == "dc1"), 6);
        assert_eq!(count(&|r| r.node_class == "gpu"), 4);
        assert_eq!(regs[3].name, "sim-00003");
        assert_eq!(regs[3].attributes["unique.hostname"], "sim-00003");
        assert!(
            regs.iter()
                .all(|r| r.node_id.is_empty() && r.resources.is_some())
        );
        // The same seed lays out the same cluster.
        let again = Layout::new(&config);
        assert_eq!(again.dc_of, layout.dc_of);
        // Only the mock driver unless told to pretend more.
        assert_eq!(
            regs[0].attributes.get("driver.mock").map(String::as_str),
            Some("1")
        );
        assert!(!regs[0].attributes.contains_key("driver.raw_exec"));
        let pretend = SimConfig {
            drivers: vec!["mock".into(), "raw_exec".into()],
            ..config
        };
        let reg = Layout::new(&pretend).registration(&pretend, 0, None);
        assert_eq!(
            reg.attributes.get("driver.raw_exec").map(String::as_str),
            Some("1")
        );
    }
}
