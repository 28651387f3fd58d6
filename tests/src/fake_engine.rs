//! A fake [`Engine`] for worker and UI tests: it takes `step_time` per step, paints a
//! gradient the size of the request, panics when the prompt is `panic` and fails (an
//! error, the model kept) when it is `fail`. A file whose name contains `refiner` loads as
//! an SDXL refiner, one containing `xl` as SDXL, anything else as SD 1.x; one containing
//! `broken` fails to load (keeping the loaded model), one containing `nonstandard` needs a
//! config folder. One made [`FakeEngine::on_gpu`] loses its GPU at the prompt
//! `lose the gpu`, and goes on on the CPU as the real engine does.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use inference::api::{GenerateRequest, Generation, ModelCapabilities, SamplerChoice, Stage};
use inference::family::Family;
use inference::imaging::ImageRgb8;
use inference::schedule::diffusers::Prediction;
use inference::worker::{Cost, Engine, EngineProgress, ModelRole, ModelSummary, ModelToReload};
use inference::{Error, Result};

/// The prompt that makes the fake engine stand in for one long kernel call: it runs until
/// the cancel in scope ([`kernels::interrupt`]) says stop, or [`LONG_KERNEL_TIME`] passes.
pub const LONG_KERNEL_PROMPT: &str = "one long kernel call";
pub const LONG_KERNEL_TIME: Duration = Duration::from_secs(30);

/// Steps through `request.steps` with a pause each.
#[derive(Clone, Default)]
pub struct FakeEngine {
    pub step_time: Duration,
    /// Counts every step run, for tests that check a cancel stopped the work.
    pub steps_run: Arc<AtomicUsize>,
    /// Counts every load begun, cancelled ones too.
    pub loads_begun: Arc<AtomicUsize>,
    /// What [`Engine::cost`] answers (`Err`: the request is refused).
    pub cost: Option<std::result::Result<Cost, String>>,
    /// The loaded models (main, refiner); a failed load keeps them, as the real engine does.
    pub loaded: [Option<ModelSummary>; 2],
    /// Runs "on a GPU" until it is lost ([`Engine::fall_back_to_cpu`]).
    pub on_gpu: bool,
    /// Unloading panics: a failure outside any job or load, which stops the worker.
    pub panic_on_unload: bool,
}

impl FakeEngine {
    pub fn new(step_time: Duration) -> Self {
        Self {
            step_time,
            steps_run: Arc::default(),
            loads_begun: Arc::default(),
            cost: None,
            loaded: Default::default(),
            on_gpu: false,
            panic_on_unload: false,
        }
    }

    /// The engine "on a GPU", which the prompt `lose the gpu` loses.
    pub fn on_gpu(mut self) -> Self {
        self.on_gpu = true;
        self
    }

    /// What a generation of `request` gives: a gradient per image.
    fn finished(&self, request: &GenerateRequest) -> Generation {
        Generation {
            images: (0..request.batch)
                .map(|i| {
                    fake_image(
                        request.width,
                        request.height,
                        request.image_seed(i as usize),
                    )
                })
                .collect(),
            latents: Vec::new(),
            latent_shape: [1, 4, 1, 1],
            warnings: Vec::new(),
            sampler_label: "fake".into(),
            embeddings: Vec::new(),
            padded_conds: false,
            loras: Vec::new(),
            vae: None,
        }
    }
}

/// A `width x height` gradient whose blue channel is the seed's low byte.
pub fn fake_image(width: u32, height: u32, seed: u64) -> ImageRgb8 {
    let mut pixels = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        for x in 0..width {
            pixels.extend([
                (x * 255 / width.max(1)) as u8,
                (y * 255 / height.max(1)) as u8,
                seed as u8,
            ]);
        }
    }
    ImageRgb8 {
        width,
        height,
        pixels,
    }
}

/// What the fake engine reports for a file: its family from the name, a 64-pixel native size.
pub fn fake_capabilities(path: &Path) -> ModelCapabilities {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let family = if name.contains("refiner") {
        Family::SdxlRefiner
    } else if name.contains("xl") {
        Family::Sdxl
    } else {
        Family::Sd1
    };
    // Sizes as tiny as the reference models', twice as large for SDXL as for SD 1.x.
    let side = if family == Family::Sd1 { 64 } else { 128 };
    ModelCapabilities {
        family,
        inpainting: false,
        prediction: Prediction::Epsilon,
        zero_terminal_snr: false,
        native_size: (side, side),
        min_side: 8,
        max_clip_skip: 12,
        default_sampler: SamplerChoice::a1111_default(),
        vae_factor: 8,
    }
}

impl Engine for FakeEngine {
    fn cost(&mut self, _: &GenerateRequest, _: &dyn Fn() -> bool) -> Result<Option<Cost>> {
        match &self.cost {
            None => Ok(None),
            Some(Ok(cost)) => Ok(Some(*cost)),
            Some(Err(e)) => Err(Error::settings(e.clone())),
        }
    }

    fn load(
        &mut self,
        path: &Path,
        config_dir: Option<&Path>,
        role: ModelRole,
        progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<ModelSummary> {
        self.loads_begun.fetch_add(1, Ordering::SeqCst);
        if progress(0, 1).is_break() {
            return Err(Error::Cancelled);
        }
        if !path.exists() {
            return Err(Error::settings(format!(
                "{} does not exist",
                path.display()
            )));
        }
        if path.to_string_lossy().contains("nonstandard") && config_dir.is_none() {
            return Err(Error::NeedsConfig {
                path: path.to_path_buf(),
                message: "not the released size; choose its config folder".into(),
            });
        }
        if path.to_string_lossy().contains("broken") {
            return Err(Error::settings("not a Stable Diffusion checkpoint"));
        }
        if path.to_string_lossy().contains("slow") {
            // A load that ends after what the app does meanwhile (an image's restore).
            std::thread::sleep(Duration::from_millis(300));
        }
        let capabilities = fake_capabilities(path);
        let summary = ModelSummary {
            path: path.to_path_buf(),
            name: "fake".into(),
            family: capabilities.label(),
            native_size: capabilities.native_size,
            capabilities,
            layout: "fake".into(),
            inpainting: false,
            notes: vec!["this is a fake model".into()],
            default_sampler: None,
        };
        self.loaded[role as usize] = Some(summary.clone());
        Ok(summary)
    }

    fn fall_back_to_cpu(&mut self) -> Option<Vec<ModelToReload>> {
        if !std::mem::take(&mut self.on_gpu) {
            return None;
        }
        let roles = [ModelRole::Main, ModelRole::Refiner];
        let loaded = std::mem::take(&mut self.loaded);
        Some(
            roles
                .into_iter()
                .zip(loaded)
                .filter_map(|(role, model)| {
                    Some(ModelToReload {
                        role,
                        path: model?.path,
                        config_dir: None,
                    })
                })
                .collect(),
        )
    }

    fn loaded(&self, role: ModelRole) -> Option<ModelSummary> {
        self.loaded[role as usize].clone()
    }

    fn unload(&mut self, role: ModelRole) {
        assert!(!self.panic_on_unload, "the fake engine fails to unload");
        self.loaded[role as usize] = None;
    }

    fn generate(
        &mut self,
        request: &GenerateRequest,
        progress: &mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
        _interrupted: &dyn Fn() -> bool,
    ) -> Result<Generation> {
        assert!(
            request.prompt != "panic",
            "the fake engine was told to panic"
        );
        if request.prompt == "fail" {
            // A job that fails as a bad setting does: an error, the model kept.
            return Err(Error::settings(
                "the fake engine refuses the prompt \"fail\"",
            ));
        }
        // As the real engine: a plot cell for a checkpoint runs on that one only.
        let main = self.loaded[0].as_ref().map(|m| m.path.as_path());
        if let Some(wanted) = &request.checkpoint
            && Some(wanted.path.as_path()) != main
        {
            return Err(Error::settings(format!(
                "this image is for {}, but another model is loaded",
                wanted.path.display()
            )));
        }
        if self.on_gpu && request.prompt == "lose the gpu" {
            return Err(Error::DeviceLost {
                what: "the GPU stopped working while generating (a fake fault); nothing was \
                       saved"
                    .into(),
            });
        }
        if request.prompt == LONG_KERNEL_PROMPT {
            // Stands in for one long kernel call (CPU attention at a large size): it asks the
            // cancel in scope and gives up, handing back an unfinished result as if whole.
            // Counted as a step, so a test can tell it is running.
            self.steps_run.fetch_add(1, Ordering::SeqCst);
            let start = std::time::Instant::now();
            while !kernels::interrupt::requested() && start.elapsed() < LONG_KERNEL_TIME {
                std::thread::sleep(Duration::from_millis(2));
            }
            return Ok(self.finished(request));
        }
        let total = request.steps as usize;
        for step in 1..=total {
            std::thread::sleep(self.step_time);
            self.steps_run.fetch_add(1, Ordering::SeqCst);
            let preview = Some(ImageRgb8 {
                width: 1,
                height: 1,
                pixels: vec![step as u8; 3],
            });
            let report = EngineProgress {
                stage: Stage::Denoising,
                step,
                total,
                elapsed: Duration::ZERO,
                preview,
            };
            if progress(report).is_break() {
                return Err(Error::Cancelled);
            }
        }
        Ok(self.finished(request))
    }

    fn parameters(
        &mut self,
        request: &GenerateRequest,
        _generation: &Generation,
        index: usize,
    ) -> String {
        let negative = if request.negative_prompt.is_empty() {
            String::new()
        } else {
            format!("\nNegative prompt: {}", request.negative_prompt)
        };
        let seamless = match request.seamless {
            inference::api::Seamless::Off => "",
            inference::api::Seamless::Both => ", Tiling: True",
            inference::api::Seamless::X => ", Tile X: True, Tile Y: False",
            inference::api::Seamless::Y => ", Tile X: False, Tile Y: True",
        };
        format!(
            "{}{negative}\nSteps: {}, CFG scale: {}, Seed: {}, Size: {}x{}, Model: fake{seamless}",
            request.prompt,
            request.steps,
            request.cfg_scale,
            request.image_seed(index),
            request.width,
            request.height
        )
    }
}
