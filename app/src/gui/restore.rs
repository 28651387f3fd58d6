//! Settings from an image's metadata: A1111/Forge/Ember `parameters`, ComfyUI's graph,
//! Fooocus' JSON. Unknown names are listed, never guessed.

use std::collections::BTreeMap;

use inference::metadata::ImageMetadata;
use inference::schedule::named::{SamplerName, ScheduleName};

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
    /// The model the image was made with, as it names it; the app loads it when its
    /// models hold it (as ComfyUI and InvokeAI do; A1111 keeps its model unless told
    /// otherwise).
    pub model: Option<ImageModel>,
    /// The VAE an A1111 image names (`VAE: sdxl_vae.safetensors`), `Some(None)` for an
    /// A1111 image made with its model's own; `None` where the format does not say.
    pub vae: Option<Option<String>>,
}

/// A model as an image names it: A1111's `Model` and `Model hash`, ComfyUI's checkpoint
/// loader, Fooocus' `base_model` and `base_model_hash`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImageModel {
    /// Without folder, extension or `[hash]`.
    pub name: Option<String>,
    /// A1111's hash (AutoV2: the first 10 hex digits of the file's SHA-256).
    pub hash: Option<String>,
}

impl ImageModel {
    /// From a name and a hash field, either of which may be absent or empty; `None` when
    /// both are.
    fn from_fields(name: Option<&str>, hash: Option<&str>) -> Option<Self> {
        let name = name
            .map(model_name)
            .filter(|n| !n.is_empty() && n != "None");
        let hash = hash
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        (name.is_some() || hash.is_some()).then_some(Self { name, hash })
    }

    /// For notices: the name, with the hash in brackets as A1111 writes it.
    pub fn describe(&self) -> String {
        match (&self.name, &self.hash) {
            (Some(name), Some(hash)) => format!("{name} [{hash}]"),
            (Some(name), None) => name.clone(),
            (None, Some(hash)) => format!("the model of hash {hash}"),
            (None, None) => "an unnamed model".into(),
        }
    }

    /// Whether this is the model at `path`, whose hash is `hash` when known: the hashes
    /// decide where both are known and of one kind (A1111's AutoV2, 10 hex digits; images
    /// from before 2023 carry its 8-digit first hash, which Ember does not compute), else
    /// the file's (or folder's) name does.
    pub fn is(&self, path: &std::path::Path, hash: Option<&str>) -> bool {
        if let (Some(mine), Some(theirs)) = (&self.hash, hash)
            && mine.len() == theirs.len()
        {
            return mine.eq_ignore_ascii_case(theirs);
        }
        let stem = model_name(&path.file_name().unwrap_or_default().to_string_lossy());
        self.name.as_deref() == Some(stem.as_str())
    }
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
    // Only an A1111 image's own `Hires …` fields turn the hires fix on, and only its
    // `Tiling` / `Tile X` / `Tile Y` seamless tiling (ComfyUI and Fooocus have none).
    settings.hires.enabled = false;
    // An image is remade as it was made: alone, unless it is an X/Y/Z plot's grid.
    settings.plot.enabled = false;
    settings.seamless = inference::api::Seamless::Off;
    // ComfyUI, Fooocus and InvokeAI draw CPU noise without seed extras; A1111's fields
    // say where they differ.
    settings.noise.clear_for_restore();
    match metadata {
        ImageMetadata::A1111(p) => a1111::apply(p, settings, with_seed, &mut r),
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
            r.model = ImageModel::from_fields(sampler.get("ckpt_name").map(String::as_str), None);
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
            r.model = ImageModel::from_fields(
                fields.get("base_model").map(String::as_str),
                fields.get("base_model_hash").map(String::as_str),
            );
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
    let number = |m: &BTreeMap<String, String>, k: &str| {
        m.get(k)
            .and_then(|v| v.parse::<f32>().ok())
            .filter(|v| v.is_finite())
    };
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

fn set_text(value: Option<&String>, field: &mut String, name: &'static str, r: &mut Restored) {
    if let Some(v) = value {
        field.clone_from(v);
        r.applied.push(name);
    }
}

/// A number a setting can hold: a finite one. `f32::from_str` takes "NaN", "inf" and
/// "1e39" (infinite), which the settings file cannot keep (JSON has no such numbers: it
/// would not read back, and every setting would be lost).
trait SettingNumber: std::str::FromStr {
    fn is_finite(&self) -> bool {
        true
    }
}

impl SettingNumber for f32 {
    fn is_finite(&self) -> bool {
        f32::is_finite(*self)
    }
}

impl SettingNumber for u32 {}

impl SettingNumber for u64 {}

fn set_number<T: SettingNumber>(
    value: Option<&str>,
    field: &mut T,
    name: &'static str,
    r: &mut Restored,
) -> bool {
    let Some(text) = value else { return false };
    match text.trim().parse::<T>() {
        Ok(v) if v.is_finite() => {
            *field = v;
            r.applied.push(name);
            true
        }
        Ok(_) => {
            r.skipped
                .push(format!("{name} {text:?} is not a finite number"));
            false
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

mod a1111;
#[cfg(test)]
mod tests;
