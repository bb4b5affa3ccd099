//! The action keys: confirmations, targets and the read-only guard.

use super::*;

#[test]
fn confirmations_default_to_cancel() {
    // (keys, command expected to run)
    let offline = |app: &App| Command::Offline(vec![selected_node(app).expect("selected")]);
    let cases: [(&str, bool); 5] = [
        ("o<enter>", false),
        ("o<esc>", false),
        ("on", false),
        ("o<right><enter>", true),
        ("o<tab><tab><enter>", false),
    ];
    for (keys, runs) in cases {
        let mut app = app();
        let want = offline(&app);
        let actions = press(&mut app, keys);
        assert_eq!(app.mode, Mode::Normal, "{keys}");
        if runs {
            assert_eq!(actions, vec![Action::Run(want)], "{keys}");
        } else {
            assert!(actions.is_empty(), "{keys}: {actions:?}");
        }
    }
    let mut app = app();
    press(&mut app, "o");
    assert!(matches!(&app.mode, Mode::Confirm(c) if !c.on_confirm));
}

/// The allocation selected first in the allocations of job `batch-1` (`:jobs`, enter).
fn first_alloc() -> drover_core::AllocId {
    let mut app = app();
    press(&mut app, ":jobs<enter><enter>");
    match app.list().selected {
        Some(RowKey::Alloc(id)) => id,
        ref other => panic!("an allocation is selected: {other:?}"),
    }
}

#[test]
fn every_action_key_asks_or_runs_the_right_command() {
    let base = app();
    let first = selected_node(&base).expect("selected");
    let alloc = first_alloc();
    // (view command, keys, the command it ends in)
    let cases: Vec<(&str, &str, Command)> = vec![
        ("", "O", Command::Online(vec![first])),
        ("", "D", Command::EndDrain(vec![first])),
        (
            "",
            "e<right><enter>",
            Command::SetEligibility {
                nodes: vec![first],
                eligible: false,
            },
        ),
        (
            "",
            "d<bs><bs>30m<enter><right><enter>",
            Command::Drain {
                nodes: vec![first],
                deadline: Some(std::time::Duration::from_secs(1_800)),
            },
        ),
        (
            ":workers<enter>",
            "p<right><enter>",
            Command::PauseWorker {
                server_id: "server-1".into(),
                worker_id: "worker-0".into(),
            },
        ),
        (
            ":workers<enter>",
            "<down><down>r",
            Command::ResumeWorker {
                server_id: "server-1".into(),
                worker_id: "worker-2".into(),
            },
        ),
        (
            ":workers<enter>",
            "P<right><enter>",
            Command::PauseAllWorkers,
        ),
        (":workers<enter>", "R", Command::ResumeAllWorkers),
        (
            ":workers<enter>",
            "c<bs>2<enter><right><enter>",
            Command::SetWorkerCount {
                server_id: "server-1".into(),
                count: 2,
            },
        ),
        (
            ":jobs<enter>",
            "x<right><enter>",
            Command::StopJob(drover_core::JobKey::default_ns("batch-1")),
        ),
        (
            ":jobs<enter><enter>",
            "r<right><enter>",
            Command::RestartAlloc(alloc),
        ),
        (
            ":jobs<enter><enter>",
            "<c-k><right><enter>",
            Command::StopAlloc(alloc),
        ),
        // The deployments, newest first: web-0's finished one, web-3's canaries, web-6's
        // paused rollout.
        (
            ":deployments<enter>",
            "jp<right><enter>",
            Command::PromoteDeployment(fixtures::deployment_id(1)),
        ),
        (
            ":deployments<enter>",
            "jP<right><enter>",
            Command::PauseDeployment {
                id: fixtures::deployment_id(1),
                pause: true,
            },
        ),
        (
            ":deployments<enter>",
            "jjR",
            Command::PauseDeployment {
                id: fixtures::deployment_id(2),
                pause: false,
            },
        ),
        (
            ":deployments<enter>",
            "jjf<right><enter>",
            Command::FailDeployment(fixtures::deployment_id(2)),
        ),
    ];
    for (view, keys, want) in cases {
        let mut app = app();
        press(&mut app, view);
        let actions = press(&mut app, keys);
        assert_eq!(actions, vec![Action::Run(want)], "{view}{keys}");
    }
}

#[test]
fn marked_nodes_are_the_targets() {
    let mut app = app();
    let keys: Vec<_> = app.list().order.iter().take(2).cloned().collect();
    let actions = press(&mut app, "  O");
    let ids: Vec<_> = keys
        .iter()
        .filter_map(|k| match k {
            RowKey::Node(id) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(actions, vec![Action::Run(Command::Online(ids))]);
    press(&mut app, "<esc>");
    assert!(app.list().marked.is_empty());
}

#[test]
fn read_only_refuses_every_action() {
    let keys = [
        ("", "o<right><enter>"),
        ("", "O"),
        ("", "d<enter><right><enter>"),
        ("", "e<right><enter>"),
        (":workers<enter>", "p<right><enter>"),
        (":workers<enter>", "R"),
        (":workers<enter>", "c<enter><right><enter>"),
        (":jobs<enter>", "x<right><enter>"),
        (":jobs<enter><enter>", "r<right><enter>"),
        (":allocs<enter>", "<c-k><right><enter>"),
        (":deployments<enter>", "jp<right><enter>"),
        (":deployments<enter>", "jjR"),
    ];
    for (view, keys) in keys {
        let mut app = fixtures::app(40, 200, 120, 40);
        app.read_only = true;
        press(&mut app, view);
        let actions = press(&mut app, keys);
        assert!(
            actions
                .iter()
                .all(|a| !matches!(a, Action::Run(c) if c.is_action())),
            "{view}{keys}: {actions:?}"
        );
        assert_eq!(app.mode, Mode::Normal, "{view}{keys}");
        assert!(
            app.notice
                .as_ref()
                .is_some_and(|n| n.text.contains("read-only")),
            "{view}{keys}"
        );
    }
}

#[test]
fn actions_follow_what_the_token_may_do() {
    use crate::app::{JobRights, Permissions};
    let asked = |allowed: &[&str], denied: &[&str]| JobRights::Asked {
        allowed: allowed.iter().map(|n| n.to_string()).collect(),
        denied: denied.iter().map(|n| n.to_string()).collect(),
    };
    let only = |nodes: bool, operator: bool, jobs_in: &[&str], denied: &[&str]| Permissions {
        nodes,
        operator,
        jobs: asked(jobs_in, denied),
        allocs: asked(&[], &["default"]),
    };
    let allocs_in = |allowed: &[&str], denied: &[&str]| Permissions {
        allocs: asked(allowed, denied),
        ..only(false, false, &[], &["default"])
    };
    // (permissions, view, keys, Some(what the refusal names) or None: the action runs)
    let cases = [
        (
            only(false, true, &["default"], &[]),
            "",
            "o<right><enter>",
            Some("write-node"),
        ),
        (
            only(false, true, &["default"], &[]),
            ":node offline node-1",
            "<enter>",
            Some("write-node"),
        ),
        (
            only(true, false, &[], &["default"]),
            "",
            "o<right><enter>",
            None,
        ),
        (
            only(true, false, &[], &["default"]),
            ":workers<enter>",
            "p<right><enter>",
            Some("operator write"),
        ),
        (
            only(true, false, &[], &["default"]),
            ":workers pause",
            "<enter>",
            Some("operator write"),
        ),
        (
            only(false, false, &["prod"], &["default"]),
            ":jobs<enter>",
            "x<right><enter>",
            Some("submit-job in namespace \"default\""),
        ),
        (
            only(false, false, &["default"], &[]),
            ":jobs<enter>",
            "x<right><enter>",
            None,
        ),
        (
            Permissions::everything(),
            ":workers<enter>",
            "p<right><enter>",
            None,
        ),
        (
            allocs_in(&["default"], &[]),
            ":allocs<enter>",
            "r<right><enter>",
            None,
        ),
        (
            allocs_in(&["prod"], &["default"]),
            ":allocs<enter>",
            "<c-k><right><enter>",
            Some("alloc-lifecycle in namespace \"default\""),
        ),
        (
            only(true, true, &["default"], &[]),
            ":allocs<enter>",
            "r<right><enter>",
            Some("alloc-lifecycle"),
        ),
    ];
    for (permissions, view, keys, refused) in cases {
        let mut app = fixtures::app(40, 200, 120, 40);
        app.permissions = permissions;
        press(&mut app, view);
        let actions = press(&mut app, keys);
        let ran = actions
            .iter()
            .any(|a| matches!(a, Action::Run(c) if c.is_action()));
        match refused {
            Some(lacks) => {
                assert!(!ran, "{view}{keys}: {actions:?}");
                assert_eq!(app.mode, Mode::Normal, "{view}{keys}");
                let notice = app
                    .notice
                    .as_ref()
                    .map(|n| n.text.clone())
                    .unwrap_or_default();
                assert!(notice.contains(lacks), "{view}{keys}: {notice}");
            }
            None => assert!(ran, "{view}{keys}: {actions:?}"),
        }
    }
}

#[test]
fn invalid_prompt_answers_are_refused_with_a_reason() {
    let cases = [
        ("", "d<bs><bs>soon<enter>", "invalid deadline \"soon\""),
        (
            ":workers<enter>",
            "c<bs>many<enter>",
            "invalid worker count \"many\"",
        ),
    ];
    for (view, keys, reason) in cases {
        let mut app = app();
        press(&mut app, view);
        let actions = press(&mut app, keys);
        assert!(actions.is_empty());
        assert_eq!(app.mode, Mode::Normal);
        let notice = app.notice.clone().expect("a notice");
        assert!(notice.text.contains(reason), "{}", notice.text);
    }
}

/// Onlining a suspended node overrides the health machine: the console asks first; an
/// offlined or healthy node is onlined at once.
#[test]
fn online_of_a_suspended_node_asks_first() {
    use drover_core::{NodeHealth, SuspendReason};
    // (health of the selected node, keys, runs online)
    let cases = [
        (NodeHealth::Offlined, "O", true),
        (NodeHealth::Healthy, "O", true),
        (NodeHealth::Suspended(SuspendReason::Flaky), "O", false),
        (
            NodeHealth::Suspended(SuspendReason::Flaky),
            "O<right><enter>",
            true,
        ),
        (
            NodeHealth::Suspended(SuspendReason::Lost),
            "O<enter>",
            false,
        ),
    ];
    for (health, keys, runs) in cases {
        let mut app = app();
        let id = selected_node(&app).expect("selected");
        let mut node = app.cluster.nodes[&id].clone();
        node.health = health;
        app.cluster.nodes.insert(id, node);
        let actions = press(&mut app, keys);
        if runs {
            assert_eq!(
                actions,
                vec![Action::Run(Command::Online(vec![id]))],
                "{health:?} {keys}"
            );
        } else {
            assert!(actions.is_empty(), "{health:?} {keys}: {actions:?}");
        }
    }
}

/// What a deployment's status already rules out is told at once, without a round trip;
/// a confirmation left on cancel sends nothing.
#[test]
fn deployment_actions_the_status_rules_out_are_told() {
    // (keys from the deployments view, what the status bar says)
    let cases: [(&str, &str); 5] = [
        ("p", "of web-0 v0 is successful: it no longer changes"),
        ("jjjf", "of api v1 is failed: it no longer changes"),
        ("jR", "of web-3 v0 is not paused"),
        ("jjP", "of web-6 v0 is already paused"),
        ("jjp", "of web-6 v0 has no canaries to promote"),
    ];
    for (keys, told) in cases {
        let mut app = app();
        press(&mut app, ":deployments<enter>");
        let actions = press(&mut app, keys);
        assert!(actions.is_empty(), "{keys}: {actions:?}");
        assert_eq!(app.mode, Mode::Normal, "{keys}");
        let notice = app.notice.as_ref().expect("the operator is told why");
        assert!(notice.text.contains(told), "{keys}: {}", notice.text);
        assert_eq!(notice.tone, Tone::Warn, "{keys}");
    }
    let mut app = app();
    press(&mut app, ":deployments<enter>");
    assert!(
        press(&mut app, "jp<enter>").is_empty(),
        "cancel is the default"
    );
    assert!(press(&mut app, "jf<esc>").is_empty());
}

/// A token without submit-job where the deployment lives is told so before a round trip;
/// the server's refusals (a precondition such as unhealthy canaries) reach the status
/// line as the other actions' do.
#[test]
fn deployment_actions_respect_the_token_and_tell_refusals() {
    let mut app = app();
    app.permissions = Permissions {
        jobs: JobRights::Asked {
            allowed: ["staging".to_owned()].into(),
            denied: ["default".to_owned()].into(),
        },
        ..Permissions::everything()
    };
    press(&mut app, ":deployments<enter>");
    assert!(press(&mut app, "jp<right><enter>").is_empty());
    let notice = app.notice.as_ref().expect("told");
    assert_eq!(
        notice.text,
        "your token lacks submit-job in namespace \"default\""
    );

    let mut app = self::app();
    app.permissions = Permissions {
        jobs: JobRights::Asked {
            allowed: Default::default(),
            denied: ["default".to_owned(), "staging".to_owned()].into(),
        },
        ..Permissions::everything()
    };
    press(&mut app, ":deployments<enter>");
    assert!(press(&mut app, "jp").is_empty());
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(
        app.notice.as_ref().map(|n| n.text.as_str()),
        Some("your token lacks submit-job")
    );

    let mut app = self::app();
    press(&mut app, ":deployments<enter>");
    let sent = press(&mut app, "jp<right><enter>");
    assert_eq!(
        sent,
        vec![Action::Run(Command::PromoteDeployment(
            fixtures::deployment_id(1)
        ))]
    );
    let refusal = "promote deployment 1a2b3c4d failed: canaries of group \"web\" are not healthy";
    app.handle(Input::Update(Update::CommandDone(Err(refusal.to_owned()))));
    let notice = app.notice.as_ref().expect("told");
    assert_eq!((notice.text.as_str(), notice.tone), (refusal, Tone::Bad));
}
