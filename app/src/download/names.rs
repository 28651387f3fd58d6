//! What a download is called and where it may go: URL checks and rewrites (Hugging Face
//! `blob` pages to files), `Content-Disposition` names, safe file names, free disk space.

use std::path::Path;

/// The URL checked: HTTP(S) only, with a host. Hugging Face `…/blob/…` page URLs become the
/// `…/resolve/…` file URL (what its download button links to).
pub fn checked_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url:?} is neither a URL nor a known model name"))?;
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return Err(format!(
            "{url:?} is not an HTTP(S) address; Ember downloads over https:// (or http://)"
        ));
    }
    if host(url).is_none_or(|h| h.is_empty()) {
        return Err(format!("{url:?} names no host"));
    }
    let is_hf = host(url).is_some_and(|h| h == "huggingface.co" || h == "hf.co");
    if is_hf && rest.contains("/blob/") {
        return Ok(url.replacen("/blob/", "/resolve/", 1));
    }
    Ok(url.to_string())
}

/// The host of an `http(s)://host[:port]/…` URL, lower-cased.
pub fn host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some(host.split(':').next().unwrap_or(host).to_ascii_lowercase())
}

/// The file name a `Content-Disposition` header gives (`filename*=UTF-8''…` preferred).
pub fn disposition_name(header: &str) -> Option<String> {
    let mut plain = None;
    for part in header.split(';').map(str::trim) {
        let Some((key, value)) = part.split_once('=') else {
            continue;
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "filename*" => {
                let encoded = value.trim().trim_matches('"');
                let encoded = encoded.split_once("''").map_or(encoded, |(_, v)| v);
                return Some(percent_decode(encoded));
            }
            "filename" => plain = Some(value.trim().trim_matches('"').to_string()),
            _ => {}
        }
    }
    plain
}

/// The last path segment of a URL (without the query), percent-decoded.
pub fn url_name(url: &str) -> Option<String> {
    let path = url.split_once("://")?.1.split(['?', '#']).next()?;
    let last = path
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty() && path.contains('/'))?;
    Some(percent_decode(last))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A name safe to create in the download folder: no folders, no hidden or reserved names,
/// at most 200 bytes. `None` when nothing usable is left.
pub fn safe_file_name(name: &str) -> Option<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned: String = base
        .chars()
        .map(|c| match c {
            '<' | '>' | ':' | '"' | '|' | '?' | '*' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').to_string();
    let mut cut = cleaned.len().min(200);
    while !cleaned.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut cleaned = cleaned[..cut].to_string();
    // Windows' device names are no file names, whatever their extension.
    let stem = cleaned
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    let reserved = ["CON", "PRN", "AUX", "NUL"].contains(&stem.as_str())
        || ((stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit());
    if reserved {
        cleaned.insert(0, '_');
    }
    (!cleaned.is_empty()).then_some(cleaned)
}

/// Free bytes where `dir` is (`EMBER_FREE_DISK=…` overrides it, as `EMBER_MEMORY_LIMIT` does
/// memory: for tests and for keeping a margin); `None` when the platform does not say.
pub fn free_space(dir: &Path) -> Option<u64> {
    if let Some(limit) = std::env::var("EMBER_FREE_DISK")
        .ok()
        .and_then(|v| inference::memory::parse_bytes(&v))
    {
        return Some(limit);
    }
    platform_free_space(dir)
}

#[cfg(unix)]
fn platform_free_space(dir: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(not(unix))]
fn platform_free_space(_dir: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_and_hugging_face_pages_become_files() {
        assert_eq!(
            checked_url("https://huggingface.co/a/b/blob/main/m.safetensors").unwrap(),
            "https://huggingface.co/a/b/resolve/main/m.safetensors"
        );
        assert!(
            checked_url("ftp://example.com/m.ckpt")
                .unwrap_err()
                .contains("HTTP(S)")
        );
        assert!(
            checked_url("file:///etc/passwd")
                .unwrap_err()
                .contains("HTTP(S)")
        );
        assert!(
            checked_url("sd99")
                .unwrap_err()
                .contains("known model name")
        );
        assert_eq!(
            host("https://user@CivitAI.com:443/api?x=1").as_deref(),
            Some("civitai.com")
        );
        assert_eq!(
            checked_url("https://HuggingFace.co/a/b/blob/main/m.pt").unwrap(),
            "https://HuggingFace.co/a/b/resolve/main/m.pt"
        );
    }

    #[test]
    fn names_come_from_the_disposition_or_the_url_and_are_made_safe() {
        let h = r#"attachment; filename="dreamshaper_8.safetensors""#;
        assert_eq!(disposition_name(h).unwrap(), "dreamshaper_8.safetensors");
        let utf8 = "attachment; filename=\"x.bin\"; filename*=UTF-8''caf%C3%A9%20v2.safetensors";
        assert_eq!(disposition_name(utf8).unwrap(), "café v2.safetensors");
        assert_eq!(
            url_name("https://h.co/a/b/m%20x.safetensors?download=true").unwrap(),
            "m x.safetensors"
        );
        assert_eq!(url_name("https://h.co"), None);
        assert_eq!(safe_file_name("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(
            safe_file_name("..\\evil:name?.pt").unwrap(),
            "evil_name_.pt"
        );
        assert_eq!(safe_file_name(".hidden").unwrap(), "hidden");
        assert_eq!(safe_file_name("../"), None);
        assert_eq!(safe_file_name("CON.pth").unwrap(), "_CON.pth");
        assert_eq!(safe_file_name("com1").unwrap(), "_com1");
        assert_eq!(safe_file_name("console.pth").unwrap(), "console.pth");
    }
}
