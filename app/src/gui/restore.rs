//! Settings from an image's metadata: A1111/Forge/Ember `parameters`, ComfyUI's graph,
//! Fooocus' JSON. Unknown names are listed, never guessed.

use std::collections::BTreeMap;

use inference::api::SdeNoise;
use inference::metadata::{ImageMetadata, Parameters};
use inference::schedule::named::{SamplerName, ScheduleName};

use super::settings::Settings;

/// What restoring did, for the notice.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Settings taken from the image (`prompt`, `steps`, ...).
    pub applied: Vec<&'static str>,
    /// Values Ember could not use, with why.
    pub skipped: Vec<String>,
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
    match metadata {
        ImageMetadata::A1111(p) => apply_a1111(p, settings, with_seed, &mut r),
        ImageMetadata::ComfyUi { samplers, texts } => {
            let Some(sampler) = samplers.first() else {
                r.skipped
                    .push("the ComfyUI graph has no sampler node".into());
                return r;
            };
            let positive = sampler.get("positive").or(texts.first());
            set_text(positive, &mut settings.prompt, "prompt", &mut r);
            set_text(
                sampler.get("negative"),
                &mut settings.negative_prompt,
                "negative prompt",
                &mut r,
            );
            apply_fields(sampler, settings, with_seed, &mut r, &COMFY_KEYS);
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
        }
    }
    r
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
    if p.get("SDE noise") == Some(SdeNoise::Generator.name()) {
        s.sde_brownian = false;
        r.applied.push("SDE noise");
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
                s.schedule = schedule.comfy_name().into();
            }
            _ => set_sampler(name, s, r),
        }
    }
    match p.get("Schedule type") {
        // A1111's "Automatic" is each sampler's own default: Karras for DPM++, else normal.
        Some("Automatic") => {
            s.schedule = if s.sampler.starts_with("dpmpp") {
                "karras"
            } else {
                "normal"
            }
            .into();
        }
        Some(name) => set_schedule(name, s, r),
        None => {}
    }
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
            s.sampler = sampler.comfy_name().into();
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
            s.schedule = schedule.comfy_name().into();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sde_noise_is_brownian_unless_the_image_says_generator() {
        let text = |extra: &str| {
            format!("a fox\nSteps: 20, Sampler: DPM++ 2M SDE, Schedule type: Karras{extra}")
        };
        let mut s = Settings {
            sde_brownian: false,
            ..Settings::default()
        };
        apply(
            &ImageMetadata::A1111(Parameters::parse(&text(""))),
            &mut s,
            false,
        );
        assert!(s.sde_brownian, "A1111's images use Brownian trees");
        let generator = Parameters::parse(&text(", SDE noise: generator"));
        apply(&ImageMetadata::A1111(generator), &mut s, false);
        assert!(!s.sde_brownian);
    }
}
