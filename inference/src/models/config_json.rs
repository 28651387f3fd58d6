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
