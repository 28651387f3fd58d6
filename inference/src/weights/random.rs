//! A model of a family's released architecture with random weights, written to a
//! `.safetensors` file in f16 (as checkpoints are shared) and loaded from it as a checkpoint
//! is: what `ember bench lora` measures merging on, so that taking a LoRA out reads the
//! weights from a file as it does for a user's model. Nothing is downloaded.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::{BurnToPyTorchAdapter, ModuleSnapshot};
use safetensors::{Dtype, View};

use super::apply::NamedTensor;
use super::configs::Configs;
use super::detect::Detected;
use super::loader::{LoadOptions, Networks, Sources, Stages};
use super::source::{FileFormat, TensorFile};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::model::{Layout, Model, ModelInfo};
use crate::text::ClipTokenizer;

/// Builds the model in `dir` (its file is deleted once open: the model reads it through
/// its open handle, and the space is freed when the model goes).
pub fn random_model(family: Family, options: &LoadOptions, dir: &Path) -> Result<Model> {
    let configs = Configs::preset(family, 4);
    // Each network's parameters by PyTorch name and shape, prefixed with the network's
    // index (encoders, then UNet, then VAE). Collecting them initialises every parameter
    // (in f32), so it is done on the CPU, one network at a time, never on the device the
    // model is for: SDXL's UNet alone is 10 GB there, more than the GPUs it is measured on.
    let device = &burn::tensor::Device::flex();
    let mut shapes = Vec::new();
    let mut add = |index: usize, module: &dyn Fn() -> Vec<(String, Vec<usize>)>| {
        shapes.extend(
            module()
                .into_iter()
                .map(|(n, s)| (format!("{index}/{n}"), s)),
        );
    };
    for (i, config) in configs.encoders.iter().enumerate() {
        add(i, &|| names(&config.init(device)));
    }
    let unet_index = configs.encoders.len();
    add(unet_index, &|| names(&configs.unet.init(device)));
    add(unet_index + 1, &|| names(&configs.vae.init(device)));

    let path = dir.join(format!(
        "ember-random-{}-{}.safetensors",
        family.spec().label.replace(' ', "-"),
        std::process::id()
    ));
    let views = shapes
        .into_iter()
        .enumerate()
        .map(|(seed, (name, shape))| (name, RandomF16 { shape, seed }));
    safetensors::serialize_to_file(views, None, &path)
        .map_err(|e| Error::settings(format!("writing {}: {e}", path.display())))?;
    let file = TensorFile::open(&path);
    let _ = std::fs::remove_file(&path);
    let file = file?;
    let tensor_count = file.tensors.len();

    let mut tensors: Vec<Vec<NamedTensor>> = (0..unet_index + 2).map(|_| Vec::new()).collect();
    for mut tensor in file.tensors {
        let key = tensor.name.clone();
        let (index, name) = key
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.to_string())))
            .ok_or_else(|| Error::settings(format!("random model: stray tensor {key}")))?;
        tensor.name = name;
        tensors[index].push(NamedTensor {
            tensor,
            file_key: key,
        });
    }
    let vae = tensors.pop().unwrap_or_default();
    let unet = tensors.pop().unwrap_or_default();
    let sources = Sources {
        encoders: tensors.into_iter().map(|t| (t, path.as_path())).collect(),
        unet: (unet, &path),
        vae: (vae, &path),
        from_preset: true,
        file_names: None,
        rereadable: true,
    };
    let mut progress = |_, _| std::ops::ControlFlow::Continue(());
    let networks = Networks::load(&configs, sources, options, &mut Stages::new(&mut progress))?;
    let tokenizers = family
        .spec()
        .encoders
        .iter()
        .map(|e| ClipTokenizer::bundled(e.pad))
        .collect::<Result<Vec<_>>>()?;
    let info = ModelInfo {
        path: PathBuf::from("(random weights)"),
        name: format!("random {}", family.spec().label),
        layout: Layout::SingleFile(FileFormat::Safetensors),
        detected: Detected::plain(family, 4),
        tensor_count,
        report: Default::default(),
    };
    Ok(networks.into_model(configs, info, tokenizers, None, false, options))
}

/// A module's float parameters as a checkpoint names and shapes them.
fn names<M: Module>(module: &M) -> Vec<(String, Vec<usize>)> {
    module
        .collect(None, Some(Box::new(BurnToPyTorchAdapter)), true)
        .into_iter()
        .map(|t| (t.name.clone(), t.shape.as_slice().to_vec()))
        .collect()
}

/// A tensor of small pseudo-random f16 values, made when the writer asks for its bytes.
struct RandomF16 {
    shape: Vec<usize>,
    seed: usize,
}

impl View for RandomF16 {
    fn dtype(&self) -> Dtype {
        Dtype::F16
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (self.seed as u64).wrapping_mul(0x2545_F491);
        let n: usize = self.shape.iter().product();
        let values: Vec<u8> = (0..n)
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let v = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                half::f16::from_f32(v * 0.1).to_le_bytes()
            })
            .collect();
        Cow::Owned(values)
    }

    fn data_len(&self) -> usize {
        self.shape.iter().product::<usize>() * 2
    }
}
