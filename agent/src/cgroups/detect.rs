//! Which cgroup hierarchy a machine has, read from the text of `/proc/self/mountinfo` and
//! `/proc/self/cgroup` (pure, so every machine shape is a table row).
//!
//! v2 is used when a `cgroup2` mount offers the controllers drover needs (`memory`, `cpu`,
//! `pids`: the caller checks `cgroup.controllers`); otherwise v1, when each of `memory`,
//! `cpu`, `cpuacct` and `pids` is mounted as a v1 hierarchy. A hybrid machine (v1
//! controllers plus an empty v2 mount, as systemd's hybrid mode and this project's build
//! machines have) is v1.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The v1 controllers drover puts a task in.
pub const V1_CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "pids"];
/// The v2 controllers drover enables for its tasks.
pub const V2_CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];

/// One cgroup mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    /// The hierarchy's path that is mounted there (`/` unless mounted from a sub-cgroup).
    pub root: String,
    /// v1: the controllers of this hierarchy; v2: empty.
    pub controllers: Vec<String>,
    pub v2: bool,
}

/// The cgroup mounts in `/proc/self/mountinfo`.
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    let mut mounts = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount_point), Some(fstype)) =
            (left.get(3), left.get(4), right.first())
        else {
            continue;
        };
        let v2 = match *fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let controllers = if v2 {
            Vec::new()
        } else {
            right
                .get(2)
                .map(|opts| {
                    opts.split(',')
                        .filter(|o| V1_CONTROLLERS.contains(o))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        mounts.push(CgroupMount {
            mount_point: PathBuf::from(unescape(mount_point)),
            root: unescape(root),
            controllers,
            v2,
        });
    }
    mounts
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(char::from(c));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The process's cgroup per v1 controller (and `""` for v2) from `/proc/self/cgroup`.
pub fn parse_proc_cgroup(text: &str) -> BTreeMap<String, String> {
    let mut paths = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            paths.insert(String::new(), path.to_string());
        }
        for c in controllers.split(',').filter(|c| !c.is_empty()) {
            paths.insert(c.to_string(), path.to_string());
        }
    }
    paths
}

/// Where drover's cgroups go, per version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// Each controller's directory under which task cgroups are made: the agent's own
    /// cgroup in that hierarchy joined with the parent name, so tasks stay inside whatever
    /// limits the agent itself was given.
    V1(BTreeMap<String, PathBuf>),
    /// The directory under which task cgroups are made: the parent name under the
    /// hierarchy's root (v2 allows no processes in a cgroup whose children have
    /// controllers, so it cannot sit under the agent's own cgroup).
    V2(PathBuf),
}

impl Hierarchy {
    pub fn version(&self) -> &'static str {
        match self {
            Hierarchy::V1(_) => "v1",
            Hierarchy::V2(_) => "v2",
        }
    }
}

/// Picks the hierarchy from the mounts and the agent's own cgroups. `v2_controllers` is the
/// content of the v2 mount's `cgroup.controllers`, when there is a v2 mount.
pub fn choose(
    mounts: &[CgroupMount],
    own: &BTreeMap<String, String>,
    v2_controllers: Option<&str>,
    parent: &str,
) -> Result<Hierarchy, String> {
    if let Some(v2) = mounts.iter().find(|m| m.v2) {
        let offered: Vec<&str> = v2_controllers.unwrap_or("").split_whitespace().collect();
        if V2_CONTROLLERS.iter().all(|c| offered.contains(c)) {
            return Ok(Hierarchy::V2(v2.mount_point.join(parent)));
        }
    }
    let mut dirs = BTreeMap::new();
    for controller in V1_CONTROLLERS {
        let mount = mounts
            .iter()
            .find(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))
            .ok_or_else(|| {
                format!("no cgroup v2 with memory, cpu and pids, and no v1 {controller} hierarchy")
            })?;
        let own_path = own.get(controller).map_or("/", String::as_str);
        // The agent's path relative to what is mounted (a sub-cgroup mounted in a
        // container shows its own path under a mount root of the same path).
        let relative = own_path
            .strip_prefix(mount.root.as_str())
            .unwrap_or(own_path)
            .trim_start_matches('/');
        let mut dir = mount.mount_point.clone();
        if !relative.is_empty() {
            dir.push(relative);
        }
        dirs.insert(controller.to_string(), dir.join(parent));
    }
    Ok(Hierarchy::V1(dirs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
22 1 0:21 / /proc rw,nosuid - proc proc rw";
    const JOINED: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids";
    const UNIFIED: &str = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate";

    fn own(text: &str) -> BTreeMap<String, String> {
        parse_proc_cgroup(text)
    }

    #[test]
    fn machines_pick_the_version_and_parent_dirs_they_can_enforce_with() {
        let agent = own("4:memory:/process_api/a1\n2:cpuacct:/\n1:cpu:/\n8:pids:/\n0::/\n");
        let v1 = |pairs: &[(&str, &str)]| {
            Ok(Hierarchy::V1(
                pairs
                    .iter()
                    .map(|(c, p)| (c.to_string(), PathBuf::from(p)))
                    .collect(),
            ))
        };
        let cases: Vec<(
            &str,
            &str,
            BTreeMap<String, String>,
            Option<&str>,
            Result<Hierarchy, String>,
        )> = vec![
            (
                "hybrid: v1 controllers, an empty v2 mount; tasks under the agent's own cgroup",
                HYBRID,
                agent.clone(),
                Some(""),
                v1(&[
                    ("cpu", "/sys/fs/cgroup/cpu/drover"),
                    ("cpuacct", "/sys/fs/cgroup/cpuacct/drover"),
                    ("memory", "/sys/fs/cgroup/memory/process_api/a1/drover"),
                    ("pids", "/sys/fs/cgroup/pids/drover"),
                ]),
            ),
            (
                "joined cpu,cpuacct and a container's memory mount root",
                JOINED,
                own("5:memory:/docker/abc\n3:cpu,cpuacct:/x\n"),
                None,
                v1(&[
                    ("cpu", "/sys/fs/cgroup/cpu,cpuacct/x/drover"),
                    ("cpuacct", "/sys/fs/cgroup/cpu,cpuacct/x/drover"),
                    ("memory", "/sys/fs/cgroup/memory/drover"),
                    ("pids", "/sys/fs/cgroup/pids/drover"),
                ]),
            ),
            (
                "unified with the controllers",
                UNIFIED,
                own("0::/user.slice\n"),
                Some("cpuset cpu io memory hugetlb pids rdma misc\n"),
                Ok(Hierarchy::V2(PathBuf::from("/sys/fs/cgroup/drover"))),
            ),
            (
                "unified without pids and no v1 at all",
                UNIFIED,
                own("0::/\n"),
                Some("cpu memory"),
                Err("no cgroup v2 with memory, cpu and pids, and no v1 memory hierarchy".into()),
            ),
        ];
        for (name, mountinfo, own, controllers, want) in cases {
            let mounts = parse_mountinfo(mountinfo);
            assert_eq!(choose(&mounts, &own, controllers, "drover"), want, "{name}");
        }
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        let m = parse_mountinfo("1 2 0:3 / /mnt/with\\040space rw - cgroup2 cgroup2 rw");
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/with space"));
        assert!(m[0].v2);
    }
}
