use super::*;
use proptest::prelude::*;

/// The struct `TaskEvent` was before it was packed: what every log, snapshot and agent
/// state file holds.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
struct PlainEvent {
    time: Timestamp,
    kind: CompactString,
    message: CompactString,
    exit_code: Option<i32>,
    infra_failure: bool,
}

fn plain(time: u64, kind: &str, message: &str, exit_code: Option<i32>, infra: bool) -> PlainEvent {
    PlainEvent {
        time: Timestamp(time),
        kind: kind.into(),
        message: message.into(),
        exit_code,
        infra_failure: infra,
    }
}

/// Packs `p`, then checks every field reads back and both encodings are the plain struct's,
/// in both directions.
fn check(p: &PlainEvent) -> Result<(), TestCaseError> {
    let e = TaskEvent::new(p.time, &p.kind, p.message.as_str())
        .with_exit_code(p.exit_code)
        .with_infra_failure(p.infra_failure);
    prop_assert_eq!(e.time(), p.time);
    prop_assert_eq!(e.kind(), p.kind.as_str());
    prop_assert_eq!(e.message(), p.message.as_str());
    prop_assert_eq!(e.exit_code(), p.exit_code);
    prop_assert_eq!(e.infra_failure(), p.infra_failure);

    let old = postcard::to_allocvec(p).unwrap();
    prop_assert_eq!(&postcard::to_allocvec(&e).unwrap(), &old);
    prop_assert_eq!(&postcard::from_bytes::<TaskEvent>(&old).unwrap(), &e);
    let json = serde_json::to_string(p).unwrap();
    prop_assert_eq!(&serde_json::to_string(&e).unwrap(), &json);
    prop_assert_eq!(&serde_json::from_str::<TaskEvent>(&json).unwrap(), &e);
    Ok(())
}

#[test]
fn reads_back_and_encodes_as_the_plain_struct_did() {
    let cases = [
        plain(1, "Received", "task received by the agent", None, false),
        plain(2, "Started", "", None, false),
        plain(3, "Terminated", "exit status 2", Some(2), false),
        plain(4, "Terminated", "killed", Some(-9), false),
        plain(5, "Driver Failure", "fork failed: no space", None, true),
        plain(
            6,
            "Plugin became unhealthy",
            "a message of more than twenty-four bytes",
            None,
            false,
        ),
        // Kinds no agent of ours sends are kept exactly, whatever they hold.
        plain(7, "Custom", "hello", Some(0), true),
        plain(8, "", "an empty kind", None, false),
        plain(9, "12:ab", "a kind that looks like a prefix", None, false),
        plain(10, "received", "case matters", None, false),
        plain(11, "Zeitüberschreitung", "ünïcödé", None, false),
        plain(12, "x", "", None, false),
        plain(u64::MAX, "Killed", "", Some(i32::MIN), true),
    ];
    for case in &cases {
        check(case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    }
}

#[test]
fn every_known_kind_is_kept_as_its_number() {
    for (at, name) in KNOWN_KINDS.iter().enumerate() {
        let e = TaskEvent::new(Timestamp(1), name, "m");
        assert_eq!(usize::from(e.kind), at, "{name}");
        assert_eq!(e.text, "m", "{name}: the kind takes no room in the text");
    }
    let names: std::collections::BTreeSet<_> = KNOWN_KINDS.iter().collect();
    assert_eq!(names.len(), KNOWN_KINDS.len(), "a kind is listed twice");
    assert!(KNOWN_KINDS.len() < usize::from(OTHER_KIND));
}

#[test]
fn flags_can_be_cleared() {
    let e = TaskEvent::new(Timestamp(1), "Terminated", "m")
        .with_exit_code(Some(3))
        .with_infra_failure(true)
        .with_exit_code(None)
        .with_infra_failure(false);
    assert_eq!(e, TaskEvent::new(Timestamp(1), "Terminated", "m"));
}

/// Two reports per running allocation across millions of allocations: each byte here is
/// megabytes of server memory.
#[test]
fn an_event_is_40_bytes() {
    assert_eq!(std::mem::size_of::<TaskEvent>(), 40);
}

proptest! {
    #[test]
    fn any_event_reads_back_and_encodes_as_the_plain_struct_did(
        time in any::<u64>(),
        kind in prop_oneof![
            proptest::sample::select(KNOWN_KINDS.to_vec()).prop_map(String::from),
            "[0-9:]{0,6}",
            ".{0,40}",
        ],
        message in ".{0,60}",
        exit_code in any::<Option<i32>>(),
        infra in any::<bool>(),
    ) {
        check(&plain(time, &kind, &message, exit_code, infra))?;
    }
}
