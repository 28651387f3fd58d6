//! LoRA files as artists download them: kohya-ss / A1111 (`lora_unet_*`, `lora_te_*`,
//! SDXL's `lora_te1_*` / `lora_te2_*`, with `.lora_down` / `.lora_up` / `.alpha`) and
//! diffusers / PEFT (`unet.` / `text_encoder.` / `text_encoder_2.` prefixes with `lora_A` /
//! `lora_B`, or `.lora.down` / `.lora.up`). Each module's pair becomes one [`Adapter`]; which
//! model parameter it targets is decided against the model ([`super::merge`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::store::burn_pack::Tensor as PackTensor;

use crate::error::{Error, Result};
use crate::weights::source::TensorFile;

/// The network an adapter belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Network {
    Unet,
    /// Text encoder `i` in the family's order (SDXL: 0 = CLIP-L, 1 = OpenCLIP-G).
    TextEncoder(usize),
}

/// How the file names the module.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModuleName {
    /// kohya's diffusers path with every `.` written `_` (`down_blocks_0_attentions_0_proj_in`).
    Flat(String),
    /// A dotted diffusers / transformers path (`down_blocks.0.attentions.0.proj_in`).
    Dotted(String),
}

/// One module's low-rank update: `delta = scale * up @ down`.
#[derive(Clone, Debug)]
pub struct Adapter {
    pub network: Network,
    pub module: ModuleName,
    /// The file's key prefix of this module (for messages).
    pub key: String,
    /// `[out, rank]` or `[out, rank, 1, 1]`.
    pub up: PackTensor,
    /// `[rank, in]` or `[rank, in, kh, kw]`.
    pub down: PackTensor,
    /// kohya's `alpha`: the update is scaled by `alpha / rank` (1 without one).
    pub alpha: Option<f32>,
}

impl Adapter {
    pub fn rank(&self) -> usize {
        self.down.shape.as_slice().first().copied().unwrap_or(1)
    }

    /// `alpha / rank`, or 1 (A1111's `calc_scale`).
    pub fn scale(&self) -> f32 {
        self.alpha.map_or(1.0, |a| a / self.rank() as f32)
    }
}

/// A LoRA file's adapters.
pub struct LoraFile {
    pub path: PathBuf,
    pub adapters: Vec<Adapter>,
}

/// The part a key plays for its module.
enum Part {
    Up,
    Down,
    Alpha,
}

/// `(network, module name, part)` of a key, or `None` for keys no LoRA format uses.
fn classify(key: &str) -> Option<(Network, ModuleName, Part, String)> {
    let (stem, part) = [
        (".lora_up.weight", Part::Up),
        (".lora_down.weight", Part::Down),
        (".lora_B.weight", Part::Up),
        (".lora_A.weight", Part::Down),
        (".lora.up.weight", Part::Up),
        (".lora.down.weight", Part::Down),
        (".alpha", Part::Alpha),
    ]
    .into_iter()
    .find_map(|(suffix, part)| key.strip_suffix(suffix).map(|s| (s, part)))?;
    let kohya = [
        ("lora_unet_", Network::Unet),
        ("lora_te1_", Network::TextEncoder(0)),
        ("lora_te2_", Network::TextEncoder(1)),
        ("lora_te_", Network::TextEncoder(0)),
    ];
    for (prefix, network) in kohya {
        if let Some(name) = stem.strip_prefix(prefix) {
            let module = ModuleName::Flat(name.to_string());
            return Some((network, module, part, stem.to_string()));
        }
    }
    let peft = [
        ("unet.", Network::Unet),
        ("text_encoder_2.", Network::TextEncoder(1)),
        ("text_encoder.", Network::TextEncoder(0)),
    ];
    for (prefix, network) in peft {
        if let Some(name) = stem.strip_prefix(prefix) {
            let module = ModuleName::Dotted(name.to_string());
            return Some((network, module, part, stem.to_string()));
        }
    }
    None
}

impl LoraFile {
    /// Reads a LoRA file's adapters. Keys of formats Ember does not merge yet (LyCORIS's
    /// `hada_*`, `lokr_*`, `lora_mid`, DoRA's `dora_scale`) are refused by name, never
    /// skipped.
    pub fn open(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::invalid_model(path, format!("LoRA: {message}"));
        let file = TensorFile::open(path)?;
        let unsupported = ["hada_", "lokr_", "lora_mid", "dora_scale", ".diff", "oft_"];
        if let Some(t) = file
            .tensors
            .iter()
            .find(|t| unsupported.iter().any(|u| t.name.contains(u)))
        {
            return Err(bad(format!(
                "`{}` belongs to a LyCORIS/DoRA adapter, which Ember does not merge yet \
                 (plain LoRA and LoCon only)",
                t.name
            )));
        }
        type Parts = (Option<PackTensor>, Option<PackTensor>, Option<f32>);
        let mut modules: BTreeMap<(Network, ModuleName, String), Parts> = BTreeMap::new();
        let mut unknown = Vec::new();
        for tensor in file.tensors {
            let Some((network, module, part, key)) = classify(&tensor.name) else {
                unknown.push(tensor.name.clone());
                continue;
            };
            let entry = modules.entry((network, module, key)).or_default();
            match part {
                Part::Up => entry.0 = Some(tensor),
                Part::Down => entry.1 = Some(tensor),
                Part::Alpha => {
                    let data = burn::store::bridge::to_data(&tensor)
                        .map_err(|e| bad(format!("`{}` cannot be read ({e})", tensor.name)))?;
                    let values = data
                        .convert::<f32>()
                        .try_into_vec::<f32>()
                        .map_err(|e| bad(format!("`{}`: {e:?}", tensor.name)))?;
                    match values.as_slice() {
                        [alpha] if alpha.is_finite() => entry.2 = Some(*alpha),
                        _ => return Err(bad(format!("`{}` is not one number", tensor.name))),
                    }
                }
            }
        }
        if modules.is_empty() {
            let example = unknown
                .first()
                .map_or(String::new(), |k| format!(" (e.g. `{k}`)"));
            return Err(bad(format!(
                "no LoRA weights found{example}: not a LoRA file, or a format Ember does not read"
            )));
        }
        let mut adapters = Vec::with_capacity(modules.len());
        for ((network, module, key), (up, down, alpha)) in modules {
            let (Some(up), Some(down)) = (up, down) else {
                return Err(bad(format!("`{key}` has no up/down pair")));
            };
            let (u, d) = (up.shape.as_slice(), down.shape.as_slice());
            let rank_ok = u.len() >= 2 && d.len() >= 2 && u[1] == d[0];
            if !rank_ok || u.len() != d.len() {
                return Err(bad(format!(
                    "`{key}`: up {u:?} and down {d:?} do not multiply (ranks differ)"
                )));
            }
            adapters.push(Adapter {
                network,
                module,
                key,
                up,
                down,
                alpha,
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            adapters,
        })
    }
}

/// A1111's short hash of a LoRA: for `.safetensors`, the SHA-256 of the data after the header
/// (kohya's "addnet" hash, which ignores the metadata), else of the whole file; 12 hex digits.
pub fn short_hash(path: &Path) -> Result<String> {
    use std::io::{Read, Seek, SeekFrom};

    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let safetensors = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    if safetensors {
        let mut len = [0u8; 8];
        file.read_exact(&mut len).map_err(|e| Error::io(path, e))?;
        let offset = u64::from_le_bytes(len).saturating_add(8);
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(path, e))?;
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest = hasher.finalize();
    Ok(digest.iter().take(6).map(|b| format!("{b:02x}")).collect())
}
