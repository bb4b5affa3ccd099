//! A task's `artifact` and `template` blocks and its `dispatch_payload` ⇄ wire. Modes travel
//! as their job-file words; an empty word is the default, an unknown one is refused.

use super::{ConvertError, Problem, Result, Within};
use crate::v1 as pb;
use drover_core::types::{Artifact, ArtifactMode, ChangeMode, Template};

impl From<&Artifact> for pb::Artifact {
    fn from(a: &Artifact) -> Self {
        pb::Artifact {
            source: a.source.clone(),
            destination: a.destination.clone(),
            mode: a.mode.as_str().into(),
            options: a.options.clone(),
        }
    }
}

impl From<&Template> for pb::Template {
    fn from(t: &Template) -> Self {
        pb::Template {
            data: t.data.clone(),
            source: t.source.clone(),
            destination: t.destination.clone(),
            env: t.env,
            change_mode: t.change_mode.as_str().into(),
            change_signal: t.change_signal.clone(),
            perms: t.perms.clone(),
            left_delimiter: t.left_delimiter.clone(),
            right_delimiter: t.right_delimiter.clone(),
        }
    }
}

fn word<T>(field: &'static str, text: &str, default: T, parse: fn(&str) -> Option<T>) -> Result<T> {
    if text.is_empty() {
        return Ok(default);
    }
    parse(text).ok_or_else(|| ConvertError::new(field, Problem::Invalid("unknown mode")))
}

pub(super) fn artifact(p: pb::Artifact) -> Result<Artifact> {
    Ok(Artifact {
        source: p.source,
        destination: if p.destination.is_empty() {
            Artifact::DEFAULT_DESTINATION.into()
        } else {
            p.destination
        },
        mode: word("mode", &p.mode, ArtifactMode::Any, ArtifactMode::parse)?,
        options: p.options,
    })
}

pub(super) fn template(p: pb::Template) -> Result<Template> {
    let or = |text: String, default: &str| {
        if text.is_empty() {
            default.to_string()
        } else {
            text
        }
    };
    Ok(Template {
        data: p.data,
        source: p.source,
        destination: p.destination,
        env: p.env,
        change_mode: word(
            "change_mode",
            &p.change_mode,
            ChangeMode::Restart,
            ChangeMode::parse,
        )?,
        change_signal: p.change_signal,
        perms: or(p.perms, Template::DEFAULT_PERMS),
        left_delimiter: or(p.left_delimiter, "{{"),
        right_delimiter: or(p.right_delimiter, "}}"),
    })
}

/// Converts each element, naming the failing one by index under `field`.
pub(super) fn each<P, T>(
    field: &str,
    items: Vec<P>,
    convert: fn(P) -> Result<T>,
) -> Result<Vec<T>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, p)| convert(p).within(format!("{field}[{i}]")))
        .collect()
}
