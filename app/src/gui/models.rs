//! The models folder: checkpoints and diffusers folders found in it with their detected
//! family, size and A1111 hash, and the add-ons beside them (LoRA, embeddings, ControlNet,
//! VAE, upscalers) grouped by A1111's folder conventions, all worked out on a background
//! thread. Hashes are lazy, as A1111's are: the list shows a model's hash once the engine has
//! computed it (the first image made with it, cached by path, size and date), and never
//! reads a whole checkpoint itself, so a scan of hundreds of gigabytes takes seconds and a
//! rescan or the app closing stops it between files (the scan's token).

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
    /// A live preview decoder (TAESD).
    PreviewDecoder,
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
            EntryKind::PreviewDecoder => "Preview decoders",
            EntryKind::NotLoadable => "Not loadable",
        }
    }

    /// The kind A1111's folder names give (`models/Lora`, `embeddings`, …), if any.
    fn from_folder(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "lora" | "lycoris" | "loras" => Some(EntryKind::Lora),
            "embeddings" | "textual_inversion" => Some(EntryKind::Embedding),
            "controlnet" => Some(EntryKind::ControlNet),
            "vae" => Some(EntryKind::Vae),
            // A1111's `VAE-approx` holds its "Approx NN" preview network.
            "vae-taesd" | "vae_approx" | "vae-approx" => Some(EntryKind::PreviewDecoder),
            "esrgan" | "realesrgan" | "upscale_models" | "swinir" => Some(EntryKind::Upscaler),
            _ => None,
        }
    }
}

/// A model's hash, as the list shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hash {
    Known(String),
    /// A single-file model not used yet (hashed the first time it makes an image).
    NotYet,
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
    /// The preview image A1111 and Civitai keep beside an add-on (`name.preview.png`, or
    /// `name.png`), shown on its card.
    pub preview: Option<PathBuf>,
}

#[derive(Debug)]
pub enum Request {
    /// List `dir` (stopping between files once `stop` is cancelled).
    Scan { dir: PathBuf, stop: CancelToken },
    /// Look these files' hashes up in the cache (after the engine hashed them).
    LookUp { paths: Vec<PathBuf> },
    /// Hash these LoRA files (A1111's short hash) and answer those that differ from the
    /// hash an image recorded: `(name, file, recorded hash)`.
    CheckLoras(Vec<(String, PathBuf, String)>),
}

#[derive(Debug)]
pub enum Reply {
    /// The folder's entries, with the hashes already cached.
    Listed {
        dir: PathBuf,
        entries: Vec<ModelEntry>,
    },
    /// A model's hash, found in the cache.
    Hashed { path: PathBuf, hash: String },
    /// A LoRA whose file is not the one an image used (or could not be read).
    LoraDiffers {
        name: String,
        recorded: String,
        found: Result<String, String>,
    },
}

/// Serves a request on the models thread.
pub fn serve(request: Request, reply: &dyn Fn(Reply)) {
    let cache = hashing::cache_dir();
    match request {
        Request::Scan { dir, stop } => {
            if let Some(entries) = list(&dir, &stop, cache.as_deref()) {
                reply(Reply::Listed { dir, entries });
            }
        }
        Request::LookUp { paths } => {
            for path in paths {
                if let Some(hash) = hashing::cached_model_hash(&path, cache.as_deref()) {
                    reply(Reply::Hashed { path, hash });
                }
            }
        }
        Request::CheckLoras(checks) => {
            for (name, path, recorded) in checks {
                let found = inference::lora::file::short_hash(&path).map_err(|e| e.to_string());
                // A1111 writes the short hash's first 12 hex digits; older images fewer.
                let same = found.as_ref().is_ok_and(|h| {
                    // Bytes, not characters: the recorded text comes from an image.
                    let (h, r) = (h.as_bytes(), recorded.as_bytes());
                    let n = r.len().min(h.len());
                    n >= 8 && h[..n].eq_ignore_ascii_case(&r[..n])
                });
                if !same {
                    reply(Reply::LoraDiffers {
                        name,
                        recorded,
                        found,
                    });
                }
            }
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

/// Everything under `dir`: models first, then the add-on groups, each sorted by name;
/// `None` when `stop` was cancelled meanwhile.
pub fn list(dir: &Path, stop: &CancelToken, cache: Option<&Path>) -> Option<Vec<ModelEntry>> {
    let mut found = Vec::new();
    collect(dir, 0, None, &mut found);
    let mut entries = Vec::with_capacity(found.len());
    for (path, folder_kind) in found {
        if stop.is_cancelled() {
            return None;
        }
        entries.push(entry(path, folder_kind, cache));
    }
    disambiguate(&mut entries);
    entries.sort_by_key(|e| (e.kind, e.name.to_lowercase()));
    Some(entries)
}

/// One found path: an add-on by its folder, else a model if `inspect` detects a family.
fn entry(path: PathBuf, folder_kind: Option<EntryKind>, cache: Option<&Path>) -> ModelEntry {
    let (kind, family) = match folder_kind {
        Some(kind) => (kind, String::new()),
        None => match inspect(&path) {
            Ok(info) if is_loadable(&info.family) => (EntryKind::Model, info.family),
            Ok(info) => (EntryKind::NotLoadable, info.family),
            Err(e) => (EntryKind::NotLoadable, format!("unreadable: {e}")),
        },
    };
    let hash = if kind == EntryKind::Model && path.is_file() {
        hashing::cached_model_hash(&path, cache).map_or(Hash::NotYet, Hash::Known)
    } else {
        Hash::NotHashed
    };
    let preview = matches!(kind, EntryKind::Lora | EntryKind::Embedding)
        .then(|| preview_of(&path))
        .flatten();
    ModelEntry {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        bytes: size_of(&path),
        kind,
        family,
        hash,
        preview,
        path,
    }
}

/// The preview image beside an add-on file, by A1111's and Civitai's names.
pub fn preview_of(path: &Path) -> Option<PathBuf> {
    const NAMES: [&str; 8] = [
        "preview.png",
        "preview.jpg",
        "preview.jpeg",
        "preview.webp",
        "png",
        "jpg",
        "jpeg",
        "webp",
    ];
    NAMES
        .iter()
        .map(|ext| path.with_extension(ext))
        .find(|p| p.is_file())
}

/// `inspect`'s family text for files it could not place (see `weights::inspect`).
fn is_loadable(family: &str) -> bool {
    !(family.starts_with("not a full model") || family.starts_with("unknown"))
}

/// Names that repeat get their parent folder (`sdxl/model.safetensors`).
fn disambiguate(entries: &mut [ModelEntry]) {
    let shown = shown_names(entries.iter().map(|e| e.path.as_path()));
    for (entry, name) in entries.iter_mut().zip(shown) {
        entry.name = name;
    }
}

/// How a list shows each of `paths`: its file name, with its parent folder where another
/// has the same name (`sdxl/model.safetensors`).
pub fn shown_names<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Vec<String> {
    let paths: Vec<&Path> = paths.into_iter().collect();
    let name = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    let names: Vec<String> = paths.iter().map(|p| name(p)).collect();
    paths
        .iter()
        .zip(&names)
        .map(
            |(path, own)| match path.parent().and_then(Path::file_name) {
                Some(parent) if names.iter().filter(|n| *n == own).count() > 1 => {
                    format!("{}/{own}", parent.to_string_lossy())
                }
                _ => own.clone(),
            },
        )
        .collect()
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
        // A diffusers VAE folder (sdxl-vae-fp16-fix's) is one VAE, config and all.
        let vae_folder =
            kind == Some(EntryKind::Vae) && path.is_dir() && path.join("config.json").is_file();
        if addon || vae_folder || (kind.is_none() && is_model_path(&path)) {
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
    fn repeated_names_show_their_folder() {
        let paths = [
            Path::new("/ref/sd15/pipeline"),
            Path::new("/ref/sdxl/pipeline"),
            Path::new("/models/dreamshaper.safetensors"),
        ];
        assert_eq!(
            shown_names(paths),
            ["sd15/pipeline", "sdxl/pipeline", "dreamshaper.safetensors"]
        );
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
        put("VAE-taesd/taesd_decoder.pth", Some(b"taesd"));
        put("notes.txt", Some(b"x"));
        let cache = root.join("cache");
        let entries = list(root, &CancelToken::new(), Some(&cache)).unwrap();
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
                (EntryKind::PreviewDecoder, "taesd_decoder.pth"),
                (EntryKind::NotLoadable, "broken.safetensors"),
            ]
        );
        assert!(
            entries[0].family.starts_with("SD 1.x"),
            "{}",
            entries[0].family
        );
        assert!(
            entries[6].family.starts_with("unreadable"),
            "{}",
            entries[6].family
        );
        let hashes: Vec<&Hash> = entries.iter().map(|e| &e.hash).collect();
        assert_eq!(
            hashes[..3],
            [&Hash::NotYet, &Hash::NotYet, &Hash::NotHashed]
        );

        // Once the engine has hashed a model, the list finds it in the cache.
        let used = &entries[0].path;
        let hash = hashing::model_hash(used, Some(&cache)).unwrap();
        let again = list(root, &CancelToken::new(), Some(&cache)).unwrap();
        assert_eq!(again[0].hash, Hash::Known(hash));
        assert_eq!(
            again[1].hash,
            Hash::NotYet,
            "the other copy was never hashed"
        );

        let stop = CancelToken::new();
        stop.cancel();
        assert!(list(root, &stop, None).is_none(), "a cancelled scan stops");
    }
}
