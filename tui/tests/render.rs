//! Every view drawn from the fixture cluster at several terminal sizes, compared with
//! insta snapshots of the screen text.

mod support {
    pub mod screen;
}

use drover_tui::app::{Action, App, Command, Connection, Input, Update};
use drover_tui::fixtures;
use drover_tui::ui::{Theme, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use support::screen::{keys, screen};

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (60, 20)];

/// (snapshot name, keys pressed from the nodes view)
const SCREENS: [(&str, &str); 20] = [
    ("nodes", ""),
    ("nodes_detail", "jji"),
    ("node_allocs", "jj\n"),
    ("allocs_all", ":allocs\n"),
    ("nodes_lost_group", "ggg"),
    ("nodes_filtered_sorted", "/dc2\n88"),
    ("evals", ":evals\n"),
    ("evals_why_pending", ":evals\n\n"),
    ("blocked", ":blocked\n\n"),
    ("workers", ":workers\n"),
    ("jobs", ":jobs\n"),
    ("allocs", ":jobs\n\n"),
    ("events", ":events\n"),
    ("services", ":services\n"),
    ("services_detail", ":services\njjji"),
    ("deployments", ":deployments\n"),
    ("deployments_detail", ":deployments\nji"),
    ("jobs_detail_deployment", ":jobs\n/web-3\ni"),
    ("help_nodes", "?"),
    ("help_deployments", ":deployments\n?"),
];

#[test]
fn every_view_at_every_size() {
    for (width, height) in SIZES {
        for (name, pressed) in SCREENS {
            let mut app = fixtures::app(40, 200, width, height);
            keys(&mut app, pressed);
            let text = screen(&mut app, Theme { color: true });
            insta::assert_snapshot!(format!("{name}_{width}x{height}"), text);
        }
    }
}

#[test]
fn dialogs_and_connection_states() {
    let cases: [(&str, &str, bool); 5] = [
        ("confirm_offline", "o", false),
        ("drain_prompt", "d", false),
        ("help_read_only", "?", true),
        ("workers_confirm_pause_all", ":workers\nP", false),
        ("deployments_confirm_promote", ":deployments\njp", false),
    ];
    for (name, pressed, read_only) in cases {
        let mut app = fixtures::app(40, 200, 80, 24);
        app.read_only = read_only;
        keys(&mut app, pressed);
        insta::assert_snapshot!(name, screen(&mut app, Theme { color: true }));
    }
    // A token without write-node: the node actions stay listed, greyed, saying why.
    let mut app = fixtures::app(40, 200, 100, 30);
    app.permissions = drover_tui::app::Permissions {
        nodes: false,
        ..drover_tui::app::Permissions::everything()
    };
    keys(&mut app, "?");
    insta::assert_snapshot!(
        "help_token_lacks_write_node",
        screen(&mut app, Theme { color: true })
    );
    // On a terminal narrower than the dialog's buttons and hint, the hint goes below them
    // and the question wraps, both inside the dialog's padding.
    let mut app = fixtures::app(40, 200, 36, 16);
    keys(&mut app, "o");
    insta::assert_snapshot!(
        "confirm_offline_36x16",
        screen(&mut app, Theme { color: true })
    );
    let mut app = fixtures::app(40, 200, 80, 24);
    app.handle(Input::Update(Update::Connection(Connection::Lost {
        reason: "connection refused".into(),
        retry_in: std::time::Duration::from_secs(2),
    })));
    insta::assert_snapshot!("connection_lost", screen(&mut app, Theme { color: true }));
    // A server never reached (wrong address, not up) is named, and nothing is blamed on a
    // cluster the console has not seen.
    let mut app = App::new("10.0.0.9:4647", false, fixtures::now());
    app.handle(Input::Resize {
        width: 80,
        height: 24,
    });
    app.handle(Input::Update(Update::Connection(Connection::Lost {
        reason: "Connection refused (os error 111)".into(),
        retry_in: std::time::Duration::from_secs(2),
    })));
    insta::assert_snapshot!("cannot_connect", screen(&mut app, Theme { color: true }));
}

#[test]
fn no_color_draws_without_colours() {
    use ratatui::style::Color;
    let mut app = fixtures::app(40, 200, 120, 40);
    app.prepare_frame();
    for theme in [Theme { color: false }, Theme { color: true }] {
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("test terminal");
        terminal
            .draw(|frame| draw(frame, &app, &theme))
            .expect("draw");
        let coloured = terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .filter(|cell| cell.fg != Color::Reset || cell.bg != Color::Reset)
            .count();
        assert_eq!(
            coloured == 0,
            !theme.color,
            "theme {theme:?}: {coloured} coloured cells"
        );
    }
}

/// Whatever view is shown, the header's first line says what of scheduling is paused.
#[test]
fn the_header_says_when_scheduling_is_paused() {
    use drover_tui::model::WorkerStatusLabel;
    // (broker paused, workers paused of the fixture's four, what the first line ends with)
    let cases: [(bool, usize, &str); 5] = [
        (false, 0, "index 1020"),
        (false, 2, "index 1020  2 of 4 workers paused"),
        (true, 0, "scheduling paused: eval broker paused"),
        (false, 4, "scheduling paused: all 4 workers paused"),
        (
            true,
            1,
            "scheduling paused: eval broker paused, 1 of 4 workers paused",
        ),
    ];
    for (broker, workers, want) in cases {
        for view in [":nodes\n", ":jobs\n", ":events\n"] {
            let mut app = fixtures::app(40, 200, 120, 40);
            let mut stats = app.cluster.stats.clone();
            stats.broker_paused = broker;
            let mut list = fixtures::workers();
            for (i, w) in list.iter_mut().enumerate() {
                w.status = if i < workers {
                    WorkerStatusLabel::Paused
                } else {
                    WorkerStatusLabel::Started
                };
            }
            app.handle(Input::Update(Update::Scheduling(stats)));
            app.handle(Input::Update(Update::Workers(list)));
            keys(&mut app, view);
            let text = screen(&mut app, Theme { color: false });
            let first = text.lines().next().unwrap_or_default();
            assert!(
                first.ends_with(want),
                "{broker} {workers} {view:?}: {first}"
            );
        }
    }
}

/// What an operator looks at when something does not get placed, at the smallest size the
/// console is laid out for and a large one: why a job is pending, whether scheduling is
/// paused, the event stream with its payloads, and a confirmation.
#[test]
fn operator_screens_small_and_large() {
    fn pause_everything(app: &mut App) {
        let mut stats = app.cluster.stats.clone();
        stats.broker_paused = true;
        let mut workers = fixtures::workers();
        for w in &mut workers {
            w.status = drover_tui::model::WorkerStatusLabel::Paused;
        }
        app.handle(Input::Update(Update::Scheduling(stats)));
        app.handle(Input::Update(Update::Workers(workers)));
    }
    fn nothing(_: &mut App) {}
    // (snapshot name, setup, keys pressed from the nodes view)
    let screens: [(&str, fn(&mut App), &str); 8] = [
        ("job_why_pending", nothing, ":jobs\n/pending\ni"),
        ("blocked_why_pending", nothing, ":blocked\n\n"),
        ("eval_why_pending", nothing, ":evals\n\n"),
        ("scheduling_paused", pause_everything, ":jobs\n"),
        ("events_payload", nothing, ":events\n\n"),
        ("confirm_pause_all", nothing, ":workers pause\n"),
        ("confirm_stop_job", nothing, ":job stop web-3\n"),
        ("confirm_restart_alloc", nothing, ":jobs\n\nr"),
    ];
    for (width, height) in [(80, 24), (200, 50)] {
        for (name, setup, pressed) in screens {
            let mut app = fixtures::app(40, 200, width, height);
            setup(&mut app);
            keys(&mut app, pressed);
            let text = screen(&mut app, Theme { color: true });
            insta::assert_snapshot!(format!("{name}_{width}x{height}"), text);
        }
    }
}

/// A node's detail shows where it offers ports: each address (with its host network when
/// not the default), the dynamic range and the reserved ports.
#[test]
fn the_node_detail_shows_addresses_and_ports() {
    // `nodes_detail_120x40` holds the same lines at the size every view is drawn at.
    for (width, height) in [(120, 40), (200, 50)] {
        let mut app = fixtures::app(40, 200, width, height);
        keys(&mut app, "jj");
        let opened = press(&mut app, KeyCode::Char('i'));
        let Action::Run(Command::FetchNodeUsage(node)) = opened else {
            panic!("i on a node fetches its usage, got {opened:?}");
        };
        let loading = screen(&mut app, Theme { color: false });
        assert!(loading.contains("used           loading"), "{loading}");
        let sampled = drover_core::SampledUsage {
            used: drover_core::TaskUsage {
                cpu_mhz: 150,
                memory_mb: 40,
            },
            tasks: 2,
        };
        app.handle(Input::Update(Update::NodeUsage(node, Some(sampled))));
        let text = screen(&mut app, Theme { color: false });
        for wanted in [
            "used           150 MHz, 40 MB memory",
            "address        10.0.0.6 (eth0)",
            "address        203.0.113.6 (eth1, public)",
            "dynamic ports  20000-32000",
            "reserved ports 22,8500-8600",
        ] {
            assert!(text.contains(wanted), "{wanted:?} missing: {text}");
        }
        if width == 200 {
            insta::assert_snapshot!(format!("node_detail_ports_{width}x{height}"), text);
        }
        // Moving to the next node while the detail is open asks for that node's usage.
        let moved = press(&mut app, KeyCode::Char('j'));
        assert!(
            matches!(moved, Action::Run(Command::FetchNodeUsage(next)) if next != node),
            "{moved:?}"
        );
    }
}

fn press(app: &mut App, code: KeyCode) -> Action {
    app.handle(Input::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

/// An allocation's detail, once `AllocGet` answers, shows the address of each of its ports,
/// and the task's own port where one is mapped (`to`).
#[test]
fn the_alloc_detail_shows_each_ports_address() {
    for (width, height) in [(80, 24), (200, 50)] {
        let mut app = fixtures::app(40, 200, width, height);
        keys(&mut app, ":jobs\n\nj");
        let opened = app.handle(Input::Key(KeyEvent::new(
            KeyCode::Char('i'),
            KeyModifiers::NONE,
        )));
        let Action::Run(Command::FetchAlloc(id)) = opened else {
            panic!("i on an allocation fetches it, got {opened:?}");
        };
        let a = (0..200)
            .find(|a| fixtures::alloc_id(*a) == id)
            .expect("the selected allocation is one of the fixture's");
        let loading = screen(&mut app, Theme { color: false });
        assert!(loading.contains("loading task states"), "{loading}");
        let full = fixtures::alloc_detail(a, 40);
        let node = drover_core::mock::node_address(a % 40);
        app.handle(Input::Update(Update::AllocDetail(Box::new(full))));
        let text = screen(&mut app, Theme { color: false });
        for wanted in [
            format!("port http      {node}:23517"),
            format!("port admin     {node}:8080 (task port 9090)"),
        ] {
            assert!(text.contains(&wanted), "{wanted:?} missing: {text}");
        }
        insta::assert_snapshot!(format!("alloc_detail_ports_{width}x{height}"), text);
    }
}

/// The logs pane of an allocation: following with output, paused after scrolling up, and
/// after its stream ended with an error.
#[test]
fn logs_pane_following_paused_and_ended() {
    for (width, height) in [(80, 24), (200, 50)] {
        let mut app = fixtures::app(40, 200, width, height);
        keys(&mut app, ":jobs\n\nl");
        let target = app.logs.as_ref().expect("l opens the pane").target.clone();
        let text: String = (0..60)
            .map(|i| {
                format!(
                    "2025-01-01T00:00:{:02}Z request {i} served in {}ms\n",
                    i % 60,
                    i * 7 % 90
                )
            })
            .collect();
        app.handle(Input::Update(Update::Logs(
            target.clone(),
            drover_tui::app::LogNews::Data(text.into_bytes()),
        )));
        let following = screen(&mut app, Theme { color: true });
        insta::assert_snapshot!(format!("logs_following_{width}x{height}"), following);
        keys(&mut app, "kkkkk");
        let paused = screen(&mut app, Theme { color: true });
        insta::assert_snapshot!(format!("logs_paused_{width}x{height}"), paused);
        app.handle(Input::Update(Update::Logs(
            target,
            drover_tui::app::LogNews::Ended(Err("cannot reach the agent of node 7".into())),
        )));
        keys(&mut app, "G");
        let ended = screen(&mut app, Theme { color: true });
        insta::assert_snapshot!(format!("logs_ended_{width}x{height}"), ended);
    }
}

/// Two children dispatched from one job differ only at the end of their ids: however
/// narrow the JOB column, their rows read differently.
#[test]
fn dispatched_children_stay_distinct_when_cut() {
    for (width, height) in [(80, 24), (200, 50)] {
        let mut app = fixtures::app(40, 200, width, height);
        keys(&mut app, ":jobs\n/dispatch\n");
        let text = screen(&mut app, Theme { color: false });
        for suffix in ["0a1b2c3d", "9f8e7d6c"] {
            let rows = text.lines().filter(|l| l.contains(suffix)).count();
            assert_eq!(rows, 1, "{suffix}: {text}");
        }
        insta::assert_snapshot!(format!("jobs_dispatched_{width}x{height}"), text);
    }
}

/// The help wraps at spaces whatever the width: on a screen tall enough to hold it, every
/// word of every entry is on screen whole, in the view's help as in the global one.
#[test]
fn the_help_wraps_words_at_any_width() {
    for width in [30, 36, 48, 60, 80, 120] {
        for view in [":nodes\n", ":jobs\n\n", ":workers\n"] {
            let mut app = fixtures::app(40, 200, width, 90);
            keys(&mut app, view);
            keys(&mut app, "?");
            let text = screen(&mut app, Theme { color: false });
            let words: std::collections::HashSet<&str> = text
                .split(|c: char| c.is_whitespace() || c == '│')
                .collect();
            let entries = drover_tui::views::GLOBAL_KEYS
                .iter()
                .chain(app.component().keys());
            for entry in entries {
                for word in entry
                    .what
                    .split_whitespace()
                    .chain(entry.keys.split_whitespace())
                {
                    assert!(words.contains(word), "{word:?} at {width}{view:?}:\n{text}");
                }
            }
        }
    }
}

/// The footer fits the terminal: hints that do not fit are dropped whole, least needed
/// first, never cut; help and quit stay while there is room for them.
#[test]
fn the_footer_drops_hints_whole() {
    let all = [
        "? help",
        "/ filter",
        ": view",
        "1-9 sort",
        "enter detail",
        "enter allocs",
        "q quit",
    ];
    let three = "http://127.0.0.1:46471,http://127.0.0.1:46473,http://127.0.0.1:46475";
    for address in ["127.0.0.1:4647", three] {
        for width in [60u16, 72, 80, 100, 120] {
            let mut app = App::new(address, false, fixtures::now());
            app.handle(Input::Resize { width, height: 24 });
            app.handle(Input::Update(Update::Connection(Connection::Connected)));
            let text = screen(&mut app, Theme { color: false });
            let footer = text.lines().last().unwrap_or_default();
            let hints = footer.split_once("│ ").map_or("", |(_, h)| h).trim_end();
            let shown: Vec<&str> = if hints.is_empty() {
                Vec::new()
            } else {
                hints.split("  ").collect()
            };
            assert!(
                shown.iter().all(|h| all.contains(h)),
                "{width} {address}: {footer:?}"
            );
            let room = usize::from(width).saturating_sub(
                footer
                    .split_once("│ ")
                    .map_or(0, |(c, _)| c.chars().count() + 2),
            );
            if room >= "? help  q quit".len() {
                assert!(
                    shown.contains(&"? help") && shown.contains(&"q quit"),
                    "{width} {address}: {footer:?}"
                );
            }
            if width == 80 {
                insta::assert_snapshot!(
                    format!(
                        "footer_{}_80x24",
                        if address == three { "three" } else { "one" }
                    ),
                    footer
                );
            }
        }
    }
}

/// A help taller than the screen scrolls with j/k, and says how much more there is.
#[test]
fn a_tall_help_scrolls() {
    let mut app = fixtures::app(40, 200, 60, 20);
    keys(&mut app, "?");
    let first = screen(&mut app, Theme { color: false });
    assert!(first.contains("more, esc closes"), "{first}");
    keys(&mut app, &"j".repeat(200));
    let last = screen(&mut app, Theme { color: false });
    assert!(last.contains("toggle eligibility"), "{last}");
    assert!(last.contains("(j/k scroll, 0 more"), "{last}");
    insta::assert_snapshot!("help_nodes_scrolled_60x20", last);
    keys(&mut app, &"k".repeat(200));
    assert_eq!(screen(&mut app, Theme { color: false }), first);
}

/// With several servers the header's first line names each one's state, a server the
/// console's server cannot reach as down.
#[test]
fn the_header_shows_each_servers_state() {
    let mut app = fixtures::app(40, 200, 160, 40);
    app.handle(Input::Update(Update::Cluster(fixtures::led_by_2(&[
        ("1", "follower", false),
        ("2", "leader", true),
        ("3", "follower", true),
    ]))));
    let text = screen(&mut app, Theme { color: false });
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains(
            "leader 2  servers drover-1:down drover-2:leader drover-3:follower  index 1020"
        ),
        "{first}"
    );
}

/// The servers view: each server as the membership lists it, with what the servers the
/// console can ask say of themselves (term, index, whom they follow); during an election
/// they disagree, and a server nobody asked shows dashes.
#[test]
fn the_servers_view_shows_each_servers_own_view() {
    use drover_tui::model::ServerView;
    for (width, height) in [(80, 24), (160, 40)] {
        let mut app = fixtures::app(40, 200, width, height);
        app.handle(Input::Update(Update::Cluster(fixtures::led_by_2(&[
            ("1", "follower", false),
            ("2", "leader", true),
            ("3", "follower", true),
            ("4", "learner", true),
        ]))));
        app.handle(Input::Update(Update::ServerViews(vec![ServerView {
            server_id: "3".into(),
            url: "http://10.0.0.3:4647".into(),
            role: "follower",
            term: 4,
            applied_index: 1_018,
            leader_id: "2".into(),
        }])));
        keys(&mut app, ":servers\n");
        let text = screen(&mut app, Theme { color: false });
        insta::assert_snapshot!(format!("servers_{width}x{height}"), text);
        keys(&mut app, "jj\n");
        let detail = screen(&mut app, Theme { color: false });
        assert!(
            detail.contains("1018") && detail.contains("http://10.0.0.3:4647"),
            "{detail}"
        );
    }
}

/// `:ns NAME` scopes the jobs, evals, blocked and deployments views to one namespace and
/// says so in the title; `:ns *` shows every namespace again.
#[test]
fn a_namespace_scopes_the_job_views() {
    let mut app = fixtures::app(40, 200, 160, 40);
    keys(&mut app, ":jobs\n");
    let title = |app: &mut App| {
        screen(app, Theme { color: false })
            .lines()
            .find(|l| l.contains(" jobs ("))
            .unwrap_or_default()
            .to_string()
    };
    let all = app.list().order.len();
    assert!(all > 0, "the fixture has jobs");
    for (command, rows, shown) in [
        (":ns prod\n", 0, Some("namespace prod")),
        (":ns default\n", all, Some("namespace default")),
        (":ns *\n", all, None),
    ] {
        keys(&mut app, command);
        let t = title(&mut app);
        assert_eq!(app.list().order.len(), rows, "{command:?}: {t}");
        match shown {
            Some(text) => assert!(t.contains(text), "{command:?}: {t}"),
            None => assert!(!t.contains("namespace"), "{command:?}: {t}"),
        }
    }
}

/// The deployments view follows `:ns` like the other job views: the fixture's `staging`
/// deployments alone, then every namespace's again.
#[test]
fn a_namespace_scopes_the_deployments_view() {
    let mut app = fixtures::app(40, 200, 160, 40);
    keys(&mut app, ":deployments\n");
    let all = app.list().order.len();
    assert_eq!(all, fixtures::deployments().len());
    keys(&mut app, ":ns staging\n");
    let text = screen(&mut app, Theme { color: false });
    assert_eq!(app.list().order.len(), 2, "{text}");
    assert!(text.contains("api"), "{text}");
    assert!(!text.contains("web-3"), "{text}");
    keys(&mut app, ":ns *\n");
    assert_eq!(app.list().order.len(), all);
}
