use super::*;
use crate::fixtures;
use crate::kinds::AllocScope;
use crate::model::Change;
use drover_core::{NodeHealth, mock};
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

/// Presses keys written as text: plain characters, plus `<esc>`, `<enter>`, `<tab>`,
/// `<down>`, `<up>`, `<right>`, `<bs>`, `<end>` and `<c-k>` (ctrl-k). Returns the actions
/// that were not `None`.
fn press(app: &mut App, keys: &str) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut rest = keys;
    while !rest.is_empty() {
        let mut ctrl = false;
        let (code, len) = if rest.starts_with('<') && rest.contains('>') {
            let end = rest.find('>').unwrap_or(0);
            let code = match &rest[1..end] {
                "c-k" => {
                    ctrl = true;
                    KeyCode::Char('k')
                }
                "esc" => KeyCode::Esc,
                "enter" => KeyCode::Enter,
                "tab" => KeyCode::Tab,
                "down" => KeyCode::Down,
                "up" => KeyCode::Up,
                "right" => KeyCode::Right,
                "bs" => KeyCode::Backspace,
                "end" => KeyCode::End,
                other => panic!("unknown key <{other}>"),
            };
            (code, end + 1)
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            (KeyCode::Char(c), c.len_utf8())
        };
        rest = &rest[len..];
        let modifiers = match code {
            _ if ctrl => KeyModifiers::CONTROL,
            KeyCode::Char(c) if c.is_ascii_uppercase() => KeyModifiers::SHIFT,
            _ => KeyModifiers::NONE,
        };
        let action = app.handle(Input::Key(KeyEvent::new(code, modifiers)));
        if action != Action::None {
            actions.push(action);
        }
    }
    actions
}

fn app() -> App {
    fixtures::app(40, 200, 120, 40)
}

fn selected_node(app: &App) -> Option<drover_core::NodeId> {
    match &app.list().selected {
        Some(RowKey::Node(id)) => Some(*id),
        _ => None,
    }
}

fn node_names(app: &App) -> Vec<String> {
    app.list()
        .order
        .iter()
        .filter_map(|k| match k {
            RowKey::Node(id) => app.cluster.nodes.get(id).map(|n| n.name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn views_switch_by_tab_and_by_command() {
    let cases: [(&str, ViewKind); 8] = [
        ("", ViewKind::Nodes),
        ("<tab>", ViewKind::Evals),
        ("<tab><tab>", ViewKind::Blocked),
        (":workers<enter>", ViewKind::Workers),
        (":jobs<enter>", ViewKind::Jobs),
        (":events<enter>", ViewKind::Events),
        (":evals<enter>:nosuch<enter>", ViewKind::Evals),
        (":jobs<enter><enter>", ViewKind::Allocs),
    ];
    for (keys, want) in cases {
        let mut app = app();
        press(&mut app, keys);
        assert_eq!(app.view, want, "{keys}");
        assert_eq!(app.mode, Mode::Normal, "{keys}");
    }
}

#[test]
fn filter_narrows_rows_as_typed_and_esc_clears_it() {
    let mut app = app();
    let all = app.list().order.len();
    press(&mut app, "/node-1");
    assert_eq!(app.mode, Mode::Filter);
    // node-1, node-10..node-19
    assert_eq!(app.list().order.len(), 11);
    press(&mut app, "5<enter>");
    assert_eq!(node_names(&app), vec!["node-15".to_owned()]);
    assert_eq!(app.mode, Mode::Normal);
    press(&mut app, "<esc>");
    assert_eq!(app.list().order.len(), all);
    // Esc while typing also drops the filter.
    press(&mut app, "/zzz");
    assert!(app.list().order.is_empty());
    press(&mut app, "<esc>");
    assert_eq!(app.list().order.len(), all);
}

#[test]
fn sorting_by_a_column_twice_reverses_it() {
    let mut app = app();
    press(&mut app, "/node-1<enter>");
    press(&mut app, "1");
    let ascending = node_names(&app);
    let mut want = ascending.clone();
    want.sort();
    assert_eq!(ascending, want);
    assert_eq!(
        app.list().sort,
        Some(Sort {
            column: 0,
            descending: false
        })
    );
    press(&mut app, "1");
    let mut reversed = ascending.clone();
    reversed.reverse();
    assert_eq!(node_names(&app), reversed);
    // A column the view does not have is ignored.
    press(&mut app, "9");
    assert!(
        app.list()
            .sort
            .is_some_and(|s| s.column == 0 || s.column == 8)
    );
}

#[test]
fn the_selection_stays_on_its_node_when_rows_arrive_and_move() {
    let mut app = app();
    press(&mut app, "<down><down><down>");
    let chosen = selected_node(&app).expect("a node is selected");
    // A node sorting before it arrives, and the chosen one changes health (moves group).
    let mut newcomer = mock::node(1_000);
    newcomer.name = "aaa".into();
    let mut moved = app.cluster.nodes[&chosen].clone();
    moved.health = NodeHealth::Offlined;
    moved.modify_index += 1;
    app.handle(Input::Update(Update::Events(vec![
        (Change::Node(Box::new(newcomer)), event_row()),
        (Change::Node(Box::new(moved)), event_row()),
    ])));
    app.prepare_frame();
    assert_eq!(selected_node(&app), Some(chosen));
    let cursor = app.list().cursor;
    assert_eq!(app.list().order.get(cursor), Some(&RowKey::Node(chosen)));

    // When the selected node is deleted, the cursor stays where it was.
    app.handle(Input::Update(Update::Events(vec![(
        Change::NodeRemoved(chosen),
        event_row(),
    )])));
    app.prepare_frame();
    assert_eq!(app.list().cursor, cursor.min(app.list().order.len() - 1));
    assert_ne!(selected_node(&app), Some(chosen));
}

fn event_row() -> crate::model::EventRow {
    crate::model::EventRow {
        seq: 0,
        index: 2_000,
        topic: "node",
        event_type: "node-health",
        key: String::new(),
        summary: String::new(),
        received: drover_core::Timestamp::ZERO,
        payload: None,
    }
}

#[test]
fn esc_closes_the_detail_then_goes_back() {
    let mut app = app();
    press(&mut app, ":jobs<enter><enter>");
    assert_eq!(app.view, ViewKind::Allocs);
    let actions = press(&mut app, "<enter>");
    assert!(app.detail_open);
    assert!(matches!(
        actions.as_slice(),
        [Action::Run(Command::FetchAlloc(_))]
    ));
    press(&mut app, "<esc>");
    assert!(!app.detail_open);
    assert_eq!(app.view, ViewKind::Allocs);
    press(&mut app, "<esc>");
    assert_eq!(app.view, ViewKind::Jobs);
}

/// The allocations each row of the allocations view shows, as (node, job).
fn alloc_rows(app: &App) -> Vec<(drover_core::NodeId, drover_core::JobKey)> {
    app.list()
        .order
        .iter()
        .filter_map(|k| match k {
            RowKey::Alloc(id) => app.cluster.allocs.get(id),
            _ => None,
        })
        .map(|a| (a.node_id, a.job.clone()))
        .collect()
}

/// As k9s does: `enter` on a node or a job lists its allocations, `esc` comes back to
/// the row it left; `i` opens the node's own detail.
#[test]
fn enter_drills_into_allocations_and_esc_comes_back() {
    let mut app = app();
    press(&mut app, "<down><down>");
    let node = selected_node(&app).expect("a node is selected");
    assert!(press(&mut app, "<enter>").is_empty());
    assert_eq!(
        (app.view, &app.alloc_scope, app.detail_open),
        (ViewKind::Allocs, &AllocScope::Node(node), false)
    );
    let on_node = app
        .cluster
        .allocs
        .values()
        .filter(|a| a.node_id == node)
        .count();
    let rows = alloc_rows(&app);
    assert!(on_node > 0 && rows.len() == on_node, "{on_node} {rows:?}");
    assert!(rows.iter().all(|(n, _)| *n == node));
    press(&mut app, "<esc>");
    assert_eq!(
        (app.view, selected_node(&app)),
        (ViewKind::Nodes, Some(node))
    );
    press(&mut app, "i");
    assert!(app.detail_open);
    assert_eq!(app.view, ViewKind::Nodes);

    let mut app = self::app();
    press(&mut app, ":jobs<enter>/web-0<enter>");
    let Some(RowKey::Job(job)) = app.list().selected.clone() else {
        panic!("a job is selected");
    };
    press(&mut app, "<enter>");
    assert_eq!(app.alloc_scope, AllocScope::Job(job.clone()));
    let rows = alloc_rows(&app);
    assert!(
        !rows.is_empty() && rows.iter().all(|(_, j)| *j == job),
        "{rows:?}"
    );
    press(&mut app, "<esc>");
    assert_eq!(app.view, ViewKind::Jobs);
    assert_eq!(app.list().selected, Some(RowKey::Job(job)));
}

/// The allocations tab lists the whole cluster's allocations, newest first; `esc` has
/// nowhere to go back to from it, and leaving a drill by tab forgets the drill.
#[test]
fn the_allocations_tab_lists_every_allocation() {
    let mut app = app();
    press(&mut app, ":allocs<enter>");
    assert_eq!(
        (app.view, &app.alloc_scope),
        (ViewKind::Allocs, &AllocScope::All)
    );
    assert_eq!(app.list().order.len(), app.cluster.allocs.len());
    let ages: Vec<u64> = app
        .list()
        .order
        .iter()
        .filter_map(|k| match k {
            RowKey::Alloc(id) => app
                .cluster
                .allocs
                .get(id)
                .map(|a| a.create_time.as_millis()),
            _ => None,
        })
        .collect();
    assert!(ages.windows(2).all(|w| w[0] >= w[1]), "newest first");
    press(&mut app, "<esc>");
    assert_eq!(app.view, ViewKind::Allocs);

    press(&mut app, ":nodes<enter><enter>");
    assert!(matches!(app.alloc_scope, AllocScope::Node(_)));
    press(&mut app, "<tab>");
    assert_eq!(app.view, ViewKind::Servers);
    press(&mut app, "<esc>");
    assert_eq!(app.view, ViewKind::Servers, "no drill to go back from");
    let mut app = self::app();
    press(&mut app, "<enter>");
    let drilled = app.list().order.len();
    // Back to the tab the allocations view has: every allocation again.
    press(&mut app, &"<tab>".repeat(ViewKind::COUNT));
    assert_eq!(app.view, ViewKind::Allocs);
    assert_eq!(app.alloc_scope, AllocScope::All);
    assert!(app.list().order.len() > drilled);
}

#[test]
fn quitting_and_copying() {
    let cases: [(&str, fn(&App) -> Vec<Action>); 3] = [
        ("q", |_| vec![Action::Quit]),
        (":quit<enter>", |_| vec![Action::Quit]),
        ("y", |app| {
            vec![Action::Copy(
                app.list()
                    .selected
                    .as_ref()
                    .map(RowKey::copy_text)
                    .unwrap_or_default(),
            )]
        }),
    ];
    for (keys, want) in cases {
        let mut app = app();
        let expected = want(&app);
        assert_eq!(press(&mut app, keys), expected, "{keys}");
    }
    let mut app = app();
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    press(&mut app, "/abc");
    assert_eq!(app.handle(Input::Key(ctrl_c)), Action::Quit);
}

#[test]
fn help_opens_and_closes() {
    let mut app = app();
    press(&mut app, "?");
    assert_eq!(app.mode, Mode::Help);
    // Keys do not leak through the help to the view.
    press(&mut app, "o");
    assert_eq!(app.mode, Mode::Help);
    press(&mut app, "<esc>");
    assert_eq!(app.mode, Mode::Normal);
}

fn click(app: &mut App, kind: MouseEventKind, column: u16, row: u16) {
    app.handle(Input::Mouse(MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }));
}

#[test]
fn mouse_selects_rows_sorts_columns_scrolls_and_switches_tabs() {
    let mut app = app();
    let table = crate::ui::layout::areas(&app).table;
    // Data rows start two lines into the table (border, titles).
    click(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        10,
        table.y + 2 + 4,
    );
    assert_eq!(app.list().cursor, 4);
    click(&mut app, MouseEventKind::ScrollDown, 10, table.y + 5);
    assert_eq!(app.list().cursor, 7);
    click(&mut app, MouseEventKind::ScrollUp, 10, table.y + 5);
    assert_eq!(app.list().cursor, 4);
    // The first title (NAME) starts after the border and the two-column gutter.
    click(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        table.x + 4,
        table.y + 1,
    );
    assert_eq!(app.list().sort.map(|s| s.column), Some(0));
    let tabs = crate::ui::layout::areas(&app).tabs;
    let evals_x = tabs.x + 1 + crate::ui::layout::tab_width(ViewKind::Nodes, tabs.width) + 2;
    click(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        evals_x,
        tabs.y,
    );
    assert_eq!(app.view, ViewKind::Evals);
}

#[test]
fn health_groups_and_topics_cycle() {
    let mut app = app();
    press(&mut app, "g");
    assert!(app.list().order.iter().all(|k| match k {
        RowKey::Node(id) => app.cluster.nodes[id].health == NodeHealth::Healthy,
        _ => false,
    }));
    press(&mut app, "ggggg");
    assert_eq!(app.list().order.len(), 40);
    press(&mut app, ":events<enter>t");
    assert_eq!(app.topic_filter(), Some("node"));
    assert!(app.list().order.iter().all(|k| {
        match k {
            RowKey::Event(seq) => app
                .cluster
                .events
                .iter()
                .any(|e| e.seq == *seq && e.topic == "node"),
            _ => false,
        }
    }));
}

#[test]
fn connection_changes_reach_the_state() {
    let mut app = app();
    let lost = Connection::Lost {
        reason: "connection refused".into(),
        retry_in: std::time::Duration::from_secs(2),
    };
    app.handle(Input::Update(Update::Connection(lost.clone())));
    assert_eq!(app.connection, lost);
    app.handle(Input::Update(Update::CommandDone(Err(
        "offline node x failed: gone".into(),
    ))));
    assert!(
        app.notice
            .as_ref()
            .is_some_and(|n| n.tone == crate::views::Tone::Bad)
    );
    app.handle(Input::Update(Update::Connection(Connection::Connected)));
    assert_eq!(app.connection, Connection::Connected);
}

mod actions;
mod logs;
mod typing;

#[test]
fn colon_services_shows_every_registration_and_events_keep_it() {
    let mut app = app();
    press(&mut app, ":services<enter>");
    assert_eq!(app.view, ViewKind::Services);
    app.prepare_frame();
    let expected = fixtures::services(40, 200).len();
    assert!(expected > 0);
    assert_eq!(app.list().order.len(), expected);
    let Some(RowKey::Service(first)) = app.list().order.get(0).cloned() else {
        panic!("the services view lists registrations");
    };
    // Deregistered: its row goes.
    app.handle(Input::Update(Update::Events(vec![(
        Change::ServiceRemoved(first.clone()),
        event_row(),
    )])));
    app.prepare_frame();
    assert_eq!(app.list().order.len(), expected - 1);
    assert!(!app.list().order.contains(&RowKey::Service(first)));

    // `/` filters by any cell, as in the other views.
    press(&mut app, "/api<enter>");
    app.prepare_frame();
    let apis = fixtures::services(40, 200)
        .iter()
        .filter(|r| r.service_name == "api")
        .count();
    assert_eq!(app.list().order.len(), apis);

    // Sorting by the health column puts the worst first.
    press(&mut app, "<esc>8");
    app.prepare_frame();
    let health = |key: &RowKey| match key {
        RowKey::Service(id) => app.cluster.services.get(id).map(|r| r.health),
        _ => None,
    };
    let order: Vec<_> = app.list().order.iter().filter_map(health).collect();
    assert_eq!(order.len(), expected - 1);
    assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
    assert_eq!(order.first(), Some(&drover_core::ServiceHealth::Critical));

    // The aliases reach it too.
    press(&mut app, ":nodes<enter>:svc<enter>");
    assert_eq!(app.view, ViewKind::Services);
}

#[test]
fn colon_deployments_lists_them_newest_first_and_events_keep_it() {
    let mut app = app();
    press(&mut app, ":deployments<enter>");
    assert_eq!(app.view, ViewKind::Deployments);
    let ids = |app: &App| -> Vec<RowKey> { app.list().order.iter().cloned().collect() };
    let newest_first: Vec<RowKey> = (0..5)
        .map(|n| RowKey::Deployment(fixtures::deployment_id(n)))
        .collect();
    assert_eq!(ids(&app), newest_first);

    // web-3's next version: its deployment arrives on the stream and leads the list, and
    // the one it supersedes is cancelled in place.
    let mut next = fixtures::deployments().swap_remove(1);
    let mut superseded = next.clone();
    next.id = fixtures::deployment_id(7);
    next.job_version = 1;
    next.create_index = 1_001;
    next.modify_index = 1_001;
    superseded.status = drover_core::DeploymentStatus::Cancelled;
    superseded.modify_index = 1_001;
    app.handle(Input::Update(Update::Events(vec![
        (Change::Deployment(Box::new(superseded)), event_row()),
        (Change::Deployment(Box::new(next)), event_row()),
    ])));
    app.prepare_frame();
    assert_eq!(app.list().order.len(), 6);
    assert_eq!(
        app.list().order.get(0),
        Some(&RowKey::Deployment(fixtures::deployment_id(7)))
    );
    let cancelled = app
        .cluster
        .deployments
        .get(&fixtures::deployment_id(1))
        .map(|d| d.status);
    assert_eq!(cancelled, Some(drover_core::DeploymentStatus::Cancelled));

    // Purging web-3 takes its deployments away.
    app.handle(Input::Update(Update::Events(vec![(
        Change::JobRemoved(drover_core::JobKey::default_ns("web-3")),
        event_row(),
    )])));
    app.prepare_frame();
    assert_eq!(app.list().order.len(), 4);

    // The aliases reach it too.
    for alias in ["deploy", "dp", "deployment"] {
        press(&mut app, &format!("<esc>:nodes<enter>:{alias}<enter>"));
        assert_eq!(app.view, ViewKind::Deployments, "{alias}");
    }
}
