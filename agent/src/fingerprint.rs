//! What the agent tells the servers about its machine: capacity (CPU MHz, memory, disk of
//! the data dir) and attributes constraints can match (`kernel.name`, `cpu.arch`,
//! `unique.hostname`, `driver.raw_exec`, ...), named as Nomad names them so Nomad job files'
//! constraints work unchanged.
//!
//! The parsers take the text of `/proc` files so they are tested without a machine.

use drover_core::types::{NodeNetworks, Resources};
use std::collections::BTreeMap;
use std::path::Path;

/// Used per core when the CPU reports no frequency (some VMs and ARM boards).
const FALLBACK_MHZ_PER_CORE: u64 = 1000;

/// The machine as fingerprinted at agent start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub hostname: String,
    pub resources: Resources,
    pub attributes: BTreeMap<String, String>,
    /// What the node offers for ports; filled from the config by [`crate::network`].
    pub networks: NodeNetworks,
}

/// Go's spelling of the architecture, which Nomad job constraints use.
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// Cores and the mean MHz per core from `/proc/cpuinfo`; `None` where it says nothing.
pub fn parse_cpuinfo(text: &str) -> (usize, Option<u64>) {
    let mut cores = 0;
    let mut mhz = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "processor" => cores += 1,
            "cpu MHz" => {
                if let Ok(v) = value.trim().parse::<f64>() {
                    mhz.push(v);
                }
            }
            _ => {}
        }
    }
    let mean = (!mhz.is_empty()).then(|| (mhz.iter().sum::<f64>() / mhz.len() as f64) as u64);
    (cores, mean.filter(|m| *m > 0))
}

/// `MemTotal` of `/proc/meminfo`, in MB.
pub fn parse_meminfo_mb(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024)
}

/// `key=value` pairs of `/etc/os-release`, unquoted.
pub fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// Fingerprints this host, with the disk dimension measured on `data_dir` (which must
/// exist). Whatever cannot be read falls back to a safe value and is logged.
pub fn fingerprint(data_dir: &Path) -> std::io::Result<Fingerprint> {
    let mut attributes = BTreeMap::new();
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();

    let (mut cores, per_core) = parse_cpuinfo(&read("/proc/cpuinfo"));
    if cores == 0 {
        cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    }
    let per_core = per_core.unwrap_or_else(|| {
        tracing::warn!(
            fallback_mhz = FALLBACK_MHZ_PER_CORE,
            "cpu reports no frequency; assuming a fallback per core"
        );
        FALLBACK_MHZ_PER_CORE
    });
    let cores_u64 = u64::try_from(cores).unwrap_or(1);
    let total_mhz = per_core.saturating_mul(cores_u64);
    attributes.insert("cpu.numcores".into(), cores.to_string());
    attributes.insert("cpu.frequency".into(), per_core.to_string());
    attributes.insert("cpu.totalcompute".into(), total_mhz.to_string());
    attributes.insert(
        "cpu.arch".into(),
        go_arch(std::env::consts::ARCH).to_string(),
    );

    let memory_mb = parse_meminfo_mb(&read("/proc/meminfo")).unwrap_or(0);
    attributes.insert(
        "memory.totalbytes".into(),
        memory_mb.saturating_mul(1024 * 1024).to_string(),
    );

    let vfs = nix::sys::statvfs::statvfs(data_dir).map_err(std::io::Error::from)?;
    let fragment = vfs.fragment_size();
    let available_bytes = vfs.blocks_available().saturating_mul(fragment);
    let total_bytes = vfs.blocks().saturating_mul(fragment);
    let disk_mb = available_bytes / (1024 * 1024);
    attributes.insert(
        "unique.storage.bytesfree".into(),
        available_bytes.to_string(),
    );
    attributes.insert("unique.storage.bytestotal".into(), total_bytes.to_string());
    attributes.insert(
        "unique.storage.volume".into(),
        data_dir.display().to_string(),
    );

    let uts = nix::sys::utsname::uname().map_err(std::io::Error::from)?;
    attributes.insert(
        "kernel.name".into(),
        uts.sysname().to_string_lossy().to_lowercase(),
    );
    attributes.insert(
        "kernel.version".into(),
        uts.release().to_string_lossy().into_owned(),
    );
    let os = parse_os_release(&read("/etc/os-release"));
    if let Some(id) = os.get("ID") {
        attributes.insert("os.name".into(), id.clone());
    }
    if let Some(v) = os.get("VERSION_ID") {
        attributes.insert("os.version".into(), v.clone());
    }
    let hostname = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    attributes.insert("unique.hostname".into(), hostname.clone());

    Ok(Fingerprint {
        hostname,
        resources: Resources::new(total_mhz, memory_mb, disk_mb),
        attributes,
        networks: NodeNetworks::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_gives_cores_and_mean_frequency() {
        let cases: [(&str, (usize, Option<u64>)); 4] = [
            (
                "processor\t: 0\ncpu MHz\t\t: 2000.000\n\nprocessor\t: 1\ncpu MHz\t\t: 3000.5\n",
                (2, Some(2500)),
            ),
            ("processor : 0\nprocessor : 1\nprocessor : 2\n", (3, None)),
            ("processor : 0\ncpu MHz : 0.000\n", (1, None)),
            ("", (0, None)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_cpuinfo(text), want, "{text:?}");
        }
    }

    #[test]
    fn meminfo_and_os_release_parse() {
        let cases = [
            ("MemTotal:       16316412 kB\nMemFree: 1 kB\n", Some(15933)),
            ("MemFree: 1 kB\n", None),
            ("MemTotal: lots kB\n", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_meminfo_mb(text), want, "{text:?}");
        }
        let os = parse_os_release("ID=debian\nVERSION_ID=\"12\"\nbroken line\n");
        assert_eq!(os.get("ID").map(String::as_str), Some("debian"));
        assert_eq!(os.get("VERSION_ID").map(String::as_str), Some("12"));
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("riscv64"), "riscv64");
    }

    #[test]
    fn this_host_fingerprints_with_every_dimension() {
        let dir = tempfile::tempdir().expect("temp dir");
        let f = fingerprint(dir.path()).expect("fingerprint");
        assert!(f.resources.cpu_mhz > 0);
        assert!(f.resources.memory_mb > 0);
        for key in [
            "kernel.name",
            "kernel.version",
            "cpu.arch",
            "unique.hostname",
        ] {
            assert!(f.attributes.contains_key(key), "missing {key}");
        }
    }
}
