//! What the operator types: the `/` filter's forms, `:` commands with arguments, and how
//! long the status bar keeps what it was told.

use super::*;
use std::time::Duration;

#[test]
fn filter_inverts_with_a_bang_and_takes_a_regex_after_a_tilde() {
    let names = |range: std::ops::RangeInclusive<u32>| -> Vec<String> {
        range.map(|n| format!("node-{n}")).collect()
    };
    // (filter typed in the nodes view, names expected in the view's order; every case
    // picks healthy nodes only, which are ordered by name)
    let cases: [(&str, Vec<String>); 5] = [
        ("~^node-1[0-2]$", names(10..=12)),
        ("~NODE-3.$", names(30..=39)),
        ("!~^node-[1-3]?[0-9]$", Vec::new()),
        ("!node-", Vec::new()),
        ("~^node-(3[5-9])$", names(35..=39)),
    ];
    for (filter, want) in cases {
        let mut app = app();
        press(&mut app, &format!("/{filter}<enter>"));
        assert_eq!(node_names(&app), want, "{filter}");
    }
    // Inverting keeps exactly the rows the plain form hides.
    let mut app = app();
    let all = app.list().order.len();
    press(&mut app, "/dc2<enter>");
    let dc2 = app.list().order.len();
    press(&mut app, "<esc>/!dc2<enter>");
    assert_eq!(app.list().order.len(), all - dc2);
    assert!(dc2 > 0 && dc2 < all);
}

#[test]
fn a_broken_regex_shows_no_rows_and_the_reason() {
    let mut app = app();
    press(&mut app, "/~node-[");
    assert!(app.list().order.is_empty());
    let why = RowFilter::parse(&app.list().filter)
        .error()
        .map(str::to_owned)
        .expect("an error");
    assert!(why.starts_with("invalid regex \"node-[\""), "{why}");
    // Finishing the pattern brings the rows back as it is typed.
    press(&mut app, "1]$<enter>");
    assert_eq!(node_names(&app), vec!["node-1".to_owned()]);
}

#[test]
fn commands_with_arguments_act_on_what_they_name() {
    let base = app();
    let id_of = |name: &str| {
        base.cluster
            .nodes
            .values()
            .find(|n| n.name == name)
            .map(|n| n.id)
            .expect("fixture node")
    };
    let node7 = id_of("node-7");
    let prefix: String = node7.to_string().chars().take(6).collect();
    // (keys, the command run in the end)
    let cases: Vec<(String, Command)> = vec![
        (
            ":node offline node-7<enter><right><enter>".into(),
            Command::Offline(vec![node7]),
        ),
        (
            format!(":node offline {prefix}<enter><right><enter>"),
            Command::Offline(vec![node7]),
        ),
        (
            ":node online node-4<enter>".into(),
            Command::Online(vec![id_of("node-4")]),
        ),
        (
            ":node drain node-7 10m<enter><right><enter>".into(),
            Command::Drain {
                nodes: vec![node7],
                deadline: Some(Duration::from_secs(600)),
            },
        ),
        (
            ":node drain node-7<enter><enter><right><enter>".into(),
            Command::Drain {
                nodes: vec![node7],
                deadline: Some(Duration::from_secs(3_600)),
            },
        ),
        (
            ":node undrain node-5<enter>".into(),
            Command::EndDrain(vec![id_of("node-5")]),
        ),
        (
            ":workers pause<enter><right><enter>".into(),
            Command::PauseAllWorkers,
        ),
        (":workers resume<enter>".into(), Command::ResumeAllWorkers),
        (
            ":worker pause worker-3<enter><right><enter>".into(),
            Command::PauseWorker {
                server_id: "server-1".into(),
                worker_id: "worker-3".into(),
            },
        ),
        (
            ":job stop web-3<enter><right><enter>".into(),
            Command::StopJob(drover_core::JobKey::default_ns("web-3")),
        ),
    ];
    for (keys, want) in cases {
        let mut app = app();
        let actions = press(&mut app, &keys);
        assert_eq!(actions, vec![Action::Run(want)], "{keys}");
        assert_eq!(app.mode, Mode::Normal, "{keys}");
    }
}

#[test]
fn commands_that_name_nothing_or_too_much_say_so() {
    // (keys, start of the notice)
    let cases = [
        (
            ":node offline node-99<enter>",
            "no node is named \"node-99\"",
        ),
        (":node offline <enter>", "usage: :node"),
        (
            ":worker pause worker-<enter>",
            "worker \"worker-\" is ambiguous: worker-0 on server-1",
        ),
        (
            ":worker pause w9<enter>",
            "no worker has an id starting \"w9\"",
        ),
        (":job stop nosuch<enter>", "no job \"nosuch\""),
        (
            ":node drain node-7 soon<enter>",
            "invalid deadline \"soon\"",
        ),
    ];
    for (keys, want) in cases {
        let mut app = app();
        let actions = press(&mut app, keys);
        assert!(actions.is_empty(), "{keys}: {actions:?}");
        assert_eq!(app.mode, Mode::Normal, "{keys}");
        let notice = app.notice.clone().expect("a notice");
        assert!(notice.text.starts_with(want), "{keys}: {}", notice.text);
        assert_eq!(notice.tone, Tone::Bad, "{keys}");
    }
    let mut app = app();
    app.read_only = true;
    assert!(press(&mut app, ":workers resume<enter>").is_empty());
    assert!(app.notice.is_some_and(|n| n.text.contains("read-only")));
}

#[test]
fn notices_expire_after_a_few_seconds() {
    let mut app = app();
    let start = app.now;
    press(&mut app, ":nosuch<enter>");
    assert!(app.notice.is_some());
    let at = |secs: u64| Input::Tick(start.saturating_add(Duration::from_secs(secs)));
    app.handle(at(4));
    assert!(app.notice.is_some(), "still there after 4s");
    app.handle(at(5));
    assert!(app.notice.is_none(), "gone after 5s");
    // A newer notice gets its own five seconds from when it was told.
    press(&mut app, "g");
    app.handle(at(9));
    assert_eq!(
        app.notice.as_ref().map(|n| n.text.as_str()),
        Some("showing healthy nodes")
    );
    app.handle(at(10));
    assert!(app.notice.is_none());
}

#[test]
fn an_events_detail_holds_its_payload_and_scrolls() {
    let mut app = app();
    press(&mut app, ":events<enter><enter>");
    assert!(app.detail_open);
    let key = app.list().selected.clone().expect("an event");
    let lines = app.component().detail(&app.ctx(), &key);
    assert!(
        lines
            .iter()
            .any(|l| l.raw && l.value.text.starts_with("Node(")),
        "{lines:?}"
    );
    press(&mut app, "JJJK");
    assert_eq!(app.detail_scroll, 2);
    // Scrolling stops at the last line; moving to another row starts at the top again.
    press(&mut app, &"J".repeat(500));
    assert_eq!(usize::from(app.detail_scroll), lines.len() - 1);
    press(&mut app, "j");
    assert_eq!(app.detail_scroll, 0);
}
