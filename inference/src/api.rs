//! The engine's plain-data API: what to generate, what comes back, and progress.
//!
//! **API boundary:** nothing here names a tensor, so the app and the worker protocol can
//! pass these values around freely. Requests are validated in one place
//! ([`GenerateRequest::validate`]) with messages that say what to change.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::family::Family;
use crate::imaging::{ImageGray8, ImageRgb8};
use crate::schedule::diffusers::{Prediction, SchedulerConfig};
use crate::schedule::named::{SamplerName, ScheduleName};

mod checks;
mod choices;
mod hires;
mod noise;
mod seamless;
mod vae_tiling;

pub use crate::external_vae::VaeChoice;
pub use choices::{MaskedContent, SdeNoise};
pub use hires::{
    DEFAULT_HIRES_STRENGTH, HiresFix, HiresPlan, HiresSize, HiresUpscaler, MAX_HIRES_SCALE,
};
pub use noise::{NoiseOptions, RngSource, Variation, parse_resize_from};
pub use seamless::Seamless;
pub use vae_tiling::VaeTiling;

/// What a loaded model can do, as plain data: what requests are validated against, and what
/// front ends show (family, sizes, which prompts apply).
#[derive(Clone, Debug)]
pub struct ModelCapabilities {
    pub family: Family,
    /// A 9-channel inpainting UNet.
    pub inpainting: bool,
    pub prediction: Prediction,
    pub zero_terminal_snr: bool,
    /// `(width, height)` the model was trained at.
    pub native_size: (u32, u32),
    /// The smallest side it generates (one latent cell at its lowest resolution).
    pub min_side: u32,
    pub max_clip_skip: u32,
    /// A diffusers folder's own scheduler, else A1111's default sampler.
    pub default_sampler: SamplerChoice,
    /// Pixels per latent cell (8 for every released VAE).
    pub vae_factor: u32,
}

impl ModelCapabilities {
    /// Whether the model reads a second prompt (SDXL's bigG encoder).
    pub fn second_prompt(&self) -> bool {
        self.family.spec().has_second_prompt()
    }

    /// Whether the model takes aesthetic scores (the SDXL refiner).
    pub fn aesthetic_score(&self) -> bool {
        self.family.spec().takes_aesthetic_score()
    }

    /// Whether the model takes SDXL size conditioning.
    pub fn size_conditioning(&self) -> bool {
        self.family.spec().time_ids.is_some()
    }

    /// The family as users read it: `SDXL`, `SD 2.x v-prediction`, `SD 1.x inpainting`.
    pub fn label(&self) -> String {
        let mut label = self.family.to_string();
        if self.inpainting {
            label.push_str(" inpainting");
        }
        if self.prediction == Prediction::V {
            label.push_str(" v-prediction");
        }
        if self.zero_terminal_snr {
            label.push_str(" (zero terminal SNR)");
        }
        label
    }
}

/// SDXL's size conditioning (diffusers' `original_size`, `crops_coords_top_left`,
/// `target_size`); sizes are `(width, height)` in pixels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SizeConditioning {
    /// `None`: the generation size.
    pub original: Option<(u32, u32)>,
    /// The crop's top-left corner `(x, y)`.
    pub crop: (u32, u32),
    /// `None`: the generation size.
    pub target: Option<(u32, u32)>,
}

impl SizeConditioning {
    /// Whether anything differs from the defaults.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Aesthetic scores the SDXL refiner is conditioned on by default (diffusers', A1111's).
pub const DEFAULT_AESTHETIC_SCORE: f32 = 6.0;
pub const DEFAULT_NEGATIVE_AESTHETIC_SCORE: f32 = 2.5;

/// Which sampler and noise schedule to run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum SamplerChoice {
    /// ComfyUI's names (`dpmpp_2m` + `karras`), with ComfyUI's schedules.
    Named {
        sampler: SamplerName,
        schedule: ScheduleName,
    },
    /// A diffusers `scheduler_config.json`, reproduced as diffusers runs it.
    Diffusers(SchedulerConfig),
}

impl SamplerChoice {
    /// What A1111 users get by default: DPM++ 2M with the Karras schedule.
    pub fn a1111_default() -> Self {
        SamplerChoice::Named {
            sampler: SamplerName::DpmPp2M,
            schedule: ScheduleName::Karras,
        }
    }
}

/// Largest image side Ember generates.
pub const MAX_SIDE: u32 = 4096;
/// Largest number of steps.
pub const MAX_STEPS: u32 = 1000;
/// Longest schedule exact img2img steps may take theirs from (`steps / strength`).
pub const MAX_SCHEDULE_STEPS: u32 = 10_000;
/// Largest batch.
pub const MAX_BATCH: u32 = 64;
/// Largest guidance scale.
pub const MAX_CFG: f32 = 100.0;

/// One generation: text-to-image, or image-to-image / inpainting when an init image is set.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct GenerateRequest {
    pub prompt: String,
    pub negative_prompt: String,
    pub width: u32,
    pub height: u32,
    pub steps: u32,
    /// Classifier-free guidance scale; guidance is off at 1 or below.
    pub cfg_scale: f32,
    /// The seed of the generator all noise of the first image comes from.
    pub seed: u64,
    /// Images to make at once; image `i` uses seed `seed + i` with its own generator, so
    /// each is the image a batch-1 run with that seed makes (A1111's convention). With a
    /// variation every image has `seed`, and image `i` the variation seed + `i`
    /// ([`GenerateRequest::image_seed`]).
    pub batch: u32,
    /// The noise source and A1111's seed extras (variation seed, resize seed from, ENSD).
    #[serde(default)]
    pub noise: NoiseOptions,
    pub sampler: SamplerChoice,
    /// Ancestral / DDIM noise amount; `None` = the sampler's default.
    pub eta: Option<f32>,
    /// A1111 numbering: 1 = the last text-encoder layer, 2 = the penultimate, ...
    pub clip_skip: u32,
    /// How prompt weights (`(word:1.2)`) act; `Off` reads brackets as text.
    pub emphasis: crate::text::emphasis::Emphasis,
    /// Folders of textual-inversion embeddings: a prompt word equal to a file's stem becomes
    /// its vectors (the first folder wins for a repeated name).
    #[serde(with = "crate::path_json::many")]
    pub embedding_dirs: Vec<PathBuf>,
    /// LoRAs to merge besides the prompt's `<lora:name:w>` tags.
    pub loras: Vec<crate::lora::LoraSpec>,
    /// Folders the prompt's LoRA tags are looked up in, by file stem.
    #[serde(with = "crate::path_json::many")]
    pub lora_dirs: Vec<PathBuf>,
    /// ControlNets guiding the generation, each with its control map.
    pub controlnets: Vec<ControlRequest>,
    /// img2img / inpainting source, already at the generation size.
    pub init_image: Option<ImageRgb8>,
    /// How much of the schedule runs on the init image (1 = all of it).
    pub strength: f32,
    /// Inpainting mask at the generation size (white = repaint).
    pub mask: Option<ImageGray8>,
    /// What the masked area starts from (inpainting only).
    pub masked_content: MaskedContent,
    /// Where the DPM++ SDE samplers' noise comes from.
    pub sde_noise: SdeNoise,
    /// The second text encoder's prompts (SDXL's bigG); `None`: the first ones.
    pub prompt_2: Option<String>,
    pub negative_prompt_2: Option<String>,
    /// SDXL size conditioning.
    pub size_conditioning: SizeConditioning,
    /// SDXL refiner aesthetic scores; `None`: [`DEFAULT_AESTHETIC_SCORE`] and
    /// [`DEFAULT_NEGATIVE_AESTHETIC_SCORE`].
    pub aesthetic_score: Option<f32>,
    pub negative_aesthetic_score: Option<f32>,
    /// diffusers' `guidance_rescale` (A1111's and ComfyUI's CFG rescale φ): 0 = off.
    pub cfg_rescale: f32,
    /// With a refiner: the fraction of the schedule the base model runs before the refiner
    /// takes over (diffusers' `denoising_end` / `denoising_start`); `None` = no refiner.
    pub refiner_switch: Option<f32>,
    /// img2img from latents instead of an image (the latent hires-fix pass): no VAE encode.
    pub init_latents: Option<InitLatents>,
    /// With an init image or latents, run exactly `steps` steps (the last `steps` of a
    /// `steps / strength` schedule; A1111's "do exactly the amount of steps the slider
    /// specifies", and its hires pass) instead of diffusers' `int(steps * strength)`.
    pub exact_steps: bool,
    /// A1111's hires fix: a second, img2img pass at a larger size.
    pub hires: Option<HiresFix>,
    /// Whether the VAE runs in tiles.
    pub vae_tiling: VaeTiling,
    /// Which edges of the image meet (A1111's "Tiling").
    #[serde(default)]
    pub seamless: Seamless,
    /// `Key: value` fields the front end adds to the image's metadata, before `Version`
    /// (the dynamic prompts' `Template`).
    #[serde(default)]
    pub metadata_fields: Vec<(String, String)>,
    /// How live previews are drawn (not part of the image).
    #[serde(default)]
    pub preview: crate::preview::PreviewOptions,
    /// The VAE that decodes and encodes its images (A1111's "SD VAE").
    #[serde(default)]
    pub vae: VaeChoice,
    /// The model it is for (an X/Y/Z plot's Checkpoint name axis): the front end loads it
    /// first, and the engine refuses to run it on another. `None` = the model loaded.
    #[serde(default)]
    pub checkpoint: Option<PinnedModel>,
}

/// A model a request is for, as a load names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PinnedModel {
    #[serde(with = "crate::path_json")]
    pub path: PathBuf,
    /// The config folder of a checkpoint of non-standard size.
    #[serde(default, with = "crate::path_json::optional")]
    pub config_dir: Option<PathBuf>,
}

/// Latents to start img2img from, `[1, channels, height / f, width / f]`, already scaled by
/// the VAE's scaling factor (as the sampler holds clean latents).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InitLatents {
    pub shape: [usize; 4],
    pub values: Vec<f32>,
}

impl Default for GenerateRequest {
    /// A1111's defaults at 512x512 with seed 0; prefer [`GenerateRequest::new`], which
    /// takes the size and sampler from the model.
    fn default() -> Self {
        Self {
            prompt: String::new(),
            negative_prompt: String::new(),
            width: 512,
            height: 512,
            steps: 20,
            cfg_scale: 7.0,
            seed: 0,
            batch: 1,
            noise: NoiseOptions::default(),
            sampler: SamplerChoice::a1111_default(),
            eta: None,
            clip_skip: 1,
            init_image: None,
            strength: 1.0,
            mask: None,
            masked_content: MaskedContent::Original,
            sde_noise: SdeNoise::BrownianTree,
            emphasis: Default::default(),
            embedding_dirs: Vec::new(),
            loras: Vec::new(),
            lora_dirs: Vec::new(),
            controlnets: Vec::new(),
            prompt_2: None,
            negative_prompt_2: None,
            size_conditioning: SizeConditioning::default(),
            aesthetic_score: None,
            negative_aesthetic_score: None,
            cfg_rescale: 0.0,
            refiner_switch: None,
            init_latents: None,
            exact_steps: false,
            hires: None,
            vae_tiling: VaeTiling::Auto,
            seamless: Seamless::Off,
            metadata_fields: Vec::new(),
            preview: Default::default(),
            vae: VaeChoice::Automatic,
            checkpoint: None,
        }
    }
}

/// Where a generation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    EncodingPrompt,
    EncodingImage,
    Denoising,
    Decoding,
    /// An upscaler's tiles (`step` of `total`).
    Upscaling,
}

/// A progress report: `step` of `total` sampler steps done (only while denoising).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub stage: Stage,
    pub step: usize,
    pub total: usize,
    pub elapsed: Duration,
}

pub use crate::control::ControlRequest;

/// What a generation produced.
#[derive(Clone, Debug)]
pub struct Generation {
    pub images: Vec<ImageRgb8>,
    /// The latents the VAE decoded, `[batch, 4, h / f, w / f]` row-major.
    pub latents: Vec<f32>,
    pub latent_shape: [usize; 4],
    /// Things worth telling the user (prompt truncated, ...).
    pub warnings: Vec<String>,
    /// The sampler as run, e.g. `dpmpp_2m karras`.
    pub sampler_label: String,
    /// Textual-inversion embeddings the prompts used: name and A1111 short hash.
    pub embeddings: Vec<(String, String)>,
    /// The prompt and negative prompt had different chunk counts and were padded to one.
    pub padded_conds: bool,
    /// The LoRAs merged for it: name (file stem) and A1111 short hash, for `Lora hashes`.
    /// Filled by whoever merged them (the engine, `ember generate`).
    pub loras: Vec<(String, String)>,
    /// The VAE used when not the model's own: name and A1111 short hash (none for a
    /// folder), for `VAE` and `VAE hash`. Filled by whoever put it in.
    pub vae: Option<(String, Option<String>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn black_8x8() -> crate::imaging::ImageRgb8 {
        crate::imaging::ImageRgb8 {
            width: 8,
            height: 8,
            pixels: vec![0; 8 * 8 * 3],
        }
    }

    #[test]
    fn img2img_steps_follow_the_strength_as_written() {
        let image = black_8x8();
        let mut r = GenerateRequest {
            init_image: Some(image),
            steps: 10,
            ..GenerateRequest::default()
        };
        // `0.9f32 as f64` is 0.8999999761...: diffusers' `int(10 * 0.9)` is 9.
        for (strength, steps) in [
            (0.9, 9),
            (0.6, 6),
            (0.75, 7),
            (0.3, 3),
            (1.0, 10),
            (0.05, 0),
        ] {
            r.strength = strength;
            assert_eq!(r.effective_steps(), steps, "strength {strength}");
        }
        // A1111's exact steps (its hires pass): all `steps` run, the last of a schedule of
        // `int(steps / min(strength, 0.999))`: 20 / 0.55 = 36.36 -> 36.
        r.exact_steps = true;
        r.steps = 20;
        for (strength, schedule) in [(0.55, 36), (0.7, 28), (1.0, 20), (0.5, 40)] {
            r.strength = strength;
            assert_eq!(r.schedule_steps(), schedule, "strength {strength}");
            assert_eq!(r.effective_steps(), 20);
        }
        // Without an init image the flag changes nothing.
        r.init_image = None;
        assert_eq!((r.schedule_steps(), r.effective_steps()), (20, 20));
    }

    /// Exact steps past the training table's length would repeat `simple`'s entries (a
    /// step of zero size: NaN in DPM++); other schedules compute their sigmas and take them.
    #[test]
    fn the_simple_schedule_takes_no_more_steps_than_the_training_table() {
        let image = black_8x8();
        let request = |schedule, strength| GenerateRequest {
            init_image: Some(image.clone()),
            width: 8,
            height: 8,
            steps: 20,
            strength,
            exact_steps: true,
            sampler: SamplerChoice::Named {
                sampler: SamplerName::DpmPp2M,
                schedule,
            },
            ..GenerateRequest::default()
        };
        let e = request(ScheduleName::Simple, 0.01)
            .validate_settings()
            .unwrap_err()
            .to_string();
        assert!(e.contains("Simple schedule") && e.contains("2000"), "{e}");
        request(ScheduleName::Simple, 0.5)
            .validate_settings()
            .unwrap();
        request(ScheduleName::Karras, 0.01)
            .validate_settings()
            .unwrap();
    }
}
