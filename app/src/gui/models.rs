//! The models folder: checkpoints and diffusers folders found in it with their detected
//! family, size and A1111 hash, and the add-ons beside them (LoRA, embeddings, ControlNet,
//! VAE, upscalers) grouped by A1111's folder conventions, all worked out on a background
//! thread. Only loadable models are hashed, one at a time after the listing (cached), and
//! hashing stops the moment the scan's token is cancelled (a rescan, or the app closing).

use std::path::{Path, PathBuf};

use inference::hashing;
use inference::weights::inspect::inspect;
use inference::worker::CancelToken;

/// How deep the scan goes into subfolders (A1111 users sort checkpoints into folders).
const MAX_DEPTH: usize = 3;

/// What a file in the models folder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntryKind {
    /// A checkpoint or diffusers folder Ember can load.
    Model,
    Lora,
    Embedding,
    ControlNet,
    Vae,
    Upscaler,
    /// A file Ember cannot load as a model (`family` says why).
    NotLoadable,
}

impl EntryKind {
    /// The group's heading in the model panel.
    pub fn heading(self) -> &'static str {
        match self {
            EntryKind::Model => "Models",
            EntryKind::Lora => "LoRA",
            EntryKind::Embedding => "Embeddings",
            EntryKind::ControlNet => "ControlNet",
            EntryKind::Vae => "VAE",
            EntryKind::Upscaler => "Upscalers",
            EntryKind::NotLoadable => "Not loadable",
        }
    }

    /// The kind A1111's folder names give (`models/Lora`, `embeddings`, …), if any.
    fn from_folder(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "lora" | "lycoris" | "loras" => Some(EntryKind::Lora),
            "embeddings" | "textual_inversion" => Some(EntryKind::Embedding),
            "controlnet" => Some(EntryKind::ControlNet),
            "vae" | "vae-approx" => Some(EntryKind::Vae),
            "esrgan" | "realesrgan" | "upscale_models" | "swinir" => Some(EntryKind::Upscaler),
            _ => None,
        }
    }
}

/// A model's hash, as the list shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hash {
    /// Queued for hashing.
    Pending,
    Known(String),
    /// Could not be computed (why).
    Failed(String),
    /// Not hashed: diffusers folders (A1111 hashes single files) and add-ons.
    NotHashed,
}

/// One entry of the models folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelEntry {
    pub path: PathBuf,
    /// The file name, with its parent folder when another entry has the same name.
    pub name: String,
    pub bytes: u64,
    pub kind: EntryKind,
    /// The detected family, or why the file is not a usable model.
    pub family: String,
    pub hash: Hash,
}

#[derive(Debug)]
pub enum Request {
    /// List `dir`, then hash its models until `stop` is cancelled.
    Scan { dir: PathBuf, stop: CancelToken },
}

#[derive(Debug)]
pub enum Reply {
    /// The folder's entries, before hashing.
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

/// Serves a request on the models thread: lists, then hashes the loadable single files one
/// at a time until told to stop.
pub fn serve(request: Request, reply: &dyn Fn(Reply)) {
    let Request::Scan { dir, stop } = request;
    if stop.is_cancelled() {
        return;
    }
    let entries = list(&dir);
    let files: Vec<PathBuf> = entries
        .iter()
        .filter(|e| e.hash == Hash::Pending)
        .map(|e| e.path.clone())
        .collect();
    reply(Reply::Listed { dir, entries });
    let cache = hashing::cache_dir();
    for path in files {
        let stopped = || stop.is_cancelled();
        match hashing::model_hash_interruptible(&path, cache.as_deref(), &stopped) {
            Err(inference::Error::Cancelled) => return,
            hash => reply(Reply::Hashed {
                path,
                hash: hash.map_err(|e| e.to_string()),
            }),
        }
    }
}

/// Whether `path` looks like something Ember loads: a `.safetensors`/`.ckpt` file or a
/// folder with `model_index.json`.
pub fn is_model_path(path: &Path) -> bool {
    if path.is_dir() {
        return path.join("model_index.json").is_file();
    }
    has_extension(path, &["safetensors", "ckpt"])
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .is_some_and(|e| extensions.contains(&e.as_str()))
}

/// Everything under `dir`: models first, then the add-on groups, each sorted by name.
pub fn list(dir: &Path) -> Vec<ModelEntry> {
    let mut found = Vec::new();
    collect(dir, 0, None, &mut found);
    let mut entries: Vec<ModelEntry> = found
        .into_iter()
        .map(|(path, folder_kind)| entry(path, folder_kind))
        .collect();
    disambiguate(&mut entries);
    entries.sort_by_key(|e| (e.kind, e.name.to_lowercase()));
    entries
}

/// One found path: an add-on by its folder, else a model if `inspect` detects a family.
fn entry(path: PathBuf, folder_kind: Option<EntryKind>) -> ModelEntry {
    let (kind, family) = match folder_kind {
        Some(kind) => (kind, String::new()),
        None => match inspect(&path) {
            Ok(info) if is_loadable(&info.family) => (EntryKind::Model, info.family),
            Ok(info) => (EntryKind::NotLoadable, info.family),
            Err(e) => (EntryKind::NotLoadable, format!("unreadable: {e}")),
        },
    };
    let hash = if kind == EntryKind::Model && path.is_file() {
        Hash::Pending
    } else {
        Hash::NotHashed
    };
    ModelEntry {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        bytes: size_of(&path),
        kind,
        family,
        hash,
        path,
    }
}

/// `inspect`'s family text for files it could not place (see `weights::inspect`).
fn is_loadable(family: &str) -> bool {
    !(family.starts_with("not a full model") || family.starts_with("unknown"))
}

/// Names that repeat get their parent folder (`sdxl/model.safetensors`).
fn disambiguate(entries: &mut [ModelEntry]) {
    let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    for entry in entries.iter_mut() {
        if names.iter().filter(|n| **n == entry.name).count() > 1
            && let Some(parent) = entry.path.parent().and_then(Path::file_name)
        {
            entry.name = format!("{}/{}", parent.to_string_lossy(), entry.name);
        }
    }
}

/// Collects model paths, and in A1111's add-on folders every weight file with its kind.
fn collect(
    dir: &Path,
    depth: usize,
    kind: Option<EntryKind>,
    found: &mut Vec<(PathBuf, Option<EntryKind>)>,
) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        let path = entry.path();
        let addon =
            kind.is_some() && has_extension(&path, &["safetensors", "ckpt", "pt", "pth", "bin"]);
        if addon || (kind.is_none() && is_model_path(&path)) {
            found.push((path, kind));
        } else if path.is_dir() && depth < MAX_DEPTH {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let inner = kind.or_else(|| EntryKind::from_folder(&name));
            collect(&path, depth + 1, inner, found);
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
    fn the_scan_groups_by_kind_names_repeats_by_folder_and_hashes_only_models() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let checkpoint = ember_tests::reference("sd15/checkpoint.safetensors");
        let put = |rel: &str, bytes: Option<&[u8]>| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            match bytes {
                Some(b) => std::fs::write(&path, b).unwrap(),
                None => drop(std::fs::copy(&checkpoint, &path).unwrap()),
            }
        };
        put("Stable-diffusion/a/model.safetensors", None);
        put("Stable-diffusion/b/model.safetensors", None);
        put(
            "Stable-diffusion/broken.safetensors",
            Some(b"not a safetensors file"),
        );
        put("Lora/style.safetensors", Some(b"lora"));
        put("embeddings/word.pt", Some(b"ti"));
        put("ESRGAN/4x.pth", Some(b"esrgan"));
        put("notes.txt", Some(b"x"));
        let entries = list(root);
        let seen: Vec<(EntryKind, &str)> =
            entries.iter().map(|e| (e.kind, e.name.as_str())).collect();
        assert_eq!(
            seen,
            [
                (EntryKind::Model, "a/model.safetensors"),
                (EntryKind::Model, "b/model.safetensors"),
                (EntryKind::Lora, "style.safetensors"),
                (EntryKind::Embedding, "word.pt"),
                (EntryKind::Upscaler, "4x.pth"),
                (EntryKind::NotLoadable, "broken.safetensors"),
            ]
        );
        assert!(
            entries[0].family.starts_with("SD 1.x"),
            "{}",
            entries[0].family
        );
        assert!(
            entries[5].family.starts_with("unreadable"),
            "{}",
            entries[5].family
        );
        let pending = entries.iter().filter(|e| e.hash == Hash::Pending).count();
        assert_eq!(pending, 2, "only the models are hashed");

        // A cancelled scan lists nothing more and hashes nothing; a running one hashes both.
        let replies = std::cell::RefCell::new(Vec::new());
        let record = |r: Reply| replies.borrow_mut().push(r);
        let stop = CancelToken::new();
        stop.cancel();
        serve(
            Request::Scan {
                dir: root.into(),
                stop,
            },
            &record,
        );
        assert!(replies.borrow().is_empty());
        serve(
            Request::Scan {
                dir: root.into(),
                stop: CancelToken::new(),
            },
            &record,
        );
        let hashed = replies
            .borrow()
            .iter()
            .filter(|r| matches!(r, Reply::Hashed { hash: Ok(_), .. }))
            .count();
        assert_eq!(hashed, 2);
    }
}
