//! Ids by prefix: every command that takes an eval, allocation or node id also takes the
//! eight characters the tables print, or any unique leading part (Nomad's behaviour);
//! node arguments take the node's name too.

use crate::client::Client;
use crate::error::{CliError, rpc_failed};
use drover_proto::v1 as pb;

/// What kind of object an id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Eval,
    Alloc,
    Node,
}

impl Kind {
    fn context(self) -> pb::SearchContext {
        match self {
            Kind::Eval => pb::SearchContext::Evals,
            Kind::Alloc => pb::SearchContext::Allocs,
            Kind::Node => pb::SearchContext::Nodes,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Eval => "evaluation",
            Kind::Alloc => "allocation",
            Kind::Node => "node",
        }
    }
}

/// Candidates listed in an ambiguity error; more are counted, not shown.
const SHOWN: u32 = 10;

/// The full id of the one `kind` whose id starts with `given`. A whole id is taken as
/// it is (the command's own call then says whether it exists).
pub async fn id(client: &Client, kind: Kind, given: &str) -> Result<String, CliError> {
    let given = given.trim();
    // Any id type parses any UUID: the shape is all that is checked here.
    if given.len() == 36 && given.parse::<drover_core::EvalId>().is_ok() {
        return Ok(given.to_string());
    }
    let answer = client
        .search()
        .prefix_search(pb::PrefixSearchRequest {
            prefix: given.to_string(),
            context: kind.context() as i32,
            namespace: client.namespace().to_string(),
            limit: SHOWN,
        })
        .await
        .map_err(rpc_failed(format_args!(
            "looking up {} {given:?}",
            kind.noun()
        )))?
        .into_inner();
    let found = answer
        .matches
        .into_iter()
        .find(|m| m.context == kind.context() as i32)
        .unwrap_or_default();
    pick(kind, given, found.ids, found.truncated)
}

/// The one match, or an error that says there is none or lists the candidates.
fn pick(kind: Kind, given: &str, mut ids: Vec<String>, more: bool) -> Result<String, CliError> {
    let noun = kind.noun();
    match ids.len() {
        1 if !more => Ok(ids.remove(0)),
        0 if kind == Kind::Node => Err(CliError::Usage(format!(
            "no node is called {given:?} or has an id starting with it"
        ))),
        0 => Err(CliError::Usage(format!(
            "no {noun} id starts with {given:?}"
        ))),
        n => {
            let count = if more {
                format!("more than {n}")
            } else {
                n.to_string()
            };
            Err(CliError::Usage(format!(
                "{count} {noun}s have ids starting with {given:?}: {}{}; give more characters",
                ids.join(", "),
                if more { ", ..." } else { "" }
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("a31ff64e-0000-4000-8000-00000000000{i}"))
            .collect()
    }

    #[test]
    fn one_match_or_a_clear_error() {
        // (matches, more than shown, answer or error)
        let cases: Vec<(Vec<String>, bool, Result<&str, &str>)> = vec![
            (ids(1), false, Ok("a31ff64e-0000-4000-8000-000000000000")),
            (vec![], false, Err("no evaluation id starts with \"a31f\"")),
            (
                ids(2),
                false,
                Err("2 evaluations have ids starting with \"a31f\": \
                     a31ff64e-0000-4000-8000-000000000000, a31ff64e-0000-4000-8000-000000000001; \
                     give more characters"),
            ),
            (
                ids(1),
                true,
                Err("more than 1 evaluations have ids starting with \"a31f\": \
                     a31ff64e-0000-4000-8000-000000000000, ...; give more characters"),
            ),
        ];
        for (found, more, want) in cases {
            let got = pick(Kind::Eval, "a31f", found, more).map_err(|e| e.to_string());
            assert_eq!(got.as_deref(), want.map_err(str::to_string).as_deref());
        }
    }
}
