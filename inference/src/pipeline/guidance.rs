//! Classifier-free guidance and the model-output conventions: how a UNet call becomes the
//! `denoise(x, sigma) -> x0` that samplers see.

use burn::tensor::Tensor;

use crate::schedule::diffusers::Prediction;

/// `uncond + scale * (cond - uncond)` on the raw model output, as diffusers does.
///
/// # Shapes
/// - `out`: `[2 * batch, c, h, w]`, the unconditional half first (diffusers' order)
/// - returns `[batch, c, h, w]`
pub fn guide(out: Tensor<4>, scale: f32) -> Tensor<4> {
    let batch = out.dims()[0] / 2;
    let uncond = out.clone().narrow(0, 0, batch);
    let cond = out.narrow(0, batch, batch);
    uncond.clone() + (cond - uncond).mul_scalar(scale)
}

/// diffusers' `rescale_noise_cfg` (Lin et al. 2023, "Common Diffusion Noise Schedules and
/// Sample Steps are Flawed", section 3.4): the guided output is scaled to the conditional
/// output's standard deviation (per image, torch's unbiased `std` over all other axes), then
/// mixed with the unscaled one by `phi`.
///
/// # Shapes
/// - `guided`, `cond`: `[batch, c, h, w]` -> `[batch, c, h, w]`
pub fn rescale(guided: Tensor<4>, cond: Tensor<4>, phi: f32) -> Tensor<4> {
    if phi == 0.0 {
        return guided;
    }
    let std = |t: &Tensor<4>| {
        let [b, c, h, w] = t.dims();
        let n = (c * h * w) as f64;
        let flat = t.clone().reshape([b, c * h * w]);
        let mean = flat.clone().mean_dim(1);
        let var = (flat - mean).powi_scalar(2).sum_dim(1).div_scalar(n - 1.0);
        var.sqrt().reshape([b, 1, 1, 1])
    };
    let factor = std(&cond) / std(&guided);
    let rescaled = guided.clone() * factor;
    rescaled.mul_scalar(phi) + guided.mul_scalar(1.0 - phi)
}

/// Guidance with A1111's composable prompts (`AND`): `uncond + sum_i (cond_i - uncond) *
/// (weight_i * scale)` (`CFGDenoiser.combine_denoised`), and the unscaled combination
/// `uncond + sum_i (cond_i - uncond) * weight_i` that CFG rescale matches. One subprompt of
/// weight 1 is [`guide`] and the conditional output.
///
/// # Shapes
/// - `out`: `[(1 + weights) * batch, c, h, w]`: uncond rows, then each subprompt's rows
/// - returns two `[batch, c, h, w]`
pub fn compose(out: Tensor<4>, weights: &[f32], scale: f32) -> (Tensor<4>, Tensor<4>) {
    let batch = out.dims()[0] / (1 + weights.len());
    if weights == [1.0] {
        let cond = out.clone().narrow(0, batch, batch);
        return (guide(out, scale), cond);
    }
    let uncond = out.clone().narrow(0, 0, batch);
    let mut guided = uncond.clone();
    let mut combined = uncond.clone();
    for (i, &w) in weights.iter().enumerate() {
        let delta = out.clone().narrow(0, (i + 1) * batch, batch) - uncond.clone();
        guided = guided + delta.clone().mul_scalar(w * scale);
        combined = combined + delta.mul_scalar(w);
    }
    (guided, combined)
}

/// The UNet input for a sample at noise level `sigma`: `x / sqrt(sigma^2 + 1)`.
pub fn scale_model_input(x: Tensor<4>, sigma: f32) -> Tensor<4> {
    x.div_scalar((sigma * sigma + 1.0).sqrt())
}

/// The clean-sample prediction from the model output at noise level `sigma`.
///
/// - epsilon: `x - sigma * eps`
/// - v: `v * (-sigma / sqrt(sigma^2 + 1)) + x / (sigma^2 + 1)`
pub fn denoised(
    x: &Tensor<4>,
    model_out: Tensor<4>,
    sigma: f32,
    prediction: Prediction,
) -> Tensor<4> {
    match prediction {
        Prediction::Epsilon => x.clone() - model_out.mul_scalar(sigma),
        Prediction::V => {
            let c_out = -sigma / (sigma * sigma + 1.0).sqrt();
            model_out.mul_scalar(c_out) + x.clone().div_scalar(sigma * sigma + 1.0)
        }
    }
}
