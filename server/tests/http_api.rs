//! Nomad's HTTP API on a real server: every route meets the gRPC API's ACL checks (it
//! calls the gRPC stack in process), and bad requests are refused as Nomad refuses them.

use crate::common;

use common::api::Api;
use drover_proto::bearer::BearerChannel;
use drover_proto::v1 as pb;
use drover_proto::v1::acl_service_client::AclServiceClient;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP answer: status, headers (lowercased names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A plain HTTP/1.1 request with the token in `X-Nomad-Token`; with `head_only` the
/// answer's body is not read (streams).
async fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
    head_only: bool,
) -> Answer {
    let auth = token
        .map(|t| format!("X-Nomad-Token: {t}\r\n"))
        .unwrap_or_default();
    request(addr, method, path, &auth, body, head_only).await
}

/// A plain HTTP/1.1 request with `auth` (whole header lines, each ending in CRLF).
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    auth: &str,
    body: &str,
    head_only: bool,
) -> Answer {
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.expect("sent");
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut buf))
            .await
            .expect("answered in time")
            .expect("reads");
        raw.extend_from_slice(&buf[..n]);
        if n == 0 || (head_only && raw.windows(4).any(|w| w == b"\r\n\r\n")) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked && !head_only {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// A server serving the HTTP API on a free port.
async fn start(acl: bool) -> (Api, String) {
    let api = Api::start(|c| {
        c.acl_enabled = acl;
        c.http_addr = Some("127.0.0.1:0".into());
    })
    .await;
    let addr = api
        .api
        .http_addr()
        .expect("the HTTP API is served")
        .to_string();
    (api, addr)
}

const JOB: &str = r#"{"Job": {"ID": "web", "Type": "service", "TaskGroups": [{"Name": "g",
    "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"},
    "Resources": {"CPU": 50, "MemoryMB": 32}}]}]}}"#;

/// What a route needs of a token.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Need {
    /// Any token that may read (the read-only one).
    Read,
    /// More than the read-only token's `read` policies grant (writes, and task logs,
    /// which need `read-logs`).
    More,
    /// A management token (the ACL endpoints).
    Management,
    /// Nothing: served without a token (leader and peers as gRPC's Status calls, the
    /// parser, which touches no state, and what drover answers with 501).
    None,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_checks_the_token_as_grpc_does() {
    let (api, addr) = start(true).await;
    let raw = Api::endpoint(&api.api).connect().await.expect("connect");
    let boot = AclServiceClient::new(BearerChannel::plain(raw.clone()))
        .bootstrap(pb::AclBootstrapRequest {})
        .await
        .expect("bootstrap")
        .into_inner();
    let management = boot.token.expect("token").secret_id;
    let admin = AclServiceClient::new(BearerChannel::new(raw, Some(&management)).expect("header"));
    let rules = r#"namespace "*" { policy = "read" }
node { policy = "read" }
operator { policy = "read" }"#;
    admin
        .clone()
        .policy_apply(pb::AclPolicyApplyRequest {
            name: "ro".into(),
            description: String::new(),
            rules: rules.into(),
        })
        .await
        .expect("policy");
    let read_only = admin
        .clone()
        .token_create(pb::AclTokenCreateRequest {
            name: "ro".into(),
            r#type: "client".into(),
            policies: vec!["ro".into()],
            ttl_ms: 0,
        })
        .await
        .expect("token")
        .into_inner()
        .token
        .expect("token")
        .secret_id;
    let created = http(&addr, "POST", "/v1/jobs", Some(&management), JOB, false).await;
    assert_eq!(created.status, 200, "{created:?}");

    let node = "6f3a1c2e-0000-4000-8000-000000000001";
    let alloc = "6f3a1c2e-0000-4000-8000-000000000002";
    let parse = r#"{"JobHCL": "job \"p\" {\n group \"g\" {\n task \"t\" {\n driver = \"raw_exec\"\n config {\n command = \"/bin/true\"\n }\n }\n }\n}"}"#;
    let table: Vec<(&str, String, &str, Need)> = vec![
        ("GET", "/v1/jobs".into(), "", Need::Read),
        ("GET", "/v1/services".into(), "", Need::Read),
        ("GET", "/v1/service/db".into(), "", Need::Read),
        ("POST", "/v1/jobs".into(), JOB, Need::More),
        ("POST", "/v1/jobs/parse".into(), parse, Need::None),
        ("POST", "/v1/validate/job".into(), JOB, Need::Read),
        ("GET", "/v1/job/web".into(), "", Need::Read),
        ("POST", "/v1/job/web".into(), JOB, Need::More),
        ("DELETE", "/v1/job/absent".into(), "", Need::More),
        ("GET", "/v1/job/web/versions".into(), "", Need::Read),
        ("GET", "/v1/job/web/allocations".into(), "", Need::Read),
        ("GET", "/v1/job/web/evaluations".into(), "", Need::Read),
        ("GET", "/v1/job/web/summary".into(), "", Need::Read),
        ("POST", "/v1/job/web/plan".into(), JOB, Need::More),
        ("POST", "/v1/job/web/evaluate".into(), "", Need::More),
        (
            "POST",
            "/v1/job/web/revert".into(),
            r#"{"JobVersion": 0}"#,
            Need::More,
        ),
        (
            "POST",
            "/v1/job/web/scale".into(),
            r#"{"Count": 2, "Target": {"Group": "g"}}"#,
            Need::More,
        ),
        ("POST", "/v1/job/web/dispatch".into(), "{}", Need::More),
        ("POST", "/v1/job/web/periodic/force".into(), "", Need::More),
        ("GET", "/v1/job/web/deployments".into(), "", Need::Read),
        ("GET", "/v1/job/web/deployment".into(), "", Need::Read),
        ("GET", "/v1/job/web/services".into(), "", Need::Read),
        ("GET", "/v1/nodes".into(), "", Need::Read),
        ("GET", format!("/v1/node/{node}"), "", Need::Read),
        (
            "GET",
            format!("/v1/node/{node}/allocations"),
            "",
            Need::Read,
        ),
        (
            "POST",
            format!("/v1/node/{node}/drain"),
            r#"{"DrainSpec": {"Deadline": 0}}"#,
            Need::More,
        ),
        (
            "POST",
            format!("/v1/node/{node}/eligibility"),
            r#"{"Eligibility": "ineligible"}"#,
            Need::More,
        ),
        (
            "POST",
            format!("/v1/drover/node/{node}/offline"),
            "",
            Need::More,
        ),
        (
            "POST",
            format!("/v1/drover/node/{node}/online"),
            "",
            Need::More,
        ),
        ("POST", format!("/v1/node/{node}/purge"), "", Need::More),
        ("GET", "/v1/allocations".into(), "", Need::Read),
        ("GET", format!("/v1/allocation/{alloc}"), "", Need::Read),
        (
            "GET",
            format!("/v1/allocation/{alloc}/services"),
            "",
            Need::Read,
        ),
        (
            "GET",
            format!("/v1/client/allocation/{alloc}/checks"),
            "",
            Need::Read,
        ),
        (
            "POST",
            format!("/v1/allocation/{alloc}/stop"),
            "",
            Need::More,
        ),
        (
            "POST",
            format!("/v1/client/allocation/{alloc}/restart"),
            "",
            Need::More,
        ),
        (
            "GET",
            format!("/v1/client/fs/logs/{alloc}?task=t"),
            "",
            Need::More,
        ),
        ("GET", "/v1/evaluations".into(), "", Need::Read),
        ("GET", format!("/v1/evaluation/{alloc}"), "", Need::Read),
        (
            "GET",
            format!("/v1/evaluation/{alloc}/allocations"),
            "",
            Need::Read,
        ),
        ("GET", "/v1/deployments".into(), "", Need::Read),
        ("GET", format!("/v1/deployment/{alloc}"), "", Need::Read),
        (
            "GET",
            format!("/v1/deployment/allocations/{alloc}"),
            "",
            Need::Read,
        ),
        (
            "POST",
            format!("/v1/deployment/promote/{alloc}"),
            r#"{"All": true}"#,
            Need::More,
        ),
        (
            "POST",
            format!("/v1/deployment/fail/{alloc}"),
            "",
            Need::More,
        ),
        (
            "POST",
            format!("/v1/deployment/pause/{alloc}"),
            r#"{"Pause": true}"#,
            Need::More,
        ),
        (
            "POST",
            format!("/v1/deployment/unblock/{alloc}"),
            "",
            Need::More,
        ),
        (
            "POST",
            format!("/v1/deployment/allocation-health/{alloc}"),
            "{}",
            Need::None,
        ),
        ("GET", "/v1/status/leader".into(), "", Need::None),
        ("GET", "/v1/status/peers".into(), "", Need::None),
        ("GET", "/v1/agent/self".into(), "", Need::Read),
        ("GET", "/v1/agent/members".into(), "", Need::Read),
        ("GET", "/v1/namespaces".into(), "", Need::Read),
        (
            "GET",
            "/v1/operator/scheduler/configuration".into(),
            "",
            Need::Read,
        ),
        (
            "PUT",
            "/v1/operator/scheduler/configuration".into(),
            r#"{"SchedulerAlgorithm": "binpack"}"#,
            Need::More,
        ),
        (
            "GET",
            "/v1/operator/raft/configuration".into(),
            "",
            Need::None,
        ),
        (
            "DELETE",
            "/v1/operator/raft/peer?id=99".into(),
            "",
            Need::More,
        ),
        (
            "PUT",
            "/v1/operator/raft/transfer-leadership?id=99".into(),
            "",
            Need::More,
        ),
        ("GET", "/v1/event/stream".into(), "", Need::Read),
        (
            "POST",
            "/v1/search".into(),
            r#"{"Prefix": "w", "Context": "jobs"}"#,
            Need::Read,
        ),
        (
            "POST",
            "/v1/search/fuzzy".into(),
            r#"{"Text": "w", "Context": "jobs"}"#,
            Need::Read,
        ),
        ("GET", "/v1/acl/token/self".into(), "", Need::Read),
        ("GET", "/v1/acl/tokens".into(), "", Need::Management),
        (
            "POST",
            "/v1/acl/token".into(),
            r#"{"Name": "x", "Type": "management"}"#,
            Need::Management,
        ),
        (
            "GET",
            format!("/v1/acl/token/{alloc}"),
            "",
            Need::Management,
        ),
        (
            "DELETE",
            format!("/v1/acl/token/{alloc}"),
            "",
            Need::Management,
        ),
        ("GET", "/v1/acl/policies".into(), "", Need::Management),
        ("GET", "/v1/acl/policy/ro".into(), "", Need::Management),
        (
            "POST",
            "/v1/acl/policy/extra".into(),
            r#"{"Rules": "node { policy = \"read\" }"}"#,
            Need::Management,
        ),
        (
            "DELETE",
            "/v1/acl/policy/absent".into(),
            "",
            Need::Management,
        ),
    ];
    let mut failures = Vec::new();
    for (method, path, body, need) in &table {
        let stream = path.starts_with("/v1/event/stream");
        for (who, token) in [
            ("no token", None),
            ("read-only", Some(read_only.as_str())),
            ("management", Some(management.as_str())),
        ] {
            let answer = http(&addr, method, path, token, body, stream).await;
            let refused = answer.status == 403;
            let want_refused = match (who, need) {
                (_, Need::None) | ("management", _) => false,
                ("no token", _) => true,
                (_, Need::Read) => false,
                _ => true,
            };
            if refused != want_refused {
                failures.push(format!(
                    "{method} {path} with {who}: {} {}",
                    answer.status, answer.body
                ));
            }
            if refused && !answer.body.starts_with("Permission denied") {
                failures.push(format!("{method} {path}: 403 says {:?}", answer.body));
            }
        }
    }
    // The token may come as `Authorization: Bearer` instead, as Nomad's clients send it.
    for (auth, want) in [
        (format!("Authorization: Bearer {read_only}\r\n"), 200),
        (format!("Authorization: bearer {read_only}\r\n"), 200),
        ("Authorization: Bearer not-a-token\r\n".to_string(), 403),
        (format!("Authorization: Basic {read_only}\r\n"), 403),
    ] {
        let answer = request(&addr, "GET", "/v1/jobs", &auth, "", false).await;
        if answer.status != want {
            failures.push(format!(
                "GET /v1/jobs with {auth:?}: want {want}, got {} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_as_nomad_refuses_them() {
    let (_api, addr) = start(false).await;
    let table: &[(&str, &str, &str, u16, &str)] = &[
        (
            "POST",
            "/v1/jobs",
            r#"{"Job": {"#,
            400,
            "invalid json at line 1 column 9",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"Job": {"ID": "x"}, "Bogus": 1}"#,
            400,
            "unknown field `Bogus`",
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"Job": {"ID": "x", "Foo": 1}}"#,
            400,
            r#"unknown key "Foo""#,
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"Job": {"ID": "x", "Affinities": [{"LTarget": "a"}]}}"#,
            400,
            "Job.Affinities: a Nomad feature drover does not support",
        ),
        (
            "POST",
            "/v1/job/other",
            JOB,
            400,
            r#"job id "web" in the body does not match "other" in the path"#,
        ),
        (
            "POST",
            "/v1/jobs",
            r#"{"Job": {"ID": "x", "TaskGroups": []}}"#,
            400,
            "group",
        ),
        (
            "PATCH",
            "/v1/jobs",
            "",
            405,
            "method PATCH is not allowed on /v1/jobs",
        ),
        ("DELETE", "/v1/nodes", "", 405, "not allowed"),
        ("GET", "/v1/nope", "", 404, "/v1/nope"),
        (
            "GET",
            "/v1/jobs?filter=Status%20%3D%3D%20%22running%22",
            "",
            400,
            "query parameter filter is not supported",
        ),
        (
            "GET",
            "/v1/jobs?index=nine",
            "",
            400,
            "query parameter index",
        ),
        (
            "GET",
            "/v1/jobs?index=1&wait=soon",
            "",
            400,
            "query parameter wait",
        ),
        (
            "POST",
            "/v1/deployment/allocation-health/x",
            "{}",
            501,
            r#""Endpoint":"POST /v1/deployment/allocation-health/x""#,
        ),
        ("GET", "/v1/deployment/abc123", "", 404, "abc123"),
        (
            "GET",
            "/v1/allocation/x/checks",
            "",
            501,
            "/v1/client/allocation/{id}/checks",
        ),
        (
            "GET",
            "/v1/client/allocation/6f3a1c2e-0000-4000-8000-000000000009/checks",
            "",
            404,
            "not found",
        ),
        (
            "POST",
            "/v1/deployment/pause/x",
            "{}",
            400,
            "Pause: missing",
        ),
        (
            "POST",
            "/v1/deployment/promote/x",
            r#"{"DeploymentID": "y", "All": true}"#,
            400,
            r#"DeploymentID "y" in the body does not match "x" in the path"#,
        ),
        ("GET", "/v1/job/absent/deployment", "", 200, "null"),
        ("GET", "/v1/job/absent/services", "", 404, "absent"),
        ("GET", "/v1/job/absent", "", 404, "absent"),
        (
            "POST",
            "/v1/node/x/eligibility",
            r#"{"Eligibility": "maybe"}"#,
            400,
            "Eligibility: unknown value",
        ),
        (
            "GET",
            "/v1/event/stream?topic=Weather",
            "",
            400,
            "unknown topic",
        ),
    ];
    let mut failures = Vec::new();
    for (method, path, body, status, says) in table {
        let answer = http(&addr, method, path, None, body, false).await;
        if answer.status != *status || !answer.body.contains(says) {
            failures.push(format!(
                "{method} {path}: want {status} saying {says:?}, got {} {:?}",
                answer.status, answer.body
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_query_waits_for_the_next_change() {
    let (_api, addr) = start(false).await;
    let first = http(&addr, "GET", "/v1/jobs", None, "", false).await;
    let index: u64 = first
        .header("x-nomad-index")
        .and_then(|v| v.parse().ok())
        .expect("an index header");
    assert_eq!(first.header("x-nomad-knownleader"), Some("true"));
    assert!(first.header("x-nomad-lastcontact").is_some());

    // Nothing changes: the wait runs out and the answer is the same state.
    let started = Instant::now();
    let quiet = http(
        &addr,
        "GET",
        &format!("/v1/jobs?index={index}&wait=1s"),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(quiet.status, 200, "{quiet:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "answered before the wait"
    );
    assert_eq!(
        quiet.header("x-nomad-index"),
        Some(index.to_string().as_str())
    );

    // A registration during the wait answers it early, with the new index.
    let addr2 = addr.clone();
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let a = http(
            &addr2,
            "GET",
            &format!("/v1/jobs?index={index}&wait=30s"),
            None,
            "",
            false,
        )
        .await;
        (a, started.elapsed())
    });
    let registered = http(&addr, "POST", "/v1/jobs", None, JOB, false).await;
    assert_eq!(registered.status, 200, "{registered:?}");
    let (woken, took) = waiter.await.expect("the waiter answers");
    let new_index: u64 = woken
        .header("x-nomad-index")
        .and_then(|v| v.parse().ok())
        .expect("an index header");
    assert!(new_index > index, "{woken:?}");
    assert!(took < Duration::from_secs(20), "woke only after {took:?}");
    assert!(woken.body.contains(r#""ID":"web""#), "{}", woken.body);
}

/// A job of id `id` in `namespace`, as Nomad's JSON register body.
fn job_in(id: &str, namespace: &str) -> String {
    JOB.replacen(
        r#""ID": "web""#,
        &format!(r#""ID": "{id}", "Namespace": "{namespace}""#),
        1,
    )
}

/// Every string value of field `field` in a JSON answer, in order.
fn values_of(body: &str, field: &str) -> Vec<String> {
    let key = format!(r#""{field}":""#);
    body.split(key.as_str())
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(v, _)| v.to_string()))
        .collect()
}

/// The `ID`s of a JSON list answer, in order.
fn ids(answer: &Answer) -> Vec<String> {
    assert!(answer.body.starts_with('['), "not a list: {answer:?}");
    values_of(&answer.body, "ID")
}

/// `prefix`, `namespace` (`*` for every one) and pagination (`per_page`, `next_token`,
/// answered in `X-Nomad-NextToken`) narrow a list as they narrow Nomad's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_take_prefix_namespace_and_pages_as_nomads_do() {
    let (_api, addr) = start(false).await;
    for (id, namespace) in [
        ("web-a", "default"),
        ("web-b", "default"),
        ("db", "default"),
        ("web-p", "prod"),
    ] {
        let body = job_in(id, namespace);
        let registered = http(&addr, "POST", "/v1/jobs", None, &body, false).await;
        assert_eq!(registered.status, 200, "{id}: {registered:?}");
    }
    let table: &[(&str, &[&str])] = &[
        ("/v1/jobs", &["db", "web-a", "web-b"]),
        ("/v1/jobs?prefix=web", &["web-a", "web-b"]),
        ("/v1/jobs?namespace=prod", &["web-p"]),
        ("/v1/jobs?namespace=*", &["db", "web-a", "web-b", "web-p"]),
        ("/v1/jobs?namespace=*&prefix=web-p", &["web-p"]),
        ("/v1/jobs?prefix=nothing", &[]),
    ];
    for (path, want) in table {
        let answer = http(&addr, "GET", path, None, "", false).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        let mut got = ids(&answer);
        got.sort();
        assert_eq!(got, *want, "{path}");
        assert_eq!(answer.header("x-nomad-nexttoken"), None, "{path}");
    }

    // Two a page: the token of the first answer fetches the rest, and the last page
    // carries none.
    let mut seen = Vec::new();
    let mut path = "/v1/jobs?namespace=*&per_page=2".to_string();
    let mut pages = 0;
    loop {
        let answer = http(&addr, "GET", &path, None, "", false).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        let page = ids(&answer);
        assert!(!page.is_empty() && page.len() <= 2, "{path}: {page:?}");
        seen.extend(page);
        pages += 1;
        match answer.header("x-nomad-nexttoken") {
            Some(token) => path = format!("/v1/jobs?namespace=*&per_page=2&next_token={token}"),
            None => break,
        }
        assert!(pages < 10, "the pages never end: {seen:?}");
    }
    seen.sort();
    assert_eq!(seen, ["db", "web-a", "web-b", "web-p"]);
    assert_eq!(pages, 2);

    // Evaluations are filtered by namespace and prefix before they are paged: one a page,
    // no page comes back empty while a token remains (web-p's eval, the newest, is in
    // another namespace).
    let evals_of = |answer: &Answer| -> Vec<(String, String)> {
        ids(answer)
            .into_iter()
            .zip(values_of(&answer.body, "Namespace"))
            .collect()
    };
    // Scheduling may still add evals (blocked ones) meanwhile: every eval listed before the
    // paging is paged, and nothing paged is missing from a listing after it.
    let listed = |answer: Answer| -> std::collections::BTreeSet<(String, String)> {
        evals_of(&answer).into_iter().collect()
    };
    let whole = "/v1/evaluations?namespace=default";
    let before = listed(http(&addr, "GET", whole, None, "", false).await);
    assert!(before.len() >= 3, "one eval a job at least: {before:?}");
    let mut seen = Vec::new();
    let mut path = "/v1/evaluations?namespace=default&per_page=1".to_string();
    loop {
        let answer = http(&addr, "GET", &path, None, "", false).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        let page = evals_of(&answer);
        assert_eq!(page.len(), 1, "{path}: {page:?}");
        assert!(
            page.iter().all(|(_, ns)| ns == "default"),
            "{path}: {page:?}"
        );
        seen.extend(page);
        match answer.header("x-nomad-nexttoken") {
            Some(token) => {
                path = format!("/v1/evaluations?namespace=default&per_page=1&next_token={token}")
            }
            None => break,
        }
        assert!(seen.len() < 20, "the pages never end: {seen:?}");
    }
    let after = listed(http(&addr, "GET", whole, None, "", false).await);
    let paged: std::collections::BTreeSet<(String, String)> = seen.iter().cloned().collect();
    assert_eq!(paged.len(), seen.len(), "an eval paged twice: {seen:?}");
    assert!(
        before.is_subset(&paged),
        "paged {paged:?}, listed before {before:?}"
    );
    assert!(
        paged.is_subset(&after),
        "paged {paged:?}, listed after {after:?}"
    );
    let (oldest, _) = seen.last().unwrap().clone();
    let path = format!("/v1/evaluations?prefix={}&per_page=1", &oldest[..8]);
    let answer = http(&addr, "GET", &path, None, "", false).await;
    assert_eq!(
        evals_of(&answer),
        [(oldest, "default".to_string())],
        "{path}"
    );
    assert_eq!(answer.header("x-nomad-nexttoken"), None, "{path}");

    // A fuzzy search names the namespace a job was found in as its scope, whether the
    // namespace was given or is the default.
    for (path, body, want) in [
        (
            "/v1/search/fuzzy",
            r#"{"Text": "web-", "Context": "jobs"}"#,
            r#"{"ID":"web-a","Scope":["default"]}"#,
        ),
        (
            "/v1/search/fuzzy?namespace=prod",
            r#"{"Text": "web-", "Context": "jobs"}"#,
            r#"{"ID":"web-p","Scope":["prod"]}"#,
        ),
        (
            "/v1/search/fuzzy",
            r#"{"Text": "web-", "Context": "jobs", "Namespace": "prod"}"#,
            r#"{"ID":"web-p","Scope":["prod"]}"#,
        ),
    ] {
        let answer = http(&addr, "POST", path, None, body, false).await;
        assert_eq!(answer.status, 200, "{path} {body}: {answer:?}");
        assert!(answer.body.contains(want), "{path} {body}: {}", answer.body);
    }
}

/// Every read Nomad answers as a blocking query takes `index` and `wait`: asked for an
/// index far past the log's, each waits out its `wait` before answering (Nomad does the
/// same), where a read that ignored the parameters would answer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_nomad_blocks_on_takes_index_and_wait() {
    let (_api, addr) = start(false).await;
    let registered = http(&addr, "POST", "/v1/jobs", None, JOB, false).await;
    assert_eq!(registered.status, 200, "{registered:?}");
    let eval = values_of(&registered.body, "EvalID")
        .pop()
        .expect("an eval id");
    let reads = [
        "/v1/jobs".to_string(),
        "/v1/job/web".into(),
        "/v1/job/web/versions".into(),
        "/v1/job/web/allocations".into(),
        "/v1/job/web/evaluations".into(),
        "/v1/job/web/summary".into(),
        "/v1/job/web/deployments".into(),
        "/v1/nodes".into(),
        "/v1/allocations".into(),
        "/v1/evaluations".into(),
        format!("/v1/evaluation/{eval}"),
        format!("/v1/evaluation/{eval}/allocations"),
        "/v1/deployments".into(),
        "/v1/namespaces".into(),
        "/v1/operator/scheduler/configuration".into(),
    ];
    let wait = Duration::from_millis(700);
    let mut failures = Vec::new();
    for read in &reads {
        let sep = if read.contains('?') { '&' } else { '?' };
        let path = format!("{read}{sep}index=999999999&wait=700ms");
        let started = Instant::now();
        let answer = http(&addr, "GET", &path, None, "", false).await;
        let took = started.elapsed();
        if answer.status != 200 || took < wait {
            failures.push(format!(
                "{path}: {} after {took:?} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Nomad's ACL token and policy lists are blocking queries as every other list: a wait
/// at the answer's index runs out at `wait` when nothing changes and ends early, with the
/// change in it, when a token or policy is written; the index is the state's, as the
/// other lists answer (ACL writes and every other write move it alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_lists_block_until_the_next_change() {
    let (_api, addr) = start(true).await;
    let boot = http(&addr, "POST", "/v1/acl/bootstrap", None, "", false).await;
    assert_eq!(boot.status, 200, "{boot:?}");
    let management = values_of(&boot.body, "SecretID")
        .pop()
        .expect("a secret id");
    let token = Some(management.as_str());
    let writes: [(&str, &str, &str, &str); 2] = [
        (
            "/v1/acl/tokens",
            "/v1/acl/token",
            r#"{"Name": "late", "Type": "management"}"#,
            r#""Name":"late""#,
        ),
        (
            "/v1/acl/policies",
            "/v1/acl/policy/late",
            r#"{"Name": "late", "Rules": "node { policy = \"read\" }"}"#,
            r#""Name":"late""#,
        ),
    ];
    for (list, write, body, written) in writes {
        let first = http(&addr, "GET", list, token, "", false).await;
        assert_eq!(first.status, 200, "{list}: {first:?}");
        let index: u64 = first
            .header("x-nomad-index")
            .and_then(|v| v.parse().ok())
            .expect("an index header");

        let started = Instant::now();
        let quiet = http(
            &addr,
            "GET",
            &format!("{list}?index={index}&wait=700ms"),
            token,
            "",
            false,
        )
        .await;
        let took = started.elapsed();
        assert_eq!(quiet.status, 200, "{list}: {quiet:?}");
        assert!(
            took >= Duration::from_millis(650),
            "{list} answered after {took:?}, before the wait"
        );
        assert_eq!(
            quiet.header("x-nomad-index"),
            Some(index.to_string().as_str()),
            "{list}"
        );

        let (addr2, path, secret) = (
            addr.clone(),
            format!("{list}?index={index}&wait=30s"),
            management.clone(),
        );
        let waiter = tokio::spawn(async move {
            let started = Instant::now();
            let a = http(&addr2, "GET", &path, Some(&secret), "", false).await;
            (a, started.elapsed())
        });
        let done = http(&addr, "PUT", write, token, body, false).await;
        assert_eq!(done.status, 200, "{write}: {done:?}");
        let (woken, took) = waiter.await.expect("the waiter answers");
        assert_eq!(woken.status, 200, "{list}: {woken:?}");
        assert!(took < Duration::from_secs(20), "{list} woke after {took:?}");
        let new_index: u64 = woken
            .header("x-nomad-index")
            .and_then(|v| v.parse().ok())
            .expect("an index header");
        assert!(new_index > index, "{list}: {woken:?}");
        assert!(woken.body.contains(written), "{list}: {}", woken.body);
    }
}

/// `/v1/validate/job` (`nomad job validate`) answers a job's problems as Nomad's
/// `JobValidateResponse`, found by the same reader and validation a registration meets;
/// a body that is no register request is refused as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_answers_a_jobs_problems_as_nomad_does() {
    let (_api, addr) = start(false).await;
    let table: &[(&str, u16, &[&str])] = &[
        (
            JOB,
            200,
            &[
                r#""DriverConfigValidated":true"#,
                r#""Error":"""#,
                r#""ValidationErrors":null"#,
            ],
        ),
        (
            r#"{"Job": {"ID": "x", "Foo": 1}}"#,
            200,
            &[r#""DriverConfigValidated":false"#, r#"unknown key \"Foo\""#],
        ),
        (
            r#"{"Job": {"ID": "x", "TaskGroups": []}}"#,
            200,
            &[r#""DriverConfigValidated":false"#, "group"],
        ),
        (r#"{"Job": {"#, 400, &["invalid json at line 1 column 9"]),
        ("{}", 400, &["missing job"]),
    ];
    let mut failures = Vec::new();
    for (body, status, says) in table {
        let answer = http(&addr, "PUT", "/v1/validate/job", None, body, false).await;
        if answer.status != *status || !says.iter().all(|s| answer.body.contains(s)) {
            failures.push(format!(
                "{body}: want {status} saying {says:?}, got {} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Validating registers nothing.
    let jobs = http(&addr, "GET", "/v1/jobs", None, "", false).await;
    assert_eq!(jobs.body, "[]", "{jobs:?}");
}

/// Endpoints Nomad serves and drover does not answer 501 with a JSON error naming the
/// endpoint, never a 404 as though Nomad had no such path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_nomad_serves_and_drover_does_not_is_a_501() {
    let (_api, addr) = start(false).await;
    let table = [
        ("PUT", "/v1/acl/role"),
        ("GET", "/v1/acl/roles"),
        ("PUT", "/v1/acl/auth-method"),
        ("GET", "/v1/acl/auth-method/okta"),
        ("PUT", "/v1/acl/binding-rule"),
        ("DELETE", "/v1/acl/binding-rule/b1"),
        ("POST", "/v1/acl/login"),
        ("POST", "/v1/acl/oidc/auth-url"),
        ("POST", "/v1/acl/oidc/complete-auth"),
        ("POST", "/v1/acl/token/onetime"),
        ("POST", "/v1/acl/token/onetime/exchange"),
        ("GET", "/v1/client/metadata"),
        ("GET", "/v1/job/web/actions"),
        ("GET", "/v1/job/web/action"),
        ("GET", "/v1/plugin/csi/ebs"),
        ("GET", "/v1/volumes/external"),
        ("GET", "/v1/operator/keyring/keys"),
        ("GET", "/v1/operator/utilization"),
        ("GET", "/v1/operator/upgrade-check/vault-workload-identity"),
        ("GET", "/v1/quota/q"),
        ("GET", "/v1/quota-usages"),
        ("GET", "/v1/recommendations"),
        ("GET", "/v1/recommendation/r1"),
    ];
    let mut failures = Vec::new();
    for (method, path) in table {
        let answer = http(&addr, method, path, None, "", false).await;
        let endpoint = format!(r#""Endpoint":"{method} {path}""#);
        if answer.status != 501 || !answer.body.contains(&endpoint) {
            failures.push(format!(
                "{method} {path}: {} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A dispatched child's id holds a `/` (`parent/dispatch-...`), which Nomad's clients put in
/// the path unescaped: the known endpoint at the path's end is read off, the rest is the
/// id, as Nomad routes it; escaped (`%2F`) it routes the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_ids_with_a_slash_route_as_nomad_routes_them() {
    let (_api, addr) = start(false).await;
    let parent = JOB.replacen(r#""ID": "web""#, r#""ID": "p""#, 1).replacen(
        r#""Type": "service""#,
        r#""Type": "batch", "ParameterizedJob": {"MetaOptional": ["who"]}"#,
        1,
    );
    let registered = http(&addr, "POST", "/v1/jobs", None, &parent, false).await;
    assert_eq!(registered.status, 200, "{registered:?}");
    let dispatched = http(
        &addr,
        "POST",
        "/v1/job/p/dispatch",
        None,
        r#"{"Meta": {"who": "x"}}"#,
        false,
    )
    .await;
    assert_eq!(dispatched.status, 200, "{dispatched:?}");
    let child = values_of(&dispatched.body, "DispatchedJobID")
        .pop()
        .expect("a child id");
    assert!(child.starts_with("p/"), "{child}");
    let escaped = child.replace('/', "%2F");
    let table = [
        (format!("/v1/job/{child}"), format!(r#""ID":"{child}""#)),
        (format!("/v1/job/{escaped}"), format!(r#""ID":"{child}""#)),
        (
            format!("/v1/job/{child}/summary?namespace=default"),
            format!(r#""JobID":"{child}""#),
        ),
        (format!("/v1/job/{child}/allocations"), "[".to_string()),
        (
            format!("/v1/job/{child}/versions"),
            r#""Versions""#.to_string(),
        ),
    ];
    let mut failures = Vec::new();
    for (path, says) in &table {
        let answer = http(&addr, "GET", path, None, "", false).await;
        if answer.status != 200 || !answer.body.contains(says.as_str()) {
            failures.push(format!("{path}: {} {}", answer.status, answer.body));
        }
    }
    let absent = http(&addr, "GET", "/v1/job/p/nothing", None, "", false).await;
    if absent.status != 404 || !absent.body.contains("p/nothing not found") {
        failures.push(format!("/v1/job/p/nothing: {absent:?}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The service catalog over Nomad's API: empty lists at first, and a blocking query on it
/// waits for the catalog (not any write) and answers its index when the wait runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_catalog_answers_as_nomad_lists_it() {
    let (_api, addr) = start(false).await;
    let list = http(&addr, "GET", "/v1/services", None, "", false).await;
    assert_eq!((list.status, list.body.as_str()), (200, "[]"), "{list:?}");
    let index: u64 = list
        .header("x-nomad-index")
        .and_then(|v| v.parse().ok())
        .expect("an index header");
    let started = Instant::now();
    let registered = http(&addr, "POST", "/v1/jobs", None, JOB, false).await;
    assert_eq!(registered.status, 200, "{registered:?}");
    let quiet = http(
        &addr,
        "GET",
        &format!("/v1/service/db?index={index}&wait=500ms"),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(
        (quiet.status, quiet.body.as_str()),
        (200, "[]"),
        "{quiet:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "a job write does not wake a catalog read"
    );
    let bad = http(&addr, "GET", "/v1/services?wait=soon", None, "", false).await;
    assert_eq!(bad.status, 400, "{bad:?}");
}

/// An allocation's check results over Nomad's client endpoint: keyed by check id, each
/// with its service, check, Nomad's status and what the check said, as its agent reported,
/// and Nomad's mode from the job's check (`on_update = "ignore"` only gates readiness).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocations_checks_answer_as_nomads_client_endpoint() {
    use drover_core::types::*;
    let (api, addr) = start(false).await;
    let agents = common::join_many(&api.h, 1).await;
    let mut job = common::big_service_job("shop", 1);
    let task = job.groups[0].tasks[0].name.clone();
    let check = |name: &str, on_update| ServiceCheck {
        name: name.into(),
        kind: CheckKind::Script {
            command: "/bin/true".into(),
            args: Vec::new(),
        },
        interval: Duration::from_secs(10),
        timeout: Duration::from_secs(2),
        on_update,
        check_restart: None,
        task: Some(task.clone()),
    };
    job.groups[0].services = vec![Service {
        name: "db".into(),
        port_label: String::new(),
        tags: Vec::new(),
        meta: Default::default(),
        address_mode: AddressMode::Auto,
        checks: vec![
            check("ready", OnUpdate::RequireHealthy),
            check("warm", OnUpdate::Ignore),
        ],
    }];
    common::register(&api.h, job).await;
    let snap = common::wait_until(&api.h, "placed", |s| {
        common::live_allocs(s, "shop").len() == 1
    })
    .await;
    let alloc = common::live_allocs(&snap, "shop").remove(0);
    let registration = common::db_instance(
        &alloc,
        ServiceHealth::Critical,
        vec![
            CheckState {
                name: "ready".into(),
                check_type: CheckType::Http,
                status: CheckStatus::Critical,
                output: "GET http://127.0.0.1:5432/ready: 503".into(),
                http_status: Some(503),
                time: Timestamp(1_700_000_042_500),
            },
            CheckState {
                name: "warm".into(),
                check_type: CheckType::Script,
                status: CheckStatus::Passing,
                output: "warm".into(),
                http_status: None,
                time: Timestamp(1_700_000_043_000),
            },
        ],
    );
    api.h
        .update_allocs(drover_proto::convert::AllocUpdates {
            auth: agents[0].creds.clone(),
            updates: vec![drover_proto::convert::ClientAllocUpdate {
                update: drover_core::fsm::AllocClientUpdate {
                    alloc_id: alloc.id,
                    client_status: ClientStatus::Running,
                    client_description: Default::default(),
                    task_states: Default::default(),
                    deployment_health: None,
                },
                infra_failure: false,
                services: Some(vec![registration.clone()]),
            }],
        })
        .await
        .expect("the node reports its allocation");
    let answer = http(
        &addr,
        "GET",
        &format!("/v1/client/allocation/{}/checks", alloc.id),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let (id, warm) = (
        format!("{}-check-0", registration.id),
        format!("{}-check-1", registration.id),
    );
    let want = format!(
        r#"{{"{id}":{{"ID":"{id}","Check":"ready","Group":"{0}","Service":"db","Mode":"healthiness","Status":"failure","StatusCode":503,"Output":"GET http://127.0.0.1:5432/ready: 503","Timestamp":1700000042}},"{warm}":{{"ID":"{warm}","Check":"warm","Group":"{0}","Service":"db","Mode":"readiness","Status":"success","Output":"warm","Timestamp":1700000043}}}}"#,
        alloc.name
    );
    assert_eq!(answer.body, want);
}

/// Nomad's API over TLS with the gRPC API's certificates: a client the cluster CA signed is
/// served, one without a certificate is refused in the handshake (`verify_incoming`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_takes_the_grpc_apis_tls_settings() {
    use drover_server::tls::ServerTls;
    use drover_server::tls::dev_certs::{Role, create_ca, create_cert};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use std::sync::Arc;

    let certs = tempfile::tempdir().expect("temp dir");
    let ca = create_ca(1).expect("ca");
    let path = |name: &str| certs.path().join(name);
    for (name, pem) in [
        ("ca", ca.clone()),
        (
            "server",
            create_cert(&ca, Role::Server, &[], 1).expect("server cert"),
        ),
        (
            "cli",
            create_cert(&ca, Role::Cli, &[], 1).expect("cli cert"),
        ),
    ] {
        std::fs::write(path(&format!("{name}.pem")), &pem.cert).expect("written");
        std::fs::write(path(&format!("{name}-key.pem")), &pem.key).expect("written");
    }
    let api = Api::start(|c| {
        c.http_addr = Some("127.0.0.1:0".into());
        c.tls = Some(ServerTls {
            ca_file: path("ca.pem"),
            cert_file: path("server.pem"),
            key_file: path("server-key.pem"),
            verify_incoming: true,
            verify_server_hostname: true,
        });
    })
    .await;
    let addr = api.api.http_addr().expect("the HTTP API is served");

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path("ca.pem")).expect("ca") {
        roots.add(cert.expect("ca cert")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = || {
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots.clone())
    };
    let with_cert = builder()
        .with_client_auth_cert(
            CertificateDer::pem_file_iter(path("cli.pem"))
                .expect("cli cert")
                .collect::<Result<_, _>>()
                .expect("cli cert"),
            PrivateKeyDer::from_pem_file(path("cli-key.pem")).expect("cli key"),
        )
        .expect("client auth");
    let without_cert = builder().with_no_client_auth();
    // The server certificate names localhost (and 127.0.0.1) besides its role.
    let name = ServerName::try_from("localhost").expect("server name");
    let get = |config: rustls::ClientConfig| {
        let name = name.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects");
            let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            tls.write_all(b"GET /v1/regions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            let mut raw = Vec::new();
            tls.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
            Ok::<String, String>(String::from_utf8_lossy(&raw).to_string())
        }
    };
    let served = get(with_cert).await.expect("served over TLS");
    assert!(
        served.starts_with("HTTP/1.1 200") && served.contains(r#"["global"]"#),
        "{served}"
    );
    let refused = get(without_cert).await;
    assert!(
        refused.as_ref().map_or(true, |answer| answer.is_empty()),
        "a client without a certificate was served: {refused:?}"
    );
}

/// Nomad's `node purge`: an unknown node is a 404 naming it; a node with work is gone from
/// `/v1/nodes` at once, and the answer's evals (one per job with work there) exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purged_node_is_gone_and_its_jobs_are_evaluated() {
    let (api, addr) = start(false).await;
    let unknown = "6f3a1c2e-0000-4000-8000-00000000000f";
    let absent = http(
        &addr,
        "PUT",
        &format!("/v1/node/{unknown}/purge"),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(absent.status, 404, "{absent:?}");
    assert!(absent.body.contains(unknown), "{absent:?}");

    let agents = common::join_many(&api.h, 2).await;
    common::register(&api.h, common::big_service_job("shop", 2)).await;
    let snap = common::wait_until(&api.h, "placed", |s| {
        common::live_allocs(s, "shop").len() == 2
    })
    .await;
    let node = agents[0].creds.node_id;
    assert!(
        snap.allocs_by_node(&node).next().is_some(),
        "shop runs on it"
    );

    let purged = http(
        &addr,
        "POST",
        &format!("/v1/node/{node}/purge"),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(purged.status, 200, "{purged:?}");
    // `{"EvalIDs":["..."],...}`: one eval, for shop.
    let eval_ids: Vec<&str> = purged
        .body
        .split_once(r#""EvalIDs":["#)
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list.split(',').map(|v| v.trim_matches('"')).collect())
        .unwrap_or_default();
    assert_eq!(eval_ids.len(), 1, "one eval for shop: {}", purged.body);
    let index: u64 = purged
        .header("x-nomad-index")
        .and_then(|v| v.parse().ok())
        .expect("an index header");
    assert!(
        purged.body.contains(&format!(r#""Index":{index}"#)),
        "{}",
        purged.body
    );

    let nodes = http(&addr, "GET", "/v1/nodes", None, "", false).await;
    assert_eq!(nodes.status, 200, "{nodes:?}");
    assert!(!nodes.body.contains(&node.to_string()), "{}", nodes.body);
    assert!(nodes.body.contains(&agents[1].creds.node_id.to_string()));
    let eval = http(
        &addr,
        "GET",
        &format!("/v1/evaluation/{}", eval_ids[0]),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(eval.status, 200, "{eval:?}");
    assert!(eval.body.contains(r#""JobID":"shop""#), "{}", eval.body);
    assert!(
        eval.body.contains(r#""TriggeredBy":"node-update""#),
        "{}",
        eval.body
    );
    let again = http(
        &addr,
        "PUT",
        &format!("/v1/node/{node}/purge"),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(again.status, 404, "purged once: {again:?}");
}

/// `DELETE /v1/operator/raft/peer` and `PUT /v1/operator/raft/transfer-leadership` name
/// their server by `id=` or `address=` (one of them, as Nomad's do) and answer what
/// `ClusterService` answers; on one server every way to get them wrong is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_peer_calls_name_their_server_as_nomads_do() {
    let (_api, addr) = start(false).await;
    let peer = "/v1/operator/raft/peer";
    let transfer = "/v1/operator/raft/transfer-leadership";
    let table: &[(&str, String, u16, &str)] = &[
        ("DELETE", peer.into(), 400, "missing id or address"),
        (
            "DELETE",
            format!("{peer}?id=1&address=127.0.0.1:1"),
            400,
            "give the server's id or its address, not both",
        ),
        (
            "DELETE",
            format!("{peer}?id=abc"),
            400,
            r#"id: "abc" is not a server id"#,
        ),
        (
            "DELETE",
            format!("{peer}?address=127.0.0.9:1"),
            404,
            r#"address: no server at "127.0.0.9:1" in the Raft configuration"#,
        ),
        ("DELETE", format!("{peer}?id=99"), 404, "99"),
        ("DELETE", format!("{peer}?id=1"), 400, "1"),
        ("GET", peer.into(), 405, ""),
        ("PUT", transfer.into(), 400, "missing id or address"),
        ("PUT", format!("{transfer}?id=99"), 404, "99"),
        ("POST", format!("{transfer}?id=1"), 200, r#""LeaderID":"1""#),
        ("GET", transfer.into(), 405, ""),
    ];
    let mut failures = Vec::new();
    for (method, path, status, says) in table {
        let answer = http(&addr, method, path, None, "", false).await;
        if answer.status != *status || !answer.body.contains(says) {
            failures.push(format!(
                "{method} {path}: want {status} saying {says:?}, got {} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// On three servers the HTTP calls move the leadership and remove a server: a transfer
/// asked of the leader by the target's Raft address hands the leadership to it, and
/// removing the third server by id (asked of the new leader) leaves the other two in the
/// configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_calls_move_the_leadership_and_remove_a_server() {
    let (configs, _dirs) = common::cluster_configs(3, "http-raft-cluster-secret-0123");
    let mut servers = Vec::new();
    for mut c in configs {
        c.bind_addr = "127.0.0.1:0".into();
        c.http_addr = Some("127.0.0.1:0".into());
        let raft_addr = c.raft_addr.clone().expect("a raft address");
        let server = drover_server::Server::start(c)
            .await
            .expect("server starts");
        let api = server
            .serve(drover_server::api::ApiOptions::default())
            .await
            .expect("api serves");
        let http_addr = api.http_addr().expect("the HTTP API is served").to_string();
        servers.push((server, api, http_addr, raft_addr));
    }
    let first = servers[0].0.handle();
    common::eventually(&first, "a leader", || async {
        first.raft_metrics().current_leader.is_some()
    })
    .await;
    let leader = first.raft_metrics().current_leader.expect("a leader");
    let target = (1..=3u64).find(|id| *id != leader).expect("a follower");
    let third = (1..=3u64)
        .find(|id| *id != leader && *id != target)
        .expect("the third server");
    let at = |id: u64| &servers[id as usize - 1];

    let moved = http(
        &at(leader).2,
        "PUT",
        &format!(
            "/v1/operator/raft/transfer-leadership?address={}",
            at(target).3
        ),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(moved.status, 200, "{moved:?}");
    assert!(
        moved.body.contains(&format!(r#""LeaderID":"{target}""#)),
        "{}",
        moved.body
    );
    for (server, _, _, _) in &servers {
        let h = server.handle();
        common::eventually(&h, "the new leader", || async {
            h.raft_metrics().current_leader == Some(target)
        })
        .await;
    }

    let removed = http(
        &at(target).2,
        "DELETE",
        &format!("/v1/operator/raft/peer?id={third}"),
        None,
        "",
        false,
    )
    .await;
    assert_eq!(removed.status, 200, "{removed:?}");
    let index: u64 = removed
        .header("x-nomad-index")
        .and_then(|v| v.parse().ok())
        .expect("an index header");
    assert!(index > 0, "{removed:?}");
    let mut want = vec![at(leader).3.clone(), at(target).3.clone()];
    want.sort();
    // The leader's Raft metrics (which the configuration reads) may trail the commit.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let config = http(
            &at(target).2,
            "GET",
            "/v1/operator/raft/configuration",
            None,
            "",
            false,
        )
        .await;
        assert_eq!(config.status, 200, "{config:?}");
        let mut addresses = values_of(&config.body, "Address");
        addresses.sort();
        if addresses == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "want {want:?} in {}",
            config.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for (server, api, _, _) in servers {
        api.shutdown().await.expect("api stops");
        server.shutdown().await.expect("server stops");
    }
}
