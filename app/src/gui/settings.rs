//! What the app remembers between runs: the last generation settings, folders and recent
//! models, in `settings.json` under the config folder (window layout is eframe's own storage).
//!
//! **Invariant:** the file is replaced atomically (write, then rename), and a file that cannot
//! be read as settings is kept as `settings.json.bad` before the defaults are used, so a
//! crash or a corrupt file never loses more than the last change.

use std::path::{Path, PathBuf};

use inference::api::{MaskedContent, Seamless, VaeTiling};
use inference::canvas::FitMode;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;
use serde::{Deserialize, Serialize};

mod file;
mod named;
mod noise;
mod saving;
pub use file::{Loaded, SettingsFile};
pub use named::Named;
pub(super) use named::by_name;
pub use noise::NoiseSettings;
pub use saving::{FileKind, SaveSettings};

/// How many recently used models the model panel lists.
pub const RECENT_MODELS: usize = 8;

/// The persisted settings. Unknown or missing fields take their defaults, so older and
/// newer files both load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub prompt: String,
    pub negative_prompt: String,
    /// The A1111 styles chosen, by name, in the order they apply to the prompts.
    pub styles: Vec<String>,
    /// The seed the next generation uses when `seed_locked`; otherwise the last one used.
    pub seed: u64,
    /// Keep the seed between generations (off: a new random seed each time).
    pub seed_locked: bool,
    /// The noise source and A1111's extra seed options.
    pub noise: NoiseSettings,
    pub steps: u32,
    pub cfg_scale: f32,
    pub width: u32,
    pub height: u32,
    /// The native short side of the model `width` × `height` were chosen for: when a
    /// model of another native side loads, the size is scaled to it (SD 1.5's 512×768
    /// becomes SDXL's 1024×1536). `None` (a settings file from before, or a size restored
    /// from an image made with a model not loaded): the next model keeps the size.
    #[serde(default)]
    pub size_for: Option<u32>,
    /// Stored by its ComfyUI name (`dpmpp_2m`).
    #[serde(with = "by_name")]
    pub sampler: SamplerName,
    /// Stored by its ComfyUI name (`karras`).
    #[serde(with = "by_name")]
    pub schedule: ScheduleName,
    /// Images per click, run one after another with seeds `seed`, `seed + 1`, ... (with a
    /// variation: the seed, and variation seeds `variation_seed`, `variation_seed + 1`, ...)
    pub batch_count: u32,
    /// A1111 numbering: 1 = last text-encoder layer.
    pub clip_skip: u32,
    /// How prompt weights act (A1111's Emphasis), stored as original, none, ignore or off.
    #[serde(with = "by_name")]
    pub emphasis: Emphasis,
    /// When the VAE runs in tiles, stored as auto, on or off.
    #[serde(with = "by_name")]
    pub vae_tiling: VaeTiling,
    /// Which edges of the image meet (A1111's Tiling), stored as off, both, x or y.
    #[serde(with = "by_name")]
    pub seamless: Seamless,
    /// The DPM++ SDE samplers draw from a Brownian tree (ComfyUI's and A1111's default)
    /// rather than from the seed's generator.
    pub sde_brownian: bool,
    /// `{a|b}` variant groups and `__name__` wildcards in the prompts are resolved per image
    /// (`crate::dynamic_prompts`).
    pub dynamic_prompts: bool,
    /// How the live preview is drawn, stored as auto, latent or taesd.
    #[serde(with = "by_name")]
    pub preview: inference::preview::PreviewMethod,
    /// The VAE that decodes (A1111's SD VAE): Automatic, the model's own, or a file.
    #[serde(deserialize_with = "or_default")]
    pub vae: inference::api::VaeChoice,
    /// Where results are saved; `None` = the default under the user's pictures folder.
    pub output_dir: Option<PathBuf>,
    /// The file format results are saved in.
    pub saving: SaveSettings,
    /// A folder of checkpoints the model panel lists.
    pub models_dir: Option<PathBuf>,
    /// Most recent first.
    pub recent_models: Vec<PathBuf>,
    /// Loaded again at start when it still exists.
    pub last_model: Option<PathBuf>,
    /// The canvas mode's options.
    pub canvas: CanvasSettings,
    /// SDXL: the second text encoder's prompts (empty = the first ones).
    pub prompt_2: String,
    pub negative_prompt_2: String,
    /// CFG rescale φ (0 = off).
    pub cfg_rescale: f32,
    /// The refiner an SDXL model hands over to.
    pub refiner: RefinerSettings,
    /// SDXL's size conditioning (ComfyUI's CLIPTextEncodeSDXL fields).
    pub size_conditioning: SizeConditioningSettings,
    /// Which side panels show.
    pub layout: LayoutSettings,
    /// The config folder chosen for each checkpoint of non-standard size.
    pub config_dirs: std::collections::BTreeMap<PathBuf, PathBuf>,
    /// The ControlNet units (the form's ControlNet section).
    pub controlnet: Vec<super::controlnet::ControlUnitSettings>,
    /// The hires fix (txt2img only).
    pub hires: super::hires::HiresSettings,
    /// The X/Y/Z plot section.
    pub plot: super::plot::PlotSettings,
    /// The Extras view's upscaler.
    pub extras: super::extras::ExtrasSettings,
    /// The device the engine runs on from the next start, as `--device` names it (`auto`,
    /// `cpu`, `wgpu:1`, `cuda:0`); the Device menu sets it. `EMBER_DEVICE` decides over it.
    pub device: String,
}

/// Which side panels show (the View menu).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutSettings {
    /// The settings form (Create and Canvas).
    pub settings_panel: bool,
    /// The model panel; `None`: shown when the window is at least [`WIDE_WINDOW`] wide.
    pub model_panel: Option<bool>,
}

/// Window width (points) from which the model panel shows unless hidden.
pub const WIDE_WINDOW: f32 = 1100.0;

impl Default for LayoutSettings {
    fn default() -> Self {
        Self {
            settings_panel: true,
            model_panel: None,
        }
    }
}

impl LayoutSettings {
    /// Whether the model panel shows in a window `width` wide.
    pub fn model_panel_shown(&self, width: f32) -> bool {
        self.model_panel.unwrap_or(width >= WIDE_WINDOW)
    }
}

/// SDXL's size conditioning: what the UNet is told about the image's original size, crop
/// and target size. `None` sizes follow the generation size, as diffusers' defaults do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SizeConditioningSettings {
    pub original: Option<(u32, u32)>,
    /// The crop's top-left corner `(x, y)`.
    pub crop: (u32, u32),
    pub target: Option<(u32, u32)>,
}

impl SizeConditioningSettings {
    pub fn to_request(self) -> inference::api::SizeConditioning {
        inference::api::SizeConditioning {
            original: self.original,
            crop: self.crop,
            target: self.target,
        }
    }
}

/// The refiner's options (A1111's Refiner section).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RefinerSettings {
    pub enabled: bool,
    /// The refiner checkpoint or folder.
    pub model: Option<PathBuf>,
    /// The fraction of the steps the base model runs.
    pub switch_at: f32,
    /// The aesthetic scores the refiner is conditioned on.
    pub aesthetic_score: f32,
    pub negative_aesthetic_score: f32,
}

impl Default for RefinerSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            model: None,
            switch_at: 0.8,
            aesthetic_score: inference::api::DEFAULT_AESTHETIC_SCORE,
            negative_aesthetic_score: inference::api::DEFAULT_NEGATIVE_AESTHETIC_SCORE,
        }
    }
}

/// The canvas mode's options (A1111's names and defaults where it has them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CanvasSettings {
    /// Denoising strength: how much of the schedule runs on the image.
    pub strength: f32,
    /// Gaussian blur of the mask, pixels.
    pub mask_blur: u32,
    /// "Only masked" rather than the whole picture.
    pub only_masked: bool,
    /// Pixels around the mask for "only masked".
    pub padding: u32,
    /// Stored as original, fill, latent-noise or latent-nothing.
    #[serde(with = "by_name")]
    pub masked_content: MaskedContent,
    /// Composite the result over the source through the mask (unmasked pixels unchanged).
    pub composite: bool,
    pub overlay_opacity: f32,
    pub brush_size: f32,
    pub brush_hardness: f32,
    /// Pixels each outpaint button adds.
    pub outpaint_pixels: u32,
    /// How a source of another size becomes the generation size: resize, crop or fill
    /// (A1111's Just resize / Crop and resize / Resize and fill), stored as resize, crop
    /// or fill.
    #[serde(with = "by_name")]
    pub resize_mode: FitMode,
}

impl Default for CanvasSettings {
    fn default() -> Self {
        Self {
            strength: 0.75,
            mask_blur: 4,
            only_masked: false,
            padding: 32,
            masked_content: MaskedContent::Original,
            composite: true,
            overlay_opacity: 0.5,
            brush_size: 48.0,
            brush_hardness: 0.7,
            outpaint_pixels: 64,
            resize_mode: FitMode::Resize,
        }
    }
}

impl Default for Settings {
    /// A1111's defaults: 20 steps of DPM++ 2M Karras at CFG 7, 512x512.
    fn default() -> Self {
        Self {
            prompt: String::new(),
            negative_prompt: String::new(),
            styles: Vec::new(),
            seed: 0,
            seed_locked: false,
            noise: NoiseSettings::default(),
            steps: 20,
            cfg_scale: 7.0,
            width: 512,
            height: 512,
            size_for: Some(512),
            sampler: SamplerName::DpmPp2M,
            schedule: ScheduleName::Karras,
            batch_count: 1,
            clip_skip: 1,
            emphasis: Emphasis::Original,
            vae_tiling: VaeTiling::Auto,
            seamless: Seamless::Off,
            sde_brownian: true,
            dynamic_prompts: true,
            preview: Default::default(),
            vae: Default::default(),
            output_dir: None,
            saving: SaveSettings::default(),
            models_dir: None,
            recent_models: Vec::new(),
            last_model: None,
            canvas: CanvasSettings::default(),
            prompt_2: String::new(),
            negative_prompt_2: String::new(),
            cfg_rescale: 0.0,
            refiner: RefinerSettings::default(),
            size_conditioning: SizeConditioningSettings::default(),
            layout: LayoutSettings::default(),
            config_dirs: Default::default(),
            controlnet: Vec::new(),
            hires: Default::default(),
            plot: Default::default(),
            extras: Default::default(),
            device: "auto".into(),
        }
    }
}

impl Settings {
    /// A copy holding only the paths JSON can (UTF-8), and the paths left out: one such path
    /// (a folder named in Latin-1) must not stop every other setting from being saved.
    pub fn with_storable_paths(&self) -> (Settings, Vec<PathBuf>) {
        let mut s = self.clone();
        let mut dropped = Vec::new();
        let mut storable = |p: &PathBuf| {
            let ok = p.to_str().is_some();
            if !ok {
                dropped.push(p.clone());
            }
            ok
        };
        let units = s.controlnet.iter_mut();
        let options = [
            &mut s.output_dir,
            &mut s.models_dir,
            &mut s.last_model,
            &mut s.refiner.model,
            &mut s.extras.upscaler,
        ]
        .into_iter()
        .chain(units.flat_map(|u| [&mut u.model, &mut u.image]));
        for option in options {
            if option.as_ref().is_some_and(|p| !storable(p)) {
                *option = None;
            }
        }
        s.recent_models.retain(|p| storable(p));
        s.config_dirs
            .retain(|model, config| storable(model) && storable(config));
        (s, dropped)
    }

    /// A model of native short side `native` loaded: the size follows it from the side it
    /// was chosen for, keeping its shape, in multiples of 8. Returns the size before, when
    /// it changed.
    pub fn follow_model_size(&mut self, native: u32) -> Option<(u32, u32)> {
        let before = (self.width, self.height);
        if let Some(chosen_for) = self.size_for.filter(|&side| side != native && side > 0) {
            let scale = |side: u32| {
                let scaled = f64::from(side) * f64::from(native) / f64::from(chosen_for);
                ((scaled / 8.0).round() as u32 * 8).clamp(8, inference::api::MAX_SIDE)
            };
            (self.width, self.height) = (scale(self.width), scale(self.height));
        }
        self.size_for = Some(native);
        (before != (self.width, self.height)).then_some(before)
    }

    /// Puts `path` first in the recent-models list.
    pub fn remember_model(&mut self, path: &Path) {
        self.recent_models.retain(|p| p != path);
        self.recent_models.insert(0, path.to_path_buf());
        self.recent_models.truncate(RECENT_MODELS);
        self.last_model = Some(path.to_path_buf());
    }
}

/// A value this version cannot read (a newer version's choice) takes its default rather
/// than costing the whole file.
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    let value = serde_json::Value::deserialize(d)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_stored_by_name_and_unknown_names_fall_back() {
        let old = r#"{"steps": 12, "sampler": "euler_ancestral", "schedule": "exponential",
            "canvas": {"masked_content": "latent-noise", "resize_mode": "crop"}}"#;
        let settings: Settings = serde_json::from_str(old).unwrap();
        assert_eq!(settings.sampler, SamplerName::EulerAncestral);
        assert_eq!(settings.schedule, ScheduleName::Exponential);
        assert_eq!(settings.canvas.masked_content, MaskedContent::LatentNoise);
        assert_eq!(settings.canvas.resize_mode, FitMode::Crop);
        let written: serde_json::Value = serde_json::to_value(&settings).unwrap();
        assert_eq!(written["sampler"], "euler_ancestral");
        assert_eq!(written["schedule"], "exponential");
        assert_eq!(written["canvas"]["masked_content"], "latent-noise");
        assert_eq!(written["canvas"]["resize_mode"], "crop");
        // A newer version's choice keeps the rest of the file.
        let newer = r#"{"steps": 9, "sampler": "future_sampler", "canvas": {"resize_mode": "?"}}"#;
        let settings: Settings = serde_json::from_str(newer).unwrap();
        assert_eq!(settings.steps, 9);
        assert_eq!(settings.sampler, SamplerName::DpmPp2M);
        assert_eq!(settings.canvas.resize_mode, FitMode::Resize);
    }

    #[test]
    fn the_size_follows_a_model_of_another_native_side() {
        let mut s = Settings::default();
        assert_eq!(s.follow_model_size(512), None);
        (s.width, s.height) = (512, 768);
        assert_eq!(s.follow_model_size(1024), Some((512, 768)));
        assert_eq!((s.width, s.height), (1024, 1536));
        // Another model of the same side keeps the size the user chose.
        (s.width, s.height) = (1216, 832);
        assert_eq!(s.follow_model_size(1024), None);
        assert_eq!(s.follow_model_size(768), Some((1216, 832)));
        assert_eq!((s.width, s.height), (912, 624));
        // A settings file from before says nothing of it: the size stays with the next model.
        let mut old: Settings = serde_json::from_str(r#"{"width": 1024, "height": 1024}"#).unwrap();
        assert_eq!(old.size_for, None);
        assert_eq!(old.follow_model_size(512), None);
        assert_eq!(old.size_for, Some(512));
        assert_eq!((old.width, old.height), (1024, 1024));
        // Far apart sides stay within the sizes Ember makes.
        (s.width, s.height) = (8, 8);
        s.follow_model_size(32);
        assert_eq!((s.width, s.height), (8, 8));
    }

    #[test]
    fn recent_models_are_most_recent_first_without_duplicates() {
        let mut s = Settings::default();
        for i in 0..10 {
            s.remember_model(Path::new(&format!("/m/{i}")));
        }
        s.remember_model(Path::new("/m/5"));
        assert_eq!(s.recent_models.len(), RECENT_MODELS);
        assert_eq!(s.recent_models[0], Path::new("/m/5"));
        assert_eq!(
            s.recent_models
                .iter()
                .filter(|p| **p == Path::new("/m/5"))
                .count(),
            1
        );
    }
}
