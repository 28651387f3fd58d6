//! A loaded model: its text encoders with their tokenizers, the UNet, the VAE, what loading
//! found, and the plain [`ModelCapabilities`] the API validates requests against.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Device, Tensor, TensorData};

use crate::api::{ModelCapabilities, SamplerChoice};
use crate::device::Precision;
use crate::family::{EncoderSpec, Family, FamilySpec};
use crate::models::clip::ClipTextModel;
use crate::models::unet::{UNet, UNetConfig};
use crate::models::vae::{Vae, VaeConfig};
use crate::schedule::diffusers::{Prediction, SchedulerConfig};
use crate::text::ClipTokenizer;
use crate::weights::detect::Detected;
use crate::weights::{ComponentReport, FileFormat};

/// How a model's files are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A diffusers folder (`model_index.json`, `unet/`, `vae/`, ...).
    DiffusersFolder(FileFormat),
    /// One A1111 / civitai checkpoint file.
    SingleFile(FileFormat),
}

/// What loading found besides the weights themselves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    pub components: Vec<ComponentReport>,
    /// Keys of known buffers no network needs (DDPM schedule, position ids, EMA copies).
    pub ignored: Vec<String>,
    /// Keys that belong to no component Ember knows.
    pub unknown: Vec<String>,
    /// Anything else worth telling the user.
    pub warnings: Vec<String>,
}

impl LoadReport {
    /// One line per thing worth telling the user (unused tensors, conversions, warnings).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = self.warnings.clone();
        for c in &self.components {
            if !c.unused.is_empty() {
                notes.push(format!(
                    "{}: {} tensor(s) in the file are not used, e.g. {}",
                    c.component,
                    c.unused.len(),
                    c.unused
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for (dtype, count) in &c.converted_from {
                notes.push(format!(
                    "{}: {count} tensor(s) stored as {dtype} were converted on load",
                    c.component
                ));
            }
        }
        if !self.unknown.is_empty() {
            notes.push(format!(
                "{} tensor(s) belong to no known component and were not loaded, e.g. {}",
                self.unknown.len(),
                self.unknown
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        notes
    }
}

/// Plain-data description of a loaded model (safe to send to the UI).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    pub path: PathBuf,
    /// The name A1111 writes in metadata (file stem or folder name).
    pub name: String,
    pub layout: Layout,
    pub detected: Detected,
    pub tensor_count: usize,
    pub report: LoadReport,
}

/// One text encoder with its tokenizer, and what its family does with it.
pub struct TextEncoder {
    pub spec: &'static EncoderSpec,
    pub tokenizer: ClipTokenizer,
    /// The network where it is now: on the model's device, or parked in the computer's
    /// memory while the UNet and VAE use a GPU short of memory ([`TextEncoder::park`]).
    resident: Mutex<Resident>,
}

struct Resident {
    network: ClipTextModel,
    parked: bool,
}

impl TextEncoder {
    pub fn new(
        spec: &'static EncoderSpec,
        tokenizer: ClipTokenizer,
        network: ClipTextModel,
    ) -> Self {
        TextEncoder {
            spec,
            tokenizer,
            resident: Mutex::new(Resident {
                network,
                parked: false,
            }),
        }
    }

    fn resident(&self) -> std::sync::MutexGuard<'_, Resident> {
        self.resident.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The network wherever it is now (a handle: the weights are shared, not copied).
    pub fn network(&self) -> ClipTextModel {
        self.resident().network.clone()
    }

    /// The network on `device` (the model's), brought back first if it was parked.
    pub fn network_on(&self, device: &Device) -> ClipTextModel {
        let mut resident = self.resident();
        resident.unpark(device);
        resident.network.clone()
    }

    /// The network to change in place (a LoRA merge), on `device`.
    pub fn network_mut(&mut self, device: &Device) -> &mut ClipTextModel {
        let resident = self
            .resident
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        resident.unpark(device);
        &mut resident.network
    }

    /// Moves the network to the computer's memory, freeing the GPU memory its weights held,
    /// until [`network_on`](Self::network_on) brings it back for the next prompt.
    pub fn park(&self) {
        let mut resident = self.resident();
        if !resident.parked {
            let device = resident.network.devices().first().cloned();
            resident.network = resident.network.clone().map(&mut CopyToHost);
            resident.parked = true;
            // Return the freed blocks to the driver, for the UNet's working memory.
            if let Some(device) = device {
                device.memory_cleanup();
            }
        }
    }

    /// Whether [`park`](Self::park) moved it to the computer's memory.
    pub fn is_parked(&self) -> bool {
        self.resident().parked
    }

    /// The largest CLIP skip this encoder allows: back to the first layer's output.
    pub fn max_clip_skip(&self) -> usize {
        self.resident().network.num_layers().max(2)
    }
}

/// Moves every weight to the computer's memory as a copy of its own. `to_device` onto the
/// CPU would keep, inside the CPU tensor, cubecl's lazy read of the GPU buffer, which holds
/// that buffer as long as the CPU tensor lives: parking then freed nothing (measured with
/// the stand-in driver: SDXL's text encoders stayed on an 8 GiB card, which then ran out).
struct CopyToHost;

impl ModuleMapper for CopyToHost {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| {
            let data = tensor.into_data();
            let dtype = data.dtype();
            let host =
                TensorData::from_bytes_vec(data.as_bytes().to_vec(), data.shape().clone(), dtype);
            drop(data);
            Tensor::from_data(host, (&Device::flex(), dtype))
        })
    }
}

impl Resident {
    fn unpark(&mut self, device: &Device) {
        if self.parked {
            // Made from host data again, so padded on CUDA like a freshly loaded weight.
            self.network = crate::weight_layout::unpadded(self.network.clone().to_device(device));
            self.parked = false;
        }
    }
}

/// Everything needed to generate images.
pub struct Model {
    pub info: ModelInfo,
    /// The family's text encoders, in [`FamilySpec::encoders`] order.
    pub encoders: Vec<TextEncoder>,
    pub unet: UNet,
    /// The UNet's architecture (memory estimates read it).
    pub unet_config: UNetConfig,
    pub vae: Vae,
    pub vae_config: VaeConfig,
    /// A diffusers folder's own scheduler (its default sampler).
    pub default_scheduler: Option<SchedulerConfig>,
    pub prediction: Prediction,
    /// An empty negative prompt is zero conditioning (`force_zeros_for_empty_prompt`).
    pub zero_empty_negative: bool,
    /// `(width, height)` in pixels the model was trained at.
    pub native_size: (u32, u32),
    pub device: Device,
    /// The float format the text encoders and the UNet compute in.
    pub precision: Precision,
    /// The VAE's: the same, or f32 ([`crate::weights::LoadOptions::vae_upcast`]).
    pub vae_precision: Precision,
    /// The files the UNet's and text encoders' weights were read from (none for pickles):
    /// taking a LoRA out reads the weights it changed from there again.
    pub sources: crate::weights::WeightSources,
    /// LoRAs merged into the weights, and the weights they replaced.
    pub lora: crate::lora::LoraState,
    /// The ControlNets requests use, loaded once, by folder.
    pub controlnets: Vec<(std::path::PathBuf, crate::models::controlnet::ControlNet)>,
    /// The VAE in f32, made the first time the half-precision one overflowed (A1111's
    /// automatic "no half VAE") and used from then on.
    pub vae_f32: std::sync::OnceLock<crate::models::vae::Vae>,
    /// The UNet in f32, made the first time the half-precision one overflowed and used from
    /// then on (dropped when LoRAs change the weights it was copied from).
    pub unet_f32: std::sync::OnceLock<UNet>,
    /// The model's own VAE while a request's other VAE is in its place.
    pub swapped_vae: crate::external_vae::Swapped,
}

impl Model {
    /// `t` in the networks' float format (a no-op in f32).
    pub fn to_network<const D: usize>(&self, t: Tensor<D>) -> Tensor<D> {
        match self.precision {
            Precision::F32 => t,
            p => t.cast(p.dtype()),
        }
    }

    /// `t` back in f32 for sampler maths and output.
    pub fn to_f32<const D: usize>(&self, t: Tensor<D>) -> Tensor<D> {
        match self.precision {
            Precision::F32 => t,
            _ => t.cast(burn::tensor::DType::F32),
        }
    }

    /// Pixels per latent cell (8 for real models).
    pub fn vae_factor(&self) -> usize {
        self.vae_config.factor()
    }

    /// The model's own sampler: a diffusers folder's scheduler, else A1111's default.
    pub fn default_sampler(&self) -> SamplerChoice {
        self.default_scheduler
            .clone()
            .map(SamplerChoice::Diffusers)
            .unwrap_or_else(SamplerChoice::a1111_default)
    }

    /// Whether the UNet takes the 9-channel inpainting input.
    pub fn is_inpainting(&self) -> bool {
        self.info.detected.inpainting
    }

    pub fn family(&self) -> Family {
        self.info.detected.family
    }

    /// The family's description.
    pub fn spec(&self) -> &'static FamilySpec {
        self.family().spec()
    }

    /// The largest CLIP skip every encoder allows.
    pub fn max_clip_skip(&self) -> usize {
        self.encoders
            .iter()
            .map(TextEncoder::max_clip_skip)
            .min()
            .unwrap_or(1)
    }

    /// What requests may ask of this model, as plain data.
    pub fn capabilities(&self) -> ModelCapabilities {
        let levels = self.unet.down_blocks.len();
        ModelCapabilities {
            family: self.family(),
            inpainting: self.is_inpainting(),
            prediction: self.prediction,
            zero_terminal_snr: self.info.detected.zero_terminal_snr,
            native_size: self.native_size,
            min_side: ((self.vae_factor() << (levels - 1)).max(8)) as u32,
            max_clip_skip: self.max_clip_skip() as u32,
            default_sampler: self.default_sampler(),
            vae_factor: self.vae_factor() as u32,
        }
    }

    /// A request with A1111's defaults for this model (see [`crate::api::GenerateRequest::new`]).
    pub fn request(&self, prompt: &str, seed: u64) -> crate::api::GenerateRequest {
        crate::api::GenerateRequest::new(&self.capabilities(), prompt, seed)
    }
}
