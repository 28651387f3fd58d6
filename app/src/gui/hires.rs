//! The hires fix's persisted settings (A1111's "Hires. fix" section), the request's
//! [`HiresFix`] they describe, and their restoring from A1111's `Hires …` fields.

use std::path::{Path, PathBuf};

use inference::api::{DEFAULT_HIRES_STRENGTH, HiresFix, HiresSize, HiresUpscaler};
use inference::metadata::Parameters;
use serde::{Deserialize, Serialize};

use super::restore::Restored;

/// A1111's Hires. fix options and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HiresSettings {
    pub enabled: bool,
    /// A1111's upscaler name (`Latent`, `Lanczos`, …) or an ESRGAN model's file stem.
    pub upscaler: String,
    /// "Upscale by", used while `resize_to` is `(0, 0)`.
    pub scale: f32,
    /// "Resize width to" / "Resize height to"; 0 for one keeps the aspect.
    pub resize_to: (u32, u32),
    /// "Hires steps"; 0 = the first pass's.
    pub steps: u32,
    /// The second pass's denoising strength.
    pub strength: f32,
}

impl Default for HiresSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            upscaler: "Latent".into(),
            scale: 2.0,
            resize_to: (0, 0),
            steps: 0,
            strength: DEFAULT_HIRES_STRENGTH,
        }
    }
}

impl HiresSettings {
    /// The request's hires fix (`None` when off); ESRGAN names are looked up in `dirs`.
    pub fn to_request(&self, dirs: &[PathBuf]) -> Result<Option<HiresFix>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let upscaler = HiresUpscaler::parse(&self.upscaler, dirs).map_err(|e| e.to_string())?;
        let size = self.size();
        Ok(Some(HiresFix {
            upscaler,
            size,
            steps: self.steps,
            strength: self.strength,
        }))
    }

    fn size(&self) -> HiresSize {
        match self.resize_to {
            (0, 0) => HiresSize::Scale(self.scale),
            (w, h) => HiresSize::To(w, h),
        }
    }

    /// The second pass's size for a first pass of `(w, h)`, or why there is none.
    pub fn target(&self, (w, h): (u32, u32)) -> Result<(u32, u32), String> {
        // The size does not depend on the upscaler.
        let fix = HiresFix {
            upscaler: HiresUpscaler::Lanczos,
            size: self.size(),
            steps: self.steps,
            strength: self.strength,
        };
        fix.plan((w, h), 8, inference::api::MAX_SIDE)
            .map(|plan| plan.size)
            .map_err(|e| e.to_string())
    }
}

/// Every upscaler the section offers: A1111's built-ins, then the ESRGAN models (`.pth`,
/// `.safetensors`) in `dirs` by file stem.
pub fn upscaler_names(dirs: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = HiresUpscaler::builtin_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut models: Vec<String> = model_files(dirs)
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    models.dedup();
    names.extend(models);
    names
}

/// The upscaler model files (`.pth`, `.safetensors`, `.pt`) in `dirs`, by name.
pub fn model_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_model_file(p))
        .collect();
    files.sort_by_key(|p| p.file_stem().map(|s| s.to_os_string()));
    files
}

fn is_model_file(path: &Path) -> bool {
    path.is_file()
        && path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            ["pth", "safetensors", "pt"].contains(&e.to_ascii_lowercase().as_str())
        })
}

/// A1111's hires fields: `Hires upscale` / `Hires resize`, `Hires steps`, `Hires upscaler`,
/// and the image's `Denoising strength` (the hires pass's on a txt2img image). Without
/// them the hires fix is turned off.
pub fn restore(p: &Parameters, s: &mut HiresSettings, r: &mut Restored) {
    let named = ["Hires upscale", "Hires resize", "Hires upscaler"]
        .iter()
        .any(|k| p.get(k).is_some());
    *s = HiresSettings::default();
    if !named {
        return;
    }
    s.enabled = true;
    r.applied.push("hires fix");
    if let Some(text) = p.get("Hires upscale") {
        match text.trim().parse::<f32>() {
            Ok(v) if v.is_finite() => s.scale = v,
            _ => r
                .skipped
                .push(format!("hires upscale {text:?} is not a number")),
        }
    }
    if let Some(size) = p.get("Hires resize").and_then(super::restore::parse_size) {
        s.resize_to = size;
    }
    if let Some(steps) = p.get("Hires steps").and_then(|t| t.trim().parse().ok()) {
        s.steps = steps;
    }
    if let Some(strength) = p
        .get("Denoising strength")
        .and_then(|t| t.trim().parse::<f32>().ok())
        .filter(|v| v.is_finite())
    {
        s.strength = strength;
    }
    if let Some(name) = p.get("Hires upscaler") {
        // A1111's `None` resizes with Lanczos; ESRGAN names are looked up when generating.
        s.upscaler = if name.trim().eq_ignore_ascii_case("none") {
            "Lanczos".into()
        } else {
            name.trim().to_string()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1111_hires_fields_restore_and_plain_images_turn_it_off() {
        let p = Parameters::parse(
            "a castle\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1, Size: 512x768, \
             Model: x, Denoising strength: 0.45, Hires upscale: 1.5, Hires steps: 12, \
             Hires upscaler: 4x-UltraSharp",
        );
        let mut s = HiresSettings::default();
        let mut r = Restored::default();
        restore(&p, &mut s, &mut r);
        assert!(s.enabled && r.applied.contains(&"hires fix"));
        assert_eq!((s.scale, s.steps, s.strength), (1.5, 12, 0.45));
        assert_eq!(s.upscaler, "4x-UltraSharp");
        assert_eq!(s.target((512, 768)).unwrap(), (768, 1152));

        let plain = Parameters::parse("a castle\nSteps: 20, Seed: 1, Size: 512x512");
        restore(&plain, &mut s, &mut r);
        assert!(!s.enabled);
    }

    #[test]
    fn the_request_carries_the_section_and_names_must_resolve() {
        let s = HiresSettings {
            enabled: true,
            upscaler: "Latent (nearest-exact)".into(),
            resize_to: (1024, 0),
            ..HiresSettings::default()
        };
        let fix = s.to_request(&[]).unwrap().unwrap();
        assert_eq!(fix.size, HiresSize::To(1024, 0));
        assert!(fix.upscaler.is_latent());
        let missing = HiresSettings {
            upscaler: "4x-Missing".into(),
            ..s
        };
        assert!(missing.to_request(&[]).unwrap_err().contains("4x-Missing"));
        assert_eq!(HiresSettings::default().to_request(&[]).unwrap(), None);
    }
}
