//! A1111's "Hires. fix": the first pass at the requested size, then each image enlarged
//! (its latents with torch's `interpolate`, or the decoded image with Lanczos, nearest or an
//! ESRGAN model) and denoised again as img2img at the larger size.
//!
//! The second pass of image `i` is exactly the img2img request `ember generate --init-image`
//! makes for the enlarged image: image `i`'s seed and variation seed (A1111 reuses the
//! first pass's seeds, and its variation and seed resize),
//! batch 1, the hires steps run exactly (A1111's hires pass: the last `steps` of a
//! `steps / strength` schedule), the hires strength; it runs on the base model without
//! ControlNets (a refiner, if any, refines the first pass only, and the refiner's aesthetic
//! scores go with it).

use std::ops::ControlFlow;

use super::generate::{generate_refined, plan_for};
use super::observer::Observer;
use crate::api::{
    GenerateRequest, Generation, HiresFix, HiresPlan, HiresUpscaler, InitLatents, MAX_SIDE,
};
use crate::error::{Error, Result};
use crate::imaging::ImageRgb8;
use crate::model::Model;
use crate::upscale::{self, UpscaleModel, UpscaleOptions, resample};

/// The hires plan of a request on `model`, or `None` without a hires fix. Refuses hires
/// fix on img2img (A1111 offers it on txt2img only) and absurd sizes.
pub fn hires_plan(request: &GenerateRequest, model: &Model) -> Result<Option<HiresPlan>> {
    let Some(fix) = &request.hires else {
        return Ok(None);
    };
    if request.has_init() || request.mask.is_some() {
        return Err(Error::settings(
            "hires fix works on txt2img; for img2img, upscale the image and raise the size",
        ));
    }
    let f = model.vae_factor() as u32;
    let plan = fix.plan((request.width, request.height), f, MAX_SIDE)?;
    // The second pass's own checks against the model (its size, its exact steps' schedule),
    // before the first pass runs: failing after it would throw the first pass's images away.
    let caps = model.capabilities();
    let mut second = second_pass_request(request, fix, &plan, 0);
    let (width, height) = (plan.size.0 as usize, plan.size.1 as usize);
    if fix.upscaler.is_latent() {
        let f = f as usize;
        let shape = [1, caps.family.spec().latent_channels, height / f, width / f];
        second.init_latents = Some(InitLatents {
            shape,
            values: vec![0.0; shape.iter().product()],
        });
    } else {
        second.init_image = Some(ImageRgb8 {
            width: plan.size.0,
            height: plan.size.1,
            pixels: vec![0; width * height * 3],
        });
    }
    let checked = second.validate(&caps);
    let checked = checked.and_then(|()| second.validate_refiner(&caps, None));
    checked
        .and_then(|()| plan_for(&second, &caps).map(drop))
        .map_err(|e| match e {
            Error::InvalidSettings(why) => Error::settings(format!(
                "the hires fix's second pass ({width}x{height}): {why}"
            )),
            other => other,
        })?;
    Ok(Some(plan))
}

/// Runs a generation with its hires fix (plain [`generate_refined`] without one).
/// `upscaler` is the loaded ESRGAN model when the fix names one.
pub fn generate_hires(
    model: &Model,
    refiner: Option<&Model>,
    upscaler: Option<&UpscaleModel>,
    request: &GenerateRequest,
    observer: &mut dyn Observer,
) -> Result<Generation> {
    let (Some(fix), Some(plan)) = (&request.hires, hires_plan(request, model)?) else {
        return generate_refined(model, refiner, request, observer);
    };
    if matches!(fix.upscaler, HiresUpscaler::Model(_)) && upscaler.is_none() {
        return Err(Error::settings("the hires upscaler model is not loaded"));
    }
    let first_request = GenerateRequest {
        hires: None,
        ..request.clone()
    };
    let first = generate_refined(model, refiner, &first_request, observer)?;
    let mut images = Vec::with_capacity(first.images.len());
    let mut latents = Vec::new();
    let mut latent_shape = first.latent_shape;
    let mut warnings = first.warnings.clone();
    for (i, image) in first.images.iter().enumerate() {
        let mut second = second_pass_request(request, fix, &plan, i);
        if fix.upscaler.is_latent() {
            second.init_latents = Some(enlarged_latents(&first, i, fix, &plan)?);
        } else {
            let cancelled = || observer.interrupted();
            second.init_image = Some(enlarged_image(image, fix, &plan, upscaler, &cancelled)?);
        }
        let out = generate_refined(model, None, &second, observer)?;
        for w in out.warnings {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        latent_shape = [
            first.images.len(),
            out.latent_shape[1],
            out.latent_shape[2],
            out.latent_shape[3],
        ];
        latents.extend(out.latents);
        images.extend(out.images);
    }
    Ok(Generation {
        images,
        latents,
        latent_shape,
        warnings,
        ..first
    })
}

/// The img2img request of image `index`'s second pass.
pub fn second_pass_request(
    request: &GenerateRequest,
    fix: &HiresFix,
    plan: &HiresPlan,
    index: usize,
) -> GenerateRequest {
    GenerateRequest {
        width: plan.size.0,
        height: plan.size.1,
        steps: fix.steps_or(request.steps),
        strength: fix.strength,
        exact_steps: true,
        // A1111's second pass draws with the first pass's seed, variation seed and
        // seed resize.
        seed: request.image_seed(index),
        noise: request.noise.for_image(index),
        batch: 1,
        hires: None,
        refiner_switch: None,
        // They condition the refiner only, and the second pass has none.
        aesthetic_score: None,
        negative_aesthetic_score: None,
        controlnets: Vec::new(),
        init_image: None,
        init_latents: None,
        ..request.clone()
    }
}

/// Image `index`'s latents of the first pass, resampled to the upscaled size and cropped
/// at the centre to the second pass's (A1111's `truncate_x/y`).
pub fn enlarged_latents(
    first: &Generation,
    index: usize,
    fix: &HiresFix,
    plan: &HiresPlan,
) -> Result<InitLatents> {
    let HiresUpscaler::Latent(mode) = fix.upscaler else {
        return Err(Error::settings("not a latent upscaler"));
    };
    let [batch, c, h, w] = first.latent_shape;
    let per_image = c * h * w;
    if index >= batch || first.latents.len() != batch * per_image {
        return Err(Error::settings("the first pass's latents are missing"));
    }
    let f = (first.images[index].width as usize / w).max(1);
    let (uw, uh) = (plan.upscaled.0 as usize / f, plan.upscaled.1 as usize / f);
    let values = &first.latents[index * per_image..][..per_image];
    let big = resample::interpolate(values, (c, h, w), (uh, uw), mode)?;
    let (tw, th) = (plan.size.0 as usize / f, plan.size.1 as usize / f);
    let (left, top) = (plan.offset.0 as usize / f, plan.offset.1 as usize / f);
    let mut cropped = Vec::with_capacity(c * th * tw);
    for plane in big.chunks_exact(uw * uh) {
        for row in top..top + th {
            cropped.extend_from_slice(&plane[row * uw + left..][..tw]);
        }
    }
    Ok(InitLatents {
        shape: [1, c, th, tw],
        values: cropped,
    })
}

/// The first pass's image enlarged by the fix's image upscaler to the upscaled size and
/// cropped (at the plan's offset) to the second pass's size.
pub fn enlarged_image(
    image: &ImageRgb8,
    fix: &HiresFix,
    plan: &HiresPlan,
    upscaler: Option<&UpscaleModel>,
    cancelled: &dyn Fn() -> bool,
) -> Result<ImageRgb8> {
    let big = match (&fix.upscaler, upscaler) {
        (HiresUpscaler::Lanczos, _) => resample::lanczos(image, plan.upscaled),
        (HiresUpscaler::Nearest, _) => resample::nearest(image, plan.upscaled),
        (HiresUpscaler::Model(_), Some(model)) => {
            let mut on_tile = |_, _| {
                if cancelled() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            };
            upscale::upscale_to(
                model,
                image,
                plan.upscaled,
                &UpscaleOptions::default(),
                &mut on_tile,
            )?
        }
        (HiresUpscaler::Model(path), None) => {
            return Err(Error::settings(format!(
                "the hires upscaler {} is not loaded",
                path.display()
            )));
        }
        (HiresUpscaler::Latent(_), _) => return Err(Error::settings("a latent upscaler")),
    };
    Ok(crop(&big, plan.offset, plan.size))
}

/// The `(w, h)` crop of `img` at `(left, top)`.
fn crop(img: &ImageRgb8, (left, top): (u32, u32), (w, h): (u32, u32)) -> ImageRgb8 {
    if (w, h) == (img.width, img.height) {
        return img.clone();
    }
    let mut pixels = Vec::with_capacity((w * h * 3) as usize);
    for row in top..top + h {
        let start = ((row * img.width + left) * 3) as usize;
        pixels.extend_from_slice(&img.pixels[start..start + (w * 3) as usize]);
    }
    ImageRgb8 {
        width: w,
        height: h,
        pixels,
    }
}
