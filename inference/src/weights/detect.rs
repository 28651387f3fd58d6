//! Which model family a single-file checkpoint holds, from sentinel keys and shapes
//! (after diffusers' `infer_diffusers_model_type` in `single_file_utils.py`).

use std::collections::HashMap;
use std::fmt;

pub use crate::family::Family;
use crate::schedule::diffusers::Prediction;

/// What detection found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detected {
    pub family: Family,
    /// A 9-channel inpainting UNet (latents + mask + masked-image latents).
    pub inpainting: bool,
    /// UNet input channels.
    pub unet_in_channels: usize,
    /// The prediction type, when the files say it (a diffusers scheduler, SDXL's `v_pred`
    /// key, an A1111 `.yaml`); `None`: the loader decides.
    pub prediction: Option<Prediction>,
    /// Trained with a zero-terminal-SNR schedule (SDXL's `ztsnr` key, a scheduler config).
    pub zero_terminal_snr: bool,
}

impl Detected {
    /// What a family's files hold when nothing special is detected.
    pub fn plain(family: Family, unet_in_channels: usize) -> Self {
        Self {
            family,
            inpainting: unet_in_channels == 9,
            unet_in_channels,
            prediction: None,
            zero_terminal_snr: false,
        }
    }
}

impl fmt::Display for Detected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.family)?;
        if self.inpainting {
            f.write_str(" inpainting")?;
        }
        if self.prediction == Some(Prediction::V) {
            f.write_str(" v-prediction")?;
        }
        if self.zero_terminal_snr {
            f.write_str(" (zero terminal SNR)")?;
        }
        Ok(())
    }
}

/// Why a checkpoint is not one Ember can detect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotDetected {
    /// Another known kind of file; the name says which.
    Known(&'static str),
    /// Nothing recognisable.
    Unknown,
}

const UNET_CONV_IN: &str = "model.diffusion_model.input_blocks.0.0.weight";
const SD1_TEXT: &str = "cond_stage_model.transformer.";
const SD2_TEXT: &str = "cond_stage_model.model.";
/// SDXL base: CLIP-L (transformers layout) and bigG (OpenCLIP layout).
const SDXL_TEXT_G: &str = "conditioner.embedders.1.model.";
const SDXL_TEXT_L: &str = "conditioner.embedders.0.transformer.";
/// The refiner's only encoder, bigG, is embedder 0.
const REFINER_TEXT_G: &str = "conditioner.embedders.0.model.";
/// ComfyUI's markers of v-prediction and zero-terminal-SNR SDXL files (empty tensors).
pub const V_PRED_KEY: &str = "v_pred";
pub const ZTSNR_KEY: &str = "ztsnr";

/// Detects the family from key names and the UNet's input shape (the text encoders' keys
/// tell the families apart, as in diffusers' `infer_diffusers_model_type`).
pub fn detect(shapes: &HashMap<String, Vec<usize>>) -> Result<Detected, NotDetected> {
    let has_prefix = |p: &str| shapes.keys().any(|k| k.starts_with(p));
    let Some(conv_in) = shapes.get(UNET_CONV_IN) else {
        return Err(not_a_checkpoint(shapes));
    };
    let family = if has_prefix(SDXL_TEXT_G) || has_prefix(SDXL_TEXT_L) {
        Family::Sdxl
    } else if has_prefix(REFINER_TEXT_G) {
        Family::SdxlRefiner
    } else if has_prefix(SD2_TEXT) {
        Family::Sd2
    } else if has_prefix(SD1_TEXT) {
        Family::Sd1
    } else {
        return Err(NotDetected::Known(
            "a UNet without its text encoders (no cond_stage_model / conditioner keys)",
        ));
    };
    // A first convolution that is not 4-D says nothing of the inputs: the family's latent
    // channels, and the strict load names its shape.
    let unet_in_channels = match conv_in.as_slice() {
        [_, inputs, _, _] => *inputs,
        _ => family.spec().latent_channels,
    };
    let mut detected = Detected::plain(family, unet_in_channels);
    if shapes.contains_key(V_PRED_KEY) {
        detected.prediction = Some(Prediction::V);
    }
    // As ComfyUI reads them: `ztsnr` only counts on a v-prediction file.
    detected.zero_terminal_snr = detected.prediction.is_some() && shapes.contains_key(ZTSNR_KEY);
    Ok(detected)
}

/// Names the kind of file when it is not a Stable Diffusion checkpoint.
fn not_a_checkpoint(shapes: &HashMap<String, Vec<usize>>) -> NotDetected {
    let any = |f: &dyn Fn(&str) -> bool| shapes.keys().any(|k| f(k));
    if any(&|k| k.starts_with("lora_") || k.contains(".lora_down.") || k.contains(".lora_A.")) {
        NotDetected::Known("a LoRA, not a full model (load a checkpoint and apply LoRAs to it)")
    } else if any(&|k| k == "emb_params" || k == "string_to_param.*") || shapes.len() <= 2 {
        NotDetected::Known(
            "a textual-inversion embedding or another small tensor file, not a model",
        )
    } else if any(&|k| k.contains("joint_blocks.")) {
        NotDetected::Known("an SD3 model, which Ember does not run yet")
    } else if any(&|k| k.contains("double_blocks.")) {
        NotDetected::Known("a Flux model, which Ember does not run yet")
    } else if any(&|k| {
        k.starts_with("encoder.down.")
            || k.starts_with("decoder.up.")
            || k.starts_with("decoder.up_blocks.")
    }) && !any(&|k| k.contains("diffusion_model"))
    {
        NotDetected::Known("a standalone VAE, not a full model")
    } else if any(&|k| k.starts_with("control_model.") || k.contains("controlnet_cond_embedding")) {
        NotDetected::Known("a ControlNet, not a full model")
    } else {
        NotDetected::Unknown
    }
}
