//! ControlNet units in the app: what each unit remembers between runs
//! ([`ControlUnitSettings`], part of `Settings`), what it holds while the app runs (its
//! image, the preprocessed map shown beside it, where it takes dropped files:
//! [`ControlUnits`]), and the request's ControlNets made from both.

use std::path::PathBuf;

use inference::api::ControlRequest;
use inference::canvas::FitMode;
use inference::control::{MapSettings, Module, control_map};
use inference::imaging::ImageRgb8;
use serde::{Deserialize, Serialize};

/// At most this many units (A1111 shows 3 by default).
pub const MAX_UNITS: usize = 4;

/// One unit's persisted settings (A1111's unit fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ControlUnitSettings {
    pub enabled: bool,
    /// A ControlNet single file or diffusers folder.
    pub model: Option<PathBuf>,
    /// The control image's file (the pixels are read again at start).
    pub image: Option<PathBuf>,
    #[serde(with = "super::settings::by_name")]
    pub module: Module,
    pub threshold_a: f32,
    pub threshold_b: f32,
    pub resolution: u32,
    pub pixel_perfect: bool,
    #[serde(with = "super::settings::by_name")]
    pub resize: FitMode,
    /// Control weight (the conditioning scale).
    pub weight: f32,
    /// Starting and ending control step, as fractions of the steps.
    pub start: f32,
    pub end: f32,
}

impl Default for ControlUnitSettings {
    fn default() -> Self {
        let map = MapSettings::new(Module::None);
        Self {
            enabled: true,
            model: None,
            image: None,
            module: map.module,
            threshold_a: map.threshold_a,
            threshold_b: map.threshold_b,
            resolution: map.resolution,
            pixel_perfect: map.pixel_perfect,
            resize: map.resize,
            weight: 1.0,
            start: 0.0,
            end: 1.0,
        }
    }
}

impl ControlUnitSettings {
    /// How the unit makes its map.
    pub fn map(&self) -> MapSettings {
        MapSettings {
            module: self.module,
            threshold_a: self.threshold_a,
            threshold_b: self.threshold_b,
            resolution: self.resolution,
            pixel_perfect: self.pixel_perfect,
            resize: self.resize,
        }
    }

    /// Switches the preprocessor, its thresholds back to that module's defaults.
    pub fn set_module(&mut self, module: Module) {
        let defaults = MapSettings::new(module);
        self.module = module;
        self.threshold_a = defaults.threshold_a;
        self.threshold_b = defaults.threshold_b;
    }
}

/// What one unit holds while the app runs.
#[derive(Default)]
pub struct UnitState {
    /// The control image, once read (`image` of the settings names its file).
    pub image: Option<(PathBuf, ImageRgb8)>,
    /// The map last shown, with what it was made from.
    pub preview: Option<(PreviewKey, egui::TextureHandle)>,
    /// Where the unit was drawn this frame (a file dropped there is its image).
    pub drop_zone: Option<egui::Rect>,
}

/// What a preview map depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct PreviewKey {
    pub image: PathBuf,
    pub map: MapSettings,
    pub size: (u32, u32),
}

/// The units' runtime state, one per settings unit.
#[derive(Default)]
pub struct ControlUnits {
    pub units: Vec<UnitState>,
}

impl ControlUnits {
    /// The state of unit `i` (made when first asked for).
    pub fn unit(&mut self, i: usize) -> &mut UnitState {
        if self.units.len() <= i {
            self.units.resize_with(i + 1, UnitState::default);
        }
        &mut self.units[i]
    }

    /// The unit whose drop zone holds `pos`.
    pub fn unit_at(&self, pos: egui::Pos2) -> Option<usize> {
        self.units
            .iter()
            .position(|u| u.drop_zone.is_some_and(|r| r.contains(pos)))
    }

    /// The preprocessed map of unit `i` at `size`, as a texture (made again only when its
    /// image, settings or size change).
    pub fn preview(
        &mut self,
        ctx: &egui::Context,
        i: usize,
        settings: &ControlUnitSettings,
        size: (u32, u32),
    ) -> Option<egui::TextureHandle> {
        let unit = self.unit(i);
        let (path, image) = unit.image.as_ref()?;
        let key = PreviewKey {
            image: path.clone(),
            map: settings.map(),
            size,
        };
        if settings.map().check().is_err() {
            return None;
        }
        // Not while a slider is dragged (a map can take tens of milliseconds): the last
        // map stays until the pointer is let go.
        let dragging = ctx.input(|i| i.pointer.any_down());
        let stale = unit.preview.as_ref().is_none_or(|(k, _)| *k != key);
        if stale && !(dragging && unit.preview.is_some()) {
            // An image that cannot make a map shows none; Generate says why.
            let map = control_map(image, &key.map, size).ok()?;
            let colour =
                egui::ColorImage::from_rgb([map.width as usize, map.height as usize], &map.pixels);
            let name = format!("control map {i}");
            let texture = crate::gui::texture::load(ctx, name, colour, Default::default());
            unit.preview = Some((key, texture));
        }
        unit.preview.as_ref().map(|(_, t)| t.clone())
    }
}

/// The request's ControlNets: every enabled unit's map made at `size`. A unit that is on
/// without a model or an image is an error naming what to do.
pub fn requests(
    settings: &[ControlUnitSettings],
    state: &ControlUnits,
    size: (u32, u32),
) -> Result<Vec<ControlRequest>, String> {
    let mut requests = Vec::new();
    for (i, unit) in settings.iter().enumerate().filter(|(_, u)| u.enabled) {
        let name = format!("ControlNet {i}");
        let model = unit
            .model
            .clone()
            .ok_or_else(|| format!("{name}: choose its model, or turn the unit off"))?;
        let image = state
            .units
            .get(i)
            .and_then(|u| u.image.as_ref())
            .filter(|(path, _)| Some(path) == unit.image.as_ref())
            .map(|(_, image)| image)
            .ok_or_else(|| format!("{name}: choose its control image, or turn the unit off"))?;
        let map = unit.map();
        map.check().map_err(|e| format!("{name}: {e}"))?;
        if unit.start > unit.end {
            return Err(format!(
                "{name}: the starting control step {} is after the ending one {}",
                unit.start, unit.end
            ));
        }
        requests.push(ControlRequest {
            model,
            image: control_map(image, &map, size).map_err(|e| format!("{name}: {e}"))?,
            scale: unit.weight,
            start: unit.start,
            end: unit.end,
            map,
        });
    }
    Ok(requests)
}

/// A unit read back from A1111's `ControlNet N: "Module: canny, Model: name [hash], …"`:
/// its settings (no model, no image: the caller finds the model by name) and the model's
/// name without its hash, or why the text is not a unit Ember can run.
pub fn parse_unit(text: &str) -> Result<(ControlUnitSettings, Option<String>), String> {
    let mut unit = ControlUnitSettings::default();
    let mut model = None;
    let mut fields = Vec::new();
    for item in text.split(", ") {
        let (key, value) = item
            .split_once(": ")
            .ok_or_else(|| format!("{item:?} is not a `Key: value` field"))?;
        fields.push((key.trim(), value.trim()));
    }
    let number = |key: &str, value: &str| {
        value
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("{key} {value:?} is not a number"))
    };
    // The module first: its thresholds' defaults stand in for values the text lacks.
    if let Some((_, name)) = fields.iter().find(|(k, _)| *k == "Module") {
        let module = Module::parse(name).ok_or_else(|| {
            format!("the preprocessor {name:?} is not one Ember has (none, canny, invert, threshold, scribble_xdog)")
        })?;
        unit.set_module(module);
    }
    for (key, value) in fields {
        match key {
            "Model" if value != "None" => {
                // `name [hash]`
                let name = value.rsplit_once(" [").map_or(value, |(n, _)| n);
                model = Some(name.to_string());
            }
            "Weight" => unit.weight = number(key, value)?,
            "Guidance Start" => unit.start = number(key, value)?,
            "Guidance End" => unit.end = number(key, value)?,
            "Resize Mode" => {
                unit.resize = FitMode::parse_a1111(value)
                    .ok_or_else(|| format!("resize mode {value:?} is not one Ember knows"))?;
            }
            // -1 and out-of-range values mean "the module's default", as the extension
            // reads them.
            "Processor Res" => {
                let res = number(key, value)?;
                if (64.0..=2048.0).contains(&res) {
                    unit.resolution = res as u32;
                }
            }
            "Threshold A" | "Threshold B" => {
                let v = number(key, value)?;
                let [a, b] = unit.module.sliders();
                let (slider, field) = if key == "Threshold A" {
                    (a, &mut unit.threshold_a)
                } else {
                    (b, &mut unit.threshold_b)
                };
                if slider.is_some_and(|s| (s.min..=s.max).contains(&v)) {
                    *field = v;
                }
            }
            "Pixel Perfect" => unit.pixel_perfect = value == "True",
            "Control Mode" if value != "Balanced" => {
                return Err(format!(
                    "control mode {value:?} is not supported (Ember runs Balanced)"
                ));
            }
            _ => {}
        }
    }
    if unit.start > unit.end {
        return Err(format!(
            "starting step {} is after ending step {}",
            unit.start, unit.end
        ));
    }
    Ok((unit, model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1111_units_are_read_back() {
        let (unit, model) = parse_unit(
            "Module: canny, Model: control_v11p_sd15_canny [d14c016b], Weight: 0.8, \
             Resize Mode: Resize and Fill, Processor Res: 768, Threshold A: 64, \
             Threshold B: 180.0, Guidance Start: 0.1, Guidance End: 0.9, Pixel Perfect: True, \
             Control Mode: Balanced",
        )
        .unwrap();
        assert_eq!(model.as_deref(), Some("control_v11p_sd15_canny"));
        assert_eq!(unit.module, Module::Canny);
        assert_eq!((unit.threshold_a, unit.threshold_b), (64.0, 180.0));
        assert_eq!((unit.weight, unit.start, unit.end), (0.8, 0.1, 0.9));
        assert_eq!((unit.resolution, unit.resize), (768, FitMode::Fill));
        assert!(unit.pixel_perfect && unit.enabled);

        // The extension's placeholders (-1, 0.5 for a module without thresholds) read as
        // the defaults.
        let (unit, _) = parse_unit(
            "Module: none, Model: None, Weight: 1, Processor Res: -1, Threshold A: 0.5, \
             Threshold B: 0.5",
        )
        .unwrap();
        assert_eq!(unit.resolution, 512);
        assert_eq!(unit.resize, FitMode::Crop);

        let module = parse_unit("Module: openpose_full, Model: x").unwrap_err();
        assert!(module.contains("openpose_full"), "{module}");
        let mode = parse_unit("Module: none, Control Mode: ControlNet is more important");
        assert!(mode.unwrap_err().contains("Balanced"));
    }
}
