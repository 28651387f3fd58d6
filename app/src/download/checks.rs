//! What a download checks of a server's answer before writing a byte: a status that carries
//! the file (with a hint for logins and gated models), not a web page, the size expected,
//! and room on the disk.

use std::path::Path;

use super::names::{self, free_space};
use super::transfer::{self, Tokens};

/// Refuses answers that carry no model: errors, login pages, HTML.
pub(super) fn check_status(
    answer: &transfer::Answer,
    url: &str,
    tokens: &Tokens,
) -> Result<(), String> {
    let host = names_host(url);
    match answer.status {
        200 | 206 => {}
        401 | 403 => {
            let hint = match host.as_str() {
                "huggingface.co" | "hf.co" if tokens.huggingface.is_none() => {
                    " (a gated model: accept its license on Hugging Face and set HF_TOKEN)"
                }
                "civitai.com" if tokens.civitai.is_none() => {
                    " (this model needs a Civitai login: set CIVITAI_TOKEN to an API key)"
                }
                _ => " (the token may be wrong)",
            };
            return Err(format!(
                "{host} refused the download ({}){hint}",
                answer.status
            ));
        }
        404 => return Err(format!("{url} does not exist (404); check the address")),
        416 => {
            return Err(format!(
                "{host} cannot resume this file (416); remove the .part file"
            ));
        }
        status => return Err(format!("{host} answered {status} instead of the file")),
    }
    if answer
        .content_type
        .to_ascii_lowercase()
        .starts_with("text/html")
    {
        return Err(format!(
            "{} sent a web page, not a model file (a login or license page?); use the file's \
             download link",
            answer.url
        ));
    }
    Ok(())
}

/// The URL's host, or the whole URL when it has none.
fn names_host(url: &str) -> String {
    names::host(url).unwrap_or_else(|| url.to_string())
}

/// Refuses a file whose announced size is not the catalogue's.
pub(super) fn check_size(
    total: Option<u64>,
    expected: Option<u64>,
    url: &str,
) -> Result<(), String> {
    match (total, expected) {
        (Some(t), Some(e)) if t != e => Err(format!(
            "{url} announces {t} bytes, but this model is {e} bytes: not the file Ember expects"
        )),
        _ => Ok(()),
    }
}

/// Refuses a download the disk cannot hold (with a margin).
pub(super) fn check_free_space(dir: &Path, needed: Option<u64>) -> Result<(), String> {
    let (Some(needed), Some(free)) = (needed, free_space(dir)) else {
        return Ok(());
    };
    // A margin, so the disk is not filled to the last byte.
    let margin = 64 << 20;
    if needed + margin > free {
        return Err(format!(
            "not enough disk space in {}: the download needs {}, {} is free",
            dir.display(),
            inference::memory::human_bytes(needed),
            inference::memory::human_bytes(free)
        ));
    }
    Ok(())
}
