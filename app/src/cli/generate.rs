//! `ember generate`: flags to a request, the model loaded, images written with metadata.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use inference::add_on_folders::{EMBEDDINGS, LORAS, near_model};

use inference::api::{
    GenerateRequest, MaskedContent, Progress, SamplerChoice, SdeNoise, SizeConditioning, Stage,
    VaeTiling,
};
use inference::device::{DeviceKind, choose_precision};
use inference::imaging::{self, write_atomic};
use inference::metadata::ModelRef;
use inference::model::{Layout, Model};
use inference::pipeline::generate_hires;
use inference::schedule::diffusers::{Prediction, SchedulerConfig};
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::weights::{self, LoadOptions};
use inference::{hashing, metadata};

use super::GenerateArgs;
use super::canvas::{self, Canvas};

/// Default denoising strength with an init image (A1111's).
const DEFAULT_STRENGTH: f32 = 0.75;
/// Default refiner switch (A1111's and diffusers' examples).
const DEFAULT_REFINER_SWITCH: f32 = 0.8;

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
fn parse_prediction(value: &str) -> Result<Prediction, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "epsilon" | "eps" => Ok(Prediction::Epsilon),
        "v" | "v-prediction" | "v_prediction" => Ok(Prediction::V),
        other => Err(format!("unknown prediction {other:?}; valid: epsilon, v")),
    }
}

/// The flags that only make sense together, checked before anything is loaded.
fn check_flag_pairs(args: &GenerateArgs) -> Result<(), String> {
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

pub fn run(args: &GenerateArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let started = std::time::Instant::now();
    let outputs = output_paths(&args.out, args.batch)?;
    let sampler = sampler_choice(args)?;
    let device_name = args
        .device
        .clone()
        .or_else(|| std::env::var("EMBER_DEVICE").ok())
        .unwrap_or_else(|| "auto".into());
    let opened = DeviceKind::parse(&device_name)
        .map_err(err)?
        .open()
        .map_err(err)?;
    let device = opened.device.clone();
    let (precision, vae_upcast) = choose_precision(&args.precision, &opened).map_err(err)?;
    if args.verbose {
        eprintln!("device: {}; precision: {precision}", opened.description);
    }
    let prediction = args
        .prediction
        .as_deref()
        .map(parse_prediction)
        .transpose()?;
    check_flag_pairs(args)?;
    canvas::validate(args)?;
    let size_conditioning = SizeConditioning {
        original: parse_size(args.original_size.as_deref(), "--original-size")?,
        crop: parse_corner(args.crop_top_left.as_deref())?,
        target: parse_size(args.target_size.as_deref(), "--target-size")?,
    };
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
        hires: super::hires::from_args(args)?,
        vae_tiling: VaeTiling::parse(&args.vae_tiling).map_err(err)?,
    };
    // Everything that does not need the model fails now, before a long load.
    request.validate_settings().map_err(err)?;

    let options = LoadOptions {
        config_dir: args.config.clone(),
        prediction,
        vae_upcast,
        ..LoadOptions::new(device.clone(), precision)
    };
    let refiner_options = LoadOptions {
        config_dir: args.refiner_config.clone(),
        vae_upcast,
        ..LoadOptions::new(device.clone(), precision)
    };
    check_memory(args, &request, (&options, &refiner_options))?;
    let upscaler = super::hires::load_upscaler(request.hires.as_ref(), &options)?;
    let mut model = weights::load(&args.model, &options).map_err(err)?;
    for note in model.info.report.notes() {
        eprintln!("note: {note}");
    }
    let refiner = match &args.refiner {
        Some(path) => {
            let refiner = weights::load(path, &refiner_options).map_err(err)?;
            for note in refiner.info.report.notes() {
                eprintln!("note: refiner: {note}");
            }
            Some(refiner)
        }
        None => None,
    };
    if args.verbose {
        let caps = model.capabilities();
        eprintln!("model: {} ({})", model.info.name, caps.label());
        if let Some(r) = &refiner {
            eprintln!("refiner: {} ({})", r.info.name, r.capabilities().label());
        }
        eprintln!("loaded in {:.1} s", started.elapsed().as_secs_f64());
    }
    if sampler.is_none() {
        request.sampler = model.default_sampler();
    }
    if let SamplerChoice::Diffusers(config) = &request.sampler
        && config.prediction != model.prediction
    {
        eprintln!(
            "note: the scheduler config says {} prediction; the model runs as {} (--prediction changes it)",
            weights::loader::prediction_name(config.prediction),
            weights::loader::prediction_name(model.prediction)
        );
    }
    let (width, height) = generation_size(args, model.native_size)?;
    request.width = width;
    request.height = height;
    request.validate_settings().map_err(err)?;
    request.controlnets = super::control::requests(args, (width, height))?;
    let canvas = Canvas::load(args, (width, height))?;
    if let Some(job) = &canvas.job {
        request.init_image = Some(job.init.clone());
        request.mask = job.mask.clone();
        request.masked_content = job.masked_content;
    }
    // Everything the models decide fails now, before anything is printed or run.
    let caps = model.capabilities();
    request.validate(&caps).map_err(err)?;
    let refiner_caps = refiner.as_ref().map(Model::capabilities);
    request
        .validate_refiner(&caps, refiner_caps.as_ref())
        .map_err(err)?;
    inference::pipeline::hires::hires_plan(&request, &model).map_err(err)?;
    let (loras, lora_warnings) =
        inference::lora::set_for_request(&mut model, &request).map_err(err)?;
    inference::control::set_for_request(&mut model, &request).map_err(err)?;
    for warning in &lora_warnings {
        eprintln!("warning: {warning}");
    }
    if args.seed.is_none() {
        eprintln!("seed: {seed}");
    }

    let mut printer = ProgressPrinter {
        terminal: std::io::stderr().is_terminal(),
    };
    let mut generation = generate_hires(
        &model,
        refiner.as_ref(),
        upscaler.as_ref(),
        &request,
        &mut printer,
    )
    .map_err(err)?;
    generation.loras = loras;
    for warning in &generation.warnings {
        eprintln!("warning: {warning}");
    }
    let hash = hash_of(&model).map_err(err)?;
    let refiner_hash = match &refiner {
        Some(r) => hash_of(r).map_err(err)?,
        None => None,
    };
    let refiner_ref = refiner.as_ref().map(|r| ModelRef {
        info: &r.info,
        hash: refiner_hash.as_deref(),
    });
    for (i, (image, path)) in generation.images.iter().zip(&outputs).enumerate() {
        let main = ModelRef {
            info: &model.info,
            hash: hash.as_deref(),
        };
        let mut parameters = metadata::for_generation(&request, main, refiner_ref, i);
        metadata::push_generation_fields(&mut parameters, &generation);
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
    if args.verbose {
        eprintln!("finished in {:.1} s", started.elapsed().as_secs_f64());
        if let Some(peak) = inference::memory::peak_resident_bytes() {
            eprintln!(
                "peak resident memory: {}",
                inference::memory::human_bytes(peak)
            );
        }
    }
    Ok(())
}

/// Refuses, before anything is loaded, a generation that cannot fit in the free memory: the
/// models' weights (read from their headers) plus the working memory at this size.
fn check_memory(
    args: &GenerateArgs,
    request: &GenerateRequest,
    (options, refiner_options): (&LoadOptions, &LoadOptions),
) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let memory = inference::memory::MemoryOf::of(&options.device);
    // On a GPU the text encoders make room once the prompts are encoded.
    let resident = |plan: &weights::plan::LoadPlan| match memory {
        inference::memory::MemoryOf::Host => plan.parameters,
        inference::memory::MemoryOf::Gpu => plan.parameters.saturating_sub(plan.encoder_parameters),
    };
    let plan = weights::plan::plan(&args.model, options).map_err(err)?;
    let mut parameters = resident(&plan);
    if let Some(path) = &args.refiner {
        parameters += resident(&weights::plan::plan(path, refiner_options).map_err(err)?);
    }
    let native = (plan.unet.sample_size * plan.vae.factor()) as u32;
    let size = generation_size(args, (native, native))?;
    let guided = request.cfg_scale > 1.0;
    let rows = request.batch as usize * if guided { 2 } else { 1 };
    let bytes = options.precision.dtype().size() as u64;
    let tiling = VaeTiling::parse(&args.vae_tiling).map_err(err)?;
    let estimate = inference::memory::estimate(
        parameters,
        bytes,
        &plan.unet,
        &plan.vae,
        size,
        rows,
        // Attention never holds whole score matrices: tiles on the CPU, Burn's flash
        // kernels (autotune) on a GPU.
        (false, tiling),
    );
    if args.verbose {
        eprintln!(
            "memory estimate: {} of weights, {} of working memory",
            inference::memory::human_bytes(estimate.weights),
            inference::memory::human_bytes(estimate.working)
        );
    }
    match inference::memory::available_on(&options.device) {
        Some(free) => {
            inference::memory::check_fits(estimate, (free, memory), bytes > 2).map_err(err)
        }
        None => Ok(()),
    }
}

/// A single file's A1111 hash (folders have none).
fn hash_of(model: &Model) -> inference::Result<Option<String>> {
    match model.info.layout {
        Layout::SingleFile(_) => {
            hashing::model_hash(&model.info.path, hashing::cache_dir().as_deref()).map(Some)
        }
        Layout::DiffusersFolder(_) => Ok(None),
    }
}

/// The PNG paths: `--out` itself, or `<stem>-<i>.png` for a batch. Checked up front.
fn output_paths(out: &Path, batch: u32) -> Result<Vec<PathBuf>, String> {
    check_png_out(out)?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
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

/// `--out` names a `.png` in an existing folder.
pub(super) fn check_png_out(out: &Path) -> Result<(), String> {
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
    Ok(())
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
fn generation_size(args: &GenerateArgs, native: (u32, u32)) -> Result<(u32, u32), String> {
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
fn lora_specs(args: &GenerateArgs) -> Result<Vec<inference::lora::LoraSpec>, String> {
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

/// `--loras` folders (each must exist), then the `Lora/` folders near the model.
fn lora_dirs(args: &GenerateArgs) -> Result<Vec<PathBuf>, String> {
    add_on_dirs(&args.loras, "--loras", "LoRA", args, LORAS)
}
