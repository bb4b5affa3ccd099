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
        (
            r#"formatdate("DD MMM YYYY hh:mm ZZZ", "2018-01-02T23:12:01Z")"#,
            r#""02 Jan 2018 23:12 UTC""#,
        ),
        (
            r#"formatdate("EEEE, DD-MMM-YY hh:mm:ss ZZZ", "2018-01-02T23:12:01Z")"#,
            r#""Tuesday, 02-Jan-18 23:12:01 UTC""#,
        ),
        (
            r#"formatdate("EEE, DD MMM YYYY hh:mm:ss ZZZ", "2018-01-02T23:12:01-08:00")"#,
            r#""Tue, 02 Jan 2018 23:12:01 -0800""#,
        ),
        (
            r#"formatdate("HH:mmaa", "2018-01-02T23:12:01Z")"#,
            r#""11:12pm""#,
        ),
        (
            r#"formatdate("MMMM D, YYYY 'at' h:m:s AA Z ZZZZZ ZZZZ", "2018-03-04T05:06:07+05:30")"#,
            r#""March 4, 2018 at 5:6:7 AM +05:30 +05:30 +0530""#,
        ),
        (
            r#"formatdate("M/D ''YY Z", "2018-03-04T05:06:07Z")"#,
            r#""3/4 '18 Z""#,
        ),
        // Lists of formatted strings.
        (
            r#"formatlist("Hello, %s!", ["Valentina", "Ander"])"#,
            r#"["Hello, Valentina!","Hello, Ander!"]"#,
        ),
        (
            r#"formatlist("%s, %s!", "Salutations", ["Valentina", "Ander"])"#,
            r#"["Salutations, Valentina!","Salutations, Ander!"]"#,
        ),
        (
            r#"formatlist("%s=%d", ["a", "b"], [1, 2])"#,
            r#"["a=1","b=2"]"#,
        ),
        (r#"formatlist("%s", "one")"#, r#"["one"]"#),
        // Numbers, sets, CSV and paths.
        ("log(16, 2)", "4"),
        ("log(1, 10)", "0"),
        ("pow(3, 2)", "9"),
        ("pow(4, 0.5)", "2"),
        ("signum(-7)", "-1"),
        ("signum(0)", "0"),
        ("signum(3.5)", "1"),
        (
            r#"setproduct(["a", "b"], [1, 2])"#,
            r#"[["a",1],["a",2],["b",1],["b",2]]"#,
        ),
        (r#"setproduct(["a"], [])"#, "[]"),
        (
            r#"transpose({ a = ["1", "2"], b = ["2", "3"] })"#,
            r#"{"1":["a"],"2":["a","b"],"3":["b"]}"#,
        ),
        (
            r#"csvdecode("a,b\n1,\"x,y\"\n3,4\n")"#,
            r#"[{"a":"1","b":"x,y"},{"a":"3","b":"4"}]"#,
        ),
        (r#"csvdecode("a,b\n")"#, "[]"),
        (r#"basename("/etc/app/app.conf")"#, r#""app.conf""#),
        (r#"basename("dir/")"#, r#""dir""#),
        (r#"dirname("/etc/app/app.conf")"#, r#""/etc/app""#),
        (r#"dirname("app.conf")"#, r#"".""#),
        (r#"dirname("/app.conf")"#, r#""/""#),
        // Hashes and UUIDs.
        (
            r#"md5("hello world")"#,
            r#""5eb63bbbe01eeed093cb22bb8f5acdc3""#,
        ),
        (
            r#"sha1("hello world")"#,
            r#""2aae6c35c94fcfb415dbe95f408b9ce91ee846ed""#,
        ),
        (
            r#"sha256("hello world")"#,
            r#""b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9""#,
        ),
        (
            r#"sha512("hello world")"#,
            r#""309ecc489c12d6eb4cc40f50c902f2b4d0ed77ee511a7c7a9bcd3ca86d4cd86f989dd35bc5ff499670da34255b45b0cfd830e81f605dcf7dc5542e93ae9cd76f""#,
        ),
        (
            r#"base64sha256("hello world")"#,
            r#""uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=""#,
        ),
        (
            r#"base64sha512("hello world")"#,
            r#""MJ7MSJwS1utMxA9QyQLytNDtd+5RGnx6m808qG1M2G+YndNbxf9JlnDaNCVbRbDP2DDoH2Bdz33FVC6TrpzXbw==""#,
        ),
        (
            r#"uuidv5("dns", "www.terraform.io")"#,
            r#""a5008fae-b28c-5ba5-96cd-82b4c53552d6""#,
        ),
        (
            r#"uuidv5("url", "https://www.terraform.io/")"#,
            r#""9db6f67c-dd95-5ea0-aa5b-e70e5c5f7cf5""#,
        ),
        (
            r#"uuidv5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "x")"#,
            r#""05b16a01-46c6-56dd-bd6e-c6dfb4a1427a""#,
        ),
        (r#"length(uuid())"#, "36"),
        (r#"regex("^[0-9a-f-]{14}4", uuid()) != """#, "true"),
        (r#"uuid() != uuid()"#, "true"),
        // YAML.
        (
            r#"yamlencode({ a = "b", c = "d" })"#,
            r#""\"a\": \"b\"\n\"c\": \"d\"\n""#,
        ),
        (
            r#"yamlencode({ foo = [1, { c = "d", a = "b" }, 3], bar = "baz" })"#,
            r#""\"bar\": \"baz\"\n\"foo\":\n- 1\n- \"a\": \"b\"\n  \"c\": \"d\"\n- 3\n""#,
        ),
        (
            r#"yamlencode({ m = { n = [[1, 2], []], e = {} }, s = "two\nlines", z = null, t = true })"#,
            r#""\"m\":\n  \"e\": {}\n  \"n\":\n  - - 1\n    - 2\n  - []\n\"s\": \"two\\nlines\"\n\"t\": true\n\"z\": null\n""#,
        ),
        (r#"yamlencode("x")"#, r#""\"x\"\n""#),
        (
            r#"yamldecode("hello: world\nlist: [1, 2.5, true, null]\n3: three\n")"#,
            r#"{"3":"three","hello":"world","list":[1,2.5,true,null]}"#,
        ),
        (r#"yamldecode("- a\n- b: c\n")"#, r#"["a",{"b":"c"}]"#),
        (r#"yamldecode("")"#, "null"),
        (
            r#"yamldecode(yamlencode({ a = [1, "x"], b = { c = "d" } }))"#,
            r#"{"a":[1,"x"],"b":{"c":"d"}}"#,
        ),
        // IP networks.
        (r#"cidrhost("10.12.112.0/20", 16)"#, r#""10.12.112.16""#),
        (r#"cidrhost("10.12.112.0/20", 268)"#, r#""10.12.113.12""#),
        (r#"cidrhost("10.12.112.0/20", -1)"#, r#""10.12.127.255""#),
        (
            r#"cidrhost("fd00:fd12:3456:7890:00a2::/72", 34)"#,
            r#""fd00:fd12:3456:7890::22""#,
        ),
        (r#"cidrnetmask("172.16.0.0/12")"#, r#""255.240.0.0""#),
        (r#"cidrnetmask("10.0.0.0/32")"#, r#""255.255.255.255""#),
        (r#"cidrsubnet("172.16.0.0/12", 4, 2)"#, r#""172.18.0.0/16""#),
        (r#"cidrsubnet("10.1.2.0/24", 4, 15)"#, r#""10.1.2.240/28""#),
        (r#"cidrsubnet("10.1.2.77/24", 0, 0)"#, r#""10.1.2.0/24""#),
        (
            r#"cidrsubnet("fd00:fd12:3456:7890::/56", 16, 162)"#,
            r#""fd00:fd12:3456:7800:a200::/72""#,
        ),
        (
            r#"cidrsubnets("10.1.0.0/16", 4, 4, 8, 4)"#,
            r#"["10.1.0.0/20","10.1.16.0/20","10.1.32.0/24","10.1.48.0/20"]"#,
        ),
        (
            r#"cidrsubnets("fd00:fe11:2233::/48", 16, 16)"#,
            r#"["fd00:fe11:2233::/64","fd00:fe11:2233:1::/64"]"#,
        ),
        // Errors caught: can and try see their arguments fail.
        (r#"can(regex("^[a-z]+$", "abc"))"#, "true"),
        (r#"can(regex("^[a-z]+$", "ABC"))"#, "false"),
        (r#"can(tonumber("x"))"#, "false"),
        (r#"try(tonumber("x"), 7)"#, "7"),
        (r#"try({ a = 1 }.b, { a = 1 }.a, 9)"#, "1"),
        (r#"try(yamldecode("{"), jsondecode("[1]"))"#, "[1]"),
        (
            r#"upper(try(sha1(tonumber("x")), "fallback"))"#,
            r#""FALLBACK""#,
        ),
        (
            r#"[for s in ["1", "x", "3"] : try(tonumber(s), 0)]"#,
            "[1,0,3]",
        ),
        (
            r#"{ for k, v in { a = "1", b = "z" } : k => can(tonumber(v)) if k != "c" }"#,
            r#"{"a":true,"b":false}"#,
        ),
        (r#"true ? "taken" : try(tonumber("x"))"#, r#""taken""#),
        (
            r#"upper("v${try(tonumber("x"), 2)}-${can(tonumber("y"))}")"#,
            r#""V2-FALSE""#,
        ),
        (r#""${try(tonumber("x"), [1])}""#, "[1]"),
        (
            r#""%{ if can(tonumber("x")) }num%{ else }text%{ endif }""#,
            r#""text""#,
        ),
        (
            r#""%{ for s in ["a", "b"] }${try(upper(s), s)}%{ endfor }""#,
            r#""AB""#,
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
        (
            r#"formatdate("YYYY-MM-DD", "yesterday")"#,
            r#"formatdate: timestamp "yesterday" is not an RFC 3339 time"#,
        ),
        (
            r#"formatdate("YYYYY", "2018-01-02T23:12:01Z")"#,
            r#"formatdate: invalid date format sequence "YYYYY""#,
        ),
        (
            r#"formatdate("'open", "2018-01-02T23:12:01Z")"#,
            "formatdate: unterminated quote",
        ),
        (
            r#"formatlist("%s %s", ["a", "b"], ["c"])"#,
            "formatlist: argument 2 has length 1, which is inconsistent with argument 1 of length 2",
        ),
        (
            r#"formatlist("%s %s", ["a"])"#,
            "formatlist: not enough arguments",
        ),
        (
            r#"uuidv5("isbn", "x")"#,
            r#"uuidv5: namespace "isbn" is not dns, url, oid, x500 or a UUID"#,
        ),
        ("log(0, 2)", "log: 0 is not above zero"),
        (
            "log(8, 1)",
            "log: a base of 1 is not above zero and other than 1",
        ),
        (
            "setproduct(range(100), range(101))",
            "setproduct: 10100 combinations is more than the 10000 a job file may build",
        ),
        (
            r#"transpose({ a = [1] })"#,
            r#"transpose: "a" lists a number, not a string"#,
        ),
        (r#"csvdecode("a,b\n1\n")"#, "csvdecode: "),
        (r#"yamldecode("a: [1")"#, "yamldecode: "),
        (r#"yamldecode("a: 1\n---\nb: 2\n")"#, "yamldecode: "),
        (
            r#"cidrhost("10.0.0.0/30", 4)"#,
            "cidrhost: prefix of 30 does not accommodate a host numbered 4",
        ),
        (
            r#"cidrhost("10.0.0.0/33", 1)"#,
            r#"cidrhost: "10.0.0.0/33" is not an address prefix"#,
        ),
        (
            r#"cidrnetmask("fd00::/8")"#,
            r#"cidrnetmask: "fd00::/8" is IPv6"#,
        ),
        (
            r#"cidrsubnet("10.0.0.0/24", 10, 0)"#,
            "cidrsubnet: insufficient address space to extend prefix of 24 by 10",
        ),
        (
            r#"cidrsubnet("10.0.0.0/24", 4, 16)"#,
            "cidrsubnet: prefix extension of 4 does not accommodate a subnet numbered 16",
        ),
        (
            r#"cidrsubnets("10.0.0.0/24", 1, 1, 1)"#,
            "cidrsubnets: not enough room in 10.0.0.0/24 for subnet 3",
        ),
        (
            r#"try(tonumber("x"), tobool("y"))"#,
            "try: no argument evaluated without an error (argument 1: ",
        ),
        // A billion laughs: aliases expanding past serde_yaml's budget are refused, not
        // expanded (a job file may come over the network to /v1/jobs/parse).
        (
            r#"length(yamldecode("a: &a ['x','x','x','x','x','x','x','x','x']\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]"))"#,
            "yamldecode: repetition limit exceeded",
        ),
        ("try()", "try: takes at least one argument, got 0"),
        ("can(1, 2)", "can: takes one argument, got 2"),
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
