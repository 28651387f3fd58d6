//! What a request may ask: A1111's defaults for a model, the settings checks (with
//! messages that say what to change) and the step counts derived from the settings.

use super::*;

impl GenerateRequest {
    /// A request with A1111's defaults for a model: its native size, 20 steps, CFG 7,
    /// DPM++ 2M Karras (or a diffusers folder's own scheduler), CLIP skip 1.
    pub fn new(model: &ModelCapabilities, prompt: &str, seed: u64) -> Self {
        let (width, height) = model.native_size;
        Self {
            prompt: prompt.to_string(),
            width,
            height,
            seed,
            sampler: model.default_sampler.clone(),
            ..Self::default()
        }
    }

    /// The seed of image `index` of the batch: `seed + index`, or `seed` for every image
    /// when a variation is set (A1111 then steps the variation seed instead).
    pub fn image_seed(&self, index: usize) -> u64 {
        match self.noise.active_variation() {
            Some(_) => self.seed,
            None => self.seed.wrapping_add(index as u64),
        }
    }

    /// Checks the settings that do not depend on the model (so a front end can fail fast,
    /// before loading one); [`GenerateRequest::validate`] runs these too.
    pub fn validate_settings(&self) -> Result<()> {
        let bad = |m: String| Err(Error::settings(m));
        for (name, v) in [("width", self.width), ("height", self.height)] {
            if v == 0 || v > MAX_SIDE {
                return bad(format!(
                    "{name} must be between 8 and {MAX_SIDE} pixels, got {v}"
                ));
            }
            if v % 8 != 0 {
                let down = v / 8 * 8;
                let hint = if down == 0 {
                    format!("try {}", down + 8)
                } else {
                    format!("try {down} or {}", down + 8)
                };
                return bad(format!("{name} must be a multiple of 8, got {v}; {hint}"));
            }
        }
        self.noise.validate(MAX_SIDE)?;
        if self.steps == 0 || self.steps > MAX_STEPS {
            return bad(format!(
                "steps must be between 1 and {MAX_STEPS}, got {}",
                self.steps
            ));
        }
        if self.schedule_steps() > MAX_SCHEDULE_STEPS {
            return bad(format!(
                "{} exact steps at strength {} need a schedule of {} steps (at most \
                 {MAX_SCHEDULE_STEPS}); raise the strength",
                self.steps,
                self.strength,
                self.schedule_steps()
            ));
        }
        // `simple` takes evenly strided entries of the model's 1000 training steps: more
        // steps than that repeat entries, and a step of zero size makes DPM++ and the SDE
        // samplers divide by zero (NaN, reported only after the whole job ran).
        let named_steps = crate::schedule::named::TRAINING_STEPS;
        if let SamplerChoice::Named {
            schedule: ScheduleName::Simple,
            ..
        } = &self.sampler
            && self.schedule_steps() as usize > named_steps
        {
            return bad(format!(
                "the Simple schedule picks from the model's {named_steps} training steps, and this \
                 needs {}; raise the (hires) strength, lower the steps, or choose another schedule",
                self.schedule_steps()
            ));
        }
        if !self.cfg_scale.is_finite() || self.cfg_scale < 0.0 || self.cfg_scale > MAX_CFG {
            return bad(format!(
                "CFG scale must be a number between 0 and {MAX_CFG}, got {}",
                self.cfg_scale
            ));
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return bad(format!(
                "batch must be between 1 and {MAX_BATCH}, got {}",
                self.batch
            ));
        }
        if let Some(eta) = self.eta.filter(|e| !e.is_finite() || *e < 0.0 || *e > 10.0) {
            return bad(format!("eta must be between 0 and 10, got {eta}"));
        }
        if self.clip_skip == 0 {
            return bad("CLIP skip must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.strength) {
            return bad(format!(
                "strength must be between 0 and 1, got {}",
                self.strength
            ));
        }
        if !(0.0..=1.0).contains(&self.cfg_rescale) {
            return bad(format!(
                "CFG rescale must be between 0 and 1, got {}",
                self.cfg_rescale
            ));
        }
        for (name, score) in [
            ("aesthetic score", self.aesthetic_score),
            ("negative aesthetic score", self.negative_aesthetic_score),
        ] {
            if let Some(s) = score.filter(|s| !s.is_finite() || !(0.0..=10.0).contains(s)) {
                return bad(format!("{name} must be between 0 and 10, got {s}"));
            }
        }
        if let Some(s) = self.refiner_switch.filter(|s| !(*s > 0.0 && *s < 1.0)) {
            return bad(format!(
                "the refiner switch must be between 0 and 1 (the fraction of the steps the base model runs), got {s}"
            ));
        }
        let sc = &self.size_conditioning;
        for (name, size) in [("original size", sc.original), ("target size", sc.target)] {
            if let Some((w, h)) = size.filter(|&(w, h)| w == 0 || h == 0 || w > 16384 || h > 16384)
            {
                return bad(format!(
                    "{name} must be between 1 and 16384 pixels a side, got {w}x{h}"
                ));
            }
        }
        if self.seamless.is_on() && self.vae_tiling == VaeTiling::On {
            return bad(
                "seamless tiling needs the VAE to see the whole image, whose edges meet; \
                 tiles would put seams back: set VAE tiling to auto or off"
                    .into(),
            );
        }
        if sc.crop.0 > 16384 || sc.crop.1 > 16384 {
            return bad(format!(
                "the crop's top-left corner must be within 16384 pixels, got {},{}",
                sc.crop.0, sc.crop.1
            ));
        }
        Ok(())
    }

    /// Checks every setting against the model; the message says what to change.
    pub fn validate(&self, model: &ModelCapabilities) -> Result<()> {
        self.validate_settings()?;
        let bad = |m: String| Err(Error::settings(m));
        let min = model.min_side;
        for (name, v) in [("width", self.width), ("height", self.height)] {
            if v < min {
                return bad(format!(
                    "{name} must be at least {min} pixels for this model, got {v}"
                ));
            }
        }
        if self.clip_skip > model.max_clip_skip {
            return bad(format!(
                "CLIP skip must be between 1 and {}, got {}",
                model.max_clip_skip, self.clip_skip
            ));
        }
        let family = model.family;
        if !family.spec().txt2img && !self.has_init() {
            return bad(format!(
                "this is an {family} model: it refines images rather than making them from noise; use it as the refiner of an SDXL model (--refiner), or give it an init image"
            ));
        }
        if (self.prompt_2.is_some() || self.negative_prompt_2.is_some()) && !model.second_prompt() {
            return bad(format!(
                "a second prompt needs a model with a second text encoder (SDXL); this is {family}"
            ));
        }
        if !self.size_conditioning.is_default() && !model.size_conditioning() {
            return bad(format!(
                "original size, crop and target size are SDXL conditioning; this is {family}"
            ));
        }
        if self.size_conditioning.target.is_some()
            && model.aesthetic_score()
            && self.refiner_switch.is_none()
        {
            return bad(
                "the SDXL refiner is conditioned on an aesthetic score, not a target size".into(),
            );
        }
        let matches_size = |w: u32, h: u32| (w, h) == (self.width, self.height);
        if let Some(latents) = &self.init_latents {
            let f = model.vae_factor as usize;
            let channels = model.family.spec().latent_channels;
            let expected = [
                1,
                channels,
                self.height as usize / f,
                self.width as usize / f,
            ];
            if self.init_image.is_some() || self.mask.is_some() || model.inpainting {
                return bad("init latents replace the init image; they take no mask".into());
            }
            if latents.shape != expected
                || latents.values.len() != expected.iter().product::<usize>()
            {
                return bad(format!(
                    "init latents of shape {:?} do not fit {}x{} (needs {expected:?})",
                    latents.shape, self.width, self.height
                ));
            }
            if self.effective_steps() == 0 {
                return bad("the init latents' strength leaves no denoising step".into());
            }
            return Ok(());
        }
        match (&self.init_image, &self.mask) {
            (None, Some(_)) => bad("a mask needs an init image".into()),
            (None, None) if self.strength < 1.0 => {
                bad("strength below 1 needs an init image".into())
            }
            (None, None) if model.inpainting => {
                bad("this is an inpainting model: give an init image and a mask".into())
            }
            (Some(_), None) if model.inpainting => {
                bad("this is an inpainting model: give a mask too".into())
            }
            (Some(img), _) if !matches_size(img.width, img.height) => bad(format!(
                "init image is {}x{}, not the generation size",
                img.width, img.height
            )),
            (_, Some(m)) if !matches_size(m.width, m.height) => bad(format!(
                "mask is {}x{}, not the generation size",
                m.width, m.height
            )),
            (Some(_), _) if self.effective_steps() == 0 => bad(format!(
                "strength {} with {} steps leaves no denoising step; raise the strength or the steps",
                self.strength, self.steps
            )),
            _ => Ok(()),
        }
    }

    /// Checks a two-stage request: `base` runs first, `refiner` takes over at
    /// [`GenerateRequest::refiner_switch`].
    pub fn validate_refiner(
        &self,
        base: &ModelCapabilities,
        refiner: Option<&ModelCapabilities>,
    ) -> Result<()> {
        let bad = |m: String| Err(Error::settings(m));
        let takes_scores = base.aesthetic_score() || refiner.is_some_and(|r| r.aesthetic_score());
        if (self.aesthetic_score.is_some() || self.negative_aesthetic_score.is_some())
            && !takes_scores
        {
            return bad(
                "aesthetic scores condition the SDXL refiner, and no refiner is in play".into(),
            );
        }
        match (refiner, self.refiner_switch) {
            (None, None) => Ok(()),
            (None, Some(_)) => bad("a refiner switch needs a refiner model".into()),
            (Some(_), None) => bad("a refiner needs a switch point (0 to 1)".into()),
            (Some(r), Some(_)) => {
                if !base.family.spec().shares_latents_with(r.family.spec()) {
                    return bad(format!(
                        "the {} model cannot refine the {} model's latents; pick a refiner of the same family (the SDXL refiner or another SDXL model for SDXL)",
                        r.family, base.family
                    ));
                }
                if r.inpainting != base.inpainting {
                    return bad(
                        "the base model and the refiner must both be inpainting models or both not"
                            .into(),
                    );
                }
                Ok(())
            }
        }
    }

    /// The VAE tiling the generation runs with: never tiles for a seamless image (tiles
    /// would not see across its edges), so `auto` is `off` then: too large to fit is
    /// refused before it starts rather than given seams.
    pub fn effective_vae_tiling(&self) -> VaeTiling {
        match self.vae_tiling {
            VaeTiling::Auto if self.seamless.is_on() => VaeTiling::Off,
            mode => mode,
        }
    }

    /// Whether the generation starts from an image or latents (img2img / inpainting).
    pub fn has_init(&self) -> bool {
        self.init_image.is_some() || self.init_latents.is_some()
    }

    /// The length of the schedule the steps are taken from: `steps`, or with
    /// [`GenerateRequest::exact_steps`] A1111's `int(steps / min(strength, 0.999))`.
    pub fn schedule_steps(&self) -> u32 {
        if self.has_init() && self.exact_steps && self.strength > 0.0 {
            let strength = crate::upscale::typed(self.strength);
            (f64::from(self.steps) / strength.min(0.999)) as u32
        } else {
            self.steps
        }
    }

    /// Steps that actually run: `int(steps * strength)` with an init image (as diffusers),
    /// or `steps` with [`GenerateRequest::exact_steps`].
    pub fn effective_steps(&self) -> u32 {
        if self.has_init() && self.exact_steps {
            if self.strength > 0.0 { self.steps } else { 0 }
        } else if self.has_init() {
            // diffusers' `int(steps * strength)` on the Python float the user wrote: widen
            // the f32 through its shortest decimal form, since `0.9f32 as f64` is
            // 0.89999997..., which would take 8 of 10 steps where diffusers takes 9.
            let strength: f64 = self.strength.to_string().parse().unwrap_or(0.0);
            ((f64::from(self.steps) * strength) as u32).min(self.steps)
        } else {
            self.steps
        }
    }
}
