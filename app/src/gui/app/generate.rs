//! Turning the form into jobs: the request the settings describe (with the model's
//! capabilities and the refiner in play), and queuing a batch of them.

use inference::api::{GenerateRequest, MAX_BATCH, SamplerChoice, SdeNoise};
use inference::rng::random_seed;

use super::EmberApp;
use crate::gui::action::View;
use crate::gui::session::{Level, ModelState};

impl EmberApp {
    /// Generate forever's next click: once nothing is left to make and the model is ready.
    /// A close or a start-again waiting for the queue to finish stops it, and so does a click
    /// that queues nothing (the reason is on show).
    pub(super) fn keep_generating(&mut self) {
        if !self.session.forever {
            return;
        }
        if self.quitting.asked || self.device_choice.when_idle {
            self.session.forever = false;
            return;
        }
        let idle = self.session.running.is_none() && self.session.queue.is_empty();
        if idle && matches!(self.session.model, ModelState::Ready(_)) && !self.generate() {
            self.session.forever = false;
        }
    }

    /// Queues `batch_count` jobs from the settings (seeds `seed`, `seed + 1`, ...; with a
    /// variation, variation seeds counting up), or the X/Y/Z plot's cells when it is on;
    /// `false` when it queued none (a notice says why).
    #[must_use]
    pub(super) fn generate(&mut self) -> bool {
        if self.session.refuse_when_stopped() {
            return false;
        }
        if matches!(self.session.model, ModelState::Empty) {
            self.session.notify(
                Level::Warning,
                "load a model first: drop a checkpoint on the window or choose one",
            );
            return false;
        }
        if let ModelState::Loading { path, .. } = &self.session.model {
            // The request is built from the model's capabilities (an SDXL model's second
            // prompts and size conditioning, the refiner, the LoRA folders beside it): a
            // job queued now would silently go without them.
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            self.session.notify(
                Level::Warning,
                format!("{name} is still loading: Generate once it is ready"),
            );
            return false;
        }
        let planned = self.request().and_then(|request| match self.view {
            View::Canvas => self
                .canvas_request(request)
                .map(|(request, job)| (request, Some(job))),
            _ => Ok((request, None)),
        });
        let planned = planned.and_then(|(mut request, job)| {
            self.attach_controls(&mut request)?;
            Ok((request, job))
        });
        let plot = planned.and_then(|planned| Ok((planned, self.settings.plot.plot()?)));
        let ((request, canvas_job), plot) = match plot {
            Ok(r) => r,
            Err(e) => {
                self.session.notify(Level::Error, e);
                return false;
            }
        };
        // Kept to put back when nothing is queued: a failed Generate changes nothing.
        let seeds_before = (self.settings.seed, self.settings.noise.variation_seed);
        if !self.settings.seed_locked {
            self.settings.seed = random_seed();
        }
        let noise = &mut self.settings.noise;
        if noise.extras && !noise.variation_locked {
            noise.variation_seed = random_seed();
        }
        let mut first = request;
        first.seed = self.settings.seed;
        if let Some(variation) = first.noise.variation.as_mut() {
            variation.seed = self.settings.noise.variation_seed;
        }
        if canvas_job.is_some() {
            self.canvas.hint = None;
        }
        let queued = match plot {
            Some(plot) => self.queue_plot(&plot, first, canvas_job),
            None => self.queue_batch(&first, canvas_job),
        };
        if !queued {
            (self.settings.seed, self.settings.noise.variation_seed) = seeds_before;
        }
        queued
    }

    /// Queues `batch_count` jobs from `first`; `false` (with a notice) when its dynamic
    /// prompts cannot be read.
    #[must_use]
    fn queue_batch(
        &mut self,
        first: &GenerateRequest,
        canvas_job: Option<inference::canvas::CanvasJob>,
    ) -> bool {
        // Clamped here too: the form's field clamps only when it is drawn, and a settings
        // file may say anything.
        let mut jobs = Vec::new();
        for i in 0..self.settings.batch_count.clamp(1, MAX_BATCH) {
            // A1111's batch: seeds seed, seed + 1, ..., or with a variation the seed and
            // variation seeds counting up.
            let mut job = first.clone();
            job.seed = first.image_seed(i as usize);
            job.noise = first.noise.for_image(i as usize);
            jobs.push(job);
        }
        if !self.resolve_dynamic_prompts(&mut jobs) {
            return false;
        }
        for job in jobs {
            let id = self.session.enqueue(job);
            if let Some(canvas_job) = &canvas_job {
                self.canvas_jobs.insert(id, canvas_job.clone());
                self.canvas.jobs_from_source.insert(id);
            }
        }
        true
    }

    /// The request the settings describe (seed set by the caller).
    pub fn request(&self) -> Result<GenerateRequest, String> {
        let s = &self.settings;
        let (sampler, schedule) = (s.sampler, s.schedule);
        let caps = self.session.model().map(|m| &m.capabilities);
        let second = |text: &str| {
            (caps.is_some_and(|c| c.second_prompt()) && !text.trim().is_empty())
                .then(|| text.to_string())
        };
        let refiner = self.refiner_in_play()?;
        let size_conditioning = if caps.is_some_and(|c| c.size_conditioning()) {
            s.size_conditioning.to_request()
        } else {
            Default::default()
        };
        let scored = caps.is_some_and(|c| c.aesthetic_score())
            || refiner.is_some_and(|r| r.capabilities.aesthetic_score());
        // The hires fix is the Create view's (the canvas is img2img).
        let hires = match self.view {
            View::Canvas => None,
            _ => s
                .hires
                .to_request(&self.add_on_dirs(inference::add_on_folders::UPSCALERS))?,
        };
        // The styles' text is part of the prompts from here on, as in A1111: the job, the
        // queue kept across a start-again and the image's metadata hold what they made.
        let (prompt, negative_prompt) =
            self.styles
                .apply(&s.styles, &s.prompt, &s.negative_prompt)?;
        let request = GenerateRequest {
            hires,
            prompt_2: second(&s.prompt_2),
            negative_prompt_2: second(&s.negative_prompt_2),
            cfg_rescale: s.cfg_rescale,
            size_conditioning,
            refiner_switch: refiner.map(|_| s.refiner.switch_at),
            aesthetic_score: scored.then_some(s.refiner.aesthetic_score),
            negative_aesthetic_score: scored.then_some(s.refiner.negative_aesthetic_score),
            prompt,
            negative_prompt,
            width: s.width,
            height: s.height,
            steps: s.steps,
            cfg_scale: s.cfg_scale,
            seed: s.seed,
            batch: 1,
            noise: s.noise.to_request(),
            sampler: SamplerChoice::Named { sampler, schedule },
            clip_skip: s.clip_skip,
            emphasis: s.emphasis,
            vae_tiling: s.vae_tiling,
            seamless: s.seamless,
            embedding_dirs: self.embedding_dirs(),
            lora_dirs: self.lora_dirs(),
            preview: inference::preview::PreviewOptions {
                method: s.preview,
                taesd_dirs: self.add_on_dirs(inference::add_on_folders::PREVIEW_DECODERS),
            },
            vae: s.vae.clone(),
            sde_noise: if s.sde_brownian {
                SdeNoise::BrownianTree
            } else {
                SdeNoise::Generator
            },
            ..GenerateRequest::default()
        };
        request.validate_settings().map_err(|e| e.to_string())?;
        Ok(request)
    }

    /// Resolves each job's dynamic prompts from its seed when they are on; `false` (with a
    /// notice) when a template cannot be read. Wildcards not found are one warning each.
    #[must_use]
    pub(super) fn resolve_dynamic_prompts(&mut self, jobs: &mut [GenerateRequest]) -> bool {
        if !self.settings.dynamic_prompts {
            return true;
        }
        let dirs = self.add_on_dirs(crate::dynamic_prompts::WILDCARDS);
        let mut warnings = std::collections::BTreeSet::new();
        for job in jobs {
            match crate::dynamic_prompts::apply(job, &dirs) {
                Ok(found) => warnings.extend(found),
                Err(e) => {
                    self.session
                        .notify(Level::Error, format!("dynamic prompts: {e}"));
                    return false;
                }
            }
        }
        for warning in warnings {
            self.session.notify(Level::Warning, warning);
        }
        true
    }

    /// Where prompts' embedding names are looked up: the models folder's `embeddings/`
    /// (A1111's convention), then the folders near the loaded model.
    pub fn embedding_dirs(&self) -> Vec<std::path::PathBuf> {
        self.add_on_dirs(inference::add_on_folders::EMBEDDINGS)
    }

    /// Where the prompt's `<lora:name:w>` tags are looked up: the models folder's `Lora/`
    /// (A1111) and `loras/` (ComfyUI), then the folders near the loaded model.
    pub fn lora_dirs(&self) -> Vec<std::path::PathBuf> {
        self.add_on_dirs(inference::add_on_folders::LORAS)
    }

    fn add_on_dirs(&self, names: &[&str]) -> Vec<std::path::PathBuf> {
        let model = self.session.model().map(|m| m.path.as_path());
        inference::add_on_folders::for_app(self.settings.models_dir.as_deref(), model, names)
    }

    /// The refiner a generation hands over to: the loaded one when the refiner is on and
    /// the model is one it can refine; an error while it is still loading.
    fn refiner_in_play(&self) -> Result<Option<&inference::worker::ModelSummary>, String> {
        // The form offers the refiner for SDXL base models, which it refines.
        let wanted = self.settings.refiner.enabled
            && self
                .session
                .model()
                .is_some_and(|m| m.capabilities.family == inference::family::Family::Sdxl);
        if !wanted {
            return Ok(None);
        }
        match &self.session.refiner {
            ModelState::Ready(r) => Ok(Some(r.as_ref())),
            ModelState::Loading { .. } => {
                Err("the refiner is still loading; wait a moment or turn it off".into())
            }
            ModelState::Empty => Ok(None),
        }
    }
}
