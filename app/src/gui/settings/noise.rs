//! The form's noise settings: A1111's "Extra" seed options (variation seed and strength,
//! "Resize seed from") and, under Advanced, the noise source and eta noise seed delta.

use inference::api::{NoiseOptions, RngSource, Variation};
use serde::{Deserialize, Serialize};

use super::by_name;

/// What the form holds; [`NoiseSettings::to_request`] makes the request's options of it.
/// The defaults are CPU noise without extras.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoiseSettings {
    /// Stored as cpu or nv.
    #[serde(with = "by_name")]
    pub rng: RngSource,
    /// The extra seed options are shown and in effect (A1111's "Extra" box).
    pub extras: bool,
    /// The variation seed of the next generation when `variation_locked`; otherwise the
    /// last one used.
    pub variation_seed: u64,
    /// Keep the variation seed between generations (off: a new random one each time).
    pub variation_locked: bool,
    /// 0 = no variation.
    pub variation_strength: f32,
    /// `(width, height)`; a side of 0 = off.
    pub resize_from: (u32, u32),
    pub eta_noise_seed_delta: u64,
}

impl NoiseSettings {
    /// Before an image's settings are taken: CPU noise and no extras (the variation seed
    /// stays, as the seed does when an image has none).
    pub fn clear_for_restore(&mut self) {
        self.rng = RngSource::Cpu;
        self.extras = false;
        self.variation_strength = 0.0;
        self.resize_from = (0, 0);
        self.eta_noise_seed_delta = 0;
    }

    /// The request's noise options: the extras only while they are on, as in A1111.
    pub fn to_request(self) -> NoiseOptions {
        let extras = self.extras;
        let (w, h) = self.resize_from;
        NoiseOptions {
            rng: self.rng,
            variation: (extras && self.variation_strength != 0.0).then_some(Variation {
                seed: self.variation_seed,
                strength: self.variation_strength,
            }),
            resize_from: (extras && w > 0 && h > 0).then_some((w, h)),
            eta_noise_seed_delta: self.eta_noise_seed_delta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extras_count_only_while_they_are_on() {
        let mut s = NoiseSettings {
            variation_seed: 5,
            variation_strength: 0.4,
            resize_from: (512, 768),
            eta_noise_seed_delta: 31337,
            ..NoiseSettings::default()
        };
        let off = s.to_request();
        assert_eq!((off.variation, off.resize_from), (None, None));
        assert_eq!(off.eta_noise_seed_delta, 31337);
        s.extras = true;
        let on = s.to_request();
        assert_eq!(on.variation.unwrap().seed, 5);
        assert_eq!(on.resize_from, Some((512, 768)));
        // A strength of 0 and a side of 0 are off.
        s.variation_strength = 0.0;
        s.resize_from = (512, 0);
        let zero = s.to_request();
        assert_eq!((zero.variation, zero.resize_from), (None, None));
    }

    #[test]
    fn the_source_is_stored_by_name() {
        let s = NoiseSettings {
            rng: RngSource::Nv,
            ..NoiseSettings::default()
        };
        let written = serde_json::to_value(s).unwrap();
        assert_eq!(written["rng"], "nv");
        let read: NoiseSettings = serde_json::from_str(r#"{"rng": "quantum"}"#).unwrap();
        assert_eq!(read.rng, RngSource::Cpu);
    }
}
