//! Settings from an image's metadata: A1111/Forge/Ember `parameters`, ComfyUI's graph,
//! Fooocus' JSON. Unknown names are listed, never guessed.

use std::collections::BTreeMap;

use inference::api::SdeNoise;
use inference::metadata::{ImageMetadata, Parameters};
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;

use super::settings::Settings;

/// What restoring did, for the notice.
#[derive(Debug, Default, PartialEq)]
pub struct Restored {
    /// Settings taken from the image (`prompt`, `steps`, ...).
    pub applied: Vec<&'static str>,
    /// Values Ember could not use, with why.
    pub skipped: Vec<String>,
    /// The refiner the image names (A1111's `Refiner: name [hash]`, Fooocus'
    /// `refiner_model`, ComfyUI's second sampler's checkpoint), by name without the hash:
    /// the app looks it up in its models folder.
    pub refiner: Option<String>,
    /// The ControlNet units the image used (A1111's `ControlNet N`), each with its model's
    /// name: the app finds the model and keeps each unit's current image (metadata holds
    /// none).
    pub controlnets: Vec<(super::controlnet::ControlUnitSettings, Option<String>)>,
}

impl Restored {
    /// One line for the notice area.
    pub fn summary(&self) -> String {
        let mut text = if self.applied.is_empty() {
            "no generation settings found".to_string()
        } else {
            format!("restored {}", self.applied.join(", "))
        };
        if !self.skipped.is_empty() {
            text.push_str(&format!("; not used: {}", self.skipped.join("; ")));
        }
        text
    }
}

/// Applies `metadata` to `settings`; `with_seed` also takes the seed (and locks it).
pub fn apply(metadata: &ImageMetadata, settings: &mut Settings, with_seed: bool) -> Restored {
    let mut r = Restored::default();
    // A1111, ComfyUI and Fooocus always feed their SDE samplers Brownian trees; Ember writes
    // "SDE noise" only when it did not.
    settings.sde_brownian = true;
    // Only an A1111 image's own `Hires …` fields turn the hires fix on.
    settings.hires.enabled = false;
    match metadata {
        ImageMetadata::A1111(p) => apply_a1111(p, settings, with_seed, &mut r),
        ImageMetadata::ComfyUi { samplers, texts } => {
            let Some(sampler) = samplers.first() else {
                r.skipped
                    .push("the ComfyUI graph has no sampler node".into());
                return r;
            };
            // CLIPTextEncodeSDXL: text_l feeds CLIP-L (the first prompt), text_g bigG.
            let positive = sampler
                .get("positive_text_l")
                .or(sampler.get("positive"))
                .or(texts.first());
            set_text(positive, &mut settings.prompt, "prompt", &mut r);
            let negative = sampler.get("negative_text_l").or(sampler.get("negative"));
            set_text(
                negative,
                &mut settings.negative_prompt,
                "negative prompt",
                &mut r,
            );
            settings.prompt_2 = second_text(sampler, "positive", &settings.prompt, &mut r);
            settings.negative_prompt_2 =
                second_text(sampler, "negative", &settings.negative_prompt, &mut r);
            apply_fields(sampler, settings, with_seed, &mut r, &COMFY_KEYS);
            apply_comfy_refiner(samplers, settings, &mut r);
        }
        ImageMetadata::Fooocus(fields) => {
            set_text(fields.get("prompt"), &mut settings.prompt, "prompt", &mut r);
            set_text(
                fields.get("negative_prompt"),
                &mut settings.negative_prompt,
                "negative prompt",
                &mut r,
            );
            apply_fields(fields, settings, with_seed, &mut r, &FOOOCUS_KEYS);
            if let Some((w, h)) = fields.get("resolution").and_then(|v| parse_size(v)) {
                (settings.width, settings.height) = (w, h);
                r.applied.push("size");
            }
            r.refiner = fields
                .get("refiner_model")
                .filter(|m| m.as_str() != "None")
                .map(|m| model_name(m));
            if r.refiner.is_some() {
                set_number(
                    fields.get("refiner_switch").map(String::as_str),
                    &mut settings.refiner.switch_at,
                    "refiner switch",
                    &mut r,
                );
            }
        }
    }
    r
}

/// The bigG prompt of a ComfyUI `CLIPTextEncodeSDXL`, when it differs from the CLIP-L one
/// (empty otherwise: the second prompt then follows the first).
fn second_text(
    sampler: &BTreeMap<String, String>,
    which: &str,
    first: &str,
    r: &mut Restored,
) -> String {
    match sampler.get(&format!("{which}_text_g")) {
        Some(g) if g != first => {
            r.applied.push(if which == "positive" {
                "second prompt"
            } else {
                "second negative prompt"
            });
            g.clone()
        }
        _ => String::new(),
    }
}

/// ComfyUI's refiner: a second `KSamplerAdvanced` that starts part-way, on another
/// checkpoint; the switch is where it starts.
fn apply_comfy_refiner(samplers: &[BTreeMap<String, String>], s: &mut Settings, r: &mut Restored) {
    let [base, second, ..] = samplers else {
        return;
    };
    let number =
        |m: &BTreeMap<String, String>, k: &str| m.get(k).and_then(|v| v.parse::<f32>().ok());
    let (Some(start), Some(steps)) = (number(second, "start_at_step"), number(second, "steps"))
    else {
        return;
    };
    let other_model = second
        .get("ckpt_name")
        .filter(|c| base.get("ckpt_name") != Some(*c));
    if let Some(name) = other_model.filter(|_| start > 0.0 && steps > 0.0) {
        r.refiner = Some(model_name(name));
        s.refiner.switch_at = (start / steps).clamp(0.01, 0.99);
        r.applied.push("refiner switch");
    }
}

/// A model as metadata names it, without folder, extension or `[hash]`.
fn model_name(text: &str) -> String {
    let name = text.split(" [").next().unwrap_or(text).trim();
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    file.strip_suffix(".safetensors")
        .or_else(|| file.strip_suffix(".ckpt"))
        .unwrap_or(file)
        .to_string()
}

/// Where each tool keeps each setting.
struct Keys {
    seed: &'static [&'static str],
    steps: &'static str,
    cfg: &'static str,
    sampler: &'static str,
    schedule: &'static str,
}

const COMFY_KEYS: Keys = Keys {
    seed: &["seed", "noise_seed"],
    steps: "steps",
    cfg: "cfg",
    sampler: "sampler_name",
    schedule: "scheduler",
};

const FOOOCUS_KEYS: Keys = Keys {
    seed: &["seed"],
    steps: "steps",
    cfg: "guidance_scale",
    sampler: "sampler",
    schedule: "scheduler",
};

fn apply_fields(
    fields: &BTreeMap<String, String>,
    s: &mut Settings,
    with_seed: bool,
    r: &mut Restored,
    keys: &Keys,
) {
    let get = |k: &str| fields.get(k).map(String::as_str);
    set_number(get(keys.steps), &mut s.steps, "steps", r);
    set_number(get(keys.cfg), &mut s.cfg_scale, "CFG scale", r);
    if with_seed {
        let seed = keys.seed.iter().find_map(|k| get(k));
        if set_number(seed, &mut s.seed, "seed", r) {
            s.seed_locked = true;
        }
    }
    if let Some(name) = get(keys.sampler) {
        set_sampler(name, s, r);
    }
    if let Some(name) = get(keys.schedule) {
        set_schedule(name, s, r);
    }
    if let (Some(w), Some(h)) = (get("width"), get("height"))
        && let Some(size) = parse_size(&format!("{w}x{h}"))
    {
        (s.width, s.height) = size;
        r.applied.push("size");
    }
}

fn apply_a1111(p: &Parameters, s: &mut Settings, with_seed: bool, r: &mut Restored) {
    s.prompt = p.prompt.clone();
    s.negative_prompt = p.negative_prompt.clone();
    r.applied.extend(["prompt", "negative prompt"]);
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
    apply_a1111_sdxl(p, s, r);
    super::hires::restore(p, &mut s.hires, r);
    for i in 0.. {
        let Some(text) = p.get(&format!("ControlNet {i}")) else {
            break;
        };
        match super::controlnet::parse_unit(text) {
            Ok(unit) => r.controlnets.push(unit),
            Err(e) => {
                r.skipped.push(format!("ControlNet {i}: {e}"));
                // A unit Ember cannot run stays in its place, off, so the next ones keep
                // their numbers (and images).
                let off = super::controlnet::ControlUnitSettings {
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
            }
            _ => set_sampler(name, s, r),
        }
    }
    match p.get("Schedule type") {
        // A1111's "Automatic" is each sampler's own default: Karras for DPM++, else normal.
        Some("Automatic") => {
            s.schedule = if s.sampler.comfy_name().starts_with("dpmpp") {
                ScheduleName::Karras
            } else {
                ScheduleName::Normal
            };
        }
        Some(name) => set_schedule(name, s, r),
        None => {}
    }
}

/// SDXL fields: Ember's second prompts, CFG rescale (A1111's extension wrote `CFG Rescale`,
/// older ones `CFG Rescale φ` / `phi`), the refiner and its aesthetic scores.
fn apply_a1111_sdxl(p: &Parameters, s: &mut Settings, r: &mut Restored) {
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

fn set_text(value: Option<&String>, field: &mut String, name: &'static str, r: &mut Restored) {
    if let Some(v) = value {
        field.clone_from(v);
        r.applied.push(name);
    }
}

fn set_number<T: std::str::FromStr>(
    value: Option<&str>,
    field: &mut T,
    name: &'static str,
    r: &mut Restored,
) -> bool {
    let Some(text) = value else { return false };
    // `f32::from_str` takes "NaN" and "inf", which no setting can hold: the settings file
    // (JSON has no such numbers) would not read back, and every setting would be lost.
    let lower = text.trim().to_ascii_lowercase();
    if lower.contains("nan") || lower.contains("inf") {
        r.skipped
            .push(format!("{name} {text:?} is not a finite number"));
        return false;
    }
    match text.trim().parse() {
        Ok(v) => {
            *field = v;
            r.applied.push(name);
            true
        }
        Err(_) => {
            r.skipped.push(format!("{name} {text:?} is not a number"));
            false
        }
    }
}

fn set_sampler(name: &str, s: &mut Settings, r: &mut Restored) {
    match SamplerName::parse(name) {
        Ok(sampler) => {
            s.sampler = sampler;
            r.applied.push("sampler");
        }
        Err(_) => r
            .skipped
            .push(format!("sampler {name:?} is not one Ember runs yet")),
    }
}

fn set_schedule(name: &str, s: &mut Settings, r: &mut Restored) {
    match ScheduleName::parse(name) {
        Ok(schedule) => {
            s.schedule = schedule;
            r.applied.push("schedule");
        }
        Err(_) => r
            .skipped
            .push(format!("schedule {name:?} is not one Ember computes yet")),
    }
}

/// `512x768`, `512 × 768` or Fooocus' `(512, 768)`, each side a multiple of 8.
pub fn parse_size(text: &str) -> Option<(u32, u32)> {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { c } else { ' ' })
        .collect();
    let mut numbers = cleaned.split_whitespace().map(str::parse::<u32>);
    let (w, h) = (numbers.next()?.ok()?, numbers.next()?.ok()?);
    (numbers.next().is_none() && w > 0 && h > 0 && w % 8 == 0 && h % 8 == 0).then_some((w, h))
}

/// Two numbers (`1024x768`, `0,32`), any size: SDXL's original size need not be a multiple
/// of 8.
fn parse_pair(text: &str) -> Option<(u32, u32)> {
    let (a, b) = text.split_once(['x', 'X', ','])?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

#[cfg(test)]
mod tests;
