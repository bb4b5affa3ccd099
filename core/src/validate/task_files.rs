//! The checks of what a task brings into its directory (`artifact`, `template`,
//! `dispatch_payload`) and of the docker driver's `config`. Every path a job names is
//! relative to the task's directory and may not climb out of it: the agent writes there as
//! root, so a destination like `../../state` would be an escape.

use super::task_blocks::is_signal;
use super::{Report, show};
use crate::types::{ChangeMode, GroupNetwork, Task};
use std::collections::HashSet;
use std::path::{Component, Path};

/// go-getter's checksum types, with the length of their hex digests.
pub const CHECKSUMS: [(&str, usize); 4] =
    [("md5", 32), ("sha1", 40), ("sha256", 64), ("sha512", 128)];

/// Artifact options the agent understands (go-getter's query options).
const ARTIFACT_OPTIONS: [&str; 2] = ["checksum", "archive"];

/// Why `path` is not a path inside the task's directory, if it is not.
pub fn inside_task_dir(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    let p = Path::new(path);
    if p.is_absolute() {
        return Some("must be relative to the task's directory");
    }
    let mut depth: i32 = 0;
    for c in p.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Some("must stay inside the task's directory (no leading ..)");
        }
    }
    None
}

/// Splits `sha256:<hex>` into a known type and a digest of the right length.
pub fn parse_checksum(text: &str) -> Result<(&str, &str), String> {
    let Some((kind, hex)) = text.split_once(':') else {
        return Err(format!("checksum {} is not TYPE:HEX", show(text)));
    };
    let Some((_, len)) = CHECKSUMS.iter().find(|(k, _)| *k == kind) else {
        let known: Vec<_> = CHECKSUMS.iter().map(|(k, _)| *k).collect();
        return Err(format!(
            "checksum type {} is not one of {}",
            show(kind),
            known.join(", ")
        ));
    };
    if hex.len() != *len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "checksum {} needs {len} hex digits for {kind}",
            show(text)
        ));
    }
    Ok((kind, hex))
}

pub(super) fn check_task_files(r: &mut Report<'_>, p: &str, t: &Task) {
    let max = r.limits.max_string_len;
    if t.driver == "docker" && t.config.extra.get("image").is_none_or(String::is_empty) {
        r.err(p, "config.image", "image is required by the docker driver");
    }
    r.entries(p, "artifacts", t.artifacts.len());
    for (i, a) in t.artifacts.iter().enumerate() {
        let at = format!("{p}.artifacts[{i}]");
        if a.source.is_empty() {
            r.err(&at, "source", "source must not be empty");
        } else {
            r.text(&at, "source", "source", &a.source, max);
        }
        if let Some(why) = inside_task_dir(&a.destination) {
            r.err(&at, "destination", format!("destination {why}"));
        }
        for (key, value) in &a.options {
            if !ARTIFACT_OPTIONS.contains(&key.as_str()) {
                r.err(
                    &at,
                    &format!("options.{key}"),
                    format!(
                        "option {} is not supported (known: {})",
                        show(key),
                        ARTIFACT_OPTIONS.join(", ")
                    ),
                );
            } else if key == "checksum"
                && let Err(why) = parse_checksum(value)
            {
                r.err(&at, "options.checksum", why);
            } else if key == "archive" && !matches!(value.as_str(), "true" | "false") {
                r.err(
                    &at,
                    "options.archive",
                    "archive must be \"true\" or \"false\"",
                );
            }
        }
    }
    r.entries(p, "templates", t.templates.len());
    for (i, tp) in t.templates.iter().enumerate() {
        let at = format!("{p}.templates[{i}]");
        match (&tp.data, &tp.source) {
            (Some(_), Some(_)) => r.err(&at, "data", "set either data or source, not both"),
            (None, None) => r.err(&at, "data", "a template needs data or a source"),
            (Some(data), None) => {
                r.text(&at, "data", "data", data, max);
                if !tp.left_delimiter.is_empty()
                    && !tp.right_delimiter.is_empty()
                    && let Err(e) =
                        crate::template::parse(data, &tp.left_delimiter, &tp.right_delimiter)
                {
                    r.err(&at, "data", format!("template does not parse: {e}"));
                }
            }
            (None, Some(source)) => {
                if let Some(why) = inside_task_dir(source) {
                    r.err(&at, "source", format!("source {why}"));
                }
            }
        }
        if let Some(why) = inside_task_dir(&tp.destination) {
            r.err(&at, "destination", format!("destination {why}"));
        }
        match (&tp.change_signal, tp.change_mode) {
            (None, ChangeMode::Signal) => r.err(
                &at,
                "change_signal",
                "change_mode \"signal\" needs a change_signal",
            ),
            (Some(s), _) if !is_signal(s) => r.err(
                &at,
                "change_signal",
                format!("change_signal {} is not a signal name", show(s)),
            ),
            _ => {}
        }
        if u32::from_str_radix(&tp.perms, 8).map_or(true, |m| m > 0o777) {
            r.err(
                &at,
                "perms",
                format!("perms {} is not an octal file mode", show(&tp.perms)),
            );
        }
        if tp.left_delimiter.is_empty() || tp.right_delimiter.is_empty() {
            r.err(&at, "left_delimiter", "delimiters must not be empty");
        }
    }
    if let Some(file) = &t.dispatch_payload
        && let Some(why) = inside_task_dir(file)
    {
        r.err(p, "dispatch_payload.file", format!("file {why}"));
    }
}

/// A task's `config.ports`: only the docker driver publishes ports, each label once, and
/// each must name a port of the group's `network` block (`network` is `None` when the group
/// has none). A container on the host's or no network has nothing to publish them to.
pub(super) fn check_task_ports(
    r: &mut Report<'_>,
    p: &str,
    t: &Task,
    network: Option<&GroupNetwork>,
) {
    if t.config.ports.is_empty() {
        return;
    }
    if t.driver != "docker" {
        r.err(
            p,
            "config.ports",
            format!(
                "ports are published by the docker driver only, not {}",
                show(&t.driver)
            ),
        );
        return;
    }
    if let Some(mode) = t.config.extra.get("network_mode")
        && matches!(mode.as_str(), "host" | "none")
    {
        r.err(
            p,
            "config.ports",
            format!(
                "ports cannot be published with network_mode {}: use the default bridge",
                show(mode)
            ),
        );
    }
    let mut seen = HashSet::new();
    for label in &t.config.ports {
        if !seen.insert(label.as_str()) {
            r.err(
                p,
                "config.ports",
                format!("port {} is listed twice", show(label)),
            );
        } else if !network.is_some_and(|n| n.ports.iter().any(|a| a.label == *label)) {
            r.err(
                p,
                "config.ports",
                format!(
                    "port {} is not a port of the group's network block",
                    show(label)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_in_the_task_dir() {
        let cases = [
            ("local/", None),
            ("local/../secrets/x", None),
            ("a/b/../../c", None),
            ("", Some("empty")),
            ("/etc/passwd", Some("relative")),
            ("../x", Some("inside")),
            ("local/../../x", Some("inside")),
        ];
        for (path, want) in cases {
            let got = inside_task_dir(path);
            match want {
                None => assert_eq!(got, None, "{path}"),
                Some(needle) => assert!(got.is_some_and(|g| g.contains(needle)), "{path}"),
            }
        }
    }

    #[test]
    fn checksums_name_a_type_and_enough_digits() {
        let sha256 = "a".repeat(64);
        let cases = [
            (format!("sha256:{sha256}"), Ok(("sha256", sha256.as_str()))),
            (
                "md5:0123456789abcdef0123456789abcdef".into(),
                Ok(("md5", "0123456789abcdef0123456789abcdef")),
            ),
            ("sha256:abc".into(), Err("64 hex digits")),
            ("crc32:abcd".into(), Err("not one of")),
            ("abcd".into(), Err("TYPE:HEX")),
            (format!("sha1:{}", "z".repeat(40)), Err("40 hex digits")),
        ];
        for (text, want) in cases {
            match (parse_checksum(&text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(got), Err(needle)) => assert!(got.contains(needle), "{text}: {got}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }
}
