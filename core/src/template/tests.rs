use super::*;

fn vars(name: &str) -> Option<String> {
    match name {
        "NOMAD_ALLOC_ID" => Some("a1b2".into()),
        "PORT" => Some("8080".into()),
        "EMPTY" => Some(String::new()),
        "node.unique.name" => Some("node-1".into()),
        "attr.kernel.name" => Some("linux".into()),
        "meta.rack" => Some("r7".into()),
        _ => None,
    }
}

fn render(text: &str) -> Result<String, TemplateError> {
    parse(text, "{{", "}}")?.render(&vars)
}

#[test]
fn templates_render_env_node_values_and_functions() {
    let cases = [
        ("plain text\n", "plain text\n"),
        ("id={{ env \"NOMAD_ALLOC_ID\" }}", "id=a1b2"),
        (
            "{{env \"node.unique.name\"}}/{{ env \"attr.kernel.name\" }}",
            "node-1/linux",
        ),
        ("rack={{ env \"meta.rack\" | toUpper }}", "rack=R7"),
        ("missing=[{{ env \"NOPE\" }}]", "missing=[]"),
        ("{{ envOrDefault \"EMPTY\" \"fallback\" }}", "fallback"),
        ("{{ envOrDefault \"PORT\" \"80\" }}", "8080"),
        ("{{ \"  Mixed \" | trimSpace | toLower }}", "mixed"),
        (
            "{{ printf \"%s:%d %q %%\" \"host\" 42 \"x\" }}",
            "host:42 \"x\" %",
        ),
        ("{{ `raw \\n` }}", "raw \\n"),
        ("{{ \"esc\\t\\\"q\\\"\" }}", "esc\t\"q\""),
        ("{{/* a comment */}}kept", "kept"),
        ("a  {{- \"b\" -}}  \n c", "abc"),
        (
            "{{ if eq (env \"PORT\") \"8080\" }}yes{{ else }}no{{ end }}",
            "yes",
        ),
        (
            "{{ if env \"NOPE\" }}set{{ else if env \"PORT\" }}port{{ end }}",
            "port",
        ),
        ("{{ if not (env \"NOPE\") }}unset{{ end }}", "unset"),
        (
            "{{ if and true (ne 1 2) }}{{ if false }}x{{ else }}nested{{ end }}{{ end }}",
            "nested",
        ),
        ("{{ or \"\" \"second\" }}", "second"),
        ("{{ -3 }}", "-3"),
    ];
    for (text, want) in cases {
        assert_eq!(render(text).as_deref(), Ok(want), "{text}");
    }
}

#[test]
fn templates_that_do_not_parse_name_line_and_column() {
    let cases = [
        ("line one\n  {{ env \"X\" ", "2:3: unclosed action: no }}"),
        ("{{ nope \"X\" }}", "1:4: function \"nope\" is not defined"),
        (
            "{{ with nomadVar \"nomad/jobs/web\" }}{{ .db_password }}{{ end }}",
            "1:9: function \"nomadVar\" reads Nomad Variables, which drover does not store",
        ),
        (
            "{{ range nomadVar \"nomad/jobs/web\" }}{{ .Value }}{{ end }}",
            "1:10: function \"nomadVar\" reads Nomad Variables, which drover does not store",
        ),
        (
            "{{ key \"db/addr\" }}",
            "1:4: function \"key\" reads Consul or Vault",
        ),
        ("ok\n{{ if true }}never closed", "2:1: if has no {{end}}"),
        ("{{ end }}", "1:1: unexpected {{end}}"),
        ("x {{ else }}", "1:3: unexpected {{else}}"),
        (
            "{{ .Field }}",
            "1:4: .Field is only available inside {{range}}",
        ),
        ("{{ range \"x\" }}", "1:1: range has no {{end}}"),
        (
            "{{ range \"x\" }}{{ else if true }}{{ end }}",
            "1:16: range takes an else",
        ),
        ("{{ with \"x\" }}", "1:4: {{with}} is not supported"),
        ("{{ \"open }}", "1:1: unclosed action"),
        ("{{ }}", "1:1: empty action"),
        ("{{ env \"A\" | }}", "1:12: missing value in pipeline"),
        ("{{ \"a\" | \"b\" }}", "1:10: a value cannot follow |"),
        ("\n\n   {{ toUpper (env \"A\" }}", "3:15: unclosed ("),
        ("{{/* never closed }}", "1:1: unclosed comment"),
        ("é{{ ~ }}", "1:5: unexpected '~'"),
    ];
    for (text, want) in cases {
        let err = parse(text, "{{", "}}").expect_err(text).to_string();
        assert!(err.starts_with(want), "{text}: {err}");
    }
}

#[test]
fn calls_with_the_wrong_arguments_fail_when_rendered_at_their_place() {
    let cases = [
        ("{{ env }}", "1:4: env takes 1 argument, got 0"),
        ("\n{{ eq 1 }}", "2:4: eq takes 2 arguments, got 1"),
        (
            "{{ printf \"%d\" \"x\" }}",
            "1:4: printf %d needs an integer",
        ),
        ("{{ printf \"%s\" }}", "1:4: printf %s has no argument"),
        (
            "{{ \"a\" \"b\" }}",
            "1:4: only a function can take arguments",
        ),
    ];
    for (text, want) in cases {
        let err = render(text).expect_err(text).to_string();
        assert!(err.starts_with(want), "{text}: {err}");
    }
}

#[test]
fn other_delimiters_leave_braces_alone() {
    let t = parse("{{ not an action }} [[ env \"PORT\" ]]", "[[", "]]").expect("parses");
    assert_eq!(t.render(&vars).as_deref(), Ok("{{ not an action }} 8080"));
}

/// A catalog of one service, `db`, with two instances.
struct Catalog;

impl Lookup for Catalog {
    fn get(&self, name: &str) -> Option<String> {
        vars(name)
    }

    fn services(&self, name: &str) -> Option<Vec<Record>> {
        let instance = |address: &str, port: &str| {
            Record::from([
                ("Address".to_owned(), address.to_owned()),
                ("Port".to_owned(), port.to_owned()),
            ])
        };
        (name == "db").then(|| vec![instance("10.0.0.1", "5432"), instance("10.0.0.2", "5433")])
    }
}

#[test]
fn range_walks_a_services_instances() {
    let cases = [
        (
            "{{ range nomadService \"db\" }}{{ .Address }}:{{ .Port }} {{ end }}",
            Ok("10.0.0.1:5432 10.0.0.2:5433 "),
        ),
        (
            "{{ range nomadService \"nope\" }}{{ .Address }}{{ else }}none{{ end }}",
            Ok("none"),
        ),
        (
            "{{ range nomadService \"db\" }}{{ if eq .Port \"5433\" }}{{ .Address }}{{ end }}{{ end }}",
            Ok("10.0.0.2"),
        ),
        (
            "{{ range nomadService \"db\" }}{{ .Nope }}{{ end }}",
            Err("1:33: no field .Nope (known: Address, Port)"),
        ),
        (
            "{{ range env \"PORT\" }}x{{ end }}",
            Err("1:1: range needs a list"),
        ),
    ];
    for (text, want) in cases {
        let got = parse(text, "{{", "}}")
            .expect(text)
            .render(&Catalog)
            .map_err(|e| e.to_string());
        match (got, want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
            (Err(got), Err(want)) => assert!(got.starts_with(want), "{text}: {got}"),
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }
    // Without a catalog nothing is listed.
    let t = parse("[{{ range nomadService \"db\" }}x{{ end }}]", "{{", "}}").expect("parses");
    assert_eq!(t.render(&vars).as_deref(), Ok("[]"));
}
