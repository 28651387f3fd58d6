//! The models folder: checkpoints and diffusers folders found in it, with their detected
//! family, size and A1111 hash, all worked out on a background thread (hashes are cached).

use std::path::{Path, PathBuf};

use inference::hashing;
use inference::weights::inspect::inspect;

/// How deep the scan goes into subfolders (A1111 users sort checkpoints into folders).
const MAX_DEPTH: usize = 3;

/// One model found in the folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelEntry {
    pub path: PathBuf,
    pub name: String,
    pub bytes: u64,
    /// The detected family, or why the file is not a usable model.
    pub family: String,
    /// A1111's short hash; `None` until computed (never for folders).
    pub hash: Option<String>,
}

#[derive(Debug)]
pub enum Request {
    Scan { dir: PathBuf },
}

#[derive(Debug)]
pub enum Reply {
    /// The folder's models, before hashing.
    Listed {
        dir: PathBuf,
        entries: Vec<ModelEntry>,
    },
    /// One model's hash (`Err` says why it could not be computed).
    Hashed {
        path: PathBuf,
        hash: Result<String, String>,
    },
}

/// Serves a request on the models thread: lists, then hashes one file at a time.
pub fn serve(request: Request, reply: &dyn Fn(Reply)) {
    let Request::Scan { dir } = request;
    let entries = list(&dir);
    let files: Vec<PathBuf> = entries
        .iter()
        .filter(|e| e.path.is_file())
        .map(|e| e.path.clone())
        .collect();
    reply(Reply::Listed { dir, entries });
    let cache = hashing::cache_dir();
    for path in files {
        let hash = hashing::model_hash(&path, cache.as_deref()).map_err(|e| e.to_string());
        reply(Reply::Hashed { path, hash });
    }
}

/// Whether `path` looks like something Ember loads: a `.safetensors`/`.ckpt` file or a
/// folder with `model_index.json`.
pub fn is_model_path(path: &Path) -> bool {
    if path.is_dir() {
        return path.join("model_index.json").is_file();
    }
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .is_some_and(|e| e == "safetensors" || e == "ckpt")
}

/// The models under `dir`, sorted by name.
pub fn list(dir: &Path) -> Vec<ModelEntry> {
    let mut found = Vec::new();
    collect(dir, 0, &mut found);
    let mut entries: Vec<ModelEntry> = found
        .into_iter()
        .map(|path| {
            let family = match inspect(&path) {
                Ok(info) => info.family,
                Err(e) => format!("unreadable: {e}"),
            };
            ModelEntry {
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                bytes: size_of(&path),
                family,
                hash: None,
                path,
            }
        })
        .collect();
    entries.sort_by_key(|e| e.name.to_lowercase());
    entries
}

fn collect(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        let path = entry.path();
        if is_model_path(&path) {
            found.push(path);
        } else if path.is_dir() && depth < MAX_DEPTH {
            collect(&path, depth + 1, found);
        }
    }
}

/// A file's size, or a folder's total.
fn size_of(path: &Path) -> u64 {
    if path.is_file() {
        return path.metadata().map_or(0, |m| m.len());
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| size_of(&e.path()))
        .sum()
}

/// `1.99 GB`, `312 KB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_a_file_manager() {
        assert_eq!(human_size(999), "999 B");
        assert_eq!(human_size(1_990_000_000), "1.99 GB");
        assert_eq!(human_size(312_000), "312.00 KB");
    }

    #[test]
    fn the_scan_finds_files_and_diffusers_folders_and_names_junk() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("sd15/inpaint");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(nested.join("broken.safetensors"), b"not a safetensors file").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let folder = dir.path().join("my-model");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("model_index.json"), b"{}").unwrap();
        let entries = list(dir.path());
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["broken.safetensors", "my-model"]);
        assert!(
            entries[0].family.starts_with("unreadable"),
            "{}",
            entries[0].family
        );
    }
}
