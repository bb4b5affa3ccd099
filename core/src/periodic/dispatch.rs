//! Dispatch of parameterized jobs: a child job with the caller's meta and payload.

use super::child::{self, DISPATCH_SUFFIX};
use crate::types::*;
use crate::validate::Limits;
use rand::Rng;
use std::collections::BTreeMap;

/// Why a dispatch was refused. Messages are lowercase and name the field and the offending
/// value, for the API to return as `INVALID_ARGUMENT` (or `FAILED_PRECONDITION` for
/// [`NotParameterized`](Self::NotParameterized) and [`Stopped`](Self::Stopped)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("job {job:?} is not parameterized and cannot be dispatched")]
    NotParameterized { job: String },
    #[error("job {job:?} is stopped and cannot be dispatched")]
    Stopped { job: String },
    #[error("payload is {size} bytes, above the limit of {limit} for job {job:?}")]
    PayloadTooLarge {
        job: String,
        size: usize,
        limit: usize,
    },
    #[error("payload is required by job {job:?}")]
    PayloadRequired { job: String },
    #[error("payload is not allowed by job {job:?}")]
    PayloadForbidden { job: String },
    /// Keys outside `meta_required` ∪ `meta_optional`, sorted; `allowed` in declared order,
    /// required first.
    #[error(
        "{} not allowed by job {job:?} (allowed: {})",
        keys_phrase(keys),
        allowed_list(allowed)
    )]
    MetaNotAllowed {
        job: String,
        keys: Vec<String>,
        allowed: Vec<String>,
    },
    /// Keys of `meta_required` the dispatch did not give, in declared order.
    #[error("{} required by job {job:?} but missing", keys_phrase(keys))]
    MetaMissing { job: String, keys: Vec<String> },
    #[error("meta value of key {} for job {job:?} {reason}", show(key))]
    MetaValueInvalid {
        job: String,
        key: String,
        reason: String,
    },
}

/// Dispatches `parent`: checks the request against the parent's `parameterized` block and
/// `limits`, then builds the child job and its eval for one `JobRegister` command.
///
/// Checks, in this order (the first failure is returned): the parent is parameterized, not
/// stopped; the payload is within `limits.max_payload_bytes` and matches the parent's
/// [`PayloadRequirement`]; every meta key is in `meta_required` ∪ `meta_optional`, every
/// required key is given, and every value is within `limits.max_string_len` with no NUL
/// (the child's meta must pass validation like any job's). Parameterized jobs are batch or
/// sysbatch: validation refuses any other, so the type is not checked again here.
///
/// The child: id `<parent>/dispatch-<unix seconds of now>-<8 hex digits>` (shortened for
/// long parent ids, see [`child::child_id`]), a copy of the parent with `parameterized`
/// cleared, `parent_id` set, meta = the parent's meta overridden by the dispatch meta, the
/// payload, `submit_time` = `now`. The eval is pending, [`TriggeredBy::JobDispatch`].
///
/// Randomness: 4 bytes from `rng` for the id's hex digits, then 16 for the eval id, so a
/// seeded generator gives the same child and eval every time.
pub fn dispatch(
    parent: &Job,
    meta: BTreeMap<String, String>,
    payload: Vec<u8>,
    now: Timestamp,
    rng: &mut impl Rng,
    limits: &Limits,
) -> Result<(Job, Evaluation), DispatchError> {
    let job_name = || parent.id.to_string();
    let Some(params) = &parent.parameterized else {
        return Err(DispatchError::NotParameterized { job: job_name() });
    };
    if parent.stop {
        return Err(DispatchError::Stopped { job: job_name() });
    }
    if payload.len() > limits.max_payload_bytes {
        return Err(DispatchError::PayloadTooLarge {
            job: job_name(),
            size: payload.len(),
            limit: limits.max_payload_bytes,
        });
    }
    match params.payload {
        PayloadRequirement::Required if payload.is_empty() => {
            return Err(DispatchError::PayloadRequired { job: job_name() });
        }
        PayloadRequirement::Forbidden if !payload.is_empty() => {
            return Err(DispatchError::PayloadForbidden { job: job_name() });
        }
        _ => {}
    }
    let allowed = |k: &String| params.meta_required.contains(k) || params.meta_optional.contains(k);
    let unknown: Vec<String> = meta.keys().filter(|k| !allowed(k)).cloned().collect();
    if !unknown.is_empty() {
        return Err(DispatchError::MetaNotAllowed {
            job: job_name(),
            keys: unknown,
            allowed: params
                .meta_required
                .iter()
                .chain(&params.meta_optional)
                .cloned()
                .collect(),
        });
    }
    let missing: Vec<String> = params
        .meta_required
        .iter()
        .filter(|k| !meta.contains_key(*k))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(DispatchError::MetaMissing {
            job: job_name(),
            keys: missing,
        });
    }
    for (key, value) in &meta {
        let reason = if value.len() > limits.max_string_len {
            format!(
                "is {} bytes long, above the limit of {}",
                value.len(),
                limits.max_string_len
            )
        } else if value.contains('\0') {
            "contains a NUL character".to_owned()
        } else {
            continue;
        };
        return Err(DispatchError::MetaValueInvalid {
            job: job_name(),
            key: key.clone(),
            reason,
        });
    }

    let suffix = format!(
        "{DISPATCH_SUFFIX}{}-{:08x}",
        now.as_millis() / 1000,
        rng.random::<u32>()
    );
    let id = child::child_id(&parent.id, &suffix, limits.max_name_len);
    let mut job = child::derive(parent, id, now);
    job.meta.extend(meta);
    job.payload = payload;
    let eval = Evaluation::new(
        EvalId::from_bytes(rng.random()),
        &job,
        TriggeredBy::JobDispatch,
        now,
    );
    Ok((job, eval))
}

/// Most keys one message lists; a request can carry many, and a message stays one line.
const MAX_KEYS_SHOWN: usize = 10;

/// `meta key "a" is` or `meta keys "a", "b" are`, each key quoted and cut at 64
/// characters, and at most [`MAX_KEYS_SHOWN`] of them.
fn keys_phrase(keys: &[String]) -> String {
    let mut quoted: Vec<String> = keys.iter().take(MAX_KEYS_SHOWN).map(|k| show(k)).collect();
    if keys.len() > MAX_KEYS_SHOWN {
        quoted.push(format!("and {} more", keys.len() - MAX_KEYS_SHOWN));
    }
    match keys.len() {
        1 => format!("meta key {} is", quoted[0]),
        _ => format!("meta keys {} are", quoted.join(", ")),
    }
}

/// A value quoted like a Rust string and cut at 64 characters, as validation quotes them.
fn show(value: &str) -> String {
    const MAX: usize = 64;
    match value.char_indices().nth(MAX) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}…", &value[..cut]),
    }
}

/// `size, quality` (unquoted, as operators declared them), `none`, or the first
/// [`MAX_KEYS_SHOWN`] and a count of the rest.
fn allowed_list(allowed: &[String]) -> String {
    if allowed.is_empty() {
        return "none".to_owned();
    }
    let mut shown: Vec<String> = allowed
        .iter()
        .take(MAX_KEYS_SHOWN)
        .map(|k| match k.char_indices().nth(64) {
            None => k.clone(),
            Some((cut, _)) => format!("{}…", &k[..cut]),
        })
        .collect();
    if allowed.len() > MAX_KEYS_SHOWN {
        shown.push(format!("and {} more", allowed.len() - MAX_KEYS_SHOWN));
    }
    shown.join(", ")
}
