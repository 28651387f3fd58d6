//! A1111's options beside the seed, as plain data: which generator the noise comes from,
//! variation seeds, "Resize seed from" and the eta noise seed delta.
//!
//! They exist so that an image A1111 made can be made again: most shared A1111 images were
//! drawn with its GPU noise on an NVIDIA card, which [`RngSource::Nv`] reproduces, and
//! variations of a seed are how artists explore around an image they like.

use crate::error::{Error, Result};

/// Where the noise of a generation comes from (A1111's "Random number generator source").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RngSource {
    /// `torch.Generator('cpu')`: diffusers', ComfyUI's, InvokeAI's and A1111's "CPU".
    #[default]
    Cpu,
    /// A1111's "NV": torch's CUDA `randn` imitated on the host, which is what A1111's
    /// default ("GPU") draws on an NVIDIA card.
    Nv,
}

impl RngSource {
    /// Every source, in the order menus list them.
    pub const ALL: [RngSource; 2] = [Self::Cpu, Self::Nv];

    /// Parses `cpu` or `nv` (any case); A1111's `GPU` is `nv`, what it is on NVIDIA cards.
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "nv" | "gpu" => Ok(Self::Nv),
            _ => Err(Error::settings(format!(
                "unknown noise source {name:?}; valid: cpu, nv"
            ))),
        }
    }

    /// The name [`RngSource::parse`] reads, as the CLI and the settings file write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Nv => "nv",
        }
    }

    /// A1111's name, as its `RNG` field holds it.
    pub fn a1111_name(self) -> &'static str {
        match self {
            Self::Cpu => "CPU",
            Self::Nv => "NV",
        }
    }
}

/// A1111's variation seed: the first noise is the seed's, turned towards this seed's by
/// `strength` (spherical interpolation; 0 = the seed's image, 1 = the variation seed's).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Variation {
    /// The variation seed of the first image; image `i` of a batch takes `seed + i`.
    pub seed: u64,
    pub strength: f32,
}

/// The noise options of a request; the defaults change nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct NoiseOptions {
    pub rng: RngSource,
    /// `None`, or a strength of 0: no variation.
    pub variation: Option<Variation>,
    /// A1111's "Resize seed from" `(width, height)`: the first noise is drawn for this size
    /// and pasted into the middle of the generation's, so a seed keeps its composition at
    /// another size.
    pub resize_from: Option<(u32, u32)>,
    /// A1111's "Eta noise seed delta" (ENSD; NovelAI's images used 31337): after the first
    /// noise, the samplers' step noise comes from generators seeded `seed + delta`.
    pub eta_noise_seed_delta: u64,
}

impl NoiseOptions {
    /// The variation that changes the noise: one with a strength other than 0.
    pub fn active_variation(&self) -> Option<Variation> {
        self.variation.filter(|v| v.strength != 0.0)
    }

    /// The options of image `index` of a batch made alone: its own variation seed.
    pub fn for_image(&self, index: usize) -> Self {
        let mut options = *self;
        if let Some(v) = options.variation.as_mut() {
            v.seed = v.seed.wrapping_add(index as u64);
        }
        options
    }

    /// Checks the numbers, with messages that say what to change.
    pub fn validate(&self, max_side: u32) -> Result<()> {
        if let Some(v) = self.variation
            && !(0.0..=1.0).contains(&v.strength)
        {
            return Err(Error::settings(format!(
                "the variation strength must be a number between 0 and 1, got {}",
                v.strength
            )));
        }
        if let Some((w, h)) = self.resize_from
            && [w, h].iter().any(|&side| side < 8 || side > max_side)
        {
            return Err(Error::settings(format!(
                "\"resize seed from\" needs a width and a height between 8 and {max_side} \
                 pixels, got {w}x{h}"
            )));
        }
        Ok(())
    }
}

/// Parses A1111's `WxH` (`Seed resize from: 512x768`); `-1x-1` and `0x0` (off) are `None`.
pub fn parse_resize_from(text: &str) -> Option<(u32, u32)> {
    let (w, h) = text.trim().split_once(['x', 'X'])?;
    let side = |s: &str| s.trim().parse::<i64>().ok();
    match (side(w)?, side(h)?) {
        (w, h) if w > 0 && h > 0 => Some((u32::try_from(w).ok()?, u32::try_from(h).ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_read_their_names_and_a1111s() {
        for source in RngSource::ALL {
            assert_eq!(RngSource::parse(source.name()).unwrap(), source);
            assert_eq!(RngSource::parse(source.a1111_name()).unwrap(), source);
        }
        assert_eq!(RngSource::parse("GPU").unwrap(), RngSource::Nv);
        assert!(RngSource::parse("tpu").is_err());
    }

    #[test]
    fn batch_images_take_the_next_variation_seeds() {
        let options = NoiseOptions {
            variation: Some(Variation {
                seed: 10,
                strength: 0.3,
            }),
            ..NoiseOptions::default()
        };
        assert_eq!(options.for_image(2).variation.unwrap().seed, 12);
        assert_eq!(
            NoiseOptions::default().for_image(2),
            NoiseOptions::default()
        );
    }

    #[test]
    fn bad_numbers_are_refused_with_what_was_given() {
        let strength = |strength| NoiseOptions {
            variation: Some(Variation { seed: 1, strength }),
            ..NoiseOptions::default()
        };
        assert!(strength(0.5).validate(4096).is_ok());
        for bad in [-0.1, 1.5, f32::NAN] {
            let message = strength(bad).validate(4096).unwrap_err().to_string();
            assert!(message.contains("between 0 and 1"), "{message}");
        }
        let resize = |resize_from| NoiseOptions {
            resize_from: Some(resize_from),
            ..NoiseOptions::default()
        };
        assert!(resize((512, 768)).validate(4096).is_ok());
        assert!(resize((4, 512)).validate(4096).is_err());
        assert!(resize((512, 9000)).validate(4096).is_err());
    }

    #[test]
    fn resize_sizes_read_as_a1111_writes_them() {
        assert_eq!(parse_resize_from("512x768"), Some((512, 768)));
        assert_eq!(parse_resize_from(" 640X480 "), Some((640, 480)));
        assert_eq!(parse_resize_from("-1x-1"), None);
        assert_eq!(parse_resize_from("0x0"), None);
        assert_eq!(parse_resize_from("wide"), None);
    }
}
