//! Textual-inversion embeddings as A1111 reads them: files found by stem in embedding
//! folders, loaded only when a prompt names them (`.safetensors` with `emb_params` or SDXL's
//! `clip_l` + `clip_g`, `.pt` with `string_to_param`, diffusers' one-tensor `learned_embeds`),
//! and the name matcher the chunker uses (`textual_inversion.py`, `find_embedding_at_position`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::tokenizer::{ClipTokenizer, TOKENS_PER_CHUNK};
use crate::error::{Error, Result};
use crate::weights::source::TensorFile;

/// File endings A1111 loads embeddings from (images with embedded data are not read).
const EXTENSIONS: [&str; 3] = ["safetensors", "pt", "bin"];

/// Embedding files are a few KiB; anything larger is a LoRA or a model in the wrong folder.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// How deep the folder walk goes (A1111 walks every subfolder; this only stops link loops).
const MAX_DEPTH: usize = 8;

/// One embedding file, named by its stem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddingFile {
    pub name: String,
    pub path: PathBuf,
}

/// Every embedding file under `dirs` (subfolders included), sorted by name; the first folder
/// wins when two hold the same stem. Missing folders hold nothing.
pub fn list(dirs: &[PathBuf]) -> Vec<EmbeddingFile> {
    let mut found: Vec<EmbeddingFile> = Vec::new();
    for dir in dirs {
        let mut here = Vec::new();
        walk(dir, 0, &mut here);
        here.sort_by(|a, b| a.name.cmp(&b.name).then(a.path.cmp(&b.path)));
        for file in here {
            if !found.iter().any(|f| f.name == file.name) {
                found.push(file);
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<EmbeddingFile>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if hidden {
            continue;
        }
        if path.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, out);
            }
            continue;
        }
        let known = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if let (true, Some(stem)) = (known, path.file_stem().and_then(|s| s.to_str())) {
            out.push(EmbeddingFile {
                name: stem.to_string(),
                path,
            });
        }
    }
}

/// The vectors of one embedding file.
#[derive(Clone, Debug)]
pub struct Embedding {
    pub name: String,
    pub path: PathBuf,
    /// How many token positions it fills.
    pub vectors: usize,
    /// Its tensors: `""` for a one-tensor file (SD 1.x / 2.x), else `clip_l` and `clip_g`.
    tensors: Vec<(String, usize, Vec<f32>)>,
    /// A1111's short hash: the first 12 hex digits of the file's SHA-256.
    pub short_hash: String,
}

impl Embedding {
    /// Reads an embedding file (nothing in it is executed: pickles are vetted first).
    pub fn load(name: &str, path: &Path) -> Result<Self> {
        let bad =
            |message: String| Error::invalid_model(path, format!("embedding {name}: {message}"));
        let size = std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(bad(format!(
                "the file is {} MiB; an embedding is a few KiB (is this a LoRA or a model?)",
                size >> 20
            )));
        }
        let file = TensorFile::open(path)?;
        let tensor_named = |key: &str| file.tensors.iter().find(|t| t.name == key);
        let ti_params: Vec<_> = file
            .tensors
            .iter()
            .filter(|t| t.name.starts_with("string_to_param"))
            .collect();
        let chosen: Vec<(&str, &burn::store::burn_pack::Tensor)> = if !ti_params.is_empty() {
            if ti_params.len() > 1 {
                return Err(bad("the file holds several terms; A1111 takes one".into()));
            }
            vec![("", ti_params[0])]
        } else if let Some(t) = tensor_named("emb_params") {
            vec![("", t)]
        } else if let (Some(l), Some(g)) = (tensor_named("clip_l"), tensor_named("clip_g")) {
            vec![("clip_l", l), ("clip_g", g)]
        } else if file.tensors.len() == 1 {
            vec![("", &file.tensors[0])]
        } else {
            return Err(bad(
                "not a textual-inversion embedding (no emb_params, string_to_param, or clip_l and clip_g)"
                    .into(),
            ));
        };
        let mut tensors = Vec::new();
        let mut vectors = None;
        for (key, t) in chosen {
            let (rows, width) = match t.shape.as_slice() {
                &[width] => (1, width),
                &[rows, width] => (rows, width),
                other => {
                    return Err(bad(format!(
                        "`{}` has shape {other:?}; embedding vectors are a [count, width] matrix",
                        t.name
                    )));
                }
            };
            if rows == 0 || width == 0 {
                return Err(bad(format!("`{}` holds no vectors", t.name)));
            }
            if rows > TOKENS_PER_CHUNK {
                return Err(bad(format!(
                    "{rows} vectors do not fit in one 75-token chunk"
                )));
            }
            if vectors.is_some_and(|v| v != rows) {
                return Err(bad("clip_l and clip_g have different vector counts".into()));
            }
            vectors = Some(rows);
            let data = burn::store::bridge::to_data(t)
                .map_err(|e| bad(format!("`{}` cannot be read ({e})", t.name)))?;
            let values = data
                .convert::<f32>()
                .try_into_vec::<f32>()
                .map_err(|e| bad(format!("`{}` is not a float tensor ({e:?})", t.name)))?;
            if values.iter().any(|v| !v.is_finite()) {
                return Err(bad(format!("`{}` holds NaN or infinite values", t.name)));
            }
            tensors.push((key.to_string(), width, values));
        }
        let short_hash = crate::hashing::sha256_file(path)?[..12].to_string();
        Ok(Self {
            name: name.to_string(),
            path: path.to_path_buf(),
            vectors: vectors.unwrap_or(0),
            tensors,
            short_hash,
        })
    }

    /// The `[vectors, width]` rows for an encoder that reads `key` (`clip_l` or `clip_g` in
    /// SDXL files, `""` in families with one encoder, which SDXL files do not fit) and takes
    /// `width`-wide tokens. One-tensor files serve any encoder of their width.
    pub fn rows_for(&self, key: &str, width: usize) -> Result<&[f32]> {
        let found = self
            .tensors
            .iter()
            .find(|(k, _, _)| k.is_empty() || (!key.is_empty() && k == key));
        let widths: Vec<usize> = self.tensors.iter().map(|(_, w, _)| *w).collect();
        let made_for = match widths.as_slice() {
            [_, _] => "SDXL",
            [768] => "SD 1.x",
            [1024] => "SD 2.x",
            _ => "SD 1.x or SD 2.x",
        };
        match found {
            Some((_, w, values)) if *w == width => Ok(values),
            _ => Err(Error::invalid_model(
                &self.path,
                format!(
                    "embedding {} was made for {made_for} (vectors {widths:?} wide), not for \
                     this model, whose text encoder takes {width}-wide tokens; use an embedding \
                     made for this model's family",
                    self.name,
                ),
            )),
        }
    }
}

/// The embeddings a prompt may name: every file of the folders, tokenized names, loaded on
/// first use.
pub struct EmbeddingSet {
    files: Vec<EmbeddingFile>,
    loaded: RefCell<HashMap<usize, Rc<Embedding>>>,
}

impl EmbeddingSet {
    /// The embedding files under `dirs` (nothing is read yet).
    pub fn new(dirs: &[PathBuf]) -> Self {
        Self::from_files(list(dirs))
    }

    pub fn from_files(files: Vec<EmbeddingFile>) -> Self {
        Self {
            files,
            loaded: RefCell::default(),
        }
    }

    pub fn files(&self) -> &[EmbeddingFile] {
        &self.files
    }

    /// Embedding `index`, read on first use.
    pub fn get(&self, index: usize) -> Result<Rc<Embedding>> {
        if let Some(e) = self.loaded.borrow().get(&index) {
            return Ok(e.clone());
        }
        let file = &self.files[index];
        let embedding = Rc::new(Embedding::load(&file.name, &file.path)?);
        self.loaded.borrow_mut().insert(index, embedding.clone());
        Ok(embedding)
    }

    /// Every name tokenized with `tokenizer`, longest first per first token (A1111's order).
    pub fn matcher(&self, tokenizer: &ClipTokenizer) -> Result<NameMatcher> {
        let mut names = Vec::with_capacity(self.files.len());
        for (index, file) in self.files.iter().enumerate() {
            let tokens = tokenizer.tokens(&file.name)?;
            if !tokens.is_empty() {
                names.push((tokens, index));
            }
        }
        names.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        Ok(NameMatcher { names })
    }
}

/// Finds embedding names in token sequences.
#[derive(Default)]
pub struct NameMatcher {
    /// Token ids of each name and its file index, longest first.
    names: Vec<(Vec<u32>, usize)>,
}

impl NameMatcher {
    /// The embedding whose name's tokens start at `position` of `tokens` (the longest such
    /// name), with how many tokens the name takes.
    pub fn at(&self, tokens: &[u32], position: usize) -> Option<(usize, usize)> {
        let rest = &tokens[position..];
        self.names
            .iter()
            .find(|(name, _)| rest.starts_with(name))
            .map(|(name, index)| (*index, name.len()))
    }
}

/// Names of widely shared embeddings, matched in lower case, for the "not found" note.
const WELL_KNOWN: &[&str] = &[
    "easynegative",
    "badhandv4",
    "bad-hands-5",
    "bad_prompt_version2",
    "bad-artist",
    "bad-artist-anime",
    "ng_deepnegative_v1_75t",
    "verybadimagenegative_v1.3",
    "negative_hand-neg",
    "fastnegativev2",
    "unaestheticxl_hk1",
    "unaestheticxlv31",
    "epicnegative",
    "cyberrealistic_negative",
    "bad_pictures",
    "baddream",
    "unrealisticdream",
];

/// Words of `text` that look like embedding names but name no file in `set`: `<name>`
/// words (not `<lora:…>` tags) and well-known embedding names. They stay plain text, as in
/// A1111; the caller says so.
pub fn unknown_embedding_words(text: &str, set: &EmbeddingSet) -> Vec<String> {
    let names: Vec<&str> = set.files.iter().map(|f| f.name.as_str()).collect();
    unknown_embedding_words_among(text, &names)
}

/// [`unknown_embedding_words`] with the embeddings known by name (the app's models list).
pub fn unknown_embedding_words_among(text: &str, names: &[&str]) -> Vec<String> {
    let mut words = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || ",()[]".contains(c)) {
        // Strip a trailing `:weight` of `(name:1.2)`.
        let word = match raw.rsplit_once(':') {
            Some((w, weight)) if weight.parse::<f64>().is_ok() => w,
            _ => raw,
        };
        if word.is_empty() {
            continue;
        }
        let lower = word.to_lowercase();
        let angle = word.starts_with('<') && word.ends_with('>') && !word.contains(':');
        let looks = angle || WELL_KNOWN.contains(&lower.as_str());
        let known = names.iter().any(|name| name.to_lowercase() == lower);
        if looks && !known && !words.contains(&word.to_string()) {
            words.push(word.to_string());
        }
    }
    words
}
