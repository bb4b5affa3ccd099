//! Reconciler scenarios live with the scheduler's (scheduler/tests); here are the helpers'.

use super::same_name;

#[test]
fn same_name_is_string_equality() {
    let cases = [
        ("web", "web", true),
        ("web", "weB", false),
        ("web", "webs", false),
        ("", "", true),
        ("", "a", false),
        ("grüße", "grüße", true),
        ("grüße", "grusse", false),
        (
            "a-rather-long-group-name-past-inline",
            "a-rather-long-group-name-past-inline",
            true,
        ),
    ];
    for (a, b, want) in cases {
        assert_eq!(same_name(a, b), want, "{a:?} vs {b:?}");
        assert_eq!(same_name(b, a), want, "{b:?} vs {a:?}");
        assert_eq!(same_name(a, b), a == b, "{a:?} vs {b:?}");
    }
}
