//! One HTTP request of a download: redirects followed by hand (a token goes only to the host
//! it belongs to; `Range` survives every hop), and what the answer says about the file.

use std::time::Duration;

use super::names::{disposition_name, host, url_name};

/// Redirects followed at most (Civitai and Hugging Face use one or two).
const MAX_REDIRECTS: usize = 10;

/// Access tokens for hosts that gate downloads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Hugging Face (`HF_TOKEN`), for gated repositories.
    pub huggingface: Option<String>,
    /// Civitai (`CIVITAI_TOKEN`), for models that need a login.
    pub civitai: Option<String>,
}

impl Tokens {
    /// The tokens in the environment (`HF_TOKEN`, `CIVITAI_TOKEN`).
    pub fn from_env() -> Self {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Self {
            huggingface: get("HF_TOKEN"),
            civitai: get("CIVITAI_TOKEN"),
        }
    }

    /// The token for `url`'s host, if it has one; never over plain http.
    pub fn for_url(&self, url: &str) -> Option<&str> {
        if !url
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        {
            return None;
        }
        match host(url)?.as_str() {
            "huggingface.co" | "hf.co" => self.huggingface.as_deref(),
            "civitai.com" => self.civitai.as_deref(),
            _ => None,
        }
    }
}

/// The client: no automatic redirects, statuses as values, a stalled server an error.
pub fn agent(read_timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_per_read(Some(read_timeout))
        .user_agent(concat!("Ember/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// An answer with a body to read.
pub struct Answer {
    pub status: u16,
    /// The URL that answered (after redirects).
    pub url: String,
    /// The file name the answer gives (`Content-Disposition`), else the URL's.
    pub name: Option<String>,
    /// `Content-Length`.
    pub length: Option<u64>,
    /// `Content-Range: bytes START-END/TOTAL` (a 206) as `(START, TOTAL)`; a 416's
    /// `bytes */TOTAL` as `(None, TOTAL)`.
    pub range: Option<(Option<u64>, Option<u64>)>,
    pub content_type: String,
    /// The file's version (`ETag`, else `Last-Modified`), for resuming it with `If-Range`.
    pub version: Option<String>,
    pub body: ureq::Body,
}

/// GETs `url` from byte `from` (a `Range` request when above 0, sent `If-Range: version`
/// so a changed file comes whole).
pub fn get(
    agent: &ureq::Agent,
    url: &str,
    (from, version): (u64, Option<&str>),
    tokens: &Tokens,
) -> Result<Answer, String> {
    let mut url = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let mut request = agent.get(&url);
        if from > 0 {
            request = request.header("Range", format!("bytes={from}-"));
            if let Some(v) = version {
                request = request.header("If-Range", v);
            }
        }
        if let Some(token) = tokens.for_url(&url) {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let response = request.call().map_err(|e| describe(&url, &e))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        if (300..400).contains(&status) && status != 304 {
            let location = header("location")
                .ok_or_else(|| format!("{url} redirected ({status}) without saying where"))?;
            url = join(&url, &location);
            continue;
        }
        let name = header("content-disposition")
            .and_then(|d| disposition_name(&d))
            .or_else(|| url_name(&url));
        let length = header("content-length").and_then(|v| v.trim().parse().ok());
        let range = header("content-range").and_then(|v| parse_content_range(&v));
        let content_type = header("content-type").unwrap_or_default();
        let version = header("etag").or_else(|| header("last-modified"));
        return Ok(Answer {
            status,
            url,
            name,
            length,
            range,
            content_type,
            version,
            body: response.into_body(),
        });
    }
    Err(format!("{url} redirected more than {MAX_REDIRECTS} times"))
}

/// A `Location` resolved against the URL that sent it.
fn join(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(path) = location.strip_prefix("//") {
        return format!("{scheme}://{path}");
    }
    if location.starts_with('/') {
        return format!("{scheme}://{authority}{location}");
    }
    let dir = base.rsplit_once('/').map_or(base, |(d, _)| d);
    format!("{dir}/{location}")
}

/// `bytes 100-199/1000` as `(Some(100), Some(1000))`, `bytes */1000` as `(None, Some(1000))`
/// (`*` total as `None`).
fn parse_content_range(value: &str) -> Option<(Option<u64>, Option<u64>)> {
    let spec = value.trim().strip_prefix("bytes")?.trim();
    let (range, total) = spec.split_once('/')?;
    let start = match range.trim() {
        "*" => None,
        r => Some(r.split_once('-')?.0.trim().parse().ok()?),
    };
    Some((start, total.trim().parse().ok()))
}

/// A transport error in words: the host, and what failed.
fn describe(url: &str, error: &ureq::Error) -> String {
    let host = host(url).unwrap_or_else(|| url.to_string());
    match error {
        ureq::Error::Timeout(_) => format!("{host} did not answer in time"),
        ureq::Error::HostNotFound => format!("{host} was not found (no network, or a typo?)"),
        ureq::Error::Io(e) => format!("could not reach {host}: {e}"),
        other => format!("could not download from {host}: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_resolve_against_the_url_that_sent_them() {
        let base = "https://civitai.com/api/download/models/1?type=Model";
        assert_eq!(join(base, "https://cdn.example/x"), "https://cdn.example/x");
        assert_eq!(join(base, "/files/x"), "https://civitai.com/files/x");
        assert_eq!(join(base, "//cdn.example/y"), "https://cdn.example/y");
        assert_eq!(join("http://h:8/a/b", "c"), "http://h:8/a/c");
    }

    #[test]
    fn tokens_go_only_to_their_own_hosts() {
        let tokens = Tokens {
            huggingface: Some("hf".into()),
            civitai: Some("cv".into()),
        };
        assert_eq!(
            tokens.for_url("https://huggingface.co/a/resolve/main/x"),
            Some("hf")
        );
        assert_eq!(
            tokens.for_url("https://civitai.com/api/download/models/1"),
            Some("cv")
        );
        assert_eq!(tokens.for_url("https://cdn-lfs.huggingface.co/x"), None);
        assert_eq!(tokens.for_url("https://evil.example/huggingface.co"), None);
        assert_eq!(
            tokens.for_url("http://huggingface.co/a/resolve/main/x"),
            None
        );
        assert_eq!(tokens.for_url("https://HuggingFace.co/a"), Some("hf"));
    }

    #[test]
    fn content_ranges_parse() {
        assert_eq!(
            parse_content_range("bytes 100-199/1000"),
            Some((Some(100), Some(1000)))
        );
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((Some(5), None)));
        assert_eq!(parse_content_range("bytes */77"), Some((None, Some(77))));
        assert_eq!(parse_content_range("items 1-2/3"), None);
    }
}
