//! What a single file does not say: its prediction type and zero-terminal-SNR training,
//! from A1111's `.yaml` beside it, a config folder's scheduler, or (SD 2.x) a test step.

use std::path::Path;

use burn::tensor::{Device, Tensor};

use crate::device::tensor_from_vec;
use crate::error::{Error, Result};
use crate::models::unet::UNet;
use crate::schedule::diffusers::{Prediction, SchedulerConfig};

/// What the files beside a checkpoint say about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub prediction: Option<Prediction>,
    pub zero_terminal_snr: bool,
}

/// A1111's config beside a checkpoint: the same path with the extension `.yaml`
/// (`sd_models_config.find_checkpoint_config_near_filename`).
pub fn yaml_beside(checkpoint: &Path) -> std::path::PathBuf {
    checkpoint.with_extension("yaml")
}

/// The prediction an LDM / A1111 yaml names: `parameterization: "v"` (or `v`) is v, any
/// other config is the LDM default, epsilon. `None` when the text names no model config.
pub fn yaml_prediction(text: &str) -> Option<Prediction> {
    let mut saw_model = false;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with("model:") || line.starts_with("params:") {
            saw_model = true;
        }
        if let Some(value) = line.strip_prefix("parameterization:") {
            let value = value.trim().trim_matches(['"', '\'']);
            return Some(if value == "v" {
                Prediction::V
            } else {
                Prediction::Epsilon
            });
        }
    }
    saw_model.then_some(Prediction::Epsilon)
}

/// The hints for the checkpoint at `path`: its `.yaml` first, then `config_dir`'s
/// `scheduler/scheduler_config.json`.
pub fn file_hints(path: &Path, config_dir: Option<&Path>) -> Result<Hints> {
    let mut hints = Hints::default();
    let yaml = yaml_beside(path);
    if let Ok(text) = std::fs::read_to_string(&yaml) {
        hints.prediction = yaml_prediction(&text);
    }
    if let Some(dir) = config_dir {
        let scheduler = dir.join("scheduler").join("scheduler_config.json");
        if let Ok(text) = std::fs::read_to_string(&scheduler) {
            let (prediction, zero_snr) = SchedulerConfig::model_facts(&text)
                .map_err(|e| Error::invalid_model(&scheduler, e.to_string()))?;
            hints.prediction = hints.prediction.or(Some(prediction));
            hints.zero_terminal_snr = zero_snr;
        }
    }
    Ok(hints)
}

/// A1111's `is_using_v_parameterization_for_sd2`: one UNet call on a flat grey latent
/// (`[1, 4, 8, 8]` of 0.5) at timestep 999 with a flat two-token context of 0.5; a
/// v-prediction model's output sits far below the input (`mean(out - x) < -1`), an epsilon
/// model's does not. (diffusers takes every SD 2.x single file for a 768-v model; ComfyUI
/// looks at the spread of one norm bias.)
pub fn probe_sd2_v_prediction(unet: &UNet, device: &Device) -> bool {
    let in_channels = unet.in_channels;
    // Burn's Linear weight is `[in, out]`: the key projection's input is the context.
    let Some(context_dim) = unet.mid_block.attentions[0]
        .transformer_blocks
        .first()
        .map(|b| b.attn2.to_k.weight.dims()[0])
    else {
        return false;
    };
    let x = tensor_from_vec(vec![0.5; in_channels * 64], [1, in_channels, 8, 8], device);
    let context: Tensor<3> =
        tensor_from_vec(vec![0.5; 2 * context_dim], [1, 2, context_dim], device);
    let dtype = unet.conv_in.weight.val().dtype();
    let out = unet.forward(x.clone().cast(dtype), &[999.0], &context.cast(dtype), None);
    let mean = (out.cast(burn::tensor::DType::F32) - x)
        .mean()
        .into_scalar::<f32>();
    mean < -1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1111_yaml_names_the_prediction() {
        let v = "model:\n  target: ldm.models.diffusion.ddpm.LatentDiffusion\n  params:\n    parameterization: \"v\" # 768-v\n";
        assert_eq!(yaml_prediction(v), Some(Prediction::V));
        assert_eq!(
            yaml_prediction("model:\n  params:\n    parameterization: v\n"),
            Some(Prediction::V)
        );
        let eps = "model:\n  params:\n    linear_start: 0.00085\n";
        assert_eq!(yaml_prediction(eps), Some(Prediction::Epsilon));
        assert_eq!(yaml_prediction("# parameterization: \"v\"\nfoo: 1\n"), None);
    }
}
