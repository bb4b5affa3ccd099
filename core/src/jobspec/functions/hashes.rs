//! Hash functions: `md5`, `sha1`, `sha256`, `sha512` (lowercase hex of the string's UTF-8
//! bytes), `base64sha256`, `base64sha512` (the raw digest in base64), and `uuidv5`, the
//! name-based UUID. (`uuid()` draws from the caller's seed: see `special_forms`.)

use super::{Result, base64, s};
use hcl::Value;
use hcl::eval::FuncArgs;
use sha2::Digest as _;

/// The lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn md5(a: FuncArgs) -> Result {
    Ok(hex(&md5::Md5::digest(s(&a[0]).as_bytes())).into())
}

pub(super) fn sha1(a: FuncArgs) -> Result {
    Ok(hex(&sha1::Sha1::digest(s(&a[0]).as_bytes())).into())
}

pub(super) fn sha256(a: FuncArgs) -> Result {
    Ok(hex(&sha2::Sha256::digest(s(&a[0]).as_bytes())).into())
}

pub(super) fn sha512(a: FuncArgs) -> Result {
    Ok(hex(&sha2::Sha512::digest(s(&a[0]).as_bytes())).into())
}

pub(super) fn base64sha256(a: FuncArgs) -> Result {
    Ok(base64::encode(&sha2::Sha256::digest(s(&a[0]).as_bytes())).into())
}

pub(super) fn base64sha512(a: FuncArgs) -> Result {
    Ok(base64::encode(&sha2::Sha512::digest(s(&a[0]).as_bytes())).into())
}

/// `uuidv5(namespace, name)`: the name-based (SHA-1) UUID of `name` in `namespace`, one of
/// `dns`, `url`, `oid`, `x500` or a UUID of one's own.
pub(super) fn uuidv5(a: FuncArgs) -> Result {
    let namespace = match s(&a[0]) {
        "dns" => uuid::Uuid::NAMESPACE_DNS,
        "url" => uuid::Uuid::NAMESPACE_URL,
        "oid" => uuid::Uuid::NAMESPACE_OID,
        "x500" => uuid::Uuid::NAMESPACE_X500,
        other => uuid::Uuid::parse_str(other).map_err(|_| {
            format!("uuidv5: namespace {other:?} is not dns, url, oid, x500 or a UUID")
        })?,
    };
    let mut hasher = sha1::Sha1::new();
    hasher.update(namespace.as_bytes());
    hasher.update(s(&a[1]).as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    let id = uuid::Builder::from_sha1_bytes(bytes).into_uuid();
    Ok(Value::from(id.hyphenated().to_string()))
}
