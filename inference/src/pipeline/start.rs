//! The start of a generation: the first sample and the image conditioning, drawn in
//! diffusers' order, and the per-step noise of stochastic samplers.

use burn::tensor::Tensor;

use super::image_inputs::{self, MaskInputs};
use crate::api::{GenerateRequest, MaskedContent};
use crate::device::tensor_from_vec;
use crate::error::Result;
use crate::model::Model;
use crate::models::vae_tiles::VaeTiles;
use crate::rng::BatchRng;
use crate::rng::brownian::{BrownianNoise, sigma_range};
use crate::sampling::NoiseSource;
use crate::schedule::Plan;

/// Step noise from the generation's generators (one per image), and for the SDE samplers
/// from Brownian trees where the plan asks for them.
pub struct StepNoise<'a> {
    rng: &'a mut BatchRng,
    trees: Option<BrownianNoise>,
}

impl<'a> StepNoise<'a> {
    pub fn new(rng: &'a mut BatchRng, plan: &Plan, shape: [usize; 4]) -> Self {
        let trees = plan.brownian.and_then(|brownian| {
            let range = brownian.range.or_else(|| sigma_range(&plan.sigmas))?;
            let per_image: usize = shape[1..].iter().product();
            // The trees draw from the request's noise source, as A1111's do.
            let source = rng.source();
            Some(match brownian.entropy {
                Some(entropy) => {
                    BrownianNoise::new(range, &[entropy], per_image * shape[0], source)
                }
                // Each image's own seed, as A1111 seeds its trees (with a variation, the
                // one seed of every image).
                None => BrownianNoise::new(range, rng.seeds(), per_image, source),
            })
        });
        Self { rng, trees }
    }
}

impl NoiseSource for StepNoise<'_> {
    fn draw(&mut self, like: &Tensor<4>) -> Tensor<4> {
        let dims = like.dims();
        let per_image = dims[1..].iter().product();
        tensor_from_vec(self.rng.randn(per_image), dims, &like.device())
    }

    fn draw_between(&mut self, like: &Tensor<4>, sigma: f32, sigma_next: f32) -> Tensor<4> {
        match &mut self.trees {
            Some(trees) => {
                tensor_from_vec(trees.sample(sigma, sigma_next), like.dims(), &like.device())
            }
            None => self.draw(like),
        }
    }
}

/// The starting sample and the image conditioning, drawn in diffusers' order.
pub struct Start {
    pub x: Tensor<4>,
    /// The initial noise (the inpainting blend re-noises the image with it).
    pub noise: Tensor<4>,
    /// The init image's VAE latents, when the pipeline needs them.
    pub image_latents: Option<Tensor<4>>,
    pub mask: Option<MaskInputs>,
}

impl Start {
    /// `stop` is asked between the VAE's tiles while it encodes the init image.
    pub fn prepare(
        model: &Model,
        request: &GenerateRequest,
        (plan, vae_tiles, stop): (&Plan, Option<VaeTiles>, &dyn Fn() -> bool),
        shape: [usize; 4],
        rng: &mut BatchRng,
    ) -> Result<Self> {
        // diffusers' inpainting at full strength starts from pure noise; img2img and
        // partial-strength inpainting from the noised image.
        let from_noise = !request.has_init() || (request.mask.is_some() && request.strength >= 1.0);
        // The 4-channel model blends the image back in, so it needs its latents even when
        // starting from noise; the 9-channel model only when starting part-way.
        let image_latents = match (&request.init_image, &request.init_latents) {
            (Some(init), _) if !model.is_inpainting() || !from_noise => {
                let image = image_inputs::image_tensor(model, init);
                Some(image_inputs::encode_image(
                    model,
                    image,
                    (vae_tiles, stop),
                    rng,
                )?)
            }
            // Given latents draw nothing: no posterior sample.
            (None, Some(latents)) => Some(
                tensor_from_vec(latents.values.clone(), latents.shape, &model.device)
                    .repeat_dim(0, shape[0]),
            ),
            _ => None,
        };
        let [_, c, h, w] = shape;
        let first = rng.first_noise([c, h, w], model.vae_factor());
        let noise = tensor_from_vec(first, shape, &model.device);
        // A1111's latent masked content: the masked latents start as noise or as nothing.
        let start_latents = match (&image_latents, &request.mask, request.masked_content) {
            (Some(latents), Some(m), MaskedContent::LatentNoise | MaskedContent::LatentNothing) => {
                let keep = image_inputs::latent_mask(model, m).neg().add_scalar(1.0);
                let masked = latents.clone() * keep.clone();
                Some(match request.masked_content {
                    MaskedContent::LatentNoise => {
                        masked + noise.clone() * keep.neg().add_scalar(1.0)
                    }
                    _ => masked,
                })
            }
            _ => image_latents.clone(),
        };
        let x = match (&start_latents, from_noise) {
            (Some(latents), false) => latents.clone() + noise.clone().mul_scalar(plan.sigmas[0]),
            _ => noise.clone().mul_scalar(plan.initial_noise_scale),
        };
        let mask = match (&request.init_image, &request.mask) {
            (Some(init), Some(m)) => Some(image_inputs::mask_inputs(
                model,
                init,
                m,
                (vae_tiles, stop),
                rng,
            )?),
            _ => None,
        };
        rng.begin_step_noise();
        Ok(Self {
            x,
            noise,
            image_latents,
            mask,
        })
    }
}
