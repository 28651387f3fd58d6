//! The partial file of a download: `<name>.part` with a `<name>.part.source` beside it that
//! says which URL (and which version of it: ETag or Last-Modified) the bytes came from, so a
//! resume never appends another file's tail; filling it; and the checks before it takes its
//! final name.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use sha2::{Digest, Sha256};

use super::{CHUNK, Failure, Options, Target};

/// One download's partial file.
pub struct Part {
    pub path: PathBuf,
    source: PathBuf,
}

impl Part {
    pub fn new(dir: &Path, name: &str) -> Self {
        Self {
            path: dir.join(format!("{name}.part")),
            source: dir.join(format!("{name}.part.source")),
        }
    }

    /// Bytes already there from `url`: 0 (and the stale bytes dropped) when the part came
    /// from another URL or its origin is unknown. Also the version the bytes are of, for
    /// `If-Range`.
    pub fn resumable(&self, url: &str) -> (u64, Option<String>) {
        let len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        let recorded = std::fs::read_to_string(&self.source).unwrap_or_default();
        let mut lines = recorded.lines();
        if len == 0 || lines.next() != Some(url) {
            let _ = std::fs::remove_file(&self.path);
            return (0, None);
        }
        (
            len,
            lines.next().filter(|v| !v.is_empty()).map(String::from),
        )
    }

    /// Records where the bytes come from before any is written.
    pub fn record(&self, url: &str, version: Option<&str>) -> Result<(), Failure> {
        let text = format!("{url}\n{}\n", version.unwrap_or_default());
        std::fs::write(&self.source, text)
            .map_err(|e| Failure::Failed(format!("cannot write {}: {e}", self.source.display())))
    }

    /// Removes the part and its record.
    pub fn discard(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(&self.source);
    }

    /// Appends the body from byte `start` (truncating when 0); returns the part's length when
    /// the body ends. A write failure is `Err` with `disk: …` (not worth retrying).
    pub fn fill(
        &self,
        body: ureq::Body,
        (start, total): (u64, Option<u64>),
        options: &Options,
        on_bytes: &mut dyn FnMut(u64),
    ) -> Result<u64, Failure> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(start == 0)
            .append(start > 0)
            .open(&self.path)
            .map_err(|e| self.disk_error(&e))?;
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
            let keep = total.map_or(n as u64, |t| (n as u64).min(t.saturating_sub(done)));
            file.write_all(&buffer[..keep as usize])
                .map_err(|e| self.disk_error(&e))?;
            done += n as u64;
            on_bytes(done);
        }
        file.sync_all().map_err(|e| self.disk_error(&e))?;
        Ok(done)
    }

    fn disk_error(&self, e: &std::io::Error) -> Failure {
        let what = if e.kind() == std::io::ErrorKind::StorageFull {
            "the disk is full".to_string()
        } else {
            e.to_string()
        };
        Failure::Failed(format!(
            "disk: could not write {} ({what}); what was downloaded stays there for a resume",
            self.path.display()
        ))
    }

    /// Checks the finished part (hash, model container) and gives it its final name.
    pub fn finish(&self, final_path: &Path, target: &Target) -> Result<PathBuf, Failure> {
        let reject = |message: String| {
            self.discard();
            Failure::Failed(message)
        };
        if let Some(expected) = &target.sha256 {
            let actual = sha256_file(&self.path)
                .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
            if &actual != expected {
                return Err(reject(format!(
                    "the download's SHA-256 is {actual}, not {expected}: the file is damaged or \
                     not the one expected, and was removed"
                )));
            }
        }
        if let Some(expected) = &target.git_blob {
            let actual = git_blob_id(&self.path)
                .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
            if &actual != expected {
                return Err(reject(format!(
                    "the download's git blob id is {actual}, not {expected}: the file is \
                     damaged or not the one expected, and was removed"
                )));
            }
        }
        if is_model_name(final_path)
            && let Err(e) = inference::weights::TensorFile::open(&self.path)
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
                self.path.display()
            )));
        }
        std::fs::rename(&self.path, final_path)
            .map_err(|e| format!("cannot name the download {}: {e}", final_path.display()))?;
        let _ = std::fs::remove_file(&self.source);
        Ok(final_path.to_path_buf())
    }
}

fn is_model_name(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["safetensors", "ckpt", "pt", "pth", "bin"].contains(&e.to_ascii_lowercase().as_str())
    })
}

/// Lower-case hex git blob id of a file: the SHA-1 of `blob <length>\0` and its bytes.
pub fn git_blob_id(path: &Path) -> std::io::Result<String> {
    use sha1::Digest as _;
    let length = std::fs::metadata(path)?.len();
    let mut hasher = sha1::Sha1::new();
    hasher.update(format!("blob {length}\0").as_bytes());
    each_chunk(path, |chunk| hasher.update(chunk))?;
    Ok(hex(&hasher.finalize()))
}

/// Lower-case hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    each_chunk(path, |chunk| hasher.update(chunk))?;
    Ok(hex(&hasher.finalize()))
}

/// Hands the file's bytes to `take` a chunk at a time (the hashes' two digest crates share
/// no trait).
fn each_chunk(path: &Path, mut take: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0u8; CHUNK];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok(());
        }
        take(&buffer[..n]);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_resumes_only_for_the_url_that_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let part = Part::new(dir.path(), "model.safetensors");
        std::fs::write(&part.path, b"12345").unwrap();
        part.record("https://a/model.safetensors", Some("\"v1\""))
            .unwrap();
        assert_eq!(
            part.resumable("https://a/model.safetensors"),
            (5, Some("\"v1\"".into()))
        );
        // Another repository's file of the same name starts afresh.
        assert_eq!(part.resumable("https://b/model.safetensors"), (0, None));
        assert!(!part.path.exists());
        // A part with no record (an older Ember, a crash) is not trusted either.
        std::fs::write(&part.path, b"123").unwrap();
        std::fs::remove_file(dir.path().join("model.safetensors.part.source")).unwrap();
        assert_eq!(part.resumable("https://a/model.safetensors"), (0, None));
    }

    /// A disk that fills mid-way (Linux's /dev/full answers every write with ENOSPC): one
    /// clear error that says so and keeps the bytes for a resume.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_is_named_and_not_retried() {
        let dir = tempfile::tempdir().unwrap();
        let part = Part::new(dir.path(), "model.safetensors");
        std::os::unix::fs::symlink("/dev/full", &part.path).unwrap();
        let body = ureq::Body::builder().data(vec![7u8; 4096]);
        let options = Options::new(dir.path().to_path_buf());
        let err = part
            .fill(body, (0, Some(4096)), &options, &mut |_| {})
            .unwrap_err();
        let Failure::Failed(message) = err else {
            panic!("not a failure: {err:?}")
        };
        assert!(
            message.starts_with("disk:") && message.contains("the disk is full"),
            "{message}"
        );
    }
}
