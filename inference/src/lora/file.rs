//! LoRA files as artists download them: kohya-ss / A1111 (`lora_unet_*`, `lora_te_*`,
//! SDXL's `lora_te1_*` / `lora_te2_*`, with `.lora_down` / `.lora_up` / `.alpha`), LyCORIS
//! (LoCon's `lora_mid`, LoHa's `hada_*`, LoKr's `lokr_*`, DoRA's `dora_scale`) and
//! diffusers / PEFT (`unet.` / `text_encoder.` / `text_encoder_2.` prefixes with `lora_A` /
//! `lora_B`, or `.lora.down` / `.lora.up`). Each module's factors become one [`Adapter`];
//! which model parameter it targets is decided against the model ([`super::merge`]).

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

/// The factors of one module's update (shapes as the files store them).
#[derive(Clone, Debug)]
pub enum Factors {
    /// LoRA / LoCon: `up` `[out, r(,1,1)]`, `down` `[r, in(,kh,kw)]`, LoCon's `mid`
    /// `[r, r, kh, kw]` between them.
    LoRa {
        up: PackTensor,
        down: PackTensor,
        mid: Option<PackTensor>,
    },
    /// LoHa: `(w1_a @ w1_b) ⊙ (w2_a @ w2_b)`, or with Tucker cores `(t1, t2)`.
    LoHa(Box<LoHa>),
    /// LoKr: `kron(w1, w2)`, each factor full or as `a @ b`.
    LoKr { w1: KrFactor, w2: KrFactor },
}

/// LoHa's factors: `(w1_a, w1_b)`, `(w2_a, w2_b)` and the Tucker cores `(t1, t2)`.
#[derive(Clone, Debug)]
pub struct LoHa {
    pub w1: (PackTensor, PackTensor),
    pub w2: (PackTensor, PackTensor),
    pub tucker: Option<(PackTensor, PackTensor)>,
}

/// One LoKr factor.
#[derive(Clone, Debug)]
pub enum KrFactor {
    Full(PackTensor),
    Decomposed(PackTensor, PackTensor),
}

/// One module's update, as A1111's `networks` reads it.
#[derive(Clone, Debug)]
pub struct Adapter {
    pub network: Network,
    pub module: ModuleName,
    /// The file's key prefix of this module (for messages).
    pub key: String,
    pub factors: Factors,
    /// The update is scaled by `alpha / dim` (1 without one, or without a dim: full LoKr).
    pub alpha: Option<f32>,
    /// DoRA's magnitude (`[1, in(,1,1)]` or `[out, 1(,1,1)]`).
    pub dora_scale: Option<PackTensor>,
}

impl Adapter {
    /// The rank the alpha divides by (A1111's `dim`), if the factors have one.
    pub fn dim(&self) -> Option<usize> {
        let first = |t: &PackTensor| t.shape.as_slice().first().copied();
        match &self.factors {
            Factors::LoRa { down, .. } => first(down),
            Factors::LoHa(h) => first(&h.w1.1),
            Factors::LoKr { w1, w2 } => match (w2, w1) {
                (KrFactor::Decomposed(_, b), _) | (_, KrFactor::Decomposed(_, b)) => first(b),
                _ => None,
            },
        }
    }

    /// `alpha / dim`, or 1 (A1111's `calc_scale`).
    pub fn scale(&self) -> f32 {
        match (self.alpha, self.dim()) {
            (Some(a), Some(d)) if d > 0 => a / d as f32,
            _ => 1.0,
        }
    }
}

/// A LoRA file's adapters.
pub struct LoraFile {
    pub path: PathBuf,
    pub adapters: Vec<Adapter>,
    /// Keys of no LoRA format Ember reads (reported when the LoRA is merged).
    pub unread: Vec<String>,
}

/// LyCORIS parts that change what the module does but that Ember does not merge (trained
/// norms, bias changes, LoKr's Tucker core): a file with them is refused, since leaving them
/// out would quietly give another picture than A1111's.
const UNMERGED_PARTS: [(&str, &str); 4] = [
    (".w_norm", "a trained norm"),
    (".b_norm", "a trained norm"),
    (".diff_b", "a bias change"),
    (".lokr_t2", "a LoKr Tucker core"),
];

/// Tensor roles by key suffix, in every format A1111 reads (longer suffixes first).
const PARTS: [(&str, &str); 21] = [
    (".lora_up.weight", "up"),
    (".lora_down.weight", "down"),
    (".lora_mid.weight", "mid"),
    (".lora_B.weight", "up"),
    (".lora_A.weight", "down"),
    (".lora.up.weight", "up"),
    (".lora.down.weight", "down"),
    (".alpha", "alpha"),
    (".dora_scale", "dora"),
    (".hada_w1_a", "hada_w1_a"),
    (".hada_w1_b", "hada_w1_b"),
    (".hada_w2_a", "hada_w2_a"),
    (".hada_w2_b", "hada_w2_b"),
    (".hada_t1", "hada_t1"),
    (".hada_t2", "hada_t2"),
    (".lokr_w1_a", "lokr_w1_a"),
    (".lokr_w1_b", "lokr_w1_b"),
    (".lokr_w2_a", "lokr_w2_a"),
    (".lokr_w2_b", "lokr_w2_b"),
    (".lokr_w1", "lokr_w1"),
    (".lokr_w2", "lokr_w2"),
];

/// `(network, module name, part, module key)` of a key, or `None` for keys no LoRA format
/// uses.
fn classify(key: &str) -> Option<(Network, ModuleName, &'static str, String)> {
    let (stem, part) = PARTS
        .iter()
        .find_map(|(suffix, part)| key.strip_suffix(suffix).map(|s| (s, *part)))?;
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
    // PEFT's own `save_pretrained` of one network: `base_model.model.<path>`; a text
    // model's paths start with `text_model.`.
    if let Some(name) = stem.strip_prefix("base_model.model.") {
        let network = if name.starts_with("text_model.") {
            Network::TextEncoder(0)
        } else {
            Network::Unet
        };
        let module = ModuleName::Dotted(name.to_string());
        return Some((network, module, part, stem.to_string()));
    }
    for (prefix, network) in peft {
        if let Some(name) = stem.strip_prefix(prefix) {
            let module = ModuleName::Dotted(name.to_string());
            return Some((network, module, part, stem.to_string()));
        }
    }
    None
}

/// One module's tensors by part name.
type Parts = BTreeMap<&'static str, PackTensor>;

/// The factors one module's parts make, or why they make none.
fn factors(key: &str, mut parts: Parts) -> std::result::Result<Factors, String> {
    let mut take = |name: &str| parts.remove(name);
    if let (Some(up), Some(down)) = (take("up"), take("down")) {
        // Whether they multiply out is checked with every kind's factors (`shapes::check`).
        let mid = take("mid");
        return Ok(Factors::LoRa { up, down, mid });
    }
    let hada = ["hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"].map(&mut take);
    if let [Some(w1a), Some(w1b), Some(w2a), Some(w2b)] = hada {
        let tucker = match (take("hada_t1"), take("hada_t2")) {
            (Some(t1), Some(t2)) => Some((t1, t2)),
            (None, None) => None,
            _ => return Err(format!("`{key}`: a LoHa with one Tucker core of two")),
        };
        return Ok(Factors::LoHa(Box::new(LoHa {
            w1: (w1a, w1b),
            w2: (w2a, w2b),
            tucker,
        })));
    }
    let mut kr = |full: &str, a: &str, b: &str| match (take(full), take(a), take(b)) {
        (Some(w), None, None) => Some(KrFactor::Full(w)),
        (None, Some(a), Some(b)) => Some(KrFactor::Decomposed(a, b)),
        _ => None,
    };
    let w1 = kr("lokr_w1", "lokr_w1_a", "lokr_w1_b");
    let w2 = kr("lokr_w2", "lokr_w2_a", "lokr_w2_b");
    if let (Some(w1), Some(w2)) = (w1, w2) {
        return Ok(Factors::LoKr { w1, w2 });
    }
    Err(format!(
        "`{key}` has no complete set of LoRA, LoHa or LoKr factors"
    ))
}

impl LoraFile {
    /// Reads a LoRA file's adapters (a pickle is vetted first; nothing in it is executed).
    pub fn open(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::invalid_model(path, format!("LoRA: {message}"));
        let file = TensorFile::open(path)?;
        for t in &file.tensors {
            if let Some((_, what)) = UNMERGED_PARTS.iter().find(|(s, _)| t.name.ends_with(s)) {
                return Err(bad(format!(
                    "`{}` is {what}, which Ember does not merge yet",
                    t.name
                )));
            }
        }
        if let Some(t) = file
            .tensors
            .iter()
            .find(|t| t.name.ends_with(".diff") || t.name.contains("oft_"))
        {
            return Err(bad(format!(
                "`{}` belongs to a full-difference or OFT adapter, which Ember does not merge",
                t.name
            )));
        }
        let mut modules: BTreeMap<(Network, ModuleName, String), (Parts, Option<f32>)> =
            BTreeMap::new();
        let mut unknown = Vec::new();
        for tensor in file.tensors {
            let Some((network, module, part, key)) = classify(&tensor.name) else {
                unknown.push(tensor.name.clone());
                continue;
            };
            let entry = modules.entry((network, module, key)).or_default();
            if part == "alpha" {
                let data = burn::store::bridge::to_data(&tensor)
                    .map_err(|e| bad(format!("`{}` cannot be read ({e})", tensor.name)))?;
                let values = data
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .map_err(|e| bad(format!("`{}`: {e:?}", tensor.name)))?;
                match values.as_slice() {
                    [alpha] if alpha.is_finite() => entry.1 = Some(*alpha),
                    _ => return Err(bad(format!("`{}` is not one number", tensor.name))),
                }
            } else {
                check_finite(&tensor).map_err(bad)?;
                entry.0.insert(part, tensor);
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
        for ((network, module, key), (mut parts, alpha)) in modules {
            let dora_scale = parts.remove("dora");
            let factors = factors(&key, parts).map_err(bad)?;
            super::shapes::check(&factors).map_err(|e| bad(format!("`{key}`: {e}")))?;
            adapters.push(Adapter {
                network,
                module,
                key,
                factors,
                alpha,
                dora_scale,
            });
        }
        super::adapter_config::apply_adapter_config(path, &mut adapters)?;
        for adapter in &adapters {
            let scale = adapter.scale();
            if scale == 0.0 || !scale.is_finite() || scale.abs() > MAX_SCALE {
                return Err(bad(format!(
                    "`{}` has alpha {} for rank {}: a scale of {scale} (alpha / rank) {}; the \
                     file is damaged or was saved wrongly",
                    adapter.key,
                    adapter.alpha.unwrap_or(f32::NAN),
                    adapter.dim().unwrap_or(0),
                    if scale == 0.0 {
                        "would change nothing"
                    } else {
                        "is far outside what training gives (usually 1 or less)"
                    }
                )));
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            adapters,
            unread: unknown,
        })
    }
}

/// The largest `alpha / rank` a LoRA may have: trainers give 1 or less, a few 16 or 32.
const MAX_SCALE: f32 = 1000.0;

/// Why a factor cannot be merged, if it has a NaN or an infinity.
fn check_finite(tensor: &PackTensor) -> std::result::Result<(), String> {
    let data = burn::store::bridge::to_data(tensor)
        .map_err(|e| format!("`{}` cannot be read ({e})", tensor.name))?;
    let values = data
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| format!("`{}` is not a float tensor ({e:?})", tensor.name))?;
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(format!(
            "`{}` holds {} at index {i}: the file is damaged",
            tensor.name, values[i]
        )),
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
