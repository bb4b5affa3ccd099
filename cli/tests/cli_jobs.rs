//! The `drover job ...` commands against a real server: run, plan, status, history,
//! inspect and stop, their `-json` output, exit codes and one-line errors.

use crate::cli_support;

use cli_support::{
    assert_code, code, drover, drover_at, join_nodes, json, stderr, stdout, write_job,
};
use drover_tests::TestServer;

#[tokio::test(flavor = "multi_thread")]
async fn run_plan_status_and_stop_a_job() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 2).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "web", 3);
    let file = file.to_str().expect("utf-8 path");

    // A new job: the plan would place allocations, so it exits 1 (Nomad's convention).
    let plan = drover(&server, &["job", "plan", file]).await;
    assert_code(&plan, 1);
    let text = stdout(&plan);
    assert!(text.contains("+ Job: \"web\""), "{text}");
    assert!(text.contains("(3 create)"), "{text}");
    assert!(text.contains("-check-index 0"), "{text}");

    // Run follows the evaluation and shows where each allocation went.
    let run = drover(&server, &["job", "run", file]).await;
    assert_code(&run, 0);
    let text = stdout(&run);
    assert_eq!(text.matches("created: node").count(), 3, "{text}");
    assert!(text.contains("finished with status \"complete\""), "{text}");

    // Nothing left to change: the same file plans to exit 0.
    let replan = drover(&server, &["job", "plan", file]).await;
    assert_code(&replan, 0);

    // One field changed in the file: the plan names that field, and only it.
    let scaled_dir = tempfile::tempdir().expect("temp dir");
    let scaled = write_job(scaled_dir.path(), "web", 4);
    let diff = drover(&server, &["job", "plan", scaled.to_str().unwrap()]).await;
    assert_code(&diff, 1);
    let text = stdout(&diff);
    let fields: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("    ") && !l.trim().is_empty())
        .collect();
    assert_eq!(fields.len(), 1, "{text}");
    assert!(
        fields[0].trim().starts_with("~ groups[") && fields[0].ends_with(".count: 3 => 4"),
        "{text}"
    );

    // Status, as a table and as JSON that parses.
    let status = drover(&server, &["job", "status", "web"]).await;
    assert_code(&status, 0);
    assert!(
        stdout(&status).contains("Allocations"),
        "{}",
        stdout(&status)
    );
    let view = json(&drover(&server, &["job", "status", "web", "-json"]).await);
    assert_eq!(view["job"]["id"], "web");
    assert_eq!(view["allocations"].as_array().map(Vec::len), Some(3));
    let list = json(&drover(&server, &["job", "status", "--json"]).await);
    assert_eq!(list[0]["id"], "web");
    let history = json(&drover(&server, &["job", "history", "web", "-json"]).await);
    assert_eq!(history[0]["version"], 0);
    let spec = json(&drover(&server, &["job", "inspect", "web"]).await);
    assert_eq!(spec["groups"][0]["count"], 3);
    let evals = json(&drover(&server, &["eval", "list", "-job", "web", "-json"]).await);
    let eval_id = evals[0]["id"].as_str().expect("an eval id").to_string();
    let eval = json(&drover(&server, &["eval", "status", &eval_id, "-json"]).await);
    assert_eq!(eval["status"], "Complete");
    let alloc_id = view["allocations"][0]["id"]
        .as_str()
        .expect("an alloc id")
        .to_string();
    let alloc = json(&drover(&server, &["alloc", "status", &alloc_id, "-json"]).await);
    assert_eq!(alloc["job_id"], "web");

    // Stop: the evaluation stops every allocation and the job is marked stopped.
    let stop = drover(&server, &["job", "stop", "web"]).await;
    assert_code(&stop, 0);
    assert!(
        stdout(&stop).contains("finished with status \"complete\""),
        "{}",
        stdout(&stop)
    );
    let view = json(&drover(&server, &["job", "status", "web", "-json"]).await);
    assert_eq!(view["job"]["stop"], true);
    let desired: Vec<&str> = view["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .filter_map(|a| a["desired_status"].as_str())
        .collect();
    assert!(desired.iter().all(|d| *d == "Stop"), "{desired:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unplaceable_job_reports_why_and_exits_2() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "lonely", 1);
    // No nodes at all: the evaluation completes with a blocked follow-up.
    let run = drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await;
    assert_code(&run, 2);
    let text = stdout(&run);
    assert!(text.contains("failed to place all allocations"), "{text}");
    assert!(text.contains("Task Group \"api\""), "{text}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_are_one_clear_line_and_exit_1() {
    let server = TestServer::start().await;
    let cases: &[(&[&str], &str)] = &[
        (&["job", "status", "nope"], "nope"),
        (&["job", "stop", "nope"], "nope"),
        (&["eval", "status", "not-a-uuid"], "not-a-uuid"),
        (&["job", "run", "/no/such/file.hcl"], "/no/such/file.hcl"),
    ];
    for (args, named) in cases {
        let out = drover(&server, args).await;
        assert_eq!(code(&out), 1, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("Error: "), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} should name {named:?}: {err}");
    }
    // A plan error exits 255, so scripts can tell it from "changes" (1).
    let plan = drover(&server, &["job", "plan", "/no/such/file.hcl"]).await;
    assert_code(&plan, 255);

    // Nothing listens on port 1: the error names the address.
    let out = drover_at("http://127.0.0.1:1", &["job", "status"]).await;
    assert_code(&out, 1);
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot reach drover at http://127.0.0.1:1"),
        "{err}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dispatch_a_parameterized_job() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 1).await;
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/parameterized.nomad.hcl"
    );
    // A template: registering it schedules nothing and says how to launch it.
    let run = drover(&server, &["job", "run", example]).await;
    assert_code(&run, 0);
    assert!(
        stdout(&run).contains("drover job dispatch transcode"),
        "{}",
        stdout(&run)
    );

    // The parent requires meta "input": without it the server refuses, naming it.
    let refused = drover(&server, &["job", "dispatch", "transcode"]).await;
    assert_code(&refused, 1);
    assert!(stderr(&refused).contains("input"), "{}", stderr(&refused));

    let dispatched = drover(
        &server,
        &["job", "dispatch", "-meta", "input=movie.mkv", "transcode"],
    )
    .await;
    assert_code(&dispatched, 0);
    let text = stdout(&dispatched);
    assert!(text.contains("Dispatched Job ID"), "{text}");
    assert!(text.contains("created: node"), "{text}");
    let jobs = json(&drover(&server, &["job", "status", "-json"]).await);
    let children = jobs
        .as_array()
        .expect("a list")
        .iter()
        .filter(|j| j["parent_id"] == "transcode")
        .count();
    assert_eq!(children, 1, "{jobs}");
    let status = drover(&server, &["job", "status", "transcode"]).await;
    assert_code(&status, 0);
    let text = stdout(&status);
    assert!(text.contains("Dispatched Jobs"), "{text}");
    assert!(text.contains("transcode/dispatch-"), "{text}");
    assert!(!text.contains("Next Periodic Launch"), "{text}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn force_a_periodic_job_and_see_its_children_and_next_launch() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 1).await;
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/periodic.nomad.hcl"
    );
    assert_code(&drover(&server, &["job", "run", example]).await, 0);

    let status = drover(&server, &["job", "status", "nightly-backup"]).await;
    assert_code(&status, 0);
    let text = stdout(&status);
    assert!(text.contains("Next Periodic Launch"), "{text}");
    assert!(text.contains("No child jobs"), "{text}");

    let forced = drover(&server, &["job", "periodic", "force", "nightly-backup"]).await;
    assert_code(&forced, 0);
    let text = stdout(&forced);
    assert!(text.contains("Launched Job ID"), "{text}");
    assert!(text.contains("nightly-backup/periodic-"), "{text}");
    assert!(text.contains("created: node"), "{text}");

    let view = json(&drover(&server, &["job", "status", "nightly-backup", "-json"]).await);
    let children = view["children"].as_array().expect("children");
    assert_eq!(children.len(), 1, "{view}");
    assert!(
        view["next_launch"].is_string() || view["next_launch"].is_number(),
        "{view}"
    );

    // Forcing a job that is not periodic says so, naming it.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "web", 1);
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", file.to_str().expect("utf-8")],
        )
        .await,
        0,
    );
    let refused = drover(&server, &["job", "periodic", "force", "web"]).await;
    assert_code(&refused, 1);
    let err = stderr(&refused);
    assert!(err.contains("job \"web\" is not periodic"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    server.stop().await;
}

/// A server that accepts connections and never answers does not hang the CLI: every call
/// has a deadline, and the error says so in one line.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_runs_into_the_deadline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    // Accept and hold every connection, reading nothing, writing nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let started = std::time::Instant::now();
    let out = drover_at(&address, &["job", "status", "--timeout", "1s"]).await;
    assert_code(&out, 1);
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("deadline"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the deadline ended the call, not the test's own limit"
    );
}

/// `-json` output into a reader that stops early (`| head -c 10`) ends quietly with 0.
#[tokio::test(flavor = "multi_thread")]
async fn json_into_a_closed_pipe_ends_quietly() {
    let server = TestServer::start().await;
    // Enough nodes that the output outgrows the pipe's buffer, so drover writes after
    // `head` has gone.
    let _nodes = join_nodes(&server, 150).await;
    let out = tokio::task::spawn_blocking({
        let url = server.url();
        move || {
            std::process::Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "set -o pipefail; {} node status -json | head -c 10 >/dev/null",
                    env!("CARGO_BIN_EXE_drover")
                ))
                .env("DROVER_ADDR", url)
                .output()
                .expect("bash runs")
        }
    })
    .await
    .expect("the pipeline finishes");
    assert_code(&out, 0);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    server.stop().await;
}

/// `job stop -purge` follows the stopping evaluation of a job that no longer exists and
/// exits 0; the job is gone after it.
#[tokio::test(flavor = "multi_thread")]
async fn stop_with_purge_exits_0() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "gone", 1);
    assert_code(
        &drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await,
        0,
    );
    let purge = drover(&server, &["job", "stop", "-purge", "gone"]).await;
    assert_code(&purge, 0);
    assert!(stderr(&purge).is_empty(), "{}", stderr(&purge));
    let status = drover(&server, &["job", "status", "gone"]).await;
    assert_code(&status, 1);
    server.stop().await;
}

/// `job scale` changes a group's count, `job revert` brings an old version back as a new
/// one; both follow their evaluation and refuse what cannot be done, naming it.
#[tokio::test(flavor = "multi_thread")]
async fn scale_and_revert_a_job() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 2).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "web", 2);
    assert_code(
        &drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await,
        0,
    );
    let live = |view: &serde_json::Value| {
        view["allocations"]
            .as_array()
            .expect("allocations")
            .iter()
            .filter(|a| a["desired_status"] == "Run")
            .count()
    };

    let scaled = drover(&server, &["job", "scale", "web", "4"]).await;
    assert_code(&scaled, 0);
    assert_eq!(
        stdout(&scaled).matches("created: node").count(),
        2,
        "{}",
        stdout(&scaled)
    );
    let view = json(&drover(&server, &["job", "status", "web", "-json"]).await);
    assert_eq!(view["job"]["groups"][0]["count"], 4);
    assert_eq!(view["job"]["version"], 1);
    assert_eq!(live(&view), 4);

    // Back to version 0 (count 2), registered as version 2.
    let reverted = drover(&server, &["job", "revert", "web", "0"]).await;
    assert_code(&reverted, 0);
    let view = json(&drover(&server, &["job", "status", "web", "-json"]).await);
    assert_eq!(view["job"]["groups"][0]["count"], 2);
    assert_eq!(view["job"]["version"], 2);
    assert_eq!(live(&view), 2);

    // (arguments, text the one-line error must contain)
    let refused: &[(&[&str], &str)] = &[
        (&["job", "scale", "web", "nope", "3"], "no group \"nope\""),
        (&["job", "scale", "web", "-1"], "-1"),
        (&["job", "revert", "web", "2"], "already at version 2"),
        (&["job", "revert", "web", "9"], "no version 9"),
        (
            &["job", "scale", "nosuchjob", "3"],
            "looking up job \"nosuchjob\": job",
        ),
    ];
    for (args, want) in refused {
        let out = drover(&server, args).await;
        assert_code(&out, 1);
        let err = stderr(&out);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    server.stop().await;
}

/// Every id argument takes a unique prefix (the eight characters tables print); an
/// ambiguous one lists the candidates and exits 1.
#[tokio::test(flavor = "multi_thread")]
async fn ids_by_prefix() {
    let server = TestServer::start().await;
    let nodes = join_nodes(&server, 2).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // 20 allocations: by pigeonhole two of them share their first hex digit.
    let file = write_job(dir.path(), "many", 20);
    assert_code(
        &drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await,
        0,
    );
    let view = json(&drover(&server, &["job", "status", "many", "-json"]).await);
    let alloc_ids: Vec<String> = view["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .map(|a| a["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(alloc_ids.len(), 20);

    let alloc = &alloc_ids[0];
    let shown = json(&drover(&server, &["alloc", "status", &alloc[..8], "-json"]).await);
    assert_eq!(shown["id"].as_str(), Some(alloc.as_str()));

    let evals = json(&drover(&server, &["eval", "list", "-json"]).await);
    let eval_id = evals[0]["id"].as_str().expect("an eval id").to_string();
    let shown = json(&drover(&server, &["eval", "status", &eval_id[..8], "-json"]).await);
    assert_eq!(shown["id"].as_str(), Some(eval_id.as_str()));

    let node = &nodes.ids[0];
    assert_code(
        &drover(&server, &["node", "eligibility", "-disable", &node[..6]]).await,
        0,
    );

    let first = |id: &String| id[..1].to_string();
    let shared = alloc_ids
        .iter()
        .map(first)
        .find(|c| alloc_ids.iter().filter(|id| first(id) == *c).count() > 1)
        .expect("two allocations share a first digit");
    let ambiguous = drover(&server, &["alloc", "status", &shared]).await;
    assert_code(&ambiguous, 1);
    let err = stderr(&ambiguous);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("give more characters"), "{err}");
    for id in alloc_ids.iter().filter(|id| first(id) == shared).take(10) {
        assert!(err.contains(id.as_str()), "{id} is a candidate: {err}");
    }
    let none = drover(&server, &["eval", "status", "ffffffff-f"]).await;
    assert_code(&none, 1);
    assert!(
        stderr(&none).contains("no evaluation id starts with"),
        "{}",
        stderr(&none)
    );
    server.stop().await;
}

/// A job in another namespace is found with `-namespace` (or DROVER_NAMESPACE), lists
/// show one namespace unless asked for `*`.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_in_a_namespace() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let default = write_job(dir.path(), "web", 1);
    let prod = dir.path().join("prod.nomad.hcl");
    let text = std::fs::read_to_string(&default)
        .expect("job file")
        .replacen("job \"web\" {", "job \"web\" {\n  namespace = \"prod\"", 1);
    std::fs::write(&prod, text).expect("job file is written");
    for file in [&default, &prod] {
        assert_code(
            &drover(&server, &["job", "run", file.to_str().expect("utf-8")]).await,
            0,
        );
    }
    let ns_of = |list: &serde_json::Value| -> Vec<String> {
        list.as_array()
            .expect("a list")
            .iter()
            .map(|j| j["namespace"].as_str().expect("namespace").to_string())
            .collect()
    };
    let list = json(&drover(&server, &["job", "status", "-json"]).await);
    assert_eq!(ns_of(&list), ["default"]);
    let list = json(&drover(&server, &["job", "status", "-namespace", "*", "-json"]).await);
    assert_eq!(ns_of(&list), ["default", "prod"]);
    // The table of every namespace tells the two `web` jobs apart.
    let table = stdout(&drover(&server, &["job", "status", "-namespace", "*"]).await);
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("Namespace"), "{table}");
    assert!(table.lines().any(|l| l.contains("prod")), "{table}");
    let shown = json(
        &drover(
            &server,
            &["job", "status", "-namespace", "prod", "web", "-json"],
        )
        .await,
    );
    assert_eq!(shown["job"]["namespace"], "prod");

    // Stopping in prod leaves the default namespace's job running.
    let stop = drover(
        &server,
        &["job", "stop", "-namespace=prod", "-detach", "web"],
    )
    .await;
    assert_code(&stop, 0);
    let prod_job = json(
        &drover(
            &server,
            &["job", "status", "-namespace", "prod", "web", "-json"],
        )
        .await,
    );
    assert_eq!(prod_job["job"]["stop"], true);
    let default_job = json(&drover(&server, &["job", "status", "web", "-json"]).await);
    assert_eq!(default_job["job"]["stop"], false);

    let missing = drover(&server, &["job", "status", "-namespace", "dev", "web"]).await;
    assert_code(&missing, 1);
    server.stop().await;
}

/// A job file that names no namespace runs in the one `-namespace` or `DROVER_NAMESPACE`
/// names; a file and a flag naming two different ones is refused, naming both.
#[tokio::test(flavor = "multi_thread")]
async fn job_run_takes_the_namespace_from_the_flag_or_the_environment() {
    let server = TestServer::start().await;
    let _nodes = join_nodes(&server, 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write_job(dir.path(), "web", 1);
    let file = file.to_str().expect("utf-8").to_string();
    assert_code(
        &drover(
            &server,
            &["job", "run", "-detach", "-namespace", "staging", &file],
        )
        .await,
        0,
    );
    let url = server.url();
    let from_env = tokio::task::spawn_blocking({
        let file = file.clone();
        move || {
            assert_cmd::Command::new(env!("CARGO_BIN_EXE_drover"))
                .env("DROVER_ADDR", url)
                .env("DROVER_NAMESPACE", "qa")
                .args(["job", "run", "-detach", &file])
                .output()
                .expect("drover runs")
        }
    })
    .await
    .expect("joined");
    assert_code(&from_env, 0);
    let list = json(&drover(&server, &["job", "status", "-namespace", "*", "-json"]).await);
    let mut namespaces: Vec<String> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|j| j["namespace"].as_str().expect("namespace").to_string())
        .collect();
    namespaces.sort();
    assert_eq!(namespaces, ["qa", "staging"], "never the default one");

    let prod = dir.path().join("prod.nomad.hcl");
    let text = std::fs::read_to_string(&file).expect("job file").replacen(
        "job \"web\" {",
        "job \"web\" {\n  namespace = \"prod\"",
        1,
    );
    std::fs::write(&prod, text).expect("job file is written");
    let prod = prod.to_str().expect("utf-8");
    let refused = drover(&server, &["job", "run", "-namespace", "staging", prod]).await;
    assert_ne!(refused.status.code(), Some(0));
    let said = stderr(&refused);
    assert!(
        said.contains("\"prod\"") && said.contains("\"staging\""),
        "{said}"
    );
    let same = drover(
        &server,
        &["job", "run", "-detach", "-namespace", "prod", prod],
    )
    .await;
    assert_code(&same, 0);
    server.stop().await;
}
