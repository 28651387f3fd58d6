//! `ember generate --hires-*`: the hires fix from flags, and its ESRGAN model.

use inference::add_on_folders::{self, UPSCALERS};
use inference::api::{DEFAULT_HIRES_STRENGTH, HiresFix, HiresSize, HiresUpscaler};
use inference::upscale::{self, UpscaleModel};
use inference::weights::LoadOptions;

use super::GenerateArgs;

/// A1111's default "Upscale by".
const DEFAULT_HIRES_SCALE: f32 = 2.0;

/// The hires fix the flags ask for, or `None` when no `--hires-*` flag is given.
pub fn from_args(args: &GenerateArgs) -> Result<Option<HiresFix>, String> {
    let any = args.hires_scale.is_some()
        || args.hires_size.is_some()
        || args.hires_upscaler.is_some()
        || args.hires_steps.is_some()
        || args.hires_strength.is_some();
    if !any {
        return Ok(None);
    }
    if args.init_image.is_some() {
        return Err("hires fix works on txt2img; drop --init-image or the --hires-* flags".into());
    }
    let size = match (&args.hires_size, args.hires_scale) {
        (Some(_), Some(_)) => {
            return Err("give --hires-scale or --hires-size, not both".into());
        }
        (Some(text), None) => {
            let parsed = text
                .split_once(['x', 'X'])
                .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)));
            let Some((w, h)) = parsed else {
                return Err(format!(
                    "--hires-size must be WxH (e.g. 1024x1536), got {text:?}"
                ));
            };
            HiresSize::To(w, h)
        }
        (None, scale) => HiresSize::Scale(scale.unwrap_or(DEFAULT_HIRES_SCALE)),
    };
    let mut dirs = args.upscalers.clone();
    if let Some(dir) = dirs.iter().find(|d| !d.is_dir()) {
        return Err(format!("--upscalers: {} is not a folder", dir.display()));
    }
    dirs.extend(add_on_folders::near_model(&args.model, UPSCALERS));
    let upscaler = HiresUpscaler::parse(args.hires_upscaler.as_deref().unwrap_or("Latent"), &dirs)
        .map_err(|e| e.to_string())?;
    let fix = HiresFix {
        upscaler,
        size,
        steps: args.hires_steps.unwrap_or(0),
        strength: args.hires_strength.unwrap_or(DEFAULT_HIRES_STRENGTH),
    };
    // The size is checked against the first pass once it is known; the rest now.
    fix.plan((512, 512), 8, inference::api::MAX_SIDE)
        .map_err(|e| e.to_string())?;
    Ok(Some(fix))
}

/// The ESRGAN model a hires fix names, loaded (before the checkpoint, so a bad file fails
/// fast).
pub fn load_upscaler(
    fix: Option<&HiresFix>,
    options: &LoadOptions,
) -> Result<Option<UpscaleModel>, String> {
    match fix.map(|f| &f.upscaler) {
        Some(HiresUpscaler::Model(path)) => upscale::load(path, &options.device)
            .map(Some)
            .map_err(|e| e.to_string()),
        _ => Ok(None),
    }
}
