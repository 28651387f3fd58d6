//! `ember generate`: flags to a request, the model loaded, images written with metadata.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use inference::api::{GenerateRequest, MaskedContent, Progress, SamplerChoice, SdeNoise, Stage};
use inference::device::{DeviceKind, Precision};
use inference::imaging::{self, write_atomic};
use inference::model::{Layout, Model};
use inference::pipeline::generate;
use inference::schedule::diffusers::SchedulerConfig;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::weights::{self, LoadOptions};
use inference::{hashing, metadata};

use super::GenerateArgs;
use super::canvas::{self, Canvas};

/// Default denoising strength with an init image (A1111's).
const DEFAULT_STRENGTH: f32 = 0.75;

pub fn run(args: &GenerateArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let outputs = output_paths(&args.out, args.batch)?;
    let sampler = sampler_choice(args)?;
    let device = DeviceKind::parse(&args.device)
        .map_err(err)?
        .device()
        .map_err(err)?;
    let precision = Precision::parse(&args.precision).map_err(err)?;
    if args.strength.is_some() && args.init_image.is_none() {
        return Err("--strength needs --init-image".into());
    }
    if args.mask.is_some() && args.init_image.is_none() {
        return Err("--mask needs --init-image".into());
    }
    canvas::validate(args)?;
    let seed = args.seed.unwrap_or_else(inference::rng::random_seed);
    let mut request = GenerateRequest {
        prompt: args.prompt.clone(),
        negative_prompt: args.negative.clone(),
        width: args.width.unwrap_or(512),
        height: args.height.unwrap_or(512),
        steps: args.steps,
        cfg_scale: args.cfg,
        seed,
        batch: args.batch,
        sampler: sampler.clone().unwrap_or_else(SamplerChoice::a1111_default),
        eta: args.eta,
        clip_skip: args.clip_skip,
        init_image: None,
        strength: if args.init_image.is_some() {
            args.strength.unwrap_or(DEFAULT_STRENGTH)
        } else {
            1.0
        },
        mask: None,
        masked_content: MaskedContent::Original,
        sde_noise: SdeNoise::parse(&args.sde_noise).map_err(err)?,
    };
    // Everything that does not need the model fails now, before a long load.
    request.validate_settings().map_err(err)?;

    let model = weights::load(
        &args.model,
        &LoadOptions {
            config_dir: args.config.clone(),
            device,
            precision,
        },
    )
    .map_err(err)?;
    for note in model.info.report.notes() {
        eprintln!("note: {note}");
    }
    if sampler.is_none() {
        request.sampler = model.default_sampler();
    }
    let (width, height) = generation_size(args, &model)?;
    request.width = width;
    request.height = height;
    request.validate_settings().map_err(err)?;
    let canvas = Canvas::load(args, (width, height))?;
    request.init_image = canvas.init.clone();
    request.mask = canvas.mask.clone();
    request.masked_content = canvas.masked_content;
    if args.seed.is_none() {
        eprintln!("seed: {seed}");
    }

    let mut printer = ProgressPrinter {
        terminal: std::io::stderr().is_terminal(),
    };
    let generation = generate(&model, &request, &mut printer).map_err(err)?;
    for warning in &generation.warnings {
        eprintln!("warning: {warning}");
    }
    let hash = match model.info.layout {
        Layout::SingleFile(_) => {
            Some(hashing::model_hash(&args.model, hashing::cache_dir().as_deref()).map_err(err)?)
        }
        Layout::DiffusersFolder(_) => None,
    };
    for (i, (image, path)) in generation.images.iter().zip(&outputs).enumerate() {
        let mut parameters = metadata::for_generation(&request, &model.info, hash.as_deref(), i);
        canvas.annotate(&mut parameters);
        let image = canvas.finish(image);
        let png =
            imaging::encode_png(&image, &[("parameters", &parameters.to_text())]).map_err(err)?;
        write_atomic(path, &png).map_err(err)?;
        println!("{}", path.display());
    }
    if let Some(path) = &args.save_latents {
        let bytes = latents_safetensors(&generation.latents, generation.latent_shape)?;
        write_atomic(path, &bytes).map_err(err)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// The PNG paths: `--out` itself, or `<stem>-<i>.png` for a batch. Checked up front.
fn output_paths(out: &Path, batch: u32) -> Result<Vec<PathBuf>, String> {
    if out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
        != Some("png")
    {
        return Err(format!(
            "--out must name a .png file, got {}",
            out.display()
        ));
    }
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
    if batch <= 1 {
        return Ok(vec![out.to_path_buf()]);
    }
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((0..batch)
        .map(|i| dir.join(format!("{stem}-{i}.png")))
        .collect())
}

/// `--scheduler-config`, or `--sampler`/`--schedule` (each defaulting sensibly), or `None`
/// for the model's own default.
fn sampler_choice(args: &GenerateArgs) -> Result<Option<SamplerChoice>, String> {
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
        None => default_schedule(sampler),
    };
    Ok(Some(SamplerChoice::Named { sampler, schedule }))
}

/// A1111's "Automatic" schedule for a sampler (its `sd_samplers_kdiffusion` options).
fn default_schedule(sampler: SamplerName) -> ScheduleName {
    match sampler {
        SamplerName::DpmPp2M
        | SamplerName::DpmPpSde
        | SamplerName::DpmPp2SAncestral
        | SamplerName::Dpm2
        | SamplerName::Dpm2Ancestral => ScheduleName::Karras,
        SamplerName::DpmPp2MSde | SamplerName::DpmPp2MSdeHeun | SamplerName::DpmPp3MSde => {
            ScheduleName::Exponential
        }
        SamplerName::Ddim => ScheduleName::DdimUniform,
        _ => ScheduleName::Normal,
    }
}

/// `--width`/`--height`, else the init image's size (rounded down to multiples of 8), else
/// the model's native size.
fn generation_size(args: &GenerateArgs, model: &Model) -> Result<(u32, u32), String> {
    let from_canvas = if args.width.is_none() || args.height.is_none() {
        canvas::canvas_size(args)?
    } else {
        None
    };
    let (native_w, native_h) = match (&args.init_image, from_canvas) {
        (_, Some(size)) => size,
        // "Only masked" generates at the model's size; the crop is resized to it.
        (Some(_), None) if args.inpaint_area == "masked" => model.native_size,
        (Some(path), None) if args.width.is_none() || args.height.is_none() => {
            let (w, h) = image_size(path)?;
            let rounded = (w / 8 * 8, h / 8 * 8);
            if rounded != (w, h) {
                eprintln!(
                    "note: the init image is {w}x{h}; generating at {}x{}",
                    rounded.0, rounded.1
                );
            }
            rounded
        }
        _ => model.native_size,
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

/// The final latents as a safetensors file with one float32 tensor `latents`.
fn latents_safetensors(latents: &[f32], shape: [usize; 4]) -> Result<Vec<u8>, String> {
    let bytes: Vec<u8> = latents.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.to_vec(), &bytes)
            .map_err(|e| format!("could not encode latents: {e}"))?;
    safetensors::serialize([("latents", view)], None)
        .map_err(|e| format!("could not encode latents: {e}"))
}

/// Progress on stderr: a rewritten line on a terminal, nothing when piped.
struct ProgressPrinter {
    terminal: bool,
}

impl inference::pipeline::Observer for ProgressPrinter {
    fn progress(&mut self, p: Progress) -> ControlFlow<()> {
        if self.terminal {
            let secs = p.elapsed.as_secs_f64();
            let line = match p.stage {
                Stage::Denoising if p.step > 0 => {
                    let rate = p.step as f64 / secs.max(1e-9);
                    let eta = (p.total - p.step) as f64 / rate.max(1e-9);
                    format!(
                        "step {}/{} ({rate:.2} it/s, {eta:.0}s left)",
                        p.step, p.total
                    )
                }
                stage => format!("{stage:?}..."),
            };
            eprint!("\r\x1b[2K{line}");
            if p.stage == Stage::Decoding {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
        ControlFlow::Continue(())
    }
}
