//! The logs pane: opened with `l` on an allocation, fed by its stream, scrolled, switched
//! between stdout and stderr, and closed, each with the action the runtime must take.

use super::*;

/// The app in the allocations view of the fixture's first job, with the pane open.
fn with_logs() -> (App, LogTarget) {
    let mut app = app();
    press(&mut app, ":jobs<enter><enter>");
    let actions = press(&mut app, "l");
    let Some(RowKey::Alloc(selected)) = app.list().selected.clone() else {
        panic!("an allocation is selected");
    };
    let [Action::StreamLogs(target)] = actions.as_slice() else {
        panic!("l streams the logs: {actions:?}");
    };
    assert_eq!(target.alloc_id, selected);
    assert!(!target.stderr);
    (app, target.clone())
}

fn feed(app: &mut App, target: &LogTarget, text: &str) {
    app.handle(Input::Update(Update::Logs(
        target.clone(),
        LogNews::Data(text.as_bytes().to_vec()),
    )));
}

#[test]
fn l_opens_the_pane_and_its_keys_scroll_switch_and_close() {
    let (mut app, target) = with_logs();
    let lines: String = (0..100).map(|i| format!("line {i}\n")).collect();
    feed(&mut app, &target, &lines);
    let pane = app.logs.as_ref().expect("open");
    assert_eq!(pane.lines.len(), 100);
    assert!(pane.follow);

    // News of another stream (an earlier target) is dropped.
    let mut other = target.clone();
    other.stderr = true;
    feed(&mut app, &other, "stale\n");
    assert_eq!(app.logs.as_ref().expect("open").lines.len(), 100);

    let cases: [(&str, bool, usize); 6] = [
        ("k", false, 1),
        ("kk", false, 3),
        ("j", false, 2),
        ("G", true, 0),
        ("f", false, 1),
        ("f", true, 0),
    ];
    for (keys, follow, from_bottom) in cases {
        assert!(press(&mut app, keys).is_empty(), "{keys}");
        let pane = app.logs.as_ref().expect("open");
        assert_eq!(
            (pane.follow, pane.from_bottom),
            (follow, from_bottom),
            "{keys}"
        );
    }
    assert_eq!(
        app.view,
        ViewKind::Allocs,
        "keys go to the pane, not the table"
    );

    assert_eq!(
        press(&mut app, "e"),
        vec![Action::StreamLogs(other.clone())]
    );
    let pane = app.logs.as_ref().expect("open");
    assert!(pane.lines.is_empty(), "a new stream starts a fresh pane");
    feed(&mut app, &other, "err\n");
    assert_eq!(app.logs.as_ref().expect("open").lines.len(), 1);

    assert_eq!(press(&mut app, "<esc>"), vec![Action::StopLogs]);
    assert!(app.logs.is_none());
    assert_eq!(app.view, ViewKind::Allocs);
}

#[test]
fn l_does_nothing_outside_the_allocations_view() {
    let mut app = app();
    assert!(press(&mut app, "l").is_empty());
    assert!(app.logs.is_none());
}
