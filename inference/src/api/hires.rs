//! A1111's "Hires. fix" as plain data: the upscaler, the target size (a factor, or a size
//! reached as A1111 does: cover, then crop the centre) and the second pass's steps and
//! denoising strength.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::upscale::resample::InterpolateMode;

/// A1111's default "Denoising strength" for the hires pass.
pub const DEFAULT_HIRES_STRENGTH: f32 = 0.7;
/// A1111's slider range for "Upscale by".
pub const MAX_HIRES_SCALE: f32 = 4.0;

/// How the first pass is enlarged.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum HiresUpscaler {
    /// The latents, with torch's `interpolate` (A1111's `Latent …` upscalers).
    Latent(InterpolateMode),
    /// The decoded image with a Lanczos filter (A1111's `Lanczos`, and its `None`, which
    /// resizes with Lanczos too).
    Lanczos,
    /// The decoded image, nearest neighbour (A1111's `Nearest`).
    Nearest,
    /// An ESRGAN / Real-ESRGAN model file; the decoded image goes through it.
    Model(#[serde(with = "crate::path_json")] PathBuf),
}

/// A1111's latent upscaler names and their `interpolate` modes (`shared.latent_upscale_modes`).
const LATENT_NAMES: [(&str, InterpolateMode); 6] = [
    ("Latent", InterpolateMode::Bilinear),
    ("Latent (antialiased)", InterpolateMode::BilinearAntialias),
    ("Latent (bicubic)", InterpolateMode::Bicubic),
    (
        "Latent (bicubic antialiased)",
        InterpolateMode::BicubicAntialias,
    ),
    ("Latent (nearest)", InterpolateMode::Nearest),
    ("Latent (nearest-exact)", InterpolateMode::NearestExact),
];

impl HiresUpscaler {
    /// The built-in names, as A1111 lists them.
    pub fn builtin_names() -> Vec<&'static str> {
        let mut names: Vec<&str> = LATENT_NAMES.iter().map(|(n, _)| *n).collect();
        names.extend(["None", "Lanczos", "Nearest"]);
        names
    }

    /// An upscaler by A1111 name (case-insensitive), a model file path, or the stem of a
    /// model file in one of `model_dirs` (A1111's `models/ESRGAN`).
    pub fn parse(name: &str, model_dirs: &[PathBuf]) -> Result<Self> {
        let trimmed = name.trim();
        let lower = trimmed.to_ascii_lowercase();
        if let Some((_, mode)) = LATENT_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(trimmed))
        {
            return Ok(Self::Latent(*mode));
        }
        match lower.as_str() {
            "none" | "lanczos" => return Ok(Self::Lanczos),
            "nearest" => return Ok(Self::Nearest),
            _ => {}
        }
        let path = Path::new(trimmed);
        if path.is_file() {
            return Ok(Self::Model(path.to_path_buf()));
        }
        for dir in model_dirs {
            for ext in ["pth", "safetensors", "pt"] {
                let candidate = dir.join(format!("{trimmed}.{ext}"));
                if candidate.is_file() {
                    return Ok(Self::Model(candidate));
                }
            }
        }
        Err(Error::settings(format!(
            "unknown hires upscaler {trimmed:?}: use one of {}, an ESRGAN model file, or the \
             name of one in an ESRGAN/ folder",
            Self::builtin_names().join(", ")
        )))
    }

    /// The name A1111 writes as `Hires upscaler`.
    pub fn a1111_name(&self) -> String {
        match self {
            Self::Latent(mode) => LATENT_NAMES
                .iter()
                .find(|(_, m)| m == mode)
                .map_or("Latent", |(n, _)| n)
                .to_string(),
            Self::Lanczos => "Lanczos".into(),
            Self::Nearest => "Nearest".into(),
            Self::Model(path) => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    pub fn is_latent(&self) -> bool {
        matches!(self, Self::Latent(_))
    }
}

/// How the hires pass is sized: A1111's "Upscale by", or "Resize width/height to" (0 keeps
/// the aspect from the other side).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum HiresSize {
    Scale(f32),
    To(u32, u32),
}

/// The hires fix of a txt2img request.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HiresFix {
    pub upscaler: HiresUpscaler,
    pub size: HiresSize,
    /// The second pass's steps; 0 means the first pass's.
    pub steps: u32,
    /// The second pass's denoising strength.
    pub strength: f32,
}

/// Where the second pass runs: the size the first pass is enlarged to, and the centred
/// crop (in pixels, a multiple of the VAE factor) that makes the requested size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HiresPlan {
    /// The size the upscaler makes (A1111's `hr_upscale_to_x/y`).
    pub upscaled: (u32, u32),
    /// The second pass's size: `upscaled` cropped at the centre and floored to the VAE
    /// factor.
    pub size: (u32, u32),
    /// The crop's top-left corner in `upscaled`, in whole latent cells (as A1111 truncates
    /// `truncate // 2` latent columns and rows on the left and top).
    pub offset: (u32, u32),
}

impl HiresFix {
    /// A1111's arithmetic (`StableDiffusionProcessingTxt2Img.calculate_target_resolution`)
    /// for a first pass of `(w, h)`, with `f` the VAE factor; checked against `max_side`.
    pub fn plan(&self, (w, h): (u32, u32), f: u32, max_side: u32) -> Result<HiresPlan> {
        let bad = |m: String| Err(Error::settings(m));
        if !(0.0..=1.0).contains(&self.strength) || self.strength == 0.0 {
            return bad(format!(
                "the hires denoising strength must be above 0 and at most 1, got {}",
                self.strength
            ));
        }
        // In u64: `ry * w` of a huge typed size must not overflow.
        let (w64, h64) = (u64::from(w), u64::from(h));
        let (ux, uy): (u64, u64) = match self.size {
            HiresSize::Scale(s) => {
                if !s.is_finite() || !(1.0..=MAX_HIRES_SCALE).contains(&s) {
                    return bad(format!(
                        "the hires scale must be between 1 and {MAX_HIRES_SCALE}, got {s}"
                    ));
                }
                // A1111's `int(width * hr_scale)` on the number as typed.
                let scale = crate::upscale::typed(s);
                ((w64 as f64 * scale) as u64, (h64 as f64 * scale) as u64)
            }
            HiresSize::To(0, 0) => return bad("a hires size needs a width or a height".into()),
            HiresSize::To(0, ry) => (u64::from(ry) * w64 / h64, u64::from(ry)),
            HiresSize::To(rx, 0) => (u64::from(rx), u64::from(rx) * h64 / w64),
            HiresSize::To(rx, ry) => {
                let (rx, ry) = (u64::from(rx), u64::from(ry));
                // Cover the requested size keeping the aspect, then crop the centre.
                if (w as f64 / h as f64) < (rx as f64 / ry as f64) {
                    (rx, rx * h64 / w64)
                } else {
                    (ry * w64 / h64, ry)
                }
            }
        };
        let (rx, ry) = match self.size {
            HiresSize::To(rx, ry) if rx > 0 && ry > 0 => (u64::from(rx), u64::from(ry)),
            _ => (ux, uy),
        };
        let max = u64::from(max_side);
        let f = u64::from(f);
        if ux > max || uy > max || rx < f || ry < f {
            return bad(format!(
                "the hires pass would be {ux}x{uy}; Ember generates between {f} and {max_side} \
                 pixels a side"
            ));
        }
        // A1111: the latents are `ux // f` wide, `(ux - rx) // f` of them cut away, half (rounded
        // down) on the left.
        let (tx, ty) = ((ux - rx) / f, (uy - ry) / f);
        let size = ((ux / f - tx) * f, (uy / f - ty) * f);
        let offset = ((tx / 2) * f, (ty / 2) * f);
        let (ux, uy) = (ux as u32, uy as u32);
        let size = (size.0 as u32, size.1 as u32);
        let offset = (offset.0 as u32, offset.1 as u32);
        Ok(HiresPlan {
            upscaled: (ux, uy),
            size,
            offset,
        })
    }

    /// The second pass's steps.
    pub fn steps_or(&self, first_pass: u32) -> u32 {
        if self.steps == 0 {
            first_pass
        } else {
            self.steps
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(size: HiresSize) -> HiresFix {
        HiresFix {
            upscaler: HiresUpscaler::Latent(InterpolateMode::Bilinear),
            size,
            steps: 0,
            strength: 0.7,
        }
    }

    #[test]
    fn sizes_follow_a1111() {
        let plan = |size, first| fix(size).plan(first, 8, 4096).unwrap();
        assert_eq!(plan(HiresSize::Scale(2.0), (512, 768)).size, (1024, 1536));
        // int(512 * 1.3) = 665, floored to 664 for the latents.
        let p = plan(HiresSize::Scale(1.3), (512, 512));
        assert_eq!((p.upscaled, p.size), ((665, 665), (664, 664)));
        // 640 * 1.3 is 832.0000000000001 in doubles (A1111), 831.99996 from the f32 1.3.
        assert_eq!(plan(HiresSize::Scale(1.3), (640, 640)).size, (832, 832));
        // A size off the latent grid: A1111 keeps ux // 8 - (ux - rx) // 8 latent columns:
        // 512x768 to 1020x1020 covers as 1020x1530; 127 - 0 columns, 191 - 63 rows.
        let p = plan(HiresSize::To(1020, 1020), (512, 768));
        assert_eq!(
            (p.upscaled, p.size, p.offset),
            ((1020, 1530), (1016, 1024), (0, 248))
        );
        assert_eq!(plan(HiresSize::To(1024, 0), (512, 768)).size, (1024, 1536));
        // 512x768 to 1024x1024: cover with 1024x1536, crop the centre.
        let p = plan(HiresSize::To(1024, 1024), (512, 768));
        assert_eq!((p.upscaled, p.size), ((1024, 1536), (1024, 1024)));
        assert_eq!(p.offset, (0, 256));
    }

    #[test]
    fn absurd_settings_are_refused() {
        for size in [
            HiresSize::Scale(0.0),
            HiresSize::Scale(100.0),
            HiresSize::Scale(f32::NAN),
            HiresSize::To(0, 0),
            HiresSize::To(9000, 0),
            HiresSize::To(9_000_000, 1),
        ] {
            assert!(fix(size).plan((512, 512), 8, 4096).is_err(), "{size:?}");
        }
        let mut zero = fix(HiresSize::Scale(2.0));
        zero.strength = 0.0;
        assert!(zero.plan((512, 512), 8, 4096).is_err());
    }

    #[test]
    fn upscaler_names_parse_as_a1111_writes_them() {
        let parse = |n: &str| HiresUpscaler::parse(n, &[]).unwrap();
        assert_eq!(
            parse("Latent (bicubic antialiased)"),
            HiresUpscaler::Latent(InterpolateMode::BicubicAntialias)
        );
        assert_eq!(
            parse("latent"),
            HiresUpscaler::Latent(InterpolateMode::Bilinear)
        );
        assert_eq!(parse("None"), HiresUpscaler::Lanczos);
        for name in HiresUpscaler::builtin_names() {
            let upscaler = parse(name);
            if name != "None" {
                assert_eq!(upscaler.a1111_name(), name);
            }
        }
        let err = HiresUpscaler::parse("4x-Nothing", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown hires upscaler"), "{err}");
    }
}
