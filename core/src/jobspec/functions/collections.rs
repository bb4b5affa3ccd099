//! Collection functions that build new shapes: `setproduct(lists...)` (every combination,
//! one element from each list, in order) and `transpose(map of lists)` (each value becomes
//! a key listing the keys it appeared under).

use super::{Result, arr, kind, obj, s};
use hcl::Value;
use hcl::eval::FuncArgs;

/// The most combinations `setproduct` builds: a job file has no use for more, and a few
/// short lists must not make the parser build millions.
const MAX_PRODUCT: usize = 10_000;

pub(super) fn setproduct(a: FuncArgs) -> Result {
    if a.len() < 2 {
        return Err("setproduct: takes at least two lists".into());
    }
    let mut size: usize = 1;
    for list in a.iter() {
        size = size.saturating_mul(arr(list).len());
    }
    if size > MAX_PRODUCT {
        return Err(format!(
            "setproduct: {size} combinations is more than the {MAX_PRODUCT} a job file may build"
        ));
    }
    let mut product: Vec<Vec<Value>> = vec![Vec::new()];
    for list in a.iter() {
        let mut next = Vec::with_capacity(product.len() * arr(list).len());
        for prefix in &product {
            for item in arr(list) {
                let mut combination = prefix.clone();
                combination.push(item.clone());
                next.push(combination);
            }
        }
        product = next;
    }
    Ok(Value::Array(
        product.into_iter().map(Value::Array).collect(),
    ))
}

pub(super) fn transpose(a: FuncArgs) -> Result {
    let mut out: hcl::Map<String, Value> = hcl::Map::new();
    for (key, values) in obj(&a[0]) {
        let Value::Array(values) = values else {
            return Err(format!(
                "transpose: the value of {key:?} is a {}, not a list of strings",
                kind(values)
            ));
        };
        for value in values {
            let Value::String(name) = value else {
                return Err(format!(
                    "transpose: {key:?} lists a {}, not a string",
                    kind(value)
                ));
            };
            let entry = out
                .entry(name.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(keys) = entry {
                keys.push(Value::from(key.clone()));
            }
        }
    }
    for keys in out.values_mut() {
        if let Value::Array(keys) = keys {
            keys.sort_by(|x, y| s(x).cmp(s(y)));
        }
    }
    Ok(Value::Object(out))
}
