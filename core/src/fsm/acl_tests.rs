//! The ACL commands: bootstrap once, tokens need their policies, refusals change nothing,
//! and the tables survive a snapshot (and format-1 snapshots still load).

use super::*;
use crate::acl::{AclPolicy, AclToken, TokenKind, parse_rules};
use crate::state::{StateStore, StoreParts};
use crate::types::*;

fn token(n: u8, kind: TokenKind, policies: &[&str]) -> AclToken {
    AclToken {
        accessor_id: AccessorId::from_bytes([n; 16]),
        secret_digest: format!("sha256:{n:02x}"),
        name: format!("t{n}"),
        kind,
        policies: policies.iter().map(|p| p.to_string()).collect(),
        create_time: Timestamp(1),
        expiry: None,
        create_index: 0,
        modify_index: 0,
    }
}

fn policy(name: &str) -> AclPolicy {
    let rules = r#"namespace "default" { policy = "read" }"#;
    AclPolicy {
        name: name.into(),
        description: String::new(),
        rules_source: rules.into(),
        rules: parse_rules(rules).expect("rules"),
        create_index: 0,
        modify_index: 0,
    }
}

/// Applies `steps` in order at indexes 1..; each row says whether it must be refused with
/// `Some(error text)`. A refused step must leave the store byte-for-byte as it was.
fn check(steps: &[(Command, Option<&str>)]) -> StateStore {
    let mut store = StateStore::new();
    for (i, (cmd, refused)) in steps.iter().enumerate() {
        let before = encode_snapshot(&store);
        let got = apply(&mut store, i as Index + 1, cmd.clone());
        match (got, refused) {
            (Ok(_), None) => {}
            (Err(e), Some(want)) => {
                assert_eq!(e.to_string(), *want, "step {i} ({})", cmd.kind());
                assert_eq!(
                    encode_snapshot(&store),
                    before,
                    "step {i} changed the store"
                );
            }
            (got, want) => panic!("step {i} ({}): got {got:?}, want {want:?}", cmd.kind()),
        }
        store.check_consistency().unwrap();
    }
    store
}

#[test]
fn bootstrap_happens_once() {
    let store = check(&[
        (
            Command::AclBootstrap {
                token: token(1, TokenKind::Management, &[]),
            },
            None,
        ),
        (
            Command::AclBootstrap {
                token: token(2, TokenKind::Management, &[]),
            },
            Some("acl bootstrap already done (at index 1)"),
        ),
    ]);
    assert_eq!(store.acl_bootstrap_index(), Some(1));
    assert_eq!(store.acl_tokens().count(), 1);
    let root = store.acl_token_by_digest("sha256:01").expect("by digest");
    assert_eq!((root.create_index, root.modify_index), (1, 1));
}

#[test]
fn tokens_need_their_policies_and_unique_secrets() {
    let mut clash = token(3, TokenKind::Client, &[]);
    clash.secret_digest = "sha256:02".into();
    let store = check(&[
        (
            Command::AclTokenUpsert {
                tokens: vec![token(2, TokenKind::Client, &["ro"])],
            },
            Some("acl policy \"ro\" not found"),
        ),
        (
            Command::AclPolicyUpsert {
                policies: vec![policy("ro")],
            },
            None,
        ),
        (
            Command::AclTokenUpsert {
                tokens: vec![token(2, TokenKind::Client, &["ro"])],
            },
            None,
        ),
        (
            Command::AclTokenUpsert {
                tokens: vec![clash],
            },
            Some(&format!(
                "acl token secret is already in use by token {}",
                AccessorId::from_bytes([2; 16])
            )),
        ),
        (
            Command::AclPolicyUpsert {
                policies: vec![policy("ro")],
            },
            None,
        ),
        (
            Command::AclPolicyDelete {
                names: vec!["ro".into(), "nope".into()],
            },
            Some("acl policy \"nope\" not found"),
        ),
        (
            Command::AclTokenDelete {
                accessor_ids: vec![AccessorId::from_bytes([9; 16])],
            },
            Some(&format!(
                "acl token {} not found",
                AccessorId::from_bytes([9; 16])
            )),
        ),
        (
            Command::AclTokenDelete {
                accessor_ids: vec![AccessorId::from_bytes([2; 16])],
            },
            None,
        ),
    ]);
    let ro = store.acl_policy("ro").expect("policy kept");
    assert_eq!(
        (ro.create_index, ro.modify_index),
        (2, 5),
        "re-apply keeps create index"
    );
    assert!(store.acl_token_by_digest("sha256:02").is_none(), "deleted");
    assert_eq!(store.acl_index(), 8);
    assert_eq!(store.latest_index(), 8, "acl writes count as writes");
}

#[test]
fn acl_tables_survive_a_snapshot_and_old_snapshots_load() {
    let store = check(&[
        (
            Command::AclPolicyUpsert {
                policies: vec![policy("ro")],
            },
            None,
        ),
        (
            Command::AclBootstrap {
                token: token(1, TokenKind::Management, &[]),
            },
            None,
        ),
    ]);
    let bytes = encode_snapshot(&store);
    let back = decode_snapshot(&bytes).expect("decodes");
    assert_eq!(back.acl_parts(), store.acl_parts());
    assert_eq!(encode_snapshot(&back), bytes, "byte-identical round trip");

    // A snapshot of an older format (1: before ACLs) is refused with what to do, not
    // decoded against types it was not written with.
    let mut v1 = b"ds\x01".to_vec();
    v1.extend(postcard::to_allocvec(&StoreParts::default()).expect("encode"));
    let refused = match decode_snapshot(&v1) {
        Ok(_) => panic!("format 1 is refused"),
        Err(e) => e.to_string(),
    };
    assert!(refused.contains("fresh data dir"), "{refused}");
}
