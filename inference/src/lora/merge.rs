//! Merging LoRA adapters into a loaded model and taking them out again. A1111's rule, per
//! module: `W' = W + strength * (alpha / rank) * up @ down`, computed in f32 and cast to the
//! model's precision. Taking LoRAs out gives the loaded weights back bit for bit, never by
//! subtracting: a weight loaded from a `.safetensors` file is merged in place and read
//! from the file again ([`crate::weights::WeightSources`]); any other is kept as loaded
//! and put back. A new set of LoRAs (or none) starts from the loaded weights.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::module::Module;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{BurnToPyTorchAdapter, ModuleSnapshot, PathFilter, bridge};
use burn::tensor::Tensor;

use super::delta::{Destination, merge_weight};
use super::file::{Adapter, LoraFile, Network};
use super::matching::{Matched, match_adapters};
use super::refill::{refill_weight, refillable};
use super::unmerge::{map_network, take_out};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::weights::WeightSources;
use crate::weights::keymap::diffusers_to_module;

/// One LoRA to merge, with A1111's two strengths (`<lora:name:te:unet>`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraSpec {
    #[serde(with = "crate::path_json")]
    pub path: PathBuf,
    pub text_encoder: f32,
    pub unet: f32,
}

/// What a model holds of merged LoRAs.
#[derive(Default)]
pub struct LoraState {
    /// Every weight a merge changed, by network and module path.
    pub(super) touched: BTreeSet<(Network, String)>,
    /// Those of them with no file to read them from again: the very tensors loaded,
    /// flattened (Burn's layout, the model's dtype), put back as they are.
    pub(super) originals: HashMap<(Network, String), Tensor<1>>,
    /// What is merged now.
    pub(super) applied: Vec<LoraSpec>,
    /// Taking LoRAs out failed (the checkpoint changed on disk): the weights are neither
    /// the loaded ones nor a merge, and every later merge tries again (and says so).
    pub(super) unrestored: bool,
    /// Short hashes already computed, by file, with the file's size and modification time
    /// (a LoRA is hundreds of MiB: hashing it for every image would read it every time).
    hashes: HashMap<PathBuf, (Stamp, String)>,
    /// The merged LoRA files as opened and checked (every factor read once for NaN), by
    /// path, with their size and modification time: a change of strength does not read
    /// and check them again. Their factors are read from the files when merged.
    opened: HashMap<PathBuf, (Stamp, Arc<LoraFile>)>,
}

/// A file's size and modification time.
type Stamp = (u64, Option<std::time::SystemTime>);

fn stamp(path: &Path) -> Result<Stamp> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok((meta.len(), meta.modified().ok()))
}

impl LoraState {
    /// A1111's short hash of `path`, computed once while the file stays the same.
    fn short_hash(&mut self, path: &Path) -> Result<String> {
        let stamp = stamp(path)?;
        if let Some((at, hash)) = self.hashes.get(path)
            && *at == stamp
        {
            return Ok(hash.clone());
        }
        let hash = super::file::short_hash(path)?;
        self.hashes
            .insert(path.to_path_buf(), (stamp, hash.clone()));
        Ok(hash)
    }

    /// The LoRA at `path` with its stamp before opening, opened again only when it changed
    /// since it was last opened.
    fn open(&self, path: &Path) -> Result<(Stamp, Arc<LoraFile>)> {
        let stamp = stamp(path)?;
        match self.opened.get(path) {
            Some((at, file)) if *at == stamp => Ok((stamp, Arc::clone(file))),
            _ => Ok((stamp, Arc::new(LoraFile::open(path)?))),
        }
    }
}

impl LoraState {
    /// The LoRAs merged now.
    pub fn applied(&self) -> &[LoraSpec] {
        &self.applied
    }
}

/// Runs `f` on the network's module, whichever type it is.
pub(super) fn with_network<R>(
    model: &mut Model,
    network: Network,
    f: &mut dyn FnMut(&mut dyn NetworkModule) -> R,
) -> R {
    match network {
        Network::Unet => f(&mut model.unet),
        Network::TextEncoder(i) => {
            let device = model.device.clone();
            f(model.encoders[i].network_mut(&device))
        }
    }
}

/// The snapshot operations merging needs, over the concrete network types.
pub(super) trait NetworkModule {
    /// Every float parameter path with its shape (PyTorch layout).
    fn shapes(&self) -> Vec<(String, Vec<usize>)>;
    /// The current value of `paths` (PyTorch layout).
    fn read(&self, paths: &[String]) -> Vec<PackTensor>;
}

impl<M: Module> NetworkModule for M {
    fn shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.collect(None, Some(Box::new(BurnToPyTorchAdapter)), true)
            .into_iter()
            .map(|t| (t.name.clone(), t.shape.as_slice().to_vec()))
            .collect()
    }

    fn read(&self, paths: &[String]) -> Vec<PackTensor> {
        let filter = PathFilter::new().with_full_paths(paths.iter().cloned());
        self.collect(Some(filter), Some(Box::new(BurnToPyTorchAdapter)), true)
    }
}

/// Merges `specs` into `model` (after taking out whatever was merged before); an empty list
/// restores the loaded weights. Returns report lines (partial matches).
pub fn set(model: &mut Model, specs: &[LoraSpec]) -> Result<Vec<String>> {
    if model.lora.applied == specs && !model.lora.unrestored {
        return Ok(Vec::new());
    }
    let opened: Vec<(Stamp, Arc<LoraFile>)> = specs
        .iter()
        .map(|spec| model.lora.open(&spec.path))
        .collect::<Result<_>>()?;
    let files: Vec<&LoraFile> = opened.iter().map(|(_, file)| &**file).collect();
    let Matched {
        networks,
        updates,
        report,
    } = match_adapters(model, specs, &files)?;

    // Weights merged before and merged again now are read from their file as they are
    // merged (one pass over memory instead of two); the rest of the previous merge is taken
    // out first. The previous merge's copies of weights without a file, taken out of the
    // model, are written over by this merge (when nothing else holds them).
    let refill = refillable(model, &updates);
    let mut reusable = take_out(model, &refill)?;
    if let Err(e) = merge(model, &networks, &updates, &refill, &mut reusable) {
        // A failed merge never leaves half-merged weights (if this fails too, its error,
        // which says to load the model again, is the one to tell).
        take_out(model, &BTreeSet::new())?;
        return Err(e);
    }
    model.lora.unrestored = false;
    model.lora.applied = specs.to_vec();
    let paths = specs.iter().map(|spec| spec.path.clone());
    model.lora.opened = paths.zip(opened).collect();
    Ok(report)
}

/// What each weight merges: `(strength, adapter)` lists by network and module path.
pub(super) type Updates<'a> = BTreeMap<(Network, String), Vec<(f32, &'a Adapter)>>;

/// Merges `updates` into the model's weights, recording each weight it changes (and a
/// copy of those without a file source) in `model.lora`. A weight with a file source is
/// merged into its own buffer; one in `refill` is first read from its file again, with
/// its first plain LoRA added in the same pass. On an error some weights may be merged and
/// one zeroed: the caller takes them out.
fn merge(
    model: &mut Model,
    networks: &[Network],
    updates: &Updates<'_>,
    refill: &BTreeSet<(Network, String)>,
    reusable: &mut HashMap<(Network, String), Tensor<1>>,
) -> Result<()> {
    // Read while the networks are borrowed to be mapped; put back before returning.
    let sources = std::mem::take(&mut model.sources);
    let merged = merge_with(model, &sources, networks, updates, refill, reusable);
    model.sources = sources;
    merged
}

fn merge_with(
    model: &mut Model,
    sources: &WeightSources,
    networks: &[Network],
    updates: &Updates<'_>,
    refill: &BTreeSet<(Network, String)>,
    reusable: &mut HashMap<(Network, String), Tensor<1>>,
) -> Result<()> {
    let dtype = model.precision.dtype();
    let device = model.device.clone();
    for &network in networks {
        let touched: HashMap<&str, &Vec<(f32, &Adapter)>> = updates
            .iter()
            .filter(|((n, _), _)| *n == network)
            .map(|((_, p), u)| (p.as_str(), u))
            .collect();
        if touched.is_empty() {
            continue;
        }
        let rereadable: BTreeSet<&str> = touched
            .keys()
            .copied()
            .filter(|path| sources.has(network, path))
            .collect();
        let mut failed = None;
        let mut changed = Vec::new();
        let mut kept = Vec::new();
        let wanted = |path: &str| touched.contains_key(path);
        map_network(model, network, &wanted, &mut |weight, w| {
            let (path, dims) = (weight.path, weight.dims);
            if failed.is_some() {
                return w;
            }
            changed.push(path.to_string());
            let mut updates = touched[path].as_slice();
            let w = if refill.contains(&(network, path.to_string())) {
                match refill_weight(sources, network, weight, w, &mut updates) {
                    (w, Ok(())) => w,
                    (w, Err(e)) => {
                        failed = Some(e);
                        return w;
                    }
                }
            } else {
                w
            };
            if updates.is_empty() {
                return w;
            }
            let destination = if rereadable.contains(path) {
                Destination::InPlace
            } else {
                kept.push((path.to_string(), w.clone()));
                Destination::Reuse(reusable.remove(&(network, path.to_string())).map(Box::new))
            };
            let n = w.dims()[0];
            match merge_weight(w, dims, updates, destination, &device) {
                Ok(t) => t.cast(dtype),
                Err(e) => {
                    failed = Some(e);
                    // Put back with the others by the caller.
                    Tensor::<1>::zeros([n], &device).cast(dtype)
                }
            }
        });
        let lora = &mut model.lora;
        let visited = changed.len();
        lora.touched
            .extend(changed.into_iter().map(|path| (network, path)));
        lora.originals
            .extend(kept.into_iter().map(|(path, w)| ((network, path), w)));
        if let Some(e) = failed {
            return Err(e);
        }
        if visited != touched.len() {
            return Err(Error::settings(format!(
                "merging LoRA: {} of the {} weights it changes were not found in the network",
                touched.len() - visited,
                touched.len()
            )));
        }
    }
    Ok(())
}

/// A weight as the model holds it now, in PyTorch layout and f32 (for checks and reports):
/// `network`'s parameter at the diffusers / transformers key `key`.
pub fn read_weight(model: &Model, network: Network, key: &str) -> Option<Vec<f32>> {
    let path = vec![diffusers_to_module(key)];
    let found = match network {
        Network::Unet => model.unet.read(&path),
        Network::TextEncoder(i) => model.encoders.get(i)?.network().read(&path),
    };
    let data = bridge::to_data(found.first()?).ok()?;
    data.convert::<f32>().try_into_vec::<f32>().ok()
}

/// The LoRAs merged for a request: `(name, short hash)` each, and warnings.
pub type Merged = (Vec<(String, String)>, Vec<String>);

/// Merges what `request` asks for (its explicit LoRAs and its prompt's `<lora:…>` tags
/// found in its LoRA folders) into `model`, or takes merged ones out. Returns the merged
/// LoRAs' names and short hashes (for `Lora hashes`) and warnings (tags naming no file,
/// partial matches).
pub fn set_for_request(model: &mut Model, request: &crate::api::GenerateRequest) -> Result<Merged> {
    let (specs, missing) =
        super::tags::resolve(&request.prompt, &request.loras, &request.lora_dirs)?;
    let mut warnings: Vec<String> = missing
        .iter()
        .map(|name| format!("no LoRA named {name:?} was found: the tag was left out"))
        .collect();
    warnings.extend(set(model, &specs)?);
    let mut names = Vec::with_capacity(specs.len());
    for spec in &specs {
        let name = spec
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        names.push((name, model.lora.short_hash(&spec.path)?));
    }
    Ok((names, warnings))
}
