//! The functions a job file may call, each with what it answers, as Nomad's HCL2 answers
//! it: one expression per row, its value read back through `jsonencode` in the job's meta.

use drover_core::jobspec::{Inputs, parse_hcl_with};

/// The JSON of `expr`'s value, or the parser's error.
fn eval(expr: &str) -> Result<String, String> {
    let src = format!(
        "job \"j\" {{\n  meta = {{ v = jsonencode({expr}) }}\n  group \"g\" {{\n    task \"t\" {{\n      \
         driver = \"raw_exec\"\n      config {{ command = \"/bin/true\" }}\n    }}\n  }}\n}}\n"
    );
    let job = parse_hcl_with(&src, "f.hcl", &Inputs::default()).map_err(|e| e.to_string())?;
    Ok(job.meta.get("v").cloned().unwrap_or_default())
}

#[test]
fn functions_answer_as_nomads_do() {
    let table = [
        // Strings.
        (r#"upper("ab")"#, r#""AB""#),
        (r#"title("hello big world")"#, r#""Hello Big World""#),
        (r#"trimspace("  x \n")"#, r#""x""#),
        (r#"chomp("line\r\n\n")"#, r#""line""#),
        (r#"chomp("no newline")"#, r#""no newline""#),
        (r#"indent(2, "a\nb\nc")"#, r#""a\n  b\n  c""#),
        (r#"format("%s-%d", "web", 3)"#, r#""web-3""#),
        (r#"substr("hello", 1, 3)"#, r#""ell""#),
        (r#"replace("a.b.c", ".", "/")"#, r#""a/b/c""#),
        (r#"regex_replace("v1.2.3", "[0-9]", "N")"#, r#""vN.N.N""#),
        // Regular expressions.
        (r#"regex("[0-9]+", "build 123 of 456")"#, r#""123""#),
        (r#"regex("(\\d+)\\.(\\d+)", "v10.20")"#, r#"["10","20"]"#),
        (
            r#"regex("(?P<major>\\d+)\\.(?P<minor>\\d+)", "v10.20")"#,
            r#"{"major":"10","minor":"20"}"#,
        ),
        (r#"regexall("[a-z]+", "ab 12 cd")"#, r#"["ab","cd"]"#),
        (r#"regexall("x", "abc")"#, "[]"),
        // Collections and sets.
        (r#"index(["a", "b", "c"], "b")"#, "1"),
        ("sum([1, 2, 3.5])", "6.5"),
        ("sum([1, 2])", "3"),
        (r#"chunklist(["a", "b", "c"], 2)"#, r#"[["a","b"],["c"]]"#),
        (r#"coalescelist([], ["x"], ["y"])"#, r#"["x"]"#),
        (r#"setunion(["a", "b"], ["b", "c"])"#, r#"["a","b","c"]"#),
        (
            r#"setintersection(["a", "b", "c"], ["c", "b"], ["b", "c", "d"])"#,
            r#"["b","c"]"#,
        ),
        (r#"setsubtract(["a", "b", "c"], ["b"])"#, r#"["a","c"]"#),
        (r#"lookup({ a = 1 }, "b", 7)"#, "7"),
        (r#"zipmap(["a", "b"], [1, 2])"#, r#"{"a":1,"b":2}"#),
        (r#"distinct(["a", "a", "b"])"#, r#"["a","b"]"#),
        // Encoding and time.
        (r#"base64encode("hi")"#, r#""aGk=""#),
        (r#"base64decode("aGk=")"#, r#""hi""#),
        (r#"urlencode("a b&c")"#, r#""a%20b%26c""#),
        (
            r#"timeadd("2024-01-02T03:04:05Z", "-1h30m")"#,
            r#""2024-01-02T01:34:05Z""#,
        ),
    ];
    let mut failures = Vec::new();
    for (expr, want) in table {
        match eval(expr) {
            Ok(got) if got == want => {}
            other => failures.push(format!("{expr}: want {want}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn functions_refuse_what_they_cannot_answer() {
    let table = [
        (r#"regex("[0-9]+", "none")"#, "regex: no match"),
        (r#"regex("(", "x")"#, "regex: regex parse error"),
        (
            r#"index(["a"], "z")"#,
            "index: the value is not in the list",
        ),
        ("sum([])", "sum: the list is empty"),
        (
            r#"chunklist(["a"], -1)"#,
            "chunklist: a size of -1 is negative",
        ),
        ("coalescelist([], [])", "coalescelist: every list is empty"),
        (r#"indent(-2, "a")"#, "indent: -2 spaces"),
    ];
    let mut failures = Vec::new();
    for (expr, want) in table {
        match eval(expr) {
            Err(e) if e.contains(want) => {}
            other => failures.push(format!(
                "{expr}: want an error with {want:?}, got {other:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
