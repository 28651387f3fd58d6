//! Restoring A1111's `parameters` text (Forge's and Ember's own too): the prompts, the
//! sampler and schedule (split from pre-1.9 names like "DPM++ 2M Karras"), emphasis, SDXL's
//! fields, the hires fix, ControlNet units and the X/Y/Z plot.

use inference::api::{RngSource, SdeNoise, parse_resize_from};
use inference::metadata::Parameters;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;

use super::{
    ImageModel, Restored, model_name, parse_pair, parse_size, set_number, set_sampler, set_schedule,
};
use crate::gui::settings::Settings;

/// Applies A1111's (and Forge's, and Ember's own) `parameters`.
pub(super) fn apply(p: &Parameters, s: &mut Settings, with_seed: bool, r: &mut Restored) {
    // The prompts as the model read them. With dynamic prompts on, a group left in them (an
    // escaped `\{a|b\}` of Ember's, another tool's literal braces) is escaped, so that the
    // image is remade as it was rather than resolved anew.
    let dynamic = s.dynamic_prompts;
    let literal = |text: &str| match dynamic {
        true => crate::dynamic_prompts::literal(text),
        false => text.to_string(),
    };
    s.prompt = literal(&p.prompt);
    s.negative_prompt = literal(&p.negative_prompt);
    r.applied.extend(["prompt", "negative prompt"]);
    r.model = ImageModel::from_fields(p.get("Model"), p.get("Model hash"));
    r.vae = Some(p.get("VAE").map(str::to_string).filter(|v| !v.is_empty()));
    set_number(p.get("Steps"), &mut s.steps, "steps", r);
    set_number(p.get("CFG scale"), &mut s.cfg_scale, "CFG scale", r);
    set_number(p.get("Clip skip"), &mut s.clip_skip, "CLIP skip", r);
    if with_seed && set_number(p.get("Seed"), &mut s.seed, "seed", r) {
        s.seed_locked = true;
    }
    if let Some(size) = p.get("Size").and_then(parse_size) {
        (s.width, s.height) = size;
        r.applied.push("size");
    }
    apply_noise(p, s, with_seed, r);
    s.seamless = inference::metadata::seamless(p);
    if s.seamless.is_on() {
        r.applied.push("seamless tiling");
    }
    s.emphasis = Emphasis::Original;
    if let Some(name) = p.get("Emphasis") {
        match Emphasis::from_a1111_name(name) {
            Some(emphasis) => {
                s.emphasis = emphasis;
                r.applied.push("emphasis");
            }
            None => r
                .skipped
                .push(format!("emphasis {name:?} is not one Ember knows")),
        }
    }
    if p.get("SDE noise") == Some(SdeNoise::Generator.name()) {
        s.sde_brownian = false;
        r.applied.push("SDE noise");
    }
    apply_sdxl(p, s, r);
    crate::gui::hires::restore(p, &mut s.hires, r);
    crate::gui::plot::restore(p, &mut s.plot, r);
    for i in 0.. {
        let Some(text) = p.get(&format!("ControlNet {i}")) else {
            break;
        };
        match crate::gui::controlnet::parse_unit(text) {
            Ok(unit) => r.controlnets.push(unit),
            Err(e) => {
                r.skipped.push(format!("ControlNet {i}: {e}"));
                // A unit Ember cannot run stays in its place, off, so the next ones keep
                // their numbers (and images).
                let off = crate::gui::controlnet::ControlUnitSettings {
                    enabled: false,
                    ..Default::default()
                };
                r.controlnets.push((off, None));
            }
        }
    }
    if r.controlnets.iter().any(|(unit, _)| unit.enabled) {
        r.applied.push("ControlNet");
    }
    let mut schedule_in_name = false;
    if let Some(name) = p.get("Sampler") {
        // Before A1111 1.9 the schedule was part of the sampler's name ("DPM++ 2M Karras").
        let split = ScheduleName::ALL.iter().find_map(|schedule| {
            let base = name.strip_suffix(schedule.a1111_name())?.trim_end();
            SamplerName::parse(base).ok().map(|_| (base, *schedule))
        });
        match split {
            Some((base, schedule)) if SamplerName::parse(name).is_err() => {
                set_sampler(base, s, r);
                s.schedule = schedule;
                schedule_in_name = true;
            }
            _ => set_sampler(name, s, r),
        }
    }
    match p.get("Schedule type") {
        // Each sampler's own default (A1111 1.9 on).
        // Ember before it wrote a diffusers scheduler's own sigmas as Automatic.
        Some("Automatic") if p.get("Diffusers scheduler").is_some() => {
            s.schedule = own_sigmas(s.sampler);
        }
        Some("Automatic") => s.schedule = s.sampler.a1111_automatic_schedule(),
        Some(name) => set_schedule(name, s, r),
        // Made before 1.9, where a sampler's name without a schedule ran the model's own
        // sigmas (A1111 1.9 would read it as Automatic and make another image).
        None if !schedule_in_name => s.schedule = own_sigmas(s.sampler),
        None => {}
    }
}

/// The schedule of the model's own sigmas for `sampler`: DDIM's uniform timesteps for
/// DDIM, Normal for the rest.
fn own_sigmas(sampler: SamplerName) -> ScheduleName {
    if sampler == SamplerName::Ddim {
        ScheduleName::DdimUniform
    } else {
        ScheduleName::Normal
    }
}

/// The noise source and the extra seed options. An A1111, Forge or SD.Next image without
/// `RNG` was made with their default GPU noise (A1111 reads it so), which
/// [`RngSource::Nv`] is on the NVIDIA cards most are made on ([`made_with_gpu_noise`]);
/// Ember's own images before it wrote `RNG`, Fooocus' and Civitai's are CPU noise.
fn apply_noise(p: &Parameters, s: &mut Settings, with_seed: bool, r: &mut Restored) {
    let noise = &mut s.noise;
    match p.get("RNG") {
        Some(name) => match RngSource::parse(name) {
            Ok(source) => {
                noise.rng = source;
                r.applied.push("noise source");
            }
            Err(_) => r
                .skipped
                .push(format!("noise source {name:?} is not one Ember knows")),
        },
        None if made_with_gpu_noise(p) => {
            noise.rng = RngSource::Nv;
            r.applied
                .push("noise source (NV: A1111's GPU noise on NVIDIA cards)");
        }
        // Ember before it wrote `RNG`, and the other tools that write A1111's text
        // (Fooocus' "a1111" scheme) draw CPU noise.
        None => {}
    }
    if with_seed
        && set_number(
            p.get("Variation seed"),
            &mut noise.variation_seed,
            "variation seed",
            r,
        )
    {
        noise.variation_locked = true;
    }
    let mut strength = 0.0f32;
    if set_number(
        p.get("Variation seed strength"),
        &mut strength,
        "variation strength",
        r,
    ) {
        if (0.0..=1.0).contains(&strength) {
            noise.variation_strength = strength;
        } else {
            r.applied.pop();
            r.skipped.push(format!(
                "variation strength {strength} is not between 0 and 1"
            ));
        }
    }
    if let Some(text) = p.get("Seed resize from") {
        let valid = |&(w, h): &(u32, u32)| {
            let options = inference::api::NoiseOptions {
                resize_from: Some((w, h)),
                ..Default::default()
            };
            options.validate(inference::api::MAX_SIDE).is_ok()
        };
        match parse_resize_from(text).filter(valid) {
            Some(size) => {
                noise.resize_from = size;
                r.applied.push("seed resize");
            }
            None => r.skipped.push(format!("seed resize from {text:?}")),
        }
    }
    noise.extras = noise.variation_strength != 0.0 || noise.resize_from != (0, 0);
    set_number(
        p.get("ENSD"),
        &mut noise.eta_noise_seed_delta,
        "eta noise seed delta",
        r,
    );
}

/// Whether an image without `RNG` comes from a writer whose default noise is the GPU's:
/// SD.Next (`App: SD.Next`), A1111 (`Version: v1.10.1`, `1.10.1` without git, `<none>`, or
/// no `Version`, which it wrote from 1.3 on), Forge (`f2.0.1v1.10.1-…`); not Civitai's
/// generator (`Civitai resources`), Fooocus (`Fooocus v2.5.5`) or Ember (`Ember 0.1.0`).
fn made_with_gpu_noise(p: &Parameters) -> bool {
    if p.get("App") == Some("SD.Next") {
        return true;
    }
    if p.get("Civitai resources").is_some() || p.get("Civitai metadata").is_some() {
        return false;
    }
    // `1.10.` or `0.0.`: digits, then a dot (a git hash has none).
    let numbered = |v: &str| {
        let digits = v.chars().take_while(char::is_ascii_digit).count();
        digits > 0 && v[digits..].starts_with('.')
    };
    match p.get("Version").map(str::trim) {
        None | Some("<none>") => true,
        Some(v) => {
            numbered(v.strip_prefix('v').unwrap_or(v)) || v.strip_prefix('f').is_some_and(numbered)
        }
    }
}

/// SDXL fields: Ember's second prompts, CFG rescale (A1111's extension wrote `CFG Rescale`,
/// older ones `CFG Rescale φ` / `phi`), the refiner and its aesthetic scores.
fn apply_sdxl(p: &Parameters, s: &mut Settings, r: &mut Restored) {
    s.prompt_2 = p.get("Prompt 2").unwrap_or_default().to_string();
    s.negative_prompt_2 = p.get("Negative prompt 2").unwrap_or_default().to_string();
    if !s.prompt_2.is_empty() || !s.negative_prompt_2.is_empty() {
        r.applied.push("second prompts");
    }
    s.cfg_rescale = 0.0;
    let rescale = ["CFG Rescale", "CFG Rescale φ", "CFG Rescale phi"]
        .iter()
        .find_map(|k| p.get(k));
    set_number(rescale, &mut s.cfg_rescale, "CFG rescale", r);
    let sc = &mut s.size_conditioning;
    *sc = Default::default();
    sc.original = p.get("Original size").and_then(parse_pair);
    sc.crop = p
        .get("Crop top left")
        .and_then(parse_pair)
        .unwrap_or_default();
    sc.target = p.get("Target size").and_then(parse_pair);
    if !sc.to_request().is_default() {
        r.applied.push("size conditioning");
    }
    r.refiner = p.get("Refiner").map(model_name);
    set_number(
        p.get("Refiner switch at"),
        &mut s.refiner.switch_at,
        "refiner switch",
        r,
    );
    set_number(
        p.get("Aesthetic score"),
        &mut s.refiner.aesthetic_score,
        "aesthetic score",
        r,
    );
    set_number(
        p.get("Negative aesthetic score"),
        &mut s.refiner.negative_aesthetic_score,
        "negative aesthetic score",
        r,
    );
}
