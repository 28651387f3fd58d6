//! Model families as data: what each Stable Diffusion family's text encoders, extra UNet
//! conditioning, latents and defaults are.
//!
//! **Invariant:** the pipeline, the loaders and the API read a family through its
//! [`FamilySpec`]; nothing else matches on [`Family`] to decide how a model behaves. Adding a
//! family means adding one spec (and, for single files, its presets and detection keys).

use std::fmt;

use crate::models::clip::ClipConfig;
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;
use crate::text::PadToken;

/// A model family, by what its networks are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// SD 1.x: CLIP ViT-L/14 text encoder.
    Sd1,
    /// SD 2.x: OpenCLIP ViT-H/14 text encoder (epsilon 512 or v-prediction 768 models).
    Sd2,
    /// SDXL base (and its descendants): CLIP ViT-L and OpenCLIP bigG, size conditioning.
    Sdxl,
    /// The SDXL refiner: OpenCLIP bigG alone, aesthetic-score conditioning.
    SdxlRefiner,
}

impl Family {
    /// Every family, for tables and tests.
    pub const ALL: [Family; 4] = [Family::Sd1, Family::Sd2, Family::Sdxl, Family::SdxlRefiner];

    /// The family's description.
    pub fn spec(self) -> &'static FamilySpec {
        match self {
            Family::Sd1 => &SD1,
            Family::Sd2 => &SD2,
            Family::Sdxl => &SDXL,
            Family::SdxlRefiner => &SDXL_REFINER,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec().label)
    }
}

/// Which hidden state of a text encoder conditions the UNet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncoderOutput {
    /// The last layer's output after the final LayerNorm (SD 1.x, SD 2.x). CLIP skip `n`
    /// takes the output of layer `layers + 1 - n`, then the final LayerNorm (A1111, diffusers).
    FinalNormed,
    /// The penultimate layer's output, no LayerNorm (SDXL). CLIP skip `n` takes layer
    /// `-max(n, 2)` (Forge's rule; ComfyUI's `CLIPSetLastLayer(-n)` for `n >= 2`; diffusers'
    /// `clip_skip` is `n - 2`; A1111 ignores CLIP skip on SDXL by default).
    Penultimate,
}

/// How a single-file checkpoint stores a text encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncoderFileLayout {
    /// transformers' `CLIPTextModel` keys (`text_model.encoder.layers.N...`).
    Transformers,
    /// OpenCLIP's keys (`transformer.resblocks.N.attn.in_proj_weight`, `ln_final`, a
    /// transposed `text_projection`); resblocks past the model's layers are not used.
    OpenClip,
}

/// Which of a request's prompts an encoder reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptSlot {
    /// `prompt` / `negative_prompt`.
    First,
    /// `prompt_2` / `negative_prompt_2`, falling back to the first ones (SDXL's bigG).
    Second,
}

/// One text encoder of a family.
#[derive(Debug)]
pub struct EncoderSpec {
    /// diffusers folder names of the encoder and its tokenizer.
    pub folder: &'static str,
    pub tokenizer_folder: &'static str,
    /// The pad token of a single file's bundled tokenizer (folders bring their own).
    pub pad: PadToken,
    pub output: EncoderOutput,
    /// Whether it also gives the pooled, projected embedding (SDXL's `text_embeds`).
    pub pooled: bool,
    pub prompt: PromptSlot,
    /// Key prefix and layout in single-file checkpoints.
    pub file_prefix: &'static str,
    pub file_layout: EncoderFileLayout,
    /// The architecture of the released models (single files without `--config`).
    pub preset: fn() -> ClipConfig,
    /// Which tensor of an SDXL embedding file it reads (`clip_l`, `clip_g`); `""` for
    /// families whose embeddings are one tensor.
    pub embedding_key: &'static str,
}

/// The extra conditioning an SDXL UNet adds to its time embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeIds {
    /// `[orig_h, orig_w, crop_top, crop_left, target_h, target_w]` (SDXL base).
    SizeCropTarget,
    /// `[orig_h, orig_w, crop_top, crop_left, aesthetic_score]` (SDXL refiner).
    SizeCropAesthetic,
}

impl TimeIds {
    /// Values per row.
    pub fn count(self) -> usize {
        match self {
            TimeIds::SizeCropTarget => 6,
            TimeIds::SizeCropAesthetic => 5,
        }
    }
}

/// What a family is.
#[derive(Debug)]
pub struct FamilySpec {
    pub family: Family,
    /// Shown to users and written by `ember info` (`SDXL refiner`).
    pub label: &'static str,
    /// The text encoders, in the order their outputs are concatenated.
    pub encoders: &'static [EncoderSpec],
    /// `Some`: the UNet takes pooled text embeddings and these time ids.
    pub time_ids: Option<TimeIds>,
    pub latent_channels: usize,
    /// Latents are multiplied by this after encoding (single files without a config).
    pub vae_scaling: f32,
    /// An empty negative prompt is zero conditioning rather than the encoded empty text
    /// (diffusers' `force_zeros_for_empty_prompt` of the released folders).
    pub zero_empty_negative: bool,
    /// Whether it generates from noise; the refiner only continues or refines images.
    pub txt2img: bool,
    /// Latent channel -> RGB factors and bias for live previews (ComfyUI `latent_formats`).
    pub preview_factors: [[f32; 3]; 4],
    pub preview_bias: [f32; 3],
    /// Sizes (width, height) artists pick for this family, the released models' own first.
    pub size_presets: &'static [(u32, u32)],
    /// The UNet of the released models for `in_channels` input channels.
    pub unet_preset: fn(usize) -> UNetConfig,
}

impl FamilySpec {
    /// The VAE of the released models.
    pub fn vae_preset(&self) -> VaeConfig {
        VaeConfig {
            scaling_factor: self.vae_scaling,
            // The released folders' `sample_size`: their native size (512, 768, 1024).
            sample_size: self.size_presets[0].0 as usize,
            ..VaeConfig::sd()
        }
    }

    /// Whether requests may give a second prompt (a second encoder reads [`PromptSlot::Second`]).
    pub fn has_second_prompt(&self) -> bool {
        self.encoders.iter().any(|e| e.prompt == PromptSlot::Second)
    }

    /// Whether the UNet takes aesthetic scores (the refiner).
    pub fn takes_aesthetic_score(&self) -> bool {
        self.time_ids == Some(TimeIds::SizeCropAesthetic)
    }

    /// Whether latents of `other` can be handed to this family (same VAE latent space).
    pub fn shares_latents_with(&self, other: &FamilySpec) -> bool {
        let xl = |s: &FamilySpec| s.time_ids.is_some();
        xl(self) == xl(other) && self.latent_channels == other.latent_channels
    }
}

const SD_PREVIEW: [[f32; 3]; 4] = [
    [0.3512, 0.2297, 0.3227],
    [0.3250, 0.4974, 0.2350],
    [-0.2829, 0.1762, 0.2721],
    [-0.2120, -0.2616, -0.7177],
];
const SDXL_PREVIEW: [[f32; 3]; 4] = [
    [0.3651, 0.4232, 0.4341],
    [-0.2533, -0.0042, 0.1068],
    [0.1076, 0.1111, -0.0362],
    [-0.3165, -0.2492, -0.2188],
];
const SDXL_PREVIEW_BIAS: [f32; 3] = [0.1084, -0.0175, -0.0011];

/// The SDXL training buckets artists use (Stability's list; A1111 and Fooocus offer them).
const SDXL_SIZES: [(u32, u32); 9] = [
    (1024, 1024),
    (1152, 896),
    (896, 1152),
    (1216, 832),
    (832, 1216),
    (1344, 768),
    (768, 1344),
    (1536, 640),
    (640, 1536),
];

const CLIP_L: EncoderSpec = EncoderSpec {
    folder: "text_encoder",
    tokenizer_folder: "tokenizer",
    pad: PadToken::EndOfText,
    output: EncoderOutput::FinalNormed,
    pooled: false,
    prompt: PromptSlot::First,
    file_prefix: "cond_stage_model.transformer.",
    file_layout: EncoderFileLayout::Transformers,
    preset: ClipConfig::vit_l14,
    embedding_key: "",
};

const BIG_G: EncoderSpec = EncoderSpec {
    folder: "text_encoder_2",
    tokenizer_folder: "tokenizer_2",
    pad: PadToken::Exclamation,
    output: EncoderOutput::Penultimate,
    pooled: true,
    prompt: PromptSlot::Second,
    file_prefix: "conditioner.embedders.1.model.",
    file_layout: EncoderFileLayout::OpenClip,
    preset: ClipConfig::open_clip_big_g,
    embedding_key: "clip_g",
};

static SD1: FamilySpec = FamilySpec {
    family: Family::Sd1,
    label: "SD 1.x",
    encoders: &[CLIP_L],
    time_ids: None,
    latent_channels: 4,
    vae_scaling: 0.18215,
    zero_empty_negative: false,
    txt2img: true,
    preview_factors: SD_PREVIEW,
    preview_bias: [0.0; 3],
    size_presets: &[(512, 512), (512, 768), (768, 512), (640, 640), (768, 768)],
    unet_preset: UNetConfig::sd15,
};

static SD2: FamilySpec = FamilySpec {
    family: Family::Sd2,
    label: "SD 2.x",
    encoders: &[EncoderSpec {
        pad: PadToken::Exclamation,
        file_prefix: "cond_stage_model.model.",
        file_layout: EncoderFileLayout::OpenClip,
        preset: ClipConfig::open_clip_vit_h14_sd2,
        ..CLIP_L
    }],
    size_presets: &[(768, 768), (512, 512), (640, 896), (896, 640), (1024, 1024)],
    unet_preset: UNetConfig::sd2,
    ..SD1
};

static SDXL: FamilySpec = FamilySpec {
    family: Family::Sdxl,
    label: "SDXL",
    encoders: &[
        EncoderSpec {
            output: EncoderOutput::Penultimate,
            file_prefix: "conditioner.embedders.0.transformer.",
            embedding_key: "clip_l",
            ..CLIP_L
        },
        BIG_G,
    ],
    time_ids: Some(TimeIds::SizeCropTarget),
    latent_channels: 4,
    vae_scaling: 0.13025,
    zero_empty_negative: true,
    txt2img: true,
    preview_factors: SDXL_PREVIEW,
    preview_bias: SDXL_PREVIEW_BIAS,
    size_presets: &SDXL_SIZES,
    unet_preset: UNetConfig::sdxl,
};

static SDXL_REFINER: FamilySpec = FamilySpec {
    family: Family::SdxlRefiner,
    label: "SDXL refiner",
    encoders: &[EncoderSpec {
        prompt: PromptSlot::First,
        file_prefix: "conditioner.embedders.0.model.",
        ..BIG_G
    }],
    time_ids: Some(TimeIds::SizeCropAesthetic),
    zero_empty_negative: false,
    txt2img: false,
    unet_preset: UNetConfig::sdxl_refiner,
    ..SDXL
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_describes_its_own_networks() {
        for family in Family::ALL {
            let spec = family.spec();
            assert_eq!(spec.family, family);
            let unet = (spec.unet_preset)(4);
            let context: usize = spec.encoders.iter().map(|e| (e.preset)().hidden_size).sum();
            assert_eq!(unet.cross_attention_dim, context, "{family}");
            let pooled: usize = spec
                .encoders
                .iter()
                .filter(|e| e.pooled)
                .map(|e| {
                    (e.preset)()
                        .projection_dim
                        .expect("pooled encoders project")
                })
                .sum();
            match (spec.time_ids, &unet.addition) {
                (Some(ids), Some(add)) => {
                    assert_eq!(add.input_dim, pooled + ids.count() * add.time_embed_dim)
                }
                (None, None) => assert_eq!(pooled, 0),
                _ => panic!("{family}: time ids and the UNet disagree"),
            }
            let side = (unet.sample_size * spec.vae_preset().factor()) as u32;
            assert_eq!(spec.size_presets[0], (side, side), "{family}");
        }
    }

    #[test]
    fn latent_spaces_pair_sdxl_with_sdxl_only() {
        let (sd1, xl, refiner) = (
            Family::Sd1.spec(),
            Family::Sdxl.spec(),
            Family::SdxlRefiner.spec(),
        );
        assert!(xl.shares_latents_with(refiner));
        assert!(!sd1.shares_latents_with(refiner));
        assert!(sd1.shares_latents_with(Family::Sd2.spec()));
    }
}
