//! [`BurnEngine`], the real [`Engine`]: Burn models on one device, a main model and an
//! optional refiner, each loaded beside the old one when memory allows.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use burn::tensor::Device;

use super::estimate::{Cost, Speed, cost};
use super::protocol::{ModelRole, ModelSummary, ModelToReload};
use crate::api::{GenerateRequest, Generation, Progress, SamplerChoice};
use crate::device::Precision;
use crate::error::Result;
use crate::imaging::ImageRgb8;
use crate::metadata::ModelRef;
use crate::model::{Layout, Model};
use crate::pipeline::{Observer, StepLatents, generate_hires};
use crate::preview::{Drawer, PreviewMethod, taesd_load};
use crate::weights::{self, LoadOptions};

use super::engine::{Engine, EngineProgress};

/// A loaded model and its A1111 hash, computed on first use (hashing takes seconds).
struct Slot {
    model: Model,
    hash: Option<String>,
    /// The config folder it was loaded with, to load it again.
    config_dir: Option<PathBuf>,
}

impl Slot {
    /// The model and, for single files, its hash (a hash that cannot be computed is left
    /// out of the metadata, as A1111 does).
    fn hashed(&mut self) -> ModelRef<'_> {
        if self.hash.is_none() && matches!(self.model.info.layout, Layout::SingleFile(_)) {
            self.hash = crate::hashing::model_hash(
                &self.model.info.path,
                crate::hashing::cache_dir().as_deref(),
            )
            .ok();
        }
        ModelRef {
            info: &self.model.info,
            hash: self.hash.as_deref(),
        }
    }
}

/// The real engine: Burn models on one device, a main model and an optional refiner.
pub struct BurnEngine {
    main: Option<Slot>,
    refiner: Option<Slot>,
    device: Device,
    precision: Precision,
    /// Keep VAEs in f32 beside half-precision networks ([`LoadOptions::vae_upcast`]).
    vae_upcast: bool,
    /// The main model's measured speed (reset when it changes).
    speed: Speed,
    /// Never hold a new model beside the old one while it loads.
    one_at_a_time: bool,
    /// The last hires-fix ESRGAN model, kept for the next job that names it.
    upscaler: Option<(std::path::PathBuf, crate::upscale::UpscaleModel)>,
    /// The last TAESD preview decoder, kept for the next job that finds it.
    taesd: Option<taesd_load::Taesd>,
    /// The last VAE file a request chose, kept for the next that chooses it.
    vae_file: Option<crate::external_vae::LoadedVae>,
}

impl BurnEngine {
    /// An engine with no model yet.
    pub fn new(device: Device, precision: Precision) -> Self {
        Self {
            main: None,
            refiner: None,
            device,
            precision,
            vae_upcast: false,
            speed: Speed::default(),
            one_at_a_time: false,
            upscaler: None,
            taesd: None,
            vae_file: None,
        }
    }

    /// Keeps VAEs in f32 beside half-precision networks (`--precision auto` on a GPU).
    pub fn with_vae_upcast(mut self, vae_upcast: bool) -> Self {
        self.vae_upcast = vae_upcast;
        self
    }

    /// Frees a slot's model before loading the next even when both would fit (where memory
    /// is tight). A failed load then loads the old model again from its file.
    pub fn one_model_at_a_time(mut self) -> Self {
        self.one_at_a_time = true;
        self
    }

    fn slot(&mut self, role: ModelRole) -> &mut Option<Slot> {
        match role {
            ModelRole::Main => &mut self.main,
            ModelRole::Refiner => &mut self.refiner,
        }
    }

    fn options(&self, config_dir: Option<&Path>) -> LoadOptions {
        LoadOptions {
            config_dir: config_dir.map(Path::to_path_buf),
            vae_upcast: self.vae_upcast,
            ..LoadOptions::new(self.device.clone(), self.precision)
        }
    }

    /// Whether the model `plan` describes fits in host memory beside the loaded ones (with a
    /// margin for loading's buffers). On a GPU its own free memory is not known: no.
    fn fits_beside(&self, plan: &weights::plan::LoadPlan) -> bool {
        if self.one_at_a_time || self.device != Device::flex() {
            return false;
        }
        let bytes = plan.parameters * self.precision.bytes() as u64;
        crate::memory::available_bytes().is_some_and(|free| free / 2 > bytes + LOAD_MARGIN)
    }

    /// Loads the model a failed load displaced, so a bad file never costs the working
    /// model (it loaded before, so this fails only if its file changed meanwhile).
    fn reload(&mut self, role: ModelRole, path: &Path, config_dir: Option<PathBuf>) {
        let options = self.options(config_dir.as_deref());
        let mut go_on = |_, _| ControlFlow::Continue(());
        if let Ok(model) = weights::loader::load_observed(path, &options, &mut go_on) {
            *self.slot(role) = Some(Slot {
                model,
                hash: None,
                config_dir,
            });
        }
    }
}

/// Memory kept free beyond a model's weights when loading it beside another.
const LOAD_MARGIN: u64 = 1 << 30;

/// What the UI shows of a loaded model.
pub fn summarize(model: &Model) -> ModelSummary {
    let info = &model.info;
    let layout = match info.layout {
        Layout::DiffusersFolder(f) => format!("diffusers folder ({})", f.name()),
        Layout::SingleFile(f) => format!("single file ({})", f.name()),
    };
    let default_sampler = match model.default_sampler() {
        SamplerChoice::Diffusers(config) => Some(config.class.class_name().to_string()),
        SamplerChoice::Named { .. } => None,
    };
    let capabilities = model.capabilities();
    ModelSummary {
        path: info.path.clone(),
        name: info.name.clone(),
        family: capabilities.label(),
        capabilities,
        layout,
        native_size: model.native_size,
        inpainting: model.is_inpainting(),
        notes: info.report.notes(),
        default_sampler,
    }
}

/// Turns the pipeline's callbacks into [`EngineProgress`] with previews of the model's
/// current prediction of the clean image.
struct PreviewObserver<'a> {
    progress: &'a mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
    interrupted: &'a dyn Fn() -> bool,
    pending: Option<ImageRgb8>,
    drawer: Drawer<'a>,
}

impl Observer for PreviewObserver<'_> {
    fn progress(&mut self, p: Progress) -> ControlFlow<()> {
        let preview = self.pending.take();
        (self.progress)(EngineProgress {
            stage: p.stage,
            step: p.step,
            total: p.total,
            elapsed: p.elapsed,
            preview,
        })
    }

    fn step(&mut self, latents: &StepLatents<'_>) {
        if let Some(image) = self.drawer.draw(latents.denoised) {
            self.pending = Some(image);
        }
    }

    fn interrupted(&self) -> bool {
        (self.interrupted)()
    }
}

impl Engine for BurnEngine {
    fn load(
        &mut self,
        path: &Path,
        config_dir: Option<&Path>,
        role: ModelRole,
        progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<ModelSummary> {
        let options = self.options(config_dir);
        // A file that is not a model Ember can build fails here, from its headers, with the
        // loaded model untouched.
        let plan = weights::plan::plan(path, &options)?;
        let kept = if self.fits_beside(&plan) {
            None
        } else {
            // Free the old model first so two never share memory; it is loaded again from
            // its file if the new one fails.
            if role == ModelRole::Main {
                self.speed = Speed::default();
            }
            self.slot(role)
                .take()
                .map(|old| (old.model.info.path.clone(), old.config_dir))
        };
        let loaded = weights::loader::load_observed(path, &options, progress);
        let model = match loaded {
            Ok(model) => model,
            Err(e) => {
                if let Some((old_path, old_config)) = kept {
                    self.reload(role, &old_path, old_config);
                }
                return Err(e);
            }
        };
        if role == ModelRole::Main {
            self.speed = Speed::default();
        }
        let summary = summarize(&model);
        *self.slot(role) = Some(Slot {
            model,
            hash: None,
            config_dir: config_dir.map(Path::to_path_buf),
        });
        Ok(summary)
    }

    fn loaded(&self, role: ModelRole) -> Option<ModelSummary> {
        let slot = match role {
            ModelRole::Main => &self.main,
            ModelRole::Refiner => &self.refiner,
        };
        slot.as_ref().map(|s| summarize(&s.model))
    }

    fn unload(&mut self, role: ModelRole) {
        if role == ModelRole::Main {
            self.speed = Speed::default();
        }
        *self.slot(role) = None;
    }

    fn generate(
        &mut self,
        request: &GenerateRequest,
        progress: &mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Generation> {
        let main = self
            .main
            .as_mut()
            .ok_or_else(|| crate::Error::settings("no model is loaded; load a checkpoint first"))?;
        if let Some(wanted) = &request.checkpoint
            && wanted.path != main.model.info.path
        {
            return Err(crate::Error::settings(format!(
                "this image is for {}, but {} is loaded",
                wanted.path.display(),
                main.model.info.name
            )));
        }
        // LoRAs merge into the loaded weights (and come out again when no longer asked for).
        let (loras, lora_warnings) = crate::lora::set_for_request(&mut main.model, request)?;
        crate::control::set_for_request(&mut main.model, request)?;
        // The chosen VAE goes into every model that may decode (the refiner, when it runs).
        let mut models: Vec<&mut Model> = vec![&mut main.model];
        if let (Some(_), Some(refiner)) = (request.refiner_switch, self.refiner.as_mut()) {
            models.push(&mut refiner.model);
        }
        let vae = crate::external_vae::set_for_request(
            &mut models,
            request,
            &mut self.vae_file,
            self.vae_upcast,
        )?;
        let model = &main.model;
        let refiner = match request.refiner_switch {
            Some(_) => Some(
                &self
                    .refiner
                    .as_ref()
                    .ok_or_else(|| {
                        crate::Error::settings(
                            "no refiner is loaded; choose one or turn the refiner off",
                        )
                    })?
                    .model,
            ),
            None => None,
        };
        let upscaler = match request.hires.as_ref().map(|h| &h.upscaler) {
            Some(crate::api::HiresUpscaler::Model(path)) => {
                Some(load_upscaler(&mut self.upscaler, path, &self.device)?)
            }
            _ => None,
        };
        let (drawer, preview_warning) =
            preview_drawer(&mut self.taesd, request, model, &self.device);
        let mut generation = generate_hires(
            model,
            refiner,
            upscaler,
            request,
            &mut PreviewObserver {
                progress,
                interrupted,
                pending: None,
                drawer,
            },
        )?;
        generation.loras = loras;
        generation.vae = vae.used;
        generation.warnings.extend(lora_warnings);
        generation.warnings.extend(vae.warnings);
        generation.warnings.extend(preview_warning);
        Ok(generation)
    }

    fn upscale(
        &mut self,
        request: &crate::upscale::UpscaleRequest,
        on_tile: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<(ImageRgb8, String)> {
        let model = load_upscaler(&mut self.upscaler, &request.model, &self.device)?;
        let image = crate::upscale::upscale(model, &request.image, &request.options, on_tile)?;
        let scale = request.options.scale.unwrap_or(model.scale() as f32);
        Ok((image, crate::upscale::extras_text(scale, &model.name)))
    }

    fn cost(
        &mut self,
        request: &GenerateRequest,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Option<Cost>> {
        match &self.main {
            Some(main) => {
                let available = crate::memory::available_on(&self.device);
                cost(
                    &main.model,
                    request,
                    (&mut self.speed, interrupted),
                    available,
                )
                .map(Some)
            }
            None => Ok(None),
        }
    }

    fn parameters(
        &mut self,
        request: &GenerateRequest,
        generation: &Generation,
        index: usize,
    ) -> String {
        let Some(main) = self.main.as_mut() else {
            return String::new();
        };
        let main = main.hashed();
        let refiner = match (&mut self.refiner, request.refiner_switch) {
            (Some(r), Some(_)) => Some(r.hashed()),
            _ => None,
        };
        let mut p = crate::metadata::for_generation(request, main, refiner, index);
        crate::metadata::push_generation_fields(&mut p, generation);
        p.to_text()
    }

    fn fall_back_to_cpu(&mut self) -> Option<Vec<ModelToReload>> {
        let cpu = Device::flex();
        if self.device == cpu {
            return None;
        }
        let reload = [ModelRole::Main, ModelRole::Refiner]
            .into_iter()
            .filter_map(|role| {
                let slot = self.slot(role).take()?;
                Some(ModelToReload {
                    role,
                    path: slot.model.info.path.clone(),
                    config_dir: slot.config_dir,
                })
            })
            .collect();
        // As an engine made for the CPU is (`--precision auto` there is f32).
        self.upscaler = None;
        self.taesd = None;
        self.vae_file = None;
        self.device = cpu;
        self.precision = Precision::F32;
        self.vae_upcast = false;
        self.speed = Speed::default();
        Some(reload)
    }
}

/// How this job's previews are drawn, and a warning when TAESD was asked for but cannot
/// be had: its decoder is looked up in the request's folders and those near the model,
/// kept in `cache` for the next job, and checked against the model's latents.
fn preview_drawer<'a>(
    cache: &'a mut Option<taesd_load::Taesd>,
    request: &GenerateRequest,
    model: &Model,
    device: &Device,
) -> (Drawer<'a>, Option<String>) {
    let family = model.family();
    let method = request.preview.method;
    if method == PreviewMethod::LatentColours {
        return (Drawer::Latent(family), None);
    }
    let mut dirs = request.preview.taesd_dirs.clone();
    for dir in
        crate::add_on_folders::near_model(&model.info.path, crate::add_on_folders::PREVIEW_DECODERS)
    {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let Some(path) = taesd_load::find(&dirs, family) else {
        let warning = (method == PreviewMethod::Taesd).then(|| {
            format!(
                "no TAESD decoder for {} latents was found (put {}_decoder.pth in the models \
                 folder's VAE-taesd or vae_approx folder, or download it in the Download \
                 window); the previews show the latent colours",
                family.spec().label,
                taesd_load::decoder_stem(family)
            )
        });
        return (Drawer::Latent(family), warning);
    };
    if cache.as_ref().is_none_or(|t| t.path != path) {
        *cache = None;
        match taesd_load::load(&path, device) {
            Ok(taesd) => *cache = Some(taesd),
            Err(e) => {
                let warning = format!("the previews show the latent colours: {e}");
                return (Drawer::Latent(family), Some(warning));
            }
        }
    }
    let taesd = cache.as_ref().expect("just filled");
    match taesd_load::check_latents(taesd, family) {
        Ok(()) => (
            Drawer::Taesd {
                decoder: &taesd.decoder,
                pacer: Default::default(),
            },
            None,
        ),
        Err(e) => (
            Drawer::Latent(family),
            Some(format!("the previews show the latent colours: {e}")),
        ),
    }
}

/// The ESRGAN model at `path`, from `cache` when it is the one kept there (the previous one
/// is freed before another loads).
fn load_upscaler<'a>(
    cache: &'a mut Option<(PathBuf, crate::upscale::UpscaleModel)>,
    path: &Path,
    device: &Device,
) -> Result<&'a crate::upscale::UpscaleModel> {
    if cache.as_ref().is_none_or(|(p, _)| p != path) {
        *cache = None;
        *cache = Some((path.to_path_buf(), crate::upscale::load(path, device)?));
    }
    Ok(&cache.as_ref().expect("just filled").1)
}
