//! Model downloads (`ember download`, the app's Download window): HTTP(S) with resume,
//! progress with speed and ETA, cancel, a SHA-256 check, Hugging Face and Civitai URLs.
//!
//! **Invariant:** the bytes go to `<name>.part` and become `<name>` only once complete,
//! checked and (for model files) readable as a model; nothing ever replaces an existing file.
//! A dropped connection is resumed with a `Range` request, within one run and across runs.

pub mod catalogue;
mod names;
mod transfer;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub use names::{checked_url, free_space};
pub use transfer::Tokens;

/// Tries per run; each resumes where the last ended.
const ATTEMPTS: usize = 5;
/// Bytes read per write.
const CHUNK: usize = 1 << 20;

/// What to download.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    /// The name to save as; `None`: what the server says (`Content-Disposition`, the URL).
    pub file_name: Option<String>,
    /// Lower-case hex SHA-256 the file must have.
    pub sha256: Option<String>,
    /// The size it must have.
    pub size: Option<u64>,
}

/// A catalogue name (`sd15`, `sdxl-base`, …) or an HTTP(S) URL; `sha256` adds a check.
pub fn resolve(spec: &str, sha256: Option<&str>) -> Result<Target, String> {
    let expected = sha256.map(parse_sha256).transpose()?;
    if let Some(entry) = catalogue::find(spec) {
        return Ok(Target {
            url: entry.url.into(),
            file_name: Some(entry.file_name.into()),
            sha256: Some(expected.unwrap_or_else(|| entry.sha256.into())),
            size: Some(entry.size),
        });
    }
    if !spec.contains("://") {
        let names: Vec<&str> = catalogue::CATALOGUE.iter().map(|e| e.name).collect();
        return Err(format!(
            "{spec:?} is neither a URL nor a known model; known: {}",
            names.join(", ")
        ));
    }
    Ok(Target {
        url: checked_url(spec)?,
        file_name: None,
        sha256: expected,
        size: None,
    })
}

fn parse_sha256(text: &str) -> Result<String, String> {
    let hex = text.trim().to_ascii_lowercase();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex)
    } else {
        Err(format!("{text:?} is not a SHA-256 (64 hex digits)"))
    }
}

/// How far a download is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub done: u64,
    pub total: Option<u64>,
    /// Bytes per second over the last seconds.
    pub speed: f64,
}

impl Progress {
    /// Time left at the current speed.
    pub fn eta(&self) -> Option<Duration> {
        let left = self.total?.saturating_sub(self.done);
        (self.speed > 0.0).then(|| Duration::from_secs_f64(left as f64 / self.speed))
    }
}

/// Why a download stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Cancel was asked; the `.part` file stays for a later resume.
    Cancelled,
    Failed(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Cancelled => write!(f, "the download was cancelled (run it again to resume)"),
            Failure::Failed(message) => f.write_str(message),
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Failed(message)
    }
}

/// Where and how to download.
#[derive(Clone, Debug)]
pub struct Options {
    pub dir: PathBuf,
    pub tokens: Tokens,
    pub cancel: Arc<AtomicBool>,
    /// A read that waits longer than this is a stalled server.
    pub read_timeout: Duration,
}

impl Options {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            tokens: Tokens::from_env(),
            cancel: Arc::default(),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// Downloads `target` into `options.dir`; returns the finished file.
pub fn download(
    target: &Target,
    options: &Options,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<PathBuf, Failure> {
    let dir = &options.dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let agent = transfer::agent(options.read_timeout);
    // A part left by an earlier run under the URL's own name resumes at once.
    let mut name = target.file_name.clone().or_else(|| {
        names::url_name(&target.url)
            .and_then(|n| names::safe_file_name(&n))
            .filter(|n| dir.join(format!("{n}.part")).exists())
    });
    let mut attempts = 0;
    let mut speed = Speed::default();
    loop {
        let part = name.as_ref().map(|n| dir.join(format!("{n}.part")));
        let have = part
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        let answer = transfer::get(&agent, &target.url, have, &options.tokens)?;
        check_status(&answer, &target.url, &options.tokens)?;
        if name.is_none() {
            let named = answer
                .name
                .as_deref()
                .and_then(names::safe_file_name)
                .ok_or_else(|| format!("{} gives the file no usable name", answer.url))?;
            name = Some(named);
            // A part file of that name from an earlier run: ask again for the rest.
            if dir
                .join(format!("{}.part", name.as_deref().unwrap_or_default()))
                .exists()
            {
                continue;
            }
        }
        let name = name.clone().unwrap_or_default();
        let final_path = dir.join(&name);
        let part = dir.join(format!("{name}.part"));
        if final_path.exists() {
            return Err(Failure::Failed(format!(
                "{} already exists; Ember never replaces a file (remove it or download elsewhere)",
                final_path.display()
            )));
        }
        let (start, total) = match (answer.status, answer.range) {
            (206, Some((start, total))) if start == have => (start, total),
            (206, _) => {
                return Err(Failure::Failed(format!(
                    "{} answered a resume with the wrong part of the file",
                    answer.url
                )));
            }
            // A server that ignores `Range` sends the whole file again.
            _ => (0, answer.length),
        };
        check_size(total, target.size, &answer.url)?;
        check_free_space(dir, total.map(|t| t.saturating_sub(start)))?;
        let written = copy_body(answer.body, (&part, start), total, options, &mut |done| {
            on_progress(&speed.update(done, total));
        });
        match written {
            Ok(done) if total.is_none_or(|t| done == t) => break,
            Err(Failure::Cancelled) => return Err(Failure::Cancelled),
            Err(Failure::Failed(e)) if e.starts_with("disk:") => {
                return Err(Failure::Failed(e.trim_start_matches("disk:").trim().into()));
            }
            Ok(done) if total.is_some_and(|t| done > t) => {
                let _ = std::fs::remove_file(&part);
                return Err(Failure::Failed(format!(
                    "{} sent more bytes than it announced; the partial file was removed",
                    answer.url
                )));
            }
            ended => {
                attempts += 1;
                if attempts >= ATTEMPTS {
                    let got = std::fs::metadata(&part).map_or(0, |m| m.len());
                    let why = match ended {
                        Err(Failure::Failed(e)) => format!(" ({e})"),
                        _ => String::new(),
                    };
                    return Err(Failure::Failed(format!(
                        "the connection kept ending early{why}: {got} of {} bytes are in {}; run the \
                         same download again to resume",
                        total.map_or("?".into(), |t| t.to_string()),
                        part.display()
                    )));
                }
                std::thread::sleep(Duration::from_millis(200 * attempts as u64));
            }
        }
    }
    let name = name.unwrap_or_default();
    finish(&dir.join(format!("{name}.part")), &dir.join(&name), target)
}

/// Refuses answers that carry no model: errors, login pages, HTML.
fn check_status(answer: &transfer::Answer, url: &str, tokens: &Tokens) -> Result<(), String> {
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

fn names_host(url: &str) -> String {
    names::host(url).unwrap_or(url).to_string()
}

fn check_size(total: Option<u64>, expected: Option<u64>, url: &str) -> Result<(), String> {
    match (total, expected) {
        (Some(t), Some(e)) if t != e => Err(format!(
            "{url} announces {t} bytes, but this model is {e} bytes: not the file Ember expects"
        )),
        _ => Ok(()),
    }
}

fn check_free_space(dir: &Path, needed: Option<u64>) -> Result<(), String> {
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

/// Appends the body to `part` from byte `start`; returns the part's length when the body
/// ends. `Err("disk: …")` is a write failure (not worth retrying).
fn copy_body(
    body: ureq::Body,
    (part, start): (&Path, u64),
    total: Option<u64>,
    options: &Options,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<u64, Failure> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(start == 0)
        .append(start > 0)
        .open(part)
        .map_err(|e| format!("disk: cannot write {}: {e}", part.display()))?;
    let mut reader = body.into_reader();
    let mut buffer = vec![0u8; CHUNK];
    let mut done = start;
    loop {
        if options.cancel.load(Ordering::Relaxed) {
            return Err(Failure::Cancelled);
        }
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                let _ = file.flush();
                return Err(Failure::Failed(format!("the connection broke: {e}")));
            }
        };
        // Never more than announced: the rest is a lying server's.
        let keep = total.map_or(n as u64, |t| (n as u64).min(t.saturating_sub(done))) as usize;
        file.write_all(&buffer[..keep])
            .map_err(|e| disk_error(part, &e))?;
        done += n as u64;
        on_bytes(done);
    }
    file.sync_all().map_err(|e| disk_error(part, &e))?;
    Ok(done)
}

fn disk_error(part: &Path, e: &std::io::Error) -> Failure {
    let what = if e.kind() == std::io::ErrorKind::StorageFull {
        "the disk is full".to_string()
    } else {
        e.to_string()
    };
    Failure::Failed(format!(
        "disk: could not write {} ({what}); what was downloaded stays there for a resume",
        part.display()
    ))
}

/// Checks the finished part (hash, model container) and gives it its name.
fn finish(part: &Path, final_path: &Path, target: &Target) -> Result<PathBuf, Failure> {
    let reject = |message: String| {
        let _ = std::fs::remove_file(part);
        Failure::Failed(message)
    };
    if let Some(expected) = &target.sha256 {
        let actual =
            sha256_file(part).map_err(|e| format!("cannot read {}: {e}", part.display()))?;
        if &actual != expected {
            return Err(reject(format!(
                "the download's SHA-256 is {actual}, not {expected}: the file is damaged or not \
                 the one expected, and was removed"
            )));
        }
    }
    if is_model_name(final_path)
        && let Err(e) = inference::weights::TensorFile::open(part)
    {
        return Err(reject(format!(
            "the download is not a usable model file ({e}); it was removed"
        )));
    }
    // Never over an existing file, even one that appeared meanwhile.
    if final_path.exists() {
        return Err(Failure::Failed(format!(
            "{} appeared while downloading; the download stays in {}",
            final_path.display(),
            part.display()
        )));
    }
    std::fs::rename(part, final_path)
        .map_err(|e| format!("cannot name the download {}: {e}", final_path.display()))?;
    Ok(final_path.to_path_buf())
}

fn is_model_name(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["safetensors", "ckpt", "pt", "pth", "bin"].contains(&e.to_ascii_lowercase().as_str())
    })
}

/// Lower-case hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; CHUNK];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Download speed over a sliding window of about two seconds.
#[derive(Default)]
struct Speed {
    samples: std::collections::VecDeque<(Instant, u64)>,
}

impl Speed {
    fn update(&mut self, done: u64, total: Option<u64>) -> Progress {
        let now = Instant::now();
        self.samples.push_back((now, done));
        while self.samples.len() > 2
            && now.duration_since(self.samples[0].0) > Duration::from_secs(2)
        {
            self.samples.pop_front();
        }
        let (t0, d0) = self.samples[0];
        let secs = now.duration_since(t0).as_secs_f64();
        let speed = if secs > 0.0 {
            done.saturating_sub(d0) as f64 / secs
        } else {
            0.0
        };
        Progress { done, total, speed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_urls_resolve_and_hashes_are_checked() {
        let t = resolve("SDXL-base", None).unwrap();
        assert_eq!(t.file_name.as_deref(), Some("sd_xl_base_1.0.safetensors"));
        assert_eq!(t.size, Some(6_938_078_334));
        assert!(resolve("sd99", None).unwrap_err().contains("known: sd15"));
        assert!(
            resolve("ftp://x/y.ckpt", None)
                .unwrap_err()
                .contains("HTTP(S)")
        );
        assert!(
            resolve("https://x/y.ckpt", Some("abc"))
                .unwrap_err()
                .contains("64 hex")
        );
        let hex = "A".repeat(64);
        assert_eq!(
            resolve("https://x/y.ckpt", Some(&hex)).unwrap().sha256,
            Some("a".repeat(64))
        );
    }

    #[test]
    fn progress_has_an_eta_once_there_is_a_speed() {
        let p = Progress {
            done: 50,
            total: Some(150),
            speed: 10.0,
        };
        assert_eq!(p.eta(), Some(Duration::from_secs(10)));
        assert_eq!(Progress { speed: 0.0, ..p }.eta(), None);
    }
}
