//! What every request carries besides its path: the ACL token, and Nomad's query
//! parameters (`index` and `wait` for blocking queries, `prefix`, `namespace`, `per_page`,
//! `next_token`, `stale`/`consistent`, and `filter`, which is refused).

use crate::grpc::Credentials;
use crate::reply::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use drover_proto::v1 as pb;
use std::time::Duration;

/// Nomad's longest blocking-query wait; a longer `wait` is clamped to it.
pub const MAX_WAIT: Duration = Duration::from_secs(600);
/// Nomad's wait when a blocking query names none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// One request's token and query parameters.
#[derive(Clone, Debug, Default)]
pub struct Call {
    pub creds: Credentials,
    params: Vec<(String, String)>,
}

impl<S: Send + Sync> FromRequestParts<S> for Call {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let params: Vec<(String, String)> = match parts.uri.query() {
            Some(q) => serde_urlencoded_pairs(q)?,
            None => Vec::new(),
        };
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let token = header("X-Nomad-Token")
            .or_else(|| {
                header("Authorization").and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
            })
            .map(|t| t.trim().to_string());
        let call = Call {
            creds: Credentials {
                token,
                consistent: false,
            },
            params,
        };
        if call.get("filter").is_some() {
            return Err(ApiError::BadRequest(
                "query parameter filter is not supported: drover has no implementation of \
                 Nomad's filter expressions (go-bexpr); use prefix and namespace"
                    .into(),
            ));
        }
        let consistent = call.flag("consistent")?;
        Ok(Call {
            creds: Credentials {
                consistent,
                ..call.creds
            },
            ..call
        })
    }
}

fn serde_urlencoded_pairs(q: &str) -> Result<Vec<(String, String)>, ApiError> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(
        &format!("/?{q}")
            .parse()
            .map_err(|_| ApiError::BadRequest(format!("invalid query string {q:?}")))?,
    )
    .map(|q| q.0)
    .map_err(|e| ApiError::BadRequest(format!("invalid query string: {e}")))
}

impl Call {
    /// The same credentials and blocking query (`index`, `wait`) without the other
    /// parameters: for a read the adapter makes to build its answer (the namespaces from
    /// the job list), which blocks as the request asks but must not take its paging.
    pub fn blocking_only(&self) -> Self {
        Call {
            creds: self.creds.clone(),
            params: self
                .params
                .iter()
                .filter(|(k, _)| k == "index" || k == "wait")
                .cloned()
                .collect(),
        }
    }

    /// The first value of query parameter `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of query parameter `name` (`topic` repeats).
    pub fn all(&self, name: &str) -> impl Iterator<Item = &str> {
        self.params
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter: present with no value, or `true`/`1` in any case, is true.
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.get(name) {
            None => Ok(false),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "" | "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(ApiError::BadRequest(format!(
                    "query parameter {name}: {v:?} is not a boolean"
                ))),
            },
        }
    }

    /// A whole-number parameter.
    pub fn number(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse().map_err(|_| {
                    ApiError::BadRequest(format!(
                        "query parameter {name}: {v:?} is not a whole number"
                    ))
                })
            })
            .transpose()
    }

    pub fn prefix(&self) -> &str {
        self.get("prefix").unwrap_or("")
    }

    /// The namespace of a call on one object: `default` unless given.
    pub fn namespace(&self) -> &str {
        match self.get("namespace") {
            Some(ns) if !ns.is_empty() => ns,
            _ => drover_core::DEFAULT_NAMESPACE,
        }
    }

    /// The namespace filter of a list: `*` (every namespace) is drover's empty string.
    pub fn list_namespace(&self) -> &str {
        match self.namespace() {
            "*" => "",
            ns => ns,
        }
    }

    /// `per_page` as a page size (0: every page), and `next_token`.
    pub fn page(&self) -> Result<(u32, String), ApiError> {
        let per_page = self.number("per_page")?.unwrap_or(0);
        let per_page = u32::try_from(per_page).unwrap_or(u32::MAX);
        Ok((per_page, self.get("next_token").unwrap_or("").to_string()))
    }

    /// A blocking query's options: wait until state has passed `index` (Nomad returns
    /// once its index exceeds the one given), for at most `wait` (clamped to
    /// [`MAX_WAIT`]; the server caps it further at its `max_query_wait`). `None` without
    /// `index`: answer at once.
    pub fn blocking(&self) -> Result<Option<pb::QueryOptions>, ApiError> {
        let Some(index) = self.number("index")?.filter(|i| *i > 0) else {
            return Ok(None);
        };
        let wait = match self.get("wait") {
            Some(w) if !w.is_empty() => parse_go_duration(w).ok_or_else(|| {
                ApiError::BadRequest(format!("query parameter wait: invalid duration {w:?}"))
            })?,
            _ => Duration::ZERO,
        };
        let wait = wait.min(MAX_WAIT);
        Ok(Some(pb::QueryOptions {
            min_index: index.saturating_add(1),
            max_wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        }))
    }
}

/// A Go duration (`300ms`, `1.5h`, `2m30s`), as Nomad's `wait` and TTLs are written.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    drover_core::jobspec::parse_duration(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_writes_them() {
        let table = [
            ("300ms", Some(Duration::from_millis(300))),
            ("2m30s", Some(Duration::from_secs(150))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("15", None),
            ("10x", None),
            ("m", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_go_duration(text), want, "{text}");
        }
    }

    #[test]
    fn a_wait_over_ten_minutes_is_clamped() {
        let call = Call {
            params: vec![("index".into(), "7".into()), ("wait".into(), "2h".into())],
            ..Call::default()
        };
        let q = call.blocking().expect("valid").expect("blocking");
        assert_eq!(q.min_index, 8);
        assert_eq!(q.max_wait_ms, 600_000);
        assert!(Call::default().blocking().expect("valid").is_none());
    }
}
