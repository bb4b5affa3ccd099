//! The functions a job file's expressions may call, as Nomad's HCL2 job files do: string,
//! regular expression, collection and set, numeric, encoding (CSV, JSON, YAML, base64),
//! path, type conversion and time functions, hashes, name-based UUIDs and IP networks. Each is pure: core reads no files
//! and no clock. `file()` is not here: the caller reads the files a job names and the
//! variables module inlines their text (see `variables::Scope`); nor is `uuid()`, which
//! draws from the caller's seed. `can()` and `try()` must see their argument fail, so
//! `special_forms` evaluates them before hcl-rs does; only their eager fallbacks are here.

mod cidr;
mod collections;
mod formatdate;
mod hashes;
mod math;
mod text_data;
mod yaml;

use hcl::eval::{Context, FuncArgs, FuncDef, ParamType};
use hcl::{Map, Number, Value};

type Result = std::result::Result<Value, String>;

/// A context that knows every function and no variables.
pub(super) fn context() -> Context<'static> {
    use ParamType::{Any, Number as Num, String as Str};
    let mut ctx = Context::new();
    let list = || ParamType::array_of(Any);
    let mut def = |name: &str, params: Vec<ParamType>, variadic: Option<ParamType>, f| {
        let mut b = FuncDef::builder().params(params);
        if let Some(v) = variadic {
            b = b.variadic_param(v);
        }
        ctx.declare_func(name, b.build(f));
    };
    // Strings.
    def("upper", vec![Str], None, |a| {
        Ok(s(&a[0]).to_uppercase().into())
    });
    def("lower", vec![Str], None, |a| {
        Ok(s(&a[0]).to_lowercase().into())
    });
    def("title", vec![Str], None, title);
    def("trimspace", vec![Str], None, |a| Ok(s(&a[0]).trim().into()));
    def("trim", vec![Str, Str], None, |a| {
        let cut: Vec<char> = s(&a[1]).chars().collect();
        Ok(s(&a[0]).trim_matches(cut.as_slice()).into())
    });
    def("trimprefix", vec![Str, Str], None, |a| {
        Ok(s(&a[0]).strip_prefix(s(&a[1])).unwrap_or(s(&a[0])).into())
    });
    def("trimsuffix", vec![Str, Str], None, |a| {
        Ok(s(&a[0]).strip_suffix(s(&a[1])).unwrap_or(s(&a[0])).into())
    });
    def("replace", vec![Str, Str, Str], None, |a| {
        Ok(s(&a[0]).replace(s(&a[1]), s(&a[2])).into())
    });
    def("regex_replace", vec![Str, Str, Str], None, regex_replace);
    def("split", vec![Str, Str], None, |a| {
        let parts = s(&a[1]).split(s(&a[0])).map(Value::from).collect();
        Ok(Value::Array(parts))
    });
    def("join", vec![Str, ParamType::array_of(Str)], None, |a| {
        let items: Vec<&str> = arr(&a[1]).iter().map(s).collect();
        Ok(items.join(s(&a[0])).into())
    });
    def("substr", vec![Str, Num, Num], None, substr);
    def("format", vec![Str], Some(Any), format);
    def("formatlist", vec![Str], Some(Any), formatlist);
    def("startswith", vec![Str, Str], None, |a| {
        Ok(s(&a[0]).starts_with(s(&a[1])).into())
    });
    def("endswith", vec![Str, Str], None, |a| {
        Ok(s(&a[0]).ends_with(s(&a[1])).into())
    });
    def("strrev", vec![Str], None, |a| {
        Ok(s(&a[0]).chars().rev().collect::<String>().into())
    });
    def("chomp", vec![Str], None, |a| {
        Ok(s(&a[0]).trim_end_matches(['\r', '\n']).into())
    });
    def("indent", vec![Num, Str], None, indent);
    def("regex", vec![Str, Str], None, |a| {
        let re = compile("regex", s(&a[0]))?;
        let caps = re
            .captures(s(&a[1]))
            .ok_or_else(|| format!("regex: no match for {:?} in {:?}", s(&a[0]), s(&a[1])))?;
        Ok(captured(&re, &caps))
    });
    def("regexall", vec![Str, Str], None, |a| {
        let re = compile("regexall", s(&a[0]))?;
        let all = re.captures_iter(s(&a[1])).map(|c| captured(&re, &c));
        Ok(Value::Array(all.collect()))
    });
    // Collections.
    def("length", vec![Any], None, length);
    def("concat", vec![], Some(list()), |a| {
        Ok(Value::Array(
            a.iter().flat_map(|l| arr(l).iter().cloned()).collect(),
        ))
    });
    def("contains", vec![list(), Any], None, |a| {
        Ok(arr(&a[0]).contains(&a[1]).into())
    });
    def("keys", vec![ParamType::object_of(Any)], None, |a| {
        Ok(Value::Array(
            obj(&a[0]).keys().cloned().map(Value::from).collect(),
        ))
    });
    def("values", vec![ParamType::object_of(Any)], None, |a| {
        Ok(Value::Array(obj(&a[0]).values().cloned().collect()))
    });
    def(
        "lookup",
        vec![ParamType::object_of(Any), Str],
        Some(Any),
        lookup,
    );
    def("merge", vec![], Some(ParamType::object_of(Any)), |a| {
        let mut out = Map::new();
        for m in a.iter() {
            out.extend(obj(m).clone());
        }
        Ok(Value::Object(out))
    });
    def("element", vec![list(), Num], None, element);
    def("flatten", vec![list()], None, |a| {
        Ok(Value::Array(flatten(arr(&a[0]))))
    });
    def("distinct", vec![list()], None, |a| {
        let mut out: Vec<Value> = Vec::new();
        for v in arr(&a[0]) {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        Ok(Value::Array(out))
    });
    def("compact", vec![ParamType::array_of(Str)], None, |a| {
        let kept = arr(&a[0]).iter().filter(|v| !s(v).is_empty()).cloned();
        Ok(Value::Array(kept.collect()))
    });
    def("reverse", vec![list()], None, |a| {
        Ok(Value::Array(arr(&a[0]).iter().rev().cloned().collect()))
    });
    def("sort", vec![ParamType::array_of(Str)], None, |a| {
        let mut items: Vec<String> = arr(&a[0]).iter().map(|v| s(v).to_string()).collect();
        items.sort();
        Ok(Value::Array(items.into_iter().map(Value::from).collect()))
    });
    def("slice", vec![list(), Num, Num], None, slice);
    def("index", vec![list(), Any], None, |a| {
        arr(&a[0])
            .iter()
            .position(|v| *v == a[1])
            .map(|i| Value::from(i as u64))
            .ok_or_else(|| "index: the value is not in the list".to_string())
    });
    def("sum", vec![ParamType::array_of(Num)], None, |a| {
        let items = arr(&a[0]);
        if items.is_empty() {
            return Err("sum: the list is empty".into());
        }
        Ok(whole(items.iter().map(num).sum()))
    });
    def("chunklist", vec![list(), Num], None, |a| {
        let size = num(&a[1]);
        if size < 0.0 {
            return Err(format!("chunklist: a size of {size} is negative"));
        }
        let items = arr(&a[0]);
        if size == 0.0 {
            return Ok(Value::Array(vec![Value::Array(items.to_vec())]));
        }
        let chunks = items
            .chunks(size as usize)
            .map(|c| Value::Array(c.to_vec()));
        Ok(Value::Array(chunks.collect()))
    });
    def("coalescelist", vec![], Some(list()), |a| {
        a.iter()
            .find(|l| !arr(l).is_empty())
            .cloned()
            .ok_or_else(|| "coalescelist: every list is empty".to_string())
    });
    def("setunion", vec![], Some(list()), |a| {
        Ok(Value::Array(distinct(a.iter().flat_map(|l| arr(l).iter()))))
    });
    def("setintersection", vec![list()], Some(list()), |a| {
        let kept = arr(&a[0])
            .iter()
            .filter(|v| a.iter().skip(1).all(|l| arr(l).contains(v)));
        Ok(Value::Array(distinct(kept)))
    });
    def("setsubtract", vec![list(), list()], None, |a| {
        let kept = arr(&a[0]).iter().filter(|v| !arr(&a[1]).contains(v));
        Ok(Value::Array(distinct(kept)))
    });
    def("range", vec![Num], Some(Num), range);
    def("setproduct", vec![], Some(list()), collections::setproduct);
    def(
        "transpose",
        vec![ParamType::object_of(Any)],
        None,
        collections::transpose,
    );
    def("coalesce", vec![], Some(Any), |a| {
        a.iter()
            .find(|v| !matches!(v, Value::Null) && !matches!(v, Value::String(t) if t.is_empty()))
            .cloned()
            .ok_or_else(|| "coalesce: no non-null, non-empty argument".to_string())
    });
    def(
        "zipmap",
        vec![ParamType::array_of(Str), list()],
        None,
        |a| {
            let keys = arr(&a[0]).iter().map(|k| s(k).to_string());
            Ok(Value::Object(
                keys.zip(arr(&a[1]).iter().cloned()).collect(),
            ))
        },
    );
    // Numbers.
    def("abs", vec![Num], None, |a| Ok(num(&a[0]).abs().into()));
    def("ceil", vec![Num], None, |a| Ok(whole(num(&a[0]).ceil())));
    def("floor", vec![Num], None, |a| Ok(whole(num(&a[0]).floor())));
    def("max", vec![Num], Some(Num), |a| {
        Ok(a.iter().map(num).fold(f64::MIN, f64::max).into())
    });
    def("min", vec![Num], Some(Num), |a| {
        Ok(a.iter().map(num).fold(f64::MAX, f64::min).into())
    });
    def("parseint", vec![Str, Num], None, parseint);
    def("log", vec![Num, Num], None, math::log);
    def("pow", vec![Num, Num], None, math::pow);
    def("signum", vec![Num], None, math::signum);
    // Encoding.
    def("base64encode", vec![Str], None, |a| {
        Ok(base64::encode(s(&a[0]).as_bytes()).into())
    });
    def("base64decode", vec![Str], None, |a| {
        let bytes = base64::decode(s(&a[0]))?;
        String::from_utf8(bytes)
            .map(Value::from)
            .map_err(|_| "base64decode: the decoded bytes are not UTF-8".to_string())
    });
    def("jsonencode", vec![Any], None, |a| {
        serde_json::to_string(&a[0])
            .map(Value::from)
            .map_err(|e| format!("jsonencode: {e}"))
    });
    def("jsondecode", vec![Str], None, |a| {
        serde_json::from_str::<Value>(s(&a[0])).map_err(|e| format!("jsondecode: {e}"))
    });
    def("urlencode", vec![Str], None, |a| {
        Ok(urlencode(s(&a[0])).into())
    });
    def("yamlencode", vec![Any], None, yaml::yamlencode);
    def("yamldecode", vec![Str], None, yaml::yamldecode);
    def("csvdecode", vec![Str], None, text_data::csvdecode);
    // Paths, as strings.
    def("basename", vec![Str], None, text_data::basename);
    def("dirname", vec![Str], None, text_data::dirname);
    // Hashes and UUIDs.
    def("md5", vec![Str], None, hashes::md5);
    def("sha1", vec![Str], None, hashes::sha1);
    def("sha256", vec![Str], None, hashes::sha256);
    def("sha512", vec![Str], None, hashes::sha512);
    def("base64sha256", vec![Str], None, hashes::base64sha256);
    def("base64sha512", vec![Str], None, hashes::base64sha512);
    def("uuidv5", vec![Str, Str], None, hashes::uuidv5);
    // IP networks.
    def("cidrhost", vec![Str, Num], None, cidr::cidrhost);
    def("cidrnetmask", vec![Str], None, cidr::cidrnetmask);
    def("cidrsubnet", vec![Str, Num, Num], None, cidr::cidrsubnet);
    def("cidrsubnets", vec![Str], Some(Num), cidr::cidrsubnets);
    // Type conversions.
    def("tostring", vec![Any], None, |a| match &a[0] {
        Value::String(t) => Ok(t.clone().into()),
        Value::Number(n) => Ok(n.to_string().into()),
        Value::Bool(b) => Ok(b.to_string().into()),
        other => Err(format!(
            "tostring: cannot convert {} to a string",
            kind(other)
        )),
    });
    def("tonumber", vec![Any], None, |a| match &a[0] {
        Value::Number(n) => Ok(Value::Number(*n)),
        Value::String(t) => t
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(|n| whole(n.as_f64().unwrap_or(0.0)))
            .ok_or_else(|| format!("tonumber: {t:?} is not a number")),
        other => Err(format!(
            "tonumber: cannot convert {} to a number",
            kind(other)
        )),
    });
    def("tobool", vec![Any], None, |a| match &a[0] {
        Value::Bool(b) => Ok((*b).into()),
        Value::String(t) if t == "true" || t == "false" => Ok((t == "true").into()),
        other => Err(format!("tobool: cannot convert {} to a bool", kind(other))),
    });
    def("tolist", vec![list()], None, |a| Ok(a[0].clone()));
    def("toset", vec![list()], None, |a| {
        let mut out: Vec<Value> = Vec::new();
        for v in arr(&a[0]) {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        Ok(Value::Array(out))
    });
    def("tomap", vec![ParamType::object_of(Any)], None, |a| {
        Ok(a[0].clone())
    });
    // Errors caught: `special_forms` evaluates these lazily before hcl-rs sees them; what
    // reaches hcl-rs (a `%{ for }` directive's body) had every argument evaluate.
    def("can", vec![Any], None, |_| Ok(Value::Bool(true)));
    def("try", vec![Any], Some(Any), |a| Ok(a[0].clone()));
    // Time.
    def("timeadd", vec![Str, Str], None, timeadd);
    def("formatdate", vec![Str, Str], None, formatdate::formatdate);
    ctx
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn obj(v: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    v.as_object().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn num(v: &Value) -> f64 {
    v.as_number().and_then(Number::as_f64).unwrap_or(0.0)
}

/// A float that is whole as an integer number, so `count = ceil(x)` reads as a count.
fn whole(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// The HCL type name of `v`, as errors name it.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn title(a: FuncArgs) -> Result {
    let mut out = String::new();
    let mut start = true;
    for c in s(&a[0]).chars() {
        if start {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        start = c.is_whitespace();
    }
    Ok(out.into())
}

fn regex_replace(a: FuncArgs) -> Result {
    let re = regex::Regex::new(s(&a[1])).map_err(|e| format!("regex_replace: {e}"))?;
    Ok(re.replace_all(s(&a[0]), s(&a[2])).into_owned().into())
}

fn compile(function: &str, pattern: &str) -> std::result::Result<regex::Regex, String> {
    regex::Regex::new(pattern).map_err(|e| format!("{function}: {e}"))
}

/// One match as HCL's `regex` answers it: the matched text without capture groups, an
/// object of the named groups, else a list of the groups (unmatched ones null).
fn captured(re: &regex::Regex, caps: &regex::Captures) -> Value {
    let text = |m: Option<regex::Match>| m.map_or(Value::Null, |m| m.as_str().into());
    if re.captures_len() == 1 {
        return text(caps.get(0));
    }
    if re.capture_names().flatten().next().is_some() {
        let named = re
            .capture_names()
            .flatten()
            .map(|name| (name.to_string(), text(caps.name(name))));
        return Value::Object(named.collect());
    }
    Value::Array((1..re.captures_len()).map(|i| text(caps.get(i))).collect())
}

/// `indent(n, text)`: every line but the first prefixed with `n` spaces.
fn indent(a: FuncArgs) -> Result {
    let n = num(&a[0]);
    if !(0.0..=1024.0).contains(&n) {
        return Err(format!("indent: {n} spaces is not between 0 and 1024"));
    }
    let pad = " ".repeat(n as usize);
    Ok(s(&a[1]).replace('\n', &format!("\n{pad}")).into())
}

/// The values in order of first appearance, each once (HCL's sets, ordered).
fn distinct<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for v in values {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

fn substr(a: FuncArgs) -> Result {
    let chars: Vec<char> = s(&a[0]).chars().collect();
    let len = chars.len() as i64;
    let offset = num(&a[1]) as i64;
    let start = if offset < 0 {
        (len + offset).max(0)
    } else {
        offset.min(len)
    };
    let count = num(&a[2]) as i64;
    let end = if count < 0 {
        len
    } else {
        (start + count).min(len)
    };
    Ok(chars[start as usize..end.max(start) as usize]
        .iter()
        .collect::<String>()
        .into())
}

/// `format` with the verbs job files use: `%s`, `%d`, `%v`, `%q` and `%%`.
fn format(a: FuncArgs) -> Result {
    format_values("format", s(&a[0]), &a[1..])
}

/// `spec` with its verbs replaced by `args` in order; errors say they are `function`'s.
fn format_values(function: &str, spec: &str, args: &[Value]) -> Result {
    let mut args = args.iter();
    let mut out = String::new();
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let verb = chars
            .next()
            .ok_or_else(|| format!("{function}: a lone % at the end of {spec:?}"))?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        let arg = args
            .next()
            .ok_or_else(|| format!("{function}: not enough arguments for {spec:?}"))?;
        let text = match arg {
            Value::String(t) => t.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => serde_json::to_string(other).unwrap_or_default(),
        };
        match verb {
            's' | 'v' | 'd' => out.push_str(&text),
            'q' => out.push_str(&format!("{text:?}")),
            other => return Err(format!("{function}: verb %{other} is not supported")),
        }
    }
    Ok(out.into())
}

/// `formatlist(spec, args...)`: `format` once per element of the list arguments, which
/// must be of one length; any other argument is used in every line.
fn formatlist(a: FuncArgs) -> Result {
    let spec = s(&a[0]);
    let mut rows: Option<(usize, usize)> = None;
    for (i, arg) in a.iter().enumerate().skip(1) {
        let Value::Array(items) = arg else { continue };
        match rows {
            Some((n, first)) if n != items.len() => {
                return Err(format!(
                    "formatlist: argument {i} has length {}, which is inconsistent with \
                     argument {first} of length {n}",
                    items.len()
                ));
            }
            Some(_) => {}
            None => rows = Some((items.len(), i)),
        }
    }
    let n = rows.map_or(1, |(n, _)| n);
    let mut out = Vec::with_capacity(n);
    for row in 0..n {
        let args: Vec<Value> = a[1..]
            .iter()
            .map(|arg| match arg {
                Value::Array(items) => items[row].clone(),
                other => other.clone(),
            })
            .collect();
        out.push(format_values("formatlist", spec, &args)?);
    }
    Ok(Value::Array(out))
}

fn length(a: FuncArgs) -> Result {
    let n = match &a[0] {
        Value::String(t) => t.chars().count(),
        Value::Array(items) => items.len(),
        Value::Object(map) => map.len(),
        other => return Err(format!("length: {} has no length", kind(other))),
    };
    Ok((n as u64).into())
}

fn lookup(a: FuncArgs) -> Result {
    match obj(&a[0]).get(s(&a[1])) {
        Some(v) => Ok(v.clone()),
        None => a
            .get(2)
            .cloned()
            .ok_or_else(|| format!("lookup: no key {:?} and no default", s(&a[1]))),
    }
}

fn element(a: FuncArgs) -> Result {
    let items = arr(&a[0]);
    if items.is_empty() {
        return Err("element: the list is empty".into());
    }
    let i = num(&a[1]) as usize % items.len();
    Ok(items[i].clone())
}

fn flatten(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .flat_map(|v| match v {
            Value::Array(inner) => flatten(inner),
            other => vec![other.clone()],
        })
        .collect()
}

fn slice(a: FuncArgs) -> Result {
    let items = arr(&a[0]);
    let (from, to) = (num(&a[1]) as usize, num(&a[2]) as usize);
    if from > to || to > items.len() {
        return Err(format!(
            "slice: {from}..{to} is outside a list of {}",
            items.len()
        ));
    }
    Ok(Value::Array(items[from..to].to_vec()))
}

fn range(a: FuncArgs) -> Result {
    let n: Vec<f64> = a.iter().map(num).collect();
    let (start, end, step) = match n.as_slice() {
        [end] => (0.0, *end, 1.0),
        [start, end] => (*start, *end, 1.0),
        [start, end, step] => (*start, *end, *step),
        _ => return Err("range: takes one to three numbers".into()),
    };
    if step == 0.0 || ((end - start) / step) > 1024.0 {
        return Err("range: a step of 0, or more than 1024 items".into());
    }
    let mut out = Vec::new();
    let mut x = start;
    while (step > 0.0 && x < end) || (step < 0.0 && x > end) {
        out.push(whole(x));
        x += step;
    }
    Ok(Value::Array(out))
}

fn parseint(a: FuncArgs) -> Result {
    let base = num(&a[1]) as u32;
    if !(2..=36).contains(&base) {
        return Err(format!("parseint: base {base} is not between 2 and 36"));
    }
    i64::from_str_radix(s(&a[0]), base)
        .map(Value::from)
        .map_err(|_| format!("parseint: {:?} is not a base-{base} integer", s(&a[0])))
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `timeadd("2024-01-02T03:04:05Z", "1h30m")`: an RFC 3339 time plus a Go duration
/// (negative allowed), in UTC.
fn timeadd(a: FuncArgs) -> Result {
    let at = chrono::DateTime::parse_from_rfc3339(s(&a[0]))
        .map_err(|e| format!("timeadd: {:?} is not an RFC 3339 time: {e}", s(&a[0])))?;
    let text = s(&a[1]);
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let d = super::duration::parse_duration(body).map_err(|e| format!("timeadd: {e}"))?;
    let d = chrono::Duration::from_std(d).map_err(|e| format!("timeadd: {e}"))?;
    let moved = if negative { at - d } else { at + d };
    Ok(moved
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
        .into())
}

/// Standard base64 with padding, as Nomad's `base64encode` writes it.
mod base64 {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub(super) fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    pub(super) fn decode(text: &str) -> Result<Vec<u8>, String> {
        let text = text.trim_end_matches('=');
        let mut out = Vec::with_capacity(text.len() * 3 / 4);
        let (mut acc, mut bits) = (0u32, 0);
        for c in text.bytes() {
            let v = ALPHABET
                .iter()
                .position(|&a| a == c)
                .ok_or_else(|| format!("base64decode: {:?} is not base64", c as char))?;
            acc = (acc << 6) | v as u32;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        Ok(out)
    }
}
