//! Which model family a single-file checkpoint holds, from sentinel keys and shapes
//! (after diffusers' `infer_diffusers_model_type` in `single_file_utils.py`).

use std::collections::HashMap;
use std::fmt;

/// A model family, by what its files contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// SD 1.x: CLIP ViT-L/14 text encoder (768-wide context).
    Sd1,
    /// SD 2.x: OpenCLIP ViT-H/14 text encoder (1024-wide context).
    Sd2,
    /// SDXL: two text encoders and size conditioning.
    Sdxl,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Sd1 => "SD 1.x",
            Family::Sd2 => "SD 2.x",
            Family::Sdxl => "SDXL",
        })
    }
}

/// What detection found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detected {
    pub family: Family,
    /// A 9-channel inpainting UNet (latents + mask + masked-image latents).
    pub inpainting: bool,
    /// UNet input channels.
    pub unet_in_channels: usize,
}

impl fmt::Display for Detected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.family)?;
        if self.inpainting {
            f.write_str(" inpainting")?;
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
const SDXL_TEXT: &str = "conditioner.embedders.";
const SDXL_LABEL_EMB: &str = "model.diffusion_model.label_emb.0.0.weight";

/// Detects the family from key names and the UNet's input shape.
pub fn detect(shapes: &HashMap<String, Vec<usize>>) -> Result<Detected, NotDetected> {
    let has_prefix = |p: &str| shapes.keys().any(|k| k.starts_with(p));
    let Some(conv_in) = shapes.get(UNET_CONV_IN) else {
        return Err(not_a_checkpoint(shapes));
    };
    let unet_in_channels = conv_in.get(1).copied().unwrap_or(0);
    let family = if shapes.contains_key(SDXL_LABEL_EMB) || has_prefix(SDXL_TEXT) {
        Family::Sdxl
    } else if has_prefix(SD2_TEXT) {
        Family::Sd2
    } else if has_prefix(SD1_TEXT) {
        Family::Sd1
    } else {
        return Err(NotDetected::Known(
            "a UNet without its text encoder (no cond_stage_model / conditioner keys)",
        ));
    };
    Ok(Detected {
        family,
        inpainting: unet_in_channels == 9,
        unet_in_channels,
    })
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
