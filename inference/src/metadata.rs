//! Generation parameters in PNG text chunks, in A1111's `parameters` format so A1111,
//! civitai and other tools read Ember's images, and readers for A1111's, ComfyUI's and
//! Fooocus' metadata so Ember reads theirs (`metadata/readers.rs`).
//!
//! Format (A1111 `modules/infotext_utils.py`): the prompt, then a `Negative prompt: ...`
//! line when there is one, then one line of `Key: value` pairs separated by `, `; a value
//! holding `,`, `:` or a newline is written as a JSON string.

mod readers;
mod seamless;

pub use readers::{ImageMetadata, from_text_chunks};
pub use seamless::seamless;

/// Parameters as written in (or read from) A1111's `parameters` text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parameters {
    pub prompt: String,
    pub negative_prompt: String,
    /// `Key: value` pairs in file order (`Steps`, `Sampler`, `Seed`, ...).
    pub fields: Vec<(String, String)>,
}

impl Parameters {
    /// The value of a field, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Adds a field (its value is quoted on output when it needs to be).
    pub fn push(&mut self, key: &str, value: impl ToString) {
        self.fields.push((key.to_string(), value.to_string()));
    }

    /// The `parameters` text.
    pub fn to_text(&self) -> String {
        let mut text = self.prompt.clone();
        if !self.negative_prompt.is_empty() {
            text.push_str("\nNegative prompt: ");
            text.push_str(&self.negative_prompt);
        }
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{k}: {}", quote(v)))
            .collect();
        text.push('\n');
        text.push_str(&fields.join(", "));
        text
    }

    /// Parses A1111's `parameters` text (also what Ember writes).
    pub fn parse(text: &str) -> Self {
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let (fields, body) = match lines.split_last() {
            Some((last, rest)) if looks_like_fields(last) => (parse_fields(last), rest),
            _ => (Vec::new(), &lines[..]),
        };
        let mut prompt = Vec::new();
        let mut negative = Vec::new();
        let mut in_negative = false;
        for line in body {
            if let Some(rest) = line.strip_prefix("Negative prompt:") {
                in_negative = true;
                negative.push(rest.trim_start());
            } else if in_negative {
                negative.push(line);
            } else {
                prompt.push(*line);
            }
        }
        Self {
            prompt: prompt.join("\n"),
            negative_prompt: negative.join("\n"),
            fields,
        }
    }
}

/// A1111's `quote`: JSON-encode values that would break the `k: v, k: v` line.
fn quote(value: &str) -> String {
    if value.contains([',', ':', '\n', '"']) {
        serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
    } else {
        value.to_string()
    }
}

fn looks_like_fields(line: &str) -> bool {
    let fields = parse_fields(line);
    fields.len() >= 3 || fields.iter().any(|(k, _)| k == "Steps")
}

/// Splits `Key: value, Key: "quoted, value", ...`.
fn parse_fields(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let Some(colon) = rest.find(':') else { break };
        let key = rest[..colon].trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_alphanumeric() || " -/_".contains(c))
        {
            break;
        }
        let after = rest[colon + 1..].trim_start();
        let (value, remaining) = if after.starts_with('"') {
            let mut de = serde_json::Deserializer::from_str(after).into_iter::<String>();
            match de.next() {
                Some(Ok(v)) => (v, &after[de.byte_offset()..]),
                _ => break,
            }
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        out.push((key.to_string(), value));
        rest = remaining
            .trim_start()
            .strip_prefix(',')
            .unwrap_or(remaining)
            .trim_start();
    }
    out
}

/// A1111's name for a diffusers scheduler class, and the nearest of A1111's "Schedule type"s
/// to the scheduler's own timesteps (not "Automatic", which A1111 and a restore read as the
/// sampler's default: Karras for DPM++ 2M): Karras where the class applies
/// `use_karras_sigmas`; else by `timestep_spacing`: `leading` strides like A1111's DDIM,
/// `trailing` and the DPM-Solver family's `linspace` (n + 1 points, the last dropped) like
/// SGM Uniform, the Euler family's `linspace` is Normal.
fn diffusers_names(
    config: &crate::schedule::diffusers::SchedulerConfig,
) -> (&'static str, &'static str) {
    use crate::schedule::diffusers::SchedulerClass as C;
    let sampler = match config.class {
        C::EulerDiscrete => "Euler",
        C::EulerAncestralDiscrete => "Euler a",
        C::HeunDiscrete => "Heun",
        C::LmsDiscrete => "LMS",
        C::Ddim => "DDIM",
        C::Pndm => "PLMS",
        C::DpmSolverMultistep if config.sde => "DPM++ 2M SDE",
        // First order, DPM-Solver(++) is DDIM's step, which in sigma space is Euler's: the
        // name A1111 (and a restore) can read.
        C::DpmSolverMultistep if config.solver_order == 1 => "Euler",
        C::DpmSolverMultistep => "DPM++ 2M",
        C::KDpm2Discrete => "DPM2",
        C::KDpm2AncestralDiscrete => "DPM2 a",
        C::DpmSolverSde => "DPM++ SDE",
        C::Ddpm => "DDPM",
        C::UniPcMultistep => "UniPC",
        C::DeisMultistep => "DEIS",
        C::Lcm => "LCM",
    };
    use crate::schedule::diffusers::Spacing;
    let applies_karras = !matches!(config.class, C::Ddim | C::Pndm | C::Ddpm | C::Lcm);
    let dpm_solver_family = matches!(
        config.class,
        C::DpmSolverMultistep | C::UniPcMultistep | C::DeisMultistep
    );
    let schedule = match config.spacing {
        _ if config.use_karras_sigmas && applies_karras => "Karras",
        _ if config.class == C::Lcm => "Normal",
        Spacing::Leading => "DDIM",
        Spacing::Trailing => "SGM Uniform",
        Spacing::Linspace if dpm_solver_family => "SGM Uniform",
        Spacing::Linspace => "Normal",
    };
    (sampler, schedule)
}

/// A model as metadata names it: A1111's name (file stem) and short hash, when known.
#[derive(Clone, Copy, Debug)]
pub struct ModelRef<'a> {
    pub info: &'a crate::model::ModelInfo,
    pub hash: Option<&'a str>,
}

/// `(width, height)` as A1111 writes sizes.
fn size_text((w, h): (u32, u32)) -> String {
    format!("{w}x{h}")
}

/// The SDXL and refiner fields of a generation.
fn push_family_fields(
    p: &mut Parameters,
    request: &crate::api::GenerateRequest,
    model: ModelRef<'_>,
    refiner: Option<ModelRef<'_>>,
) {
    use crate::api::{DEFAULT_AESTHETIC_SCORE, DEFAULT_NEGATIVE_AESTHETIC_SCORE};
    if let Some(prompt_2) = &request.prompt_2 {
        p.push("Prompt 2", prompt_2);
    }
    if let Some(negative_2) = &request.negative_prompt_2 {
        p.push("Negative prompt 2", negative_2);
    }
    let sc = &request.size_conditioning;
    if let Some(size) = sc.original {
        p.push("Original size", size_text(size));
    }
    if sc.crop != (0, 0) {
        p.push("Crop top left", format!("{},{}", sc.crop.0, sc.crop.1));
    }
    if let Some(size) = sc.target {
        p.push("Target size", size_text(size));
    }
    if let Some(r) = refiner {
        let name = match r.hash {
            Some(hash) => format!("{} [{hash}]", r.info.name),
            None => r.info.name.clone(),
        };
        p.push("Refiner", name);
        if let Some(switch) = request.refiner_switch {
            p.push("Refiner switch at", switch);
        }
    }
    let scored = model.info.detected.family.spec().takes_aesthetic_score()
        || refiner.is_some_and(|r| r.info.detected.family.spec().takes_aesthetic_score());
    if scored {
        p.push(
            "Aesthetic score",
            request.aesthetic_score.unwrap_or(DEFAULT_AESTHETIC_SCORE),
        );
        p.push(
            "Negative aesthetic score",
            request
                .negative_aesthetic_score
                .unwrap_or(DEFAULT_NEGATIVE_AESTHETIC_SCORE),
        );
    }
    if request.cfg_rescale > 0.0 {
        p.push("CFG Rescale", request.cfg_rescale);
    }
    if model.info.detected.zero_terminal_snr {
        p.push("Noise Schedule", "Zero Terminal SNR");
    }
}

/// The parameters of image `index` of a generation (its seed is
/// [`GenerateRequest::image_seed`](crate::api::GenerateRequest::image_seed)) on
/// `model`, refined by `refiner` when the request hands over to one.
pub fn for_generation(
    request: &crate::api::GenerateRequest,
    model: ModelRef<'_>,
    refiner: Option<ModelRef<'_>>,
    index: usize,
) -> Parameters {
    use crate::api::SamplerChoice;
    let refiner = refiner.filter(|_| request.refiner_switch.is_some());
    let mut p = Parameters {
        prompt: request.prompt.clone(),
        negative_prompt: request.negative_prompt.clone(),
        fields: Vec::new(),
    };
    p.push("Steps", request.steps);
    match &request.sampler {
        SamplerChoice::Named { sampler, schedule } => {
            p.push("Sampler", sampler.a1111_name());
            p.push("Schedule type", schedule.a1111_name());
        }
        SamplerChoice::Diffusers(config) => {
            let (sampler, schedule) = diffusers_names(config);
            p.push("Sampler", sampler);
            p.push("Schedule type", schedule);
        }
    }
    p.push("CFG scale", request.cfg_scale);
    p.push("Seed", request.image_seed(index));
    p.push("Size", format!("{}x{}", request.width, request.height));
    if let Some(hash) = model.hash {
        p.push("Model hash", hash);
    }
    p.push("Model", &model.info.name);
    if request.has_init() {
        p.push("Denoising strength", request.strength);
    }
    if let Some(fix) = &request.hires {
        p.push("Denoising strength", fix.strength);
    }
    push_noise_fields(&mut p, request, index);
    seamless::push_fields(&mut p, request.seamless);
    if request.clip_skip > 1 {
        p.push("Clip skip", request.clip_skip);
    }
    if let Some(eta) = request.eta {
        p.push("Eta", eta);
    }
    // A1111 writes its Emphasis setting only when it is not the default.
    if request.emphasis != crate::text::emphasis::Emphasis::Original {
        p.push("Emphasis", request.emphasis.a1111_name());
    }
    if let SamplerChoice::Diffusers(config) = &request.sampler {
        p.push("Diffusers scheduler", config.class.class_name());
    }
    // Brownian trees are what A1111 and ComfyUI use, so only the other choice is written.
    let sde = match &request.sampler {
        SamplerChoice::Named { sampler, .. } => sampler.algorithm().brownian_by_default(),
        SamplerChoice::Diffusers(_) => false,
    };
    if sde && request.sde_noise != crate::api::SdeNoise::BrownianTree {
        p.push("SDE noise", request.sde_noise.name());
    }
    push_family_fields(&mut p, request, model, refiner);
    if let Some(fix) = &request.hires {
        push_hires_fields(&mut p, fix);
    }
    for (i, c) in request.controlnets.iter().enumerate() {
        p.push(&format!("ControlNet {i}"), controlnet_unit(c));
    }
    for (key, value) in &request.metadata_fields {
        p.push(key, value);
    }
    p.push("Version", concat!("Ember ", env!("CARGO_PKG_VERSION")));
    p
}

/// A1111's seed extras and noise source. `RNG` is always written: A1111 reads an image
/// without it as made with its GPU noise, which Ember's CPU noise is not. `ENSD` whenever
/// it is set (A1111 leaves it out where the sampler draws no step noise; reading it back
/// there changes nothing).
fn push_noise_fields(p: &mut Parameters, request: &crate::api::GenerateRequest, index: usize) {
    let noise = &request.noise;
    if let Some(v) = noise.active_variation() {
        p.push("Variation seed", v.seed.wrapping_add(index as u64));
        p.push("Variation seed strength", v.strength);
    }
    if let Some(size) = noise.resize_from {
        p.push("Seed resize from", size_text(size));
    }
    if noise.eta_noise_seed_delta != 0 {
        p.push("ENSD", noise.eta_noise_seed_delta);
    }
    p.push("RNG", noise.rng.a1111_name());
}

/// A1111's hires-fix fields: `Hires upscale` or `Hires resize`, `Hires steps` (when not the
/// first pass's), `Hires upscaler`.
fn push_hires_fields(p: &mut Parameters, fix: &crate::api::HiresFix) {
    match fix.size {
        crate::api::HiresSize::Scale(s) => p.push("Hires upscale", s),
        crate::api::HiresSize::To(w, h) => p.push("Hires resize", format!("{w}x{h}")),
    }
    if fix.steps > 0 {
        p.push("Hires steps", fix.steps);
    }
    p.push("Hires upscaler", fix.upscaler.a1111_name());
}

/// One unit as A1111's ControlNet extension writes it: all eleven fields in its order,
/// the model as `name [legacy hash]` (a folder's weights file is hashed).
fn controlnet_unit(c: &crate::control::ControlRequest) -> String {
    let (name, weights) = if c.model.is_dir() {
        let weights = crate::weights::controlnet::folder_weights(&c.model);
        (c.model.file_name(), weights)
    } else {
        (c.model.file_stem(), Some(c.model.clone()))
    };
    let name = name
        .unwrap_or_default()
        .to_string_lossy()
        .replace([',', ':'], "");
    let hash = weights
        .and_then(|w| crate::hashing::legacy_hash(&w).ok())
        .map_or(String::new(), |h| format!(" [{h}]"));
    let m = &c.map;
    format!(
        "Module: {}, Model: {name}{hash}, Weight: {}, Resize Mode: {}, Processor Res: {}, \
         Threshold A: {}, Threshold B: {}, Guidance Start: {}, Guidance End: {}, \
         Pixel Perfect: {}, Control Mode: Balanced",
        m.module.a1111_name(),
        python_float(c.scale),
        m.resize.controlnet_name(),
        m.resolution,
        python_float(m.threshold_a),
        python_float(m.threshold_b),
        python_float(c.start),
        python_float(c.end),
        if m.pixel_perfect { "True" } else { "False" },
    )
}

/// A number as Python prints a float (`1.0`, `0.45`), as A1111's infotext has them.
fn python_float(v: f32) -> String {
    if v.fract() == 0.0 && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// What the generation itself adds, before `Version`: A1111's `Pad conds: True` when the
/// prompt and negative prompt were padded to one length, and `TI hashes: "name: hash, ..."`
/// for the embeddings it used (names without `:` and `,`, as A1111 writes them).
pub fn push_generation_fields(p: &mut Parameters, generation: &crate::api::Generation) {
    let at = p
        .fields
        .iter()
        .position(|(k, _)| k == "Version")
        .unwrap_or(p.fields.len());
    let mut fields = Vec::new();
    if generation.padded_conds {
        fields.push(("Pad conds".to_string(), "True".to_string()));
    }
    if !generation.loras.is_empty() {
        let value = generation
            .loras
            .iter()
            .map(|(name, hash)| format!("{}: {hash}", name.replace([':', ','], "")))
            .collect::<Vec<_>>()
            .join(", ");
        fields.push(("Lora hashes".to_string(), value));
    }
    let used = &generation.embeddings;
    if !used.is_empty() {
        let value = used
            .iter()
            .map(|(name, hash)| format!("{}: {hash}", name.replace([':', ','], "")))
            .collect::<Vec<_>>()
            .join(", ");
        fields.push(("TI hashes".to_string(), value));
    }
    p.fields.splice(at..at, fields);
    // A1111 writes the VAE right after the model.
    if let Some((name, hash)) = &generation.vae {
        let mut at = (p.fields.iter().position(|(k, _)| k == "Model")).map_or(0, |i| i + 1);
        if let Some(hash) = hash {
            p.fields.insert(at, ("VAE hash".to_string(), hash.clone()));
            at += 1;
        }
        p.fields.insert(at, ("VAE".to_string(), name.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::diffusers_names;
    use crate::schedule::diffusers::SchedulerConfig;

    /// A scheduler's own timesteps are written as the nearest A1111 schedule, never as
    /// "Automatic" (the sampler's default, which A1111 and a restore would run instead).
    #[test]
    fn a_diffusers_scheduler_writes_the_schedule_nearest_its_timesteps() {
        let names = |class: &str, extra: &str| {
            let json = format!(
                r#"{{"_class_name": "{class}", "beta_schedule": "scaled_linear",
                    "beta_start": 0.00085, "beta_end": 0.012, "steps_offset": 1{extra}}}"#
            );
            diffusers_names(&SchedulerConfig::from_json(&json).unwrap())
        };
        let spacing = |s: &str| format!(r#", "timestep_spacing": "{s}""#);
        assert_eq!(
            names("EulerDiscreteScheduler", &spacing("linspace")).1,
            "Normal"
        );
        assert_eq!(
            names("EulerDiscreteScheduler", &spacing("leading")).1,
            "DDIM"
        );
        assert_eq!(
            names("EulerDiscreteScheduler", &spacing("trailing")).1,
            "SGM Uniform"
        );
        assert_eq!(
            names("DPMSolverMultistepScheduler", &spacing("linspace")),
            ("DPM++ 2M", "SGM Uniform")
        );
        let karras = r#", "use_karras_sigmas": true"#;
        assert_eq!(names("DPMSolverMultistepScheduler", karras).1, "Karras");
        // First order it is Euler's step: a name A1111 and a restore read.
        let first_order = format!(r#"{}, "solver_order": 1"#, spacing("linspace"));
        assert_eq!(
            names("DPMSolverMultistepScheduler", &first_order),
            ("Euler", "SGM Uniform")
        );
        // DDIM and PNDM take no Karras sigmas whatever their config says.
        assert_eq!(names("DDIMScheduler", karras), ("DDIM", "DDIM"));
        assert_eq!(names("PNDMScheduler", "").1, "DDIM");
    }
}
