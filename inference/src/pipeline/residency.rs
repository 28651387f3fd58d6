//! What a generation keeps on a GPU short of memory: its text encoders wait in the
//! computer's memory while the UNet and the VAE run (A1111's `--medvram` and ComfyUI's
//! offloading do the same), and come back for the next prompt.

use burn::module::Module;

use crate::api::GenerateRequest;
use crate::error::Result;
use crate::memory::{self, MemoryOf};
use crate::model::Model;

/// The working memory `request` needs on `model` at its peak (weights aside): the UNet's
/// activations, or the VAE's on the whole image or a tile. A hires fix peaks in its second
/// pass, one image at a time.
pub fn working_bytes(model: &Model, request: &GenerateRequest) -> Result<u64> {
    let rows = rows(request);
    let (size, peak_rows) = match crate::pipeline::hires::hires_plan(request, model)? {
        Some(plan) => (plan.size, rows / request.batch.max(1) as usize),
        None => ((request.width, request.height), rows),
    };
    // Attention in tiles (the CPU kernel, fused attention elsewhere): no full matrices.
    let estimate = memory::estimate(
        0,
        0,
        &model.unet_config,
        &model.vae_config,
        size,
        peak_rows,
        (false, request.effective_vae_tiling()),
    );
    Ok(estimate.working)
}

/// A prompt's AND subprompts, as the denoiser runs them.
pub struct Subprompts {
    /// How many (one row of the UNet call each).
    pub count: usize,
    /// Several, or one with a weight of its own (`a cat :0.5`): A1111 always runs the
    /// negative rows; Ember does below CFG 1 only for a prompt that composes.
    pub composed: bool,
}

/// The subprompts of `request`'s prompt once its LoRA tags are taken out (an error for a
/// malformed tag).
pub fn subprompts(request: &GenerateRequest) -> Result<Subprompts> {
    let (prompt, _) = crate::lora::tags::extract(&request.prompt)?;
    let parts = crate::text::and::split_and(&prompt);
    Ok(Subprompts {
        count: parts.len().max(1),
        composed: parts.len() > 1 || parts.first().is_some_and(|(_, w)| *w != 1.0),
    })
}

/// UNet rows per call: the batch times one row per AND subprompt, and one more for the
/// negative prompt when it runs (the denoiser's rule, less the CFG++ samplers' need for it
/// at scale 1, which this underestimates).
pub fn rows(request: &GenerateRequest) -> usize {
    let (count, composed) = subprompts(request).map_or((1, false), |s| (s.count, s.composed));
    let negative = request.cfg_scale > 1.0 || composed;
    request.batch as usize * (count + usize::from(negative))
}

/// The bytes of GPU memory parking `model`'s text encoders would free (0 on the CPU, where
/// there is nothing to gain).
pub fn parkable_bytes(model: &Model) -> u64 {
    if MemoryOf::of(&model.device) == MemoryOf::Host {
        return 0;
    }
    let parameters: usize = model
        .encoders
        .iter()
        .filter(|e| !e.is_parked())
        .map(|e| e.network().num_params())
        .sum();
    parameters as u64 * model.precision.bytes() as u64
}

/// Parks the text encoders of `models` (already used for this generation's prompts) when
/// their GPU has less than `working` bytes free; returns whether it did.
pub fn park_encoders_if_short(models: &[&Model], working: u64, available: Option<u64>) -> bool {
    let on_gpu = models
        .first()
        .is_some_and(|m| MemoryOf::of(&m.device) == MemoryOf::Gpu);
    let short = available.is_some_and(|free| free < working);
    if !(on_gpu && short) {
        return false;
    }
    for encoder in models.iter().flat_map(|m| &m.encoders) {
        encoder.park();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_and_subprompt_is_a_row_of_the_unet_call() {
        let request = |prompt: &str, cfg_scale, batch| GenerateRequest {
            prompt: prompt.into(),
            cfg_scale,
            batch,
            ..GenerateRequest::default()
        };
        assert_eq!(
            rows(&request("a boat", 7.0, 2)),
            4,
            "guided: and the negative"
        );
        assert_eq!(rows(&request("a boat", 1.0, 2)), 2, "unguided");
        let three = "a boat AND a lighthouse :0.5 AND fog";
        assert_eq!(rows(&request(three, 7.0, 2)), 8);
        assert_eq!(
            rows(&request(three, 1.0, 1)),
            4,
            "a composed prompt runs the negative"
        );
        assert_eq!(
            rows(&request("a boat :0.5", 1.0, 1)),
            2,
            "one weighted part composes"
        );
    }
}
