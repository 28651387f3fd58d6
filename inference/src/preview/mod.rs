//! Live previews, drawn two ways: the latents projected to RGB with the model family's
//! linear factors (ComfyUI's `Latent2RGBPreviewer`, A1111's "Approx cheap"), at latent
//! resolution and nearly free; or TAESD's tiny decoder ([`taesd`]), the full-size picture,
//! paced so its cost stays a small share of the generation's time. Both are computed on the
//! tensor's device; only the preview's pixels are read back.

pub mod taesd;
pub mod taesd_load;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::tensor::{DType, Tensor};

use crate::device::tensor_from_vec;
use crate::family::Family;
use crate::imaging::ImageRgb8;

/// An RGB preview of the first image of a latent batch: `((latent @ factors + bias) + 1) / 2`
/// with the family's factors, clamped, as 8-bit pixels.
///
/// # Shapes
/// - `latents`: `[batch, 4, h, w]` (scaled latents, as the sampler holds them) -> `h x w`
pub fn latent_preview(latents: &Tensor<4>, family: Family) -> ImageRgb8 {
    let spec = family.spec();
    let [_, c, h, w] = latents.dims();
    let device = latents.device();
    let factors = tensor_from_vec(
        spec.preview_factors.iter().flatten().copied().collect(),
        [4, 3, 1, 1],
        &device,
    )
    .reshape([4, 3]);
    let bias = tensor_from_vec(spec.preview_bias.to_vec(), [1, 3, 1, 1], &device).reshape([1, 3]);
    let first = latents
        .clone()
        .narrow(0, 0, 1)
        .reshape([c, h * w])
        .swap_dims(0, 1); // [hw, 4]
    let rgb = (first.matmul(factors) + bias)
        .add_scalar(1.0)
        .div_scalar(2.0)
        .clamp(0.0, 1.0)
        .mul_scalar(255.0)
        .round();
    let pixels = rgb.into_data().iter::<f32>().map(|v| v as u8).collect();
    ImageRgb8 {
        width: w as u32,
        height: h as u32,
        pixels,
    }
}

/// How the live preview is drawn (a setting of the app, not of the image: no metadata).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PreviewMethod {
    /// TAESD when a decoder for the model's latents is found, else the latent colours
    /// (ComfyUI's `--preview-method auto`).
    #[default]
    Auto,
    /// The latents' colours, projected linearly: nearly free, at latent resolution.
    LatentColours,
    /// TAESD, with a warning (and the latent colours) when no decoder is found.
    Taesd,
}

impl PreviewMethod {
    pub const ALL: [PreviewMethod; 3] = [Self::Auto, Self::LatentColours, Self::Taesd];

    /// The name settings files store.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::LatentColours => "latent",
            Self::Taesd => "taesd",
        }
    }

    /// The method of that name (case-insensitive).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// The preview a generation asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviewOptions {
    pub method: PreviewMethod,
    /// Folders TAESD decoders are looked up in ([`taesd_load::find`]), besides those near
    /// the model.
    #[serde(with = "crate::path_json::many")]
    pub taesd_dirs: Vec<PathBuf>,
}

/// The most of a generation's time TAESD previews may take: after a decode, the next waits
/// until the fastest decode so far divided by this has passed since that one began (the last
/// preview stays up meanwhile). Where a decode is quick next to a step, that is every step.
pub const TAESD_TIME_SHARE: f64 = 0.05;

/// When TAESD decodes: [`TAESD_TIME_SHARE`] of the time, timed by the fastest decode so far
/// (a slow one, the first compiling its kernels on a GPU, does not hold the next back), and
/// never timed by the first (always followed by another).
#[derive(Clone, Copy, Debug, Default)]
pub struct Pacer {
    next: Option<Instant>,
    fastest: Option<Duration>,
    decodes: usize,
}

impl Pacer {
    /// Whether a decode may begin at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_none_or(|next| now >= next)
    }

    /// Records a decode that began at `start` and took `took`.
    pub fn decoded(&mut self, start: Instant, took: Duration) {
        self.decodes += 1;
        if self.decodes == 1 {
            return;
        }
        let fastest = self.fastest.map_or(took, |f| f.min(took));
        self.fastest = Some(fastest);
        self.next = Some(start + fastest.div_f64(TAESD_TIME_SHARE));
    }
}

/// Draws each step's preview, one way or the other.
pub enum Drawer<'a> {
    Latent(Family),
    Taesd {
        decoder: &'a taesd::TaesdDecoder,
        pacer: Pacer,
    },
}

impl Drawer<'_> {
    /// The preview of the first image of `denoised`, or `None` when TAESD's pacing skips
    /// this step.
    ///
    /// # Shapes
    /// - `denoised`: `[batch, 4, h, w]`, sampler-space -> `h x w` (latent colours) or
    ///   `8h x 8w` (TAESD)
    pub fn draw(&mut self, denoised: &Tensor<4>) -> Option<ImageRgb8> {
        match self {
            Drawer::Latent(family) => Some(latent_preview(denoised, *family)),
            Drawer::Taesd { decoder, pacer } => {
                let start = Instant::now();
                if !pacer.due(start) {
                    return None;
                }
                let image = taesd_preview(decoder, denoised);
                pacer.decoded(start, start.elapsed());
                Some(image)
            }
        }
    }
}

/// TAESD's picture of the first image of a latent batch, clamped to [0, 1], as 8-bit pixels.
///
/// # Shapes
/// - `latents`: `[batch, latent_channels, h, w]` -> `h * scale x w * scale`
pub fn taesd_preview(decoder: &taesd::TaesdDecoder, latents: &Tensor<4>) -> ImageRgb8 {
    let first = latents.clone().narrow(0, 0, 1).cast(DType::F32);
    let rgb = decoder.forward(first);
    let [_, _, h, w] = rgb.dims();
    let levels = rgb
        .clamp(0.0, 1.0)
        .mul_scalar(255.0)
        .round()
        .permute([0, 2, 3, 1]) // [1, h, w, 3]: interleaved pixels
        .into_data();
    ImageRgb8 {
        width: w as u32,
        height: h as u32,
        pixels: levels.iter::<f32>().map(|v| v as u8).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taesd_previews_take_their_share_of_the_time_by_the_fastest_decode() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut pacer = Pacer::default();
        assert!(pacer.due(t0));
        // The first decode (kernels compiling) is slow and is not the measure.
        pacer.decoded(t0, ms(2000));
        assert!(pacer.due(t0 + ms(2000)));
        // 10 ms of every 200: a twentieth.
        let t1 = t0 + ms(3000);
        pacer.decoded(t1, ms(10));
        assert!(!pacer.due(t1 + ms(199)));
        assert!(pacer.due(t1 + ms(201)));
        // A slower decode later waits by the fastest.
        let t2 = t1 + ms(300);
        pacer.decoded(t2, ms(40));
        assert!(pacer.due(t2 + ms(201)));
        assert_eq!(PreviewMethod::parse(" TAESD"), Some(PreviewMethod::Taesd));
        for method in PreviewMethod::ALL {
            assert_eq!(PreviewMethod::parse(method.name()), Some(method));
        }
        assert_eq!(PreviewMethod::parse("full"), None);
    }
}
