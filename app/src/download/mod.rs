//! Model downloads (`ember download`, the app's Download window): HTTP(S) with resume,
//! progress with speed and ETA, cancel, a SHA-256 check, Hugging Face and Civitai URLs.
//!
//! **Invariant:** the bytes go to `<name>.part` and become `<name>` only once complete,
//! checked and (for model files) readable as a model; nothing ever replaces an existing file.
//! A dropped connection is resumed with a `Range` request, within one run and across runs,
//! and only onto bytes of the same URL and version (`part`).

pub mod catalogue;
mod checks;
mod names;
mod part;
mod transfer;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use checks::{check_free_space, check_size, check_status};
pub use names::{checked_url, free_space};
use part::Part;
pub use part::{git_blob_id, sha256_file};
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
    /// Lower-case hex git blob id the file must have (see [`catalogue::Check::GitBlob`]).
    pub git_blob: Option<String>,
    /// The size it must have.
    pub size: Option<u64>,
}

/// A catalogue name (`sd15`, `sdxl-base`, …) or an HTTP(S) URL; `sha256` adds a check.
pub fn resolve(spec: &str, sha256: Option<&str>) -> Result<Target, String> {
    let expected = sha256.map(parse_sha256).transpose()?;
    if let Some(entry) = catalogue::find(spec) {
        let (sha256, git_blob, size) = match entry.check {
            catalogue::Check::Sha256(hex) => (Some(hex.into()), None, Some(entry.size)),
            catalogue::Check::GitBlob(id) => (None, Some(id.into()), None),
        };
        return Ok(Target {
            url: entry.url.into(),
            file_name: Some(entry.file_name.into()),
            // A hash given beside a name stands for the catalogue's check.
            git_blob: git_blob.filter(|_| expected.is_none()),
            sha256: expected.or(sha256),
            size,
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
        git_blob: None,
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
    // Tries in a row that brought nothing; a try that brings bytes starts the count again.
    let mut fruitless = 0;
    let mut speed = Speed::default();
    loop {
        let part = name.as_deref().map(|n| Part::new(dir, n));
        let (have, version) = part
            .as_ref()
            .map_or((0, None), |p| p.resumable(&target.url));
        let answer = match transfer::get(
            &agent,
            &target.url,
            (have, version.as_deref()),
            &options.tokens,
        ) {
            Ok(answer) => answer,
            // No connection, a timeout: worth another try.
            Err(e) => {
                fruitless += 1;
                if fruitless >= ATTEMPTS {
                    return Err(Failure::Failed(e));
                }
                pause(fruitless, options)?;
                continue;
            }
        };
        // A part that is already whole: the server has nothing after it.
        if let (416, Some(p), Some((None, Some(total)))) = (answer.status, &part, answer.range)
            && total == have
        {
            return p.finish(&dir.join(name.as_deref().unwrap_or_default()), target);
        }
        check_status(&answer, &target.url, &options.tokens)?;
        if name.is_none() {
            let named = answer
                .name
                .as_deref()
                .and_then(names::safe_file_name)
                .ok_or_else(|| format!("{} gives the file no usable name", answer.url))?;
            let resumable = Part::new(dir, &named).resumable(&target.url).0 > 0;
            name = Some(named);
            // A part of that name from an earlier run of this URL: ask again for the rest.
            if resumable {
                continue;
            }
        }
        let name = name.clone().unwrap_or_default();
        let final_path = dir.join(&name);
        let part = Part::new(dir, &name);
        if final_path.exists() {
            return Err(Failure::Failed(format!(
                "{} already exists; Ember never replaces a file (remove it or download elsewhere)",
                final_path.display()
            )));
        }
        let (start, total) = match (answer.status, answer.range) {
            (206, Some((Some(start), total))) if start == have => (start, total),
            (206, _) => {
                return Err(Failure::Failed(format!(
                    "{} answered a resume with the wrong part of the file",
                    answer.url
                )));
            }
            // A server that ignores `Range` (or whose file changed) sends it whole again.
            _ => (0, answer.length),
        };
        check_size(total, target.size, &answer.url)?;
        check_free_space(dir, total.map(|t| t.saturating_sub(start)))?;
        if start == 0 {
            part.record(&target.url, answer.version.as_deref())?;
        }
        let written = part.fill(answer.body, (start, total), options, &mut |done| {
            on_progress(&speed.update(done, total));
        });
        match written {
            Ok(done) if total.is_none_or(|t| done == t) => break,
            Err(Failure::Cancelled) => return Err(Failure::Cancelled),
            Err(Failure::Failed(e)) if e.starts_with("disk:") => {
                return Err(Failure::Failed(e.trim_start_matches("disk:").trim().into()));
            }
            Ok(done) if total.is_some_and(|t| done > t) => {
                part.discard();
                return Err(Failure::Failed(format!(
                    "{} sent more bytes than it announced; the partial file was removed",
                    answer.url
                )));
            }
            ended => {
                let got = std::fs::metadata(&part.path).map_or(0, |m| m.len());
                fruitless = if got > have { 0 } else { fruitless + 1 };
                if fruitless >= ATTEMPTS {
                    let why = match ended {
                        Err(Failure::Failed(e)) => format!(" ({e})"),
                        _ => String::new(),
                    };
                    return Err(Failure::Failed(format!(
                        "the connection kept ending early{why}: {got} of {} bytes are in {}; run \
                         the same download again to resume",
                        total.map_or("?".into(), |t| t.to_string()),
                        part.path.display()
                    )));
                }
                pause(fruitless, options)?;
            }
        }
    }
    let name = name.unwrap_or_default();
    Part::new(dir, &name).finish(&dir.join(&name), target)
}

/// Waits before try `n` again (longer each time), unless cancelled meanwhile.
fn pause(n: usize, options: &Options) -> Result<(), Failure> {
    for _ in 0..(2 * n) {
        if options.cancel.load(Ordering::Relaxed) {
            return Err(Failure::Cancelled);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
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
