//! Reading numbers out of diffusers / transformers `config.json` files.

use serde_json::Value;

use crate::error::{Error, Result};

/// Largest size any config field may hold (vocabulary sizes are the largest real ones).
const MAX_SIZE: u64 = 1 << 20;

/// A positive integer field; `what` names the file in the error.
pub fn size(v: &Value, key: &str, what: &str) -> Result<usize> {
    v[key]
        .as_u64()
        .filter(|&n| n > 0 && n < MAX_SIZE)
        .map(|n| n as usize)
        .ok_or_else(|| Error::settings(format!("{what} config: missing or invalid {key:?}")))
}

/// A list of positive integers, if the field is a list (invalid entries read as 0 and are
/// caught by the caller's checks).
pub fn sizes(v: &Value, key: &str) -> Option<Vec<usize>> {
    v[key].as_array().map(|a| {
        a.iter()
            .map(|x| x.as_u64().filter(|&n| n < MAX_SIZE).unwrap_or(0) as usize)
            .collect()
    })
}

/// An optional field read with `read`: absent or `null` is `None`; any other value that
/// `read` refuses is an error naming the file (`what`) and the key. Every typed config
/// read goes through here (the networks' `config.json`s and `scheduler_config.json`).
pub fn typed<'a, T>(
    v: &'a Value,
    (key, what): (&str, &str),
    expected: &str,
    read: impl Fn(&'a Value) -> Option<T>,
) -> Result<Option<T>> {
    match &v[key] {
        Value::Null => Ok(None),
        value => read(value).map(Some).ok_or_else(|| {
            Error::settings(format!(
                "{what} config: {key:?} must be {expected}, not {value}"
            ))
        }),
    }
}

/// [`typed`] with a default for an absent field.
fn optional<'a, T>(
    v: &'a Value,
    key: &str,
    what: &str,
    expected: &str,
    (default, read): (T, impl Fn(&'a Value) -> Option<T>),
) -> Result<T> {
    Ok(typed(v, (key, what), expected, read)?.unwrap_or(default))
}

/// An optional positive integer field (below the size limit).
pub fn size_or(v: &Value, key: &str, what: &str, default: usize) -> Result<usize> {
    let read = |x: &Value| {
        x.as_u64()
            .filter(|&n| n > 0 && n < MAX_SIZE)
            .map(|n| n as usize)
    };
    optional(v, key, what, "a positive whole number", (default, read))
}

/// An optional number field.
pub fn number_or(v: &Value, key: &str, what: &str, default: f64) -> Result<f64> {
    optional(v, key, what, "a number", (default, Value::as_f64))
}

/// An optional true/false field.
pub fn flag_or(v: &Value, key: &str, what: &str, default: bool) -> Result<bool> {
    optional(v, key, what, "true or false", (default, Value::as_bool))
}

/// An optional string field.
pub fn text_or<'a>(v: &'a Value, key: &str, what: &str, default: &'a str) -> Result<&'a str> {
    match &v[key] {
        Value::Null => Ok(default),
        Value::String(s) => Ok(s),
        value => Err(Error::settings(format!(
            "{what} config: {key:?} must be a string, not {value}"
        ))),
    }
}
