use super::*;
use crate::types::{AccessorId, Timestamp};

fn policy(name: &str, rules: &str) -> AclPolicy {
    AclPolicy {
        name: name.into(),
        description: String::new(),
        rules_source: rules.into(),
        rules: parse_rules(rules).unwrap_or_else(|e| panic!("{name}: {e}")),
        create_index: 1,
        modify_index: 1,
    }
}

fn client(policies: &[AclPolicy]) -> Acl {
    let token = AclToken {
        accessor_id: AccessorId::from_bytes([7; 16]),
        secret_digest: "sha256:00".into(),
        name: "ci".into(),
        kind: TokenKind::Client,
        policies: policies.iter().map(|p| p.name.clone()).collect(),
        create_time: Timestamp::ZERO,
        expiry: None,
        create_index: 1,
        modify_index: 1,
    };
    Acl::for_token(&token, |n| policies.iter().find(|p| p.name == n))
}

/// Each row: the token's policies (HCL), what is asked, whether it is allowed.
fn check(rows: &[(&[&str], Need<'_>, bool)]) {
    for (i, (rules, need, want)) in rows.iter().enumerate() {
        let policies: Vec<_> = rules
            .iter()
            .enumerate()
            .map(|(n, r)| policy(&format!("p{n}"), r))
            .collect();
        let acl = client(&policies);
        assert_eq!(acl.allows(need), *want, "row {i}: {rules:?} asking {need}");
        assert_eq!(acl.check(need).is_ok(), *want, "row {i}: check agrees");
    }
}

#[test]
fn namespace_rules_grant_what_their_level_and_capabilities_say() {
    use NamespaceCapability::*;
    let read_default = r#"namespace "default" { policy = "read" }"#;
    let write_default = r#"namespace "default" { policy = "write" }"#;
    let dispatch_only = r#"namespace "default" { capabilities = ["dispatch-job"] }"#;
    let team_glob = r#"namespace "team-*" { policy = "read" }"#;
    let any_write = r#"namespace "*" { policy = "write" }"#;
    let deny_prod = r#"namespace "prod" { policy = "deny" }"#;
    check(&[
        (&[read_default], Need::Namespace(ReadJob, "default"), true),
        (
            &[read_default],
            Need::Namespace(SubmitJob, "default"),
            false,
        ),
        (&[read_default], Need::Namespace(ReadJob, "prod"), false),
        (
            &[write_default],
            Need::Namespace(SubmitJob, "default"),
            true,
        ),
        (&[write_default], Need::Namespace(ReadLogs, "default"), true),
        (
            &[dispatch_only],
            Need::Namespace(DispatchJob, "default"),
            true,
        ),
        (&[dispatch_only], Need::Namespace(ReadJob, "default"), false),
        (&[team_glob], Need::Namespace(ReadJob, "team-a"), true),
        (&[team_glob], Need::Namespace(ReadJob, "teams"), false),
        (&[any_write], Need::Namespace(SubmitJob, "anything"), true),
        // The exact rule governs, even when a wildcard grants more.
        (
            &[any_write, read_default],
            Need::Namespace(SubmitJob, "default"),
            false,
        ),
        (
            &[any_write, read_default],
            Need::Namespace(SubmitJob, "other"),
            true,
        ),
        (
            &[any_write, deny_prod],
            Need::Namespace(ReadJob, "prod"),
            false,
        ),
        (
            &[any_write, deny_prod],
            Need::Namespace(ReadJob, "dev"),
            true,
        ),
        // Deny in one policy beats write in another for the same pattern.
        (
            &[deny_prod, r#"namespace "prod" { policy = "write" }"#],
            Need::Namespace(ReadJob, "prod"),
            false,
        ),
        // Grants for one pattern add up across policies.
        (
            &[read_default, dispatch_only],
            Need::Namespace(DispatchJob, "default"),
            true,
        ),
        (&[team_glob], Need::AnyNamespace(ReadJob), true),
        (&[team_glob], Need::AnyNamespace(SubmitJob), false),
        (&[], Need::Namespace(ReadJob, "default"), false),
    ]);
}

#[test]
fn area_levels_cover_lower_levels_and_deny_wins() {
    let node_read = r#"node { policy = "read" }"#;
    let node_write = r#"node { policy = "write" }"#;
    let node_deny = r#"node { policy = "deny" }"#;
    let operator_write = r#"operator { policy = "write" }"#;
    check(&[
        (&[node_read], Need::Area(Area::Node, Level::Read), true),
        (&[node_read], Need::Area(Area::Node, Level::Write), false),
        (&[node_write], Need::Area(Area::Node, Level::Read), true),
        (
            &[node_write, node_deny],
            Need::Area(Area::Node, Level::Read),
            false,
        ),
        (
            &[operator_write],
            Need::Area(Area::Operator, Level::Read),
            true,
        ),
        (
            &[operator_write],
            Need::Area(Area::Node, Level::Read),
            false,
        ),
        (
            &[operator_write],
            Need::Area(Area::Agent, Level::Write),
            false,
        ),
        (&[operator_write], Need::Management, false),
        (&[], Need::AnyToken, true),
    ]);
}

#[test]
fn management_and_disabled_allow_everything() {
    let token = AclToken {
        accessor_id: AccessorId::from_bytes([1; 16]),
        secret_digest: String::new(),
        name: "root".into(),
        kind: TokenKind::Management,
        policies: vec![],
        create_time: Timestamp::ZERO,
        expiry: None,
        create_index: 1,
        modify_index: 1,
    };
    for acl in [Acl::for_token(&token, |_| None), Acl::Disabled] {
        assert!(acl.allows(&Need::Management));
        assert!(acl.allows(&Need::Area(Area::Operator, Level::Write)));
        assert!(acl.allows(&Need::Namespace(NamespaceCapability::SubmitJob, "x")));
    }
}

#[test]
fn a_denial_names_the_token_and_the_capability() {
    let acl = client(&[policy("ro", r#"node { policy = "read" }"#)]);
    let err = acl
        .check(&Need::Area(Area::Node, Level::Write))
        .expect_err("read cannot write");
    assert_eq!(
        err.to_string(),
        "permission denied: token \"ci\" lacks write-node"
    );
    let err = acl
        .check(&Need::Namespace(NamespaceCapability::SubmitJob, "prod"))
        .expect_err("no namespace rule");
    assert_eq!(
        err.to_string(),
        "permission denied: token \"ci\" lacks submit-job on namespace \"prod\""
    );
}

#[test]
fn bad_rules_are_refused_naming_the_field() {
    let rows = [
        ("namespace {", "rules: not valid HCL"),
        (
            r#"namespace { policy = "read" }"#,
            "namespace: needs exactly one label",
        ),
        (
            r#"namespace "a" { policy = "admin" }"#,
            r#"namespace "a".policy: "admin" is not a policy"#,
        ),
        (
            r#"namespace "a" { capabilities = ["fly"] }"#,
            r#"namespace "a".capabilities: unknown capability "fly""#,
        ),
        (
            r#"namespace "a" { colour = "red" }"#,
            r#"namespace "a".colour: unknown attribute"#,
        ),
        (r#"namespace "a" {}"#, r#"namespace "a": grants nothing"#),
        (
            r#"namespace "a/b" { policy = "read" }"#,
            r#"namespace "a/b": '/' is not allowed"#,
        ),
        (r#"node {}"#, "node.policy: is required"),
        (r#"cluster { policy = "read" }"#, "cluster: is not a rule"),
        (r#"policy = "read""#, "policy: is not a rule"),
        (
            "node { policy = \"read\" }\nnode { policy = \"write\" }",
            "node: appears twice",
        ),
    ];
    for (src, want) in rows {
        let err = parse_rules(src).expect_err(src).to_string();
        assert!(err.starts_with(want), "{src:?}: got {err:?}, want {want:?}");
    }
}

#[test]
fn policy_names_are_checked() {
    assert!(validate_policy_name("read-only_1").is_ok());
    for bad in ["", "has space", "slash/", &"x".repeat(MAX_POLICY_NAME + 1)] {
        let err = validate_policy_name(bad).expect_err(bad).to_string();
        assert!(err.starts_with("name: "), "{err}");
    }
}

#[test]
fn a_node_identity_is_granted_nothing_and_events_follow_the_token() {
    use crate::fsm::{Event, EventType};
    use crate::mock;
    let id = crate::types::NodeId::from_bytes([3; 16]);
    let node = Acl::node_identity(id);
    assert_eq!(node.node(), Some(id));
    for need in [
        Need::Namespace(NamespaceCapability::ReadJob, "any"),
        Need::Namespace(NamespaceCapability::SubmitJob, "any"),
        Need::AnyNamespace(NamespaceCapability::ReadEvents),
        Need::Area(Area::Node, Level::Read),
        Need::AnyToken,
    ] {
        assert!(!node.allows(&need), "{need}");
    }
    assert!(!node.may_subscribe());
    assert!(
        node.check(&Need::AnyToken)
            .unwrap_err()
            .to_string()
            .contains("node 03030303")
    );

    let job = std::sync::Arc::new(mock::service_job("web", 1));
    let job_event = Event::job(1, EventType::JobRegistered, &job);
    let node_event = Event::node(
        2,
        EventType::NodeStatus,
        &std::sync::Arc::new(mock::node(1)),
    );
    let nodes_only = client(&[policy("n", r#"node { policy = "read" }"#)]);
    assert!(nodes_only.may_subscribe());
    assert!(nodes_only.may_see(&node_event) && !nodes_only.may_see(&job_event));
    let events = client(&[policy(
        "e",
        r#"namespace "default" { capabilities = ["read-events"] }"#,
    )]);
    assert!(events.may_see(&job_event) && !events.may_see(&node_event));
    let nothing = client(&[policy("x", r#"namespace "other" { policy = "deny" }"#)]);
    assert!(!nothing.may_subscribe());
}
