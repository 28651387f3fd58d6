//! Model hashes as A1111 and civitai compute them ("AutoV2": the first 10 hex digits of
//! the file's SHA-256), cached per (path, size, modification time) because hashing a
//! 4 GB checkpoint takes seconds.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::imaging::write_atomic;

/// Ember's cache folder: `$EMBER_CACHE_DIR`, else the platform cache dir + `ember`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("EMBER_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join("Library/Caches"))
    } else {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
    };
    base.map(|b| b.join("ember"))
}

/// The full SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    sha256_file_interruptible(path, &|| false)
}

/// [`sha256_file`], asking `stop` between megabytes: `Err(Cancelled)` when it says so.
pub fn sha256_file_interruptible(path: &Path, stop: &dyn Fn() -> bool) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if stop() {
            return Err(Error::Cancelled);
        }
        let n = file.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A1111's old model hash, which its ControlNet extension still writes (`[d14c016b]`): the
/// SHA-256 of the 64 KiB at offset 1 MiB (of whatever of them the file has), 8 hex digits.
pub fn legacy_hash(path: &Path) -> Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    file.seek(SeekFrom::Start(0x10_0000))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::with_capacity(0x1_0000);
    file.take(0x1_0000)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    Ok(sha256_bytes(&buf)[..8].to_string())
}

/// The full SHA-256 of some bytes, hex (the canvas hashes the source image's pixels).
pub fn sha256_bytes(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A1111's "Model hash" of a single-file checkpoint, using (and updating) the cache in
/// `cache` when given. A broken cache file is ignored and rewritten.
pub fn model_hash(path: &Path, cache: Option<&Path>) -> Result<String> {
    model_hash_interruptible(path, cache, &|| false)
}

/// [`model_hash`], stopping with `Err(Cancelled)` as soon as `stop` says so (a model list
/// hashing 7 GB files must not hold up a rescan or the app's exit).
pub fn model_hash_interruptible(
    path: &Path,
    cache: Option<&Path>,
    stop: &dyn Fn() -> bool,
) -> Result<String> {
    let (key, mut entries) = cache_lookup(path, cache)?;
    if let Some(hash) = entries.get(&key) {
        return Ok(hash.clone());
    }
    let hash = sha256_file_interruptible(path, stop)?[..10].to_string();
    if let Some(file) = cache.map(|dir| dir.join(CACHE_FILE)) {
        entries.insert(key, hash.clone());
        // A cache that cannot be written only costs time later.
        if std::fs::create_dir_all(file.parent().unwrap_or(Path::new("."))).is_ok() {
            let json = serde_json::to_vec_pretty(&entries).unwrap_or_default();
            let _ = write_atomic(&file, &json);
        }
    }
    Ok(hash)
}

/// The hash [`model_hash`] computed for this file before, if the cache has it (no hashing:
/// cheap enough for a models list).
pub fn cached_model_hash(path: &Path, cache: Option<&Path>) -> Option<String> {
    let (key, entries) = cache_lookup(path, cache).ok()?;
    entries.get(&key).cloned()
}

const CACHE_FILE: &str = "model-hashes.json";

/// The cache key of `path` (path, size, modification time) and the cache's entries.
fn cache_lookup(path: &Path, cache: Option<&Path>) -> Result<(String, BTreeMap<String, String>)> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let key = format!(
        "{}|{}|{modified}",
        std::fs::canonicalize(path)
            .unwrap_or(path.to_path_buf())
            .display(),
        meta.len()
    );
    let entries = cache
        .map(|dir| dir.join(CACHE_FILE))
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    Ok((key, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_stops_when_asked_and_otherwise_matches_the_plain_hash() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.safetensors");
        std::fs::write(&file, vec![7u8; 3 << 20]).unwrap();
        let stopped = model_hash_interruptible(&file, Some(dir.path()), &|| true);
        assert!(matches!(stopped, Err(Error::Cancelled)), "{stopped:?}");
        assert!(
            !dir.path().join("model-hashes.json").exists(),
            "nothing cached"
        );
        assert_eq!(cached_model_hash(&file, Some(dir.path())), None);
        let hash = model_hash_interruptible(&file, Some(dir.path()), &|| false).unwrap();
        assert_eq!(hash, sha256_file(&file).unwrap()[..10]);
        assert_eq!(cached_model_hash(&file, Some(dir.path())), Some(hash));
    }
}
