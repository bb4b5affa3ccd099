//! What a task gets from its job beyond its own `env`: the merged `meta` of job, group and
//! task as `NOMAD_META_*` variables, and a dispatched job's payload as a file. Kept apart
//! from [`super::task_env`] so each source of variables stays one small function.

use std::collections::BTreeMap;
use std::path::Path;

/// `NOMAD_META_<key>` (and `DROVER_META_<key>`) for the job's, the group's and the task's
/// `meta`, the more specific winning, as Nomad sets them: each key as written and
/// upper-cased, with characters a shell cannot name turned into `_`.
pub fn meta_env(
    job: &BTreeMap<String, String>,
    group: &BTreeMap<String, String>,
    task: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged: BTreeMap<&str, &str> = BTreeMap::new();
    for meta in [job, group, task] {
        merged.extend(meta.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    let mut env = BTreeMap::new();
    for (key, value) in merged {
        let clean: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        for name in [clean.clone(), clean.to_ascii_uppercase()] {
            env.insert(format!("NOMAD_META_{name}"), value.to_string());
            env.insert(format!("DROVER_META_{name}"), value.to_string());
        }
    }
    env
}

/// Writes a dispatched job's payload to `file` in the task's `local` dir (validation keeps
/// `file` inside it), readable by the task's user (`owner`), before the task starts; never
/// through a link the task may have left there.
pub fn write_payload(
    local: &Path,
    file: &str,
    payload: &[u8],
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    super::task_files::replace_file(local, Path::new(file), payload, 0o640, owner).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn meta_reaches_tasks_under_both_spellings_the_most_specific_winning() {
        let env = meta_env(
            &map(&[("input", "job"), ("owner", "ops"), ("rack.id", "r1")]),
            &map(&[("input", "group")]),
            &map(&[("input", "task"), ("Quality", "high")]),
        );
        let cases = [
            ("NOMAD_META_input", Some("task")),
            ("NOMAD_META_INPUT", Some("task")),
            ("DROVER_META_owner", Some("ops")),
            ("NOMAD_META_OWNER", Some("ops")),
            ("NOMAD_META_Quality", Some("high")),
            ("NOMAD_META_QUALITY", Some("high")),
            ("NOMAD_META_rack_id", Some("r1")),
            ("NOMAD_META_RACK_ID", Some("r1")),
            ("NOMAD_META_rack.id", None),
        ];
        for (key, want) in cases {
            assert_eq!(env.get(key).map(String::as_str), want, "{key}");
        }
    }

    #[test]
    fn payloads_land_in_the_local_dir() {
        let dir = tempfile::tempdir().expect("temp dir");
        write_payload(dir.path(), "in/data.json", b"{}", None).expect("written");
        assert_eq!(
            std::fs::read(dir.path().join("in/data.json")).expect("read"),
            b"{}"
        );
    }
}
