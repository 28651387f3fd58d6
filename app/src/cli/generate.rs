//! `ember generate`: flags to a request, the model loaded, images written with metadata.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;

use inference::api::{GenerateRequest, Progress, SamplerChoice, Stage};
use inference::device::{DeviceKind, choose_precision};
use inference::external_vae::LoadedVae;
use inference::imaging::{ImageRgb8, SaveFormat, write_atomic};
use inference::metadata::ModelRef;
use inference::model::{Layout, Model};
use inference::pipeline::generate_hires;
use inference::weights::{self, LoadOptions};
use inference::{hashing, metadata};

use super::GenerateArgs;
use super::args::SeedArg;
use super::canvas::{self, Canvas};

mod flags;
mod plot;

pub(super) use flags::check_image_out;
use flags::{check_flag_pairs, generation_size, output_paths, parse_prediction, sampler_choice};

/// Runs `ember generate`: checks every flag, loads the model (and refiner), generates, and
/// writes each image (with its settings as A1111 writes them) atomically to its path.
pub fn run(args: &GenerateArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let started = std::time::Instant::now();
    let (outputs, format) = output_paths(&args.out, args.batch, args.jpeg_quality)?;
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
    let plot = plot::parse(args)?;
    let given_seed = SeedArg::fixed(args.seed);
    let given_variation_seed = SeedArg::fixed(args.variation_seed);
    let seed = given_seed.unwrap_or_else(inference::rng::random_seed);
    let variation_seed = given_variation_seed.unwrap_or_else(inference::rng::random_seed);
    let mut request = flags::request(args, sampler.clone(), (seed, variation_seed))?;
    // Everything that does not need the model fails now, before a long load.
    request.validate_settings().map_err(err)?;
    // A plot's VAE axis names the VAEs in the `VAE/` folders near the model.
    let vae_dirs =
        inference::add_on_folders::near_model(&args.model, inference::add_on_folders::VAES);
    let vaes = inference::external_vae::files_in(&vae_dirs);
    let checkpoints = plot::checkpoints_beside(args);
    let plot_context = crate::plot::Context {
        variation_seed,
        schedule_follows_sampler: args.schedule.is_none() && args.scheduler_config.is_none(),
        vaes: &vaes,
        checkpoints: &checkpoints,
    };
    let wildcards = match args.no_dynamic_prompts {
        true => None,
        false => Some(flags::wildcard_dirs(args)?),
    };
    if let Some(dirs) = &wildcards {
        // Its syntax checked now; resolved (and its warnings printed) per image below.
        crate::dynamic_prompts::apply(&mut request.clone(), dirs)?;
    }
    // A plot's cells too: its seeds drawn here are drawn again once the model is known.
    let largest_cell = match &plot {
        Some(plot) => plot::largest_size(&plot.plan(&request, plot_context)?),
        None => None,
    };

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
    check_memory(args, &request, (&options, &refiner_options), largest_cell)?;
    let upscaler = super::hires::load_upscaler(request.hires.as_ref(), &options)?;
    let (mut model, mut refiner) = load_models(args, (&options, &refiner_options))?;
    if args.verbose {
        eprintln!("loaded in {:.1} s", started.elapsed().as_secs_f64());
    }
    // A plot's Schedule type axis needs a named sampler: A1111's default, not the folder's
    // diffusers scheduler.
    let schedule_axis = plot
        .as_ref()
        .is_some_and(|p| p.has(crate::plot::AxisKind::Schedule));
    if sampler.is_none() && !schedule_axis {
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
    let refiner_caps = refiner.as_ref().map(Model::capabilities);
    let planned = match &plot {
        Some(plot) => Some(plot.plan(&request, plot_context)?),
        None => None,
    };
    let mut requests: Vec<GenerateRequest> = match &planned {
        Some(planned) => planned.cells.iter().map(|c| c.request.clone()).collect(),
        None => vec![request.clone()],
    };
    if let Some(dirs) = &wildcards {
        // Each image's prompt from its own seed (a batch shares its first image's).
        let mut warned = std::collections::BTreeSet::new();
        for r in &mut requests {
            for warning in crate::dynamic_prompts::apply(r, dirs)? {
                if warned.insert(warning.clone()) {
                    eprintln!("warning: {warning}");
                }
            }
        }
    }
    plot::check_checkpoints(&requests, &model, &options)?;
    let mut tile = (0, 0);
    for r in &requests {
        // A plot's other checkpoints are checked as they load (their family may differ).
        if r.checkpoint
            .as_ref()
            .is_none_or(|c| c.path == model.info.path)
        {
            r.validate(&caps).map_err(err)?;
            r.validate_refiner(&caps, refiner_caps.as_ref())
                .map_err(err)?;
        }
        let size = inference::pipeline::hires::hires_plan(r, &model)
            .map_err(err)?
            .map_or((r.width, r.height), |p| p.size);
        // A canvas image comes back at the canvas's size.
        let size = canvas
            .job
            .as_ref()
            .map_or(size, |job| job.finished_size(size));
        tile = (tile.0.max(size.0), tile.1.max(size.1));
    }
    if let Some(planned) = &planned {
        crate::plot::grid::check_size(planned, tile)?;
    }
    // The first image's LoRAs and ControlNets before anything is printed: a LoRA of
    // another family fails here.
    let mut vae_cache = None;
    let mut first_adapters = Some(set_adapters(
        (&mut model, refiner.as_mut()),
        &requests[0],
        (&mut vae_cache, vae_upcast),
    )?);
    if given_seed.is_none() {
        eprintln!("seed: {seed}");
    }
    if given_variation_seed.is_none() && request.noise.active_variation().is_some() {
        eprintln!("variation seed: {variation_seed}");
    }

    let mut printer = ProgressPrinter {
        terminal: std::io::stderr().is_terminal(),
    };
    let mut made = Vec::with_capacity(requests.len());
    for (i, cell) in requests.iter().enumerate() {
        // A plot's Checkpoint name axis: its cells come one checkpoint at a time.
        if let Some(wanted) = &cell.checkpoint
            && wanted.path != model.info.path
        {
            eprintln!("loading {}", wanted.path.display());
            // The old model goes first, so two never share memory.
            drop(model);
            model = plot::load_checkpoint(wanted, &options)?;
            first_adapters = None;
        }
        if let Some(planned) = &planned {
            let label = planned.cell_label(i);
            eprintln!("image {} of {}: {label}", i + 1, requests.len());
        }
        let outputs = match &planned {
            Some(_) => vec![plot::cell_path(&args.out, i)],
            None => outputs.clone(),
        };
        let mut one = || {
            let adapters = match first_adapters.take() {
                Some(adapters) => adapters,
                None => set_adapters(
                    (&mut model, refiner.as_mut()),
                    cell,
                    (&mut vae_cache, vae_upcast),
                )?,
            };
            let mut generation = generate_hires(
                &model,
                refiner.as_ref(),
                upscaler.as_ref(),
                cell,
                &mut printer,
            )
            .map_err(err)?;
            generation.loras = adapters.loras;
            generation.vae = adapters.vae;
            for warning in &generation.warnings {
                eprintln!("warning: {warning}");
            }
            let first = write_images(
                &model,
                refiner.as_ref(),
                cell,
                &generation,
                (&canvas, &outputs, format),
            )?;
            // A plot keeps each image for its grid, not its latents.
            let generation = planned.is_none().then_some(generation);
            Ok::<_, String>((first, generation))
        };
        match one() {
            Ok(result) => made.push(Some(result)),
            // A plot goes on without a failed image (black in its grid, as in A1111).
            Err(e) if planned.is_some() => {
                eprintln!("error: image {} of {}: {e}", i + 1, requests.len());
                made.push(None);
            }
            Err(e) => return Err(e),
        }
    }
    match &planned {
        Some(planned) => {
            let first_parameters = made.iter().flatten().next().map(|((_, p), _)| p.clone());
            let images: Vec<Option<ImageRgb8>> = made
                .into_iter()
                .map(|m| m.map(|((image, _), _)| image))
                .collect();
            let failed = images.iter().filter(|i| i.is_none()).count();
            if failed < images.len() {
                let first_parameters = first_parameters.unwrap_or_default();
                plot::write_grid(planned, &images, &first_parameters, (&args.out, format))?;
            }
            if failed > 0 {
                return Err(format!(
                    "{failed} of the plot's {} images failed (black in its grid)",
                    images.len()
                ));
            }
        }
        None => {
            let Some(Some((_, Some(generation)))) = made.pop() else {
                unreachable!("one generation, made or returned as an error");
            };
            if let Some(path) = &args.save_latents {
                let bytes = latents_safetensors(&generation.latents, generation.latent_shape)?;
                write_atomic(path, &bytes).map_err(err)?;
                println!("{}", path.display());
            }
        }
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

/// Merges the LoRAs `request` asks for into `model` (warnings printed) and sets its
/// ControlNets; the merged LoRAs' names and hashes.
fn set_adapters(
    (model, refiner): (&mut Model, Option<&mut Model>),
    request: &GenerateRequest,
    (vae_cache, vae_upcast): (&mut Option<LoadedVae>, bool),
) -> Result<Adapters, String> {
    let err = |e: inference::Error| e.to_string();
    let (loras, mut warnings) = inference::lora::set_for_request(model, request).map_err(err)?;
    inference::control::set_for_request(model, request).map_err(err)?;
    let mut models = vec![model];
    models.extend(refiner.filter(|_| request.refiner_switch.is_some()));
    let vae = inference::external_vae::set_for_request(&mut models, request, vae_cache, vae_upcast)
        .map_err(err)?;
    warnings.extend(vae.warnings);
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    Ok(Adapters {
        loras,
        vae: vae.used,
    })
}

/// What [`set_adapters`] put in, for the metadata.
struct Adapters {
    loras: Vec<(String, String)>,
    vae: Option<(String, Option<String>)>,
}

/// The model and, with `--refiner`, the refiner, their loaders' notes printed.
fn load_models(
    args: &GenerateArgs,
    (options, refiner_options): (&LoadOptions, &LoadOptions),
) -> Result<(Model, Option<Model>), String> {
    let err = |e: inference::Error| e.to_string();
    let model = weights::load(&args.model, options).map_err(err)?;
    for note in model.info.report.notes() {
        eprintln!("note: {note}");
    }
    let refiner = match &args.refiner {
        Some(path) => {
            let refiner = weights::load(path, refiner_options).map_err(err)?;
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
    }
    Ok((model, refiner))
}

/// Each image of `generation` finished on its canvas and written atomically to its path,
/// with its settings and the models' hashes as A1111 writes them; the first image as
/// written and its settings' text (a plot's grid is made of them).
fn write_images(
    model: &Model,
    refiner: Option<&Model>,
    request: &GenerateRequest,
    generation: &inference::api::Generation,
    (canvas, outputs, format): (&Canvas, &[std::path::PathBuf], SaveFormat),
) -> Result<(ImageRgb8, String), String> {
    let hash = hash_or_warn(model);
    let refiner_hash = refiner.and_then(hash_or_warn);
    let refiner_ref = refiner.map(|r| ModelRef {
        info: &r.info,
        hash: refiner_hash.as_deref(),
    });
    let mut first = None;
    for (i, (image, path)) in generation.images.iter().zip(outputs).enumerate() {
        let main = ModelRef {
            info: &model.info,
            hash: hash.as_deref(),
        };
        let mut parameters = metadata::for_generation(request, main, refiner_ref, i);
        metadata::push_generation_fields(&mut parameters, generation);
        canvas.annotate(&mut parameters);
        let image = canvas.finish(image);
        let text = parameters.to_text();
        super::write::write_image(path, &image, format, &[("parameters", &text)])?;
        if first.is_none() {
            first = Some((image, text));
        }
    }
    first.ok_or_else(|| "the generation made no image".to_string())
}

/// Refuses, before anything is loaded, a generation that cannot fit in the free memory: the
/// models' weights (read from their headers) plus the working memory at this size (or at
/// `size`, a plot's largest image).
fn check_memory(
    args: &GenerateArgs,
    request: &GenerateRequest,
    (options, refiner_options): (&LoadOptions, &LoadOptions),
    size: Option<(u32, u32)>,
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
    let size = match size {
        Some(size) => size,
        None => generation_size(args, (native, native))?,
    };
    let rows = inference::pipeline::residency::rows(request);
    let bytes = options.precision.dtype().size() as u64;
    let tiling = request.effective_vae_tiling();
    let estimate_at = |size, rows| {
        inference::memory::estimate(
            parameters,
            bytes,
            &plan.unet,
            &plan.vae,
            size,
            rows,
            // Attention never holds whole score matrices: tiles on the CPU, Burn's flash
            // kernels (autotune) on a GPU.
            (false, tiling),
        )
    };
    let mut estimate = estimate_at(size, rows);
    // A hires fix's second pass, one image at a time at its larger size, may need more.
    if let Some(fix) = &request.hires {
        let factor = plan.vae.factor() as u32;
        let second = fix
            .plan(size, factor, inference::api::MAX_SIDE)
            .map_err(err)?;
        let per_image = rows / request.batch.max(1) as usize;
        let hires = estimate_at(second.size, per_image);
        estimate.working = estimate.working.max(hires.working);
    }
    if args.verbose {
        eprintln!(
            "memory estimate: {} of weights, {} of working memory",
            inference::memory::human_bytes(estimate.weights),
            inference::memory::human_bytes(estimate.working)
        );
    }
    match inference::memory::available_on(&options.device) {
        Some(free) => {
            let helps = (bytes > 2, !request.seamless.is_on());
            inference::memory::check_fits(estimate, (free, memory), helps).map_err(err)
        }
        None => Ok(()),
    }
}

/// [`hash_of`], or none with a warning: a checkpoint moved or unreadable since it loaded
/// costs the images their `Model hash` field, not the images themselves.
fn hash_or_warn(model: &Model) -> Option<String> {
    hash_of(model).unwrap_or_else(|e| {
        eprintln!("warning: the images are written without the model's hash: {e}");
        None
    })
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
