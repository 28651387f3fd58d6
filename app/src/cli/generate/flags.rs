//! `ember generate`'s flags read and checked: sizes, the sampler, output paths, add-on
//! folders, LoRAs, and the request they make before the model is loaded.

use std::path::{Path, PathBuf};

use inference::add_on_folders::{EMBEDDINGS, LORAS, near_model};
use inference::api::{
    GenerateRequest, MaskedContent, NoiseOptions, RngSource, SamplerChoice, SdeNoise, Seamless,
    SizeConditioning, VaeChoice, VaeTiling, Variation,
};
use inference::imaging::{self, SaveFormat, check_jpeg_quality};
use inference::preview::{PreviewMethod, PreviewOptions};
use inference::schedule::diffusers::{Prediction, SchedulerConfig};
use inference::schedule::named::{SamplerName, ScheduleName};

use crate::cli::{GenerateArgs, canvas};

/// Default denoising strength with an init image (A1111's).
const DEFAULT_STRENGTH: f32 = 0.75;
/// Default refiner switch (A1111's and diffusers' examples).
const DEFAULT_REFINER_SWITCH: f32 = 0.8;

/// The prompts with the `--style`s applied, from `--styles-file` or else the app's
/// `styles.csv`.
fn styled_prompts(args: &GenerateArgs) -> Result<(String, String), String> {
    if args.styles.is_empty() {
        return Ok((args.prompt.clone(), args.negative.clone()));
    }
    let path = args.styles_file.clone().unwrap_or_else(|| {
        crate::gui::paths::Paths::from_env()
            .config_dir
            .join(crate::styles::FILE_NAME)
    });
    let book = crate::styles::StyleBook::read(&path).map_err(|e| format!("--style: {e}"))?;
    book.apply(&args.styles, &args.prompt, &args.negative)
        .map_err(|e| {
            let known: Vec<&str> = book.styles().iter().map(|s| s.name.as_str()).collect();
            let known = if known.is_empty() {
                "it has none".to_string()
            } else {
                format!("it has {}", known.join(", "))
            };
            format!("--style: {e} in {} ({known})", path.display())
        })
}

/// The request the flags describe, before the model is known (its default sampler and
/// native size, the canvas and ControlNet images are filled in once it is loaded).
pub(super) fn request(
    args: &GenerateArgs,
    sampler: Option<SamplerChoice>,
    (seed, variation_seed): (u64, u64),
) -> Result<GenerateRequest, String> {
    let err = |e: inference::Error| e.to_string();
    let size_conditioning = SizeConditioning {
        original: parse_size(args.original_size.as_deref(), "--original-size")?,
        crop: parse_corner(args.crop_top_left.as_deref())?,
        target: parse_size(args.target_size.as_deref(), "--target-size")?,
    };
    let (prompt, negative_prompt) = styled_prompts(args)?;
    Ok(GenerateRequest {
        prompt,
        negative_prompt,
        width: args.width.unwrap_or(512),
        height: args.height.unwrap_or(512),
        steps: args.steps,
        cfg_scale: args.cfg,
        seed,
        batch: args.batch,
        noise: noise_options(args, variation_seed)?,
        sampler: sampler.unwrap_or_else(SamplerChoice::a1111_default),
        eta: args.eta,
        clip_skip: args.clip_skip,
        emphasis: inference::text::emphasis::Emphasis::parse(&args.emphasis).map_err(err)?,
        embedding_dirs: embedding_dirs(args)?,
        loras: lora_specs(args)?,
        lora_dirs: lora_dirs(args)?,
        controlnets: Vec::new(),
        init_image: None,
        strength: if args.init_image.is_some() {
            args.strength.unwrap_or(DEFAULT_STRENGTH)
        } else {
            1.0
        },
        mask: None,
        masked_content: MaskedContent::Original,
        sde_noise: SdeNoise::parse(&args.sde_noise).map_err(err)?,
        prompt_2: args.prompt_2.clone(),
        negative_prompt_2: args.negative_2.clone(),
        size_conditioning,
        aesthetic_score: args.aesthetic_score,
        negative_aesthetic_score: args.negative_aesthetic_score,
        cfg_rescale: args.cfg_rescale,
        refiner_switch: args
            .refiner
            .as_ref()
            .map(|_| args.refiner_switch.unwrap_or(DEFAULT_REFINER_SWITCH)),
        init_latents: None,
        exact_steps: args.exact_steps,
        hires: crate::cli::hires::from_args(args)?,
        vae_tiling: VaeTiling::parse(&args.vae_tiling).map_err(err)?,
        seamless: Seamless::parse(&args.seamless).map_err(err)?,
        metadata_fields: Vec::new(),
        // The command line shows no preview: the latent colours cost nothing, a TAESD
        // decode would.
        preview: PreviewOptions {
            method: PreviewMethod::LatentColours,
            taesd_dirs: Vec::new(),
        },
        vae: vae_choice(&args.vae)?,
        checkpoint: None,
    })
}

/// The noise source and A1111's seed extras; `variation_seed` stands in for a
/// `--variation-seed` not given.
fn noise_options(args: &GenerateArgs, variation_seed: u64) -> Result<NoiseOptions, String> {
    let variation = match (args.variation_seed, args.variation_strength) {
        (Some(_), None) => {
            return Err("--variation-seed needs --variation-strength (0 to 1)".into());
        }
        (seed, Some(strength)) => Some(Variation {
            seed: crate::cli::args::SeedArg::fixed(seed).unwrap_or(variation_seed),
            strength,
        }),
        (None, None) => None,
    };
    let resize_from = parse_size(args.seed_resize_from.as_deref(), "--seed-resize-from")?;
    Ok(NoiseOptions {
        rng: RngSource::parse(&args.rng).map_err(|e| e.to_string())?,
        variation,
        resize_from,
        eta_noise_seed_delta: args.ensd,
    })
}

/// `WxH` (a size flag's value).
fn parse_size(value: Option<&str>, flag: &str) -> Result<Option<(u32, u32)>, String> {
    value
        .map(|v| {
            v.split_once(['x', 'X'])
                .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)))
                .ok_or_else(|| {
                    format!("{flag} takes WIDTHxHEIGHT in pixels (e.g. 1024x1024), got {v:?}")
                })
        })
        .transpose()
}

/// `X,Y` (the crop corner).
fn parse_corner(value: Option<&str>) -> Result<(u32, u32), String> {
    let Some(v) = value else {
        return Ok((0, 0));
    };
    v.split_once(',')
        .and_then(|(x, y)| Some((x.trim().parse().ok()?, y.trim().parse().ok()?)))
        .ok_or_else(|| format!("--crop-top-left takes X,Y in pixels (e.g. 0,0), got {v:?}"))
}

/// `epsilon` or `v`.
pub(super) fn parse_prediction(value: &str) -> Result<Prediction, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "epsilon" | "eps" => Ok(Prediction::Epsilon),
        "v" | "v-prediction" | "v_prediction" => Ok(Prediction::V),
        other => Err(format!("unknown prediction {other:?}; valid: epsilon, v")),
    }
}

/// The flags that only make sense together, checked before anything is loaded.
pub(super) fn check_flag_pairs(args: &GenerateArgs) -> Result<(), String> {
    let needs = |given: bool, flag: &str, other: &str, present: bool| {
        if given && !present {
            Err(format!("{flag} needs {other}"))
        } else {
            Ok(())
        }
    };
    let init = args.init_image.is_some();
    let refiner = args.refiner.is_some();
    needs(args.strength.is_some(), "--strength", "--init-image", init)?;
    needs(args.mask.is_some(), "--mask", "--init-image", init)?;
    needs(args.exact_steps, "--exact-steps", "--init-image", init)?;
    needs(
        args.refiner_switch.is_some(),
        "--refiner-switch",
        "--refiner",
        refiner,
    )?;
    needs(
        args.refiner_config.is_some(),
        "--refiner-config",
        "--refiner",
        refiner,
    )
}

/// The output paths, `--out` itself or `<stem>-<i>.<ext>` for a batch, and the format their
/// extension names. Checked up front.
pub(super) fn output_paths(
    out: &Path,
    batch: u32,
    jpeg_quality: u8,
) -> Result<(Vec<PathBuf>, SaveFormat), String> {
    let format = check_image_out(out, jpeg_quality)?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if batch <= 1 {
        return Ok((vec![out.to_path_buf()], format));
    }
    // Before the names are made: the request's own check comes later.
    if batch > inference::api::MAX_BATCH {
        return Err(format!(
            "batch must be between 1 and {}, got {batch}",
            inference::api::MAX_BATCH
        ));
    }
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let paths = (0..batch)
        .map(|i| dir.join(format!("{stem}-{i}.{ext}")))
        .collect();
    Ok((paths, format))
}

/// `--out` names a `.png`, `.jpg`/`.jpeg` or `.webp` file in an existing folder; the format
/// it names (JPEGs at `--jpeg-quality`).
pub(in crate::cli) fn check_image_out(out: &Path, jpeg_quality: u8) -> Result<SaveFormat, String> {
    let Some(format) = SaveFormat::for_path(out, jpeg_quality) else {
        return Err(format!(
            "--out must name a .png, .jpg or .webp file, got {}",
            out.display()
        ));
    };
    check_jpeg_quality(jpeg_quality).map_err(|e| format!("--jpeg-quality: {e}"))?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!(
            "the output folder {} does not exist",
            dir.display()
        ));
    }
    Ok(format)
}

/// `--scheduler-config`, or `--sampler`/`--schedule` (each defaulting sensibly), or `None`
/// for the model's own default.
pub(super) fn sampler_choice(args: &GenerateArgs) -> Result<Option<SamplerChoice>, String> {
    if let Some(path) = &args.scheduler_config {
        if args.sampler.is_some() || args.schedule.is_some() {
            return Err("give either --scheduler-config or --sampler/--schedule, not both".into());
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{e}: {}", path.display()))?;
        let config =
            SchedulerConfig::from_json(&text).map_err(|e| format!("{e}: {}", path.display()))?;
        return Ok(Some(SamplerChoice::Diffusers(config)));
    }
    if args.sampler.is_none() && args.schedule.is_none() {
        return Ok(None);
    }
    let sampler = match &args.sampler {
        Some(name) => SamplerName::parse(name).map_err(|e| e.to_string())?,
        None => SamplerName::DpmPp2M,
    };
    let schedule = match &args.schedule {
        Some(name) => ScheduleName::parse(name).map_err(|e| e.to_string())?,
        None => sampler.a1111_automatic_schedule(),
    };
    Ok(Some(SamplerChoice::Named { sampler, schedule }))
}

/// `--width`/`--height`, else the init image's size (rounded down to multiples of 8), else
/// the model's native size.
pub(super) fn generation_size(
    args: &GenerateArgs,
    native: (u32, u32),
) -> Result<(u32, u32), String> {
    let from_canvas = if args.width.is_none() || args.height.is_none() {
        canvas::canvas_size(args)?
    } else {
        None
    };
    let (native_w, native_h) = match (&args.init_image, from_canvas) {
        (_, Some(size)) => size,
        // "Only masked" generates at the model's size; the crop is resized to it.
        (Some(_), None) if args.inpaint_area == "masked" => native,
        (Some(path), None) if args.width.is_none() || args.height.is_none() => {
            let (w, h) = image_size(path)?;
            let rounded = inference::canvas::generation_size(w, h);
            if rounded != (w, h) {
                eprintln!(
                    "note: the init image is {w}x{h}; generating at {}x{}",
                    rounded.0, rounded.1
                );
            }
            rounded
        }
        _ => native,
    };
    Ok((
        args.width.unwrap_or(native_w),
        args.height.unwrap_or(native_h),
    ))
}

fn image_size(path: &Path) -> Result<(u32, u32), String> {
    let img = imaging::load_rgb(path, None).map_err(|e| e.to_string())?;
    Ok((img.width, img.height))
}

/// `--embeddings` folders (each must exist), then the model's own `embeddings/` folders.
fn embedding_dirs(args: &GenerateArgs) -> Result<Vec<PathBuf>, String> {
    add_on_dirs(
        &args.embeddings,
        "--embeddings",
        "embedding",
        args,
        EMBEDDINGS,
    )
}

/// Folders given with `flag` (each must exist), then those named `names` near the model.
fn add_on_dirs(
    given: &[PathBuf],
    flag: &str,
    what: &str,
    args: &GenerateArgs,
    names: &[&str],
) -> Result<Vec<PathBuf>, String> {
    let mut dirs = Vec::new();
    for dir in given {
        if !dir.is_dir() {
            return Err(format!(
                "{flag} {}: no such folder (give the folder that holds the {what} files)",
                dir.display()
            ));
        }
        dirs.push(dir.clone());
    }
    dirs.extend(near_model(&args.model, names));
    Ok(dirs)
}

/// `--lora FILE[:WEIGHT]` flags (the weight applies to the text encoders and the UNet).
pub(super) fn lora_specs(args: &GenerateArgs) -> Result<Vec<inference::lora::LoraSpec>, String> {
    args.lora
        .iter()
        .map(|arg| {
            let (path, weight) = match arg.rsplit_once(':') {
                Some((path, w)) if w.parse::<f32>().is_ok() => {
                    (path, w.parse::<f32>().unwrap_or(1.0))
                }
                _ => (arg.as_str(), 1.0),
            };
            if !weight.is_finite() {
                return Err(format!("--lora {arg}: the weight must be a number"));
            }
            let path = PathBuf::from(path);
            if !path.is_file() {
                return Err(format!("--lora {arg}: no such file"));
            }
            Ok(inference::lora::LoraSpec {
                path,
                text_encoder: weight,
                unet: weight,
            })
        })
        .collect()
}

/// `--vae`: a file or folder named must be there.
fn vae_choice(text: &str) -> Result<VaeChoice, String> {
    let choice = VaeChoice::parse(text);
    if let VaeChoice::File(path) = &choice
        && !path.exists()
    {
        return Err(format!(
            "--vae: {} does not exist (give a VAE file or folder, auto or none)",
            path.display()
        ));
    }
    Ok(choice)
}

/// `--loras` folders (each must exist), then the `Lora/` folders near the model.
fn lora_dirs(args: &GenerateArgs) -> Result<Vec<PathBuf>, String> {
    add_on_dirs(&args.loras, "--loras", "LoRA", args, LORAS)
}

/// `--wildcards` folders, then `wildcards/` near the model.
pub(super) fn wildcard_dirs(args: &GenerateArgs) -> Result<Vec<PathBuf>, String> {
    let names = crate::dynamic_prompts::WILDCARDS;
    add_on_dirs(&args.wildcards, "--wildcards", "wildcards", args, names)
}
