//! The control-map preprocessors of A1111's ControlNet extension that need no network
//! (`none`, `canny`, `invert`, `threshold`, `scribble_xdog`), run at its preprocessor
//! resolution (or "Pixel Perfect"'s), and the map then fitted to the generation size by the
//! unit's resize mode ([`super::detectmap`]).

use crate::canvas::FitMode;
use crate::imaging::ImageRgb8;

use super::canny::canny;
use super::resize::{Interpolation, resize};

/// A preprocessor (A1111's "module").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Module {
    /// The image is the control map.
    None,
    /// OpenCV's Canny; thresholds low (A) and high (B).
    Canny,
    /// `255 - v`: black lines on white become white on black.
    Invert,
    /// White where every channel is above threshold A.
    Threshold,
    /// XDoG scribble lines; threshold A is the XDoG threshold.
    ScribbleXdog,
}

/// A threshold slider of a module: its label, default and range, as the extension has them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slider {
    pub label: &'static str,
    pub default: f32,
    pub min: f32,
    pub max: f32,
}

impl Module {
    pub const ALL: [Module; 5] = [
        Module::None,
        Module::Canny,
        Module::Invert,
        Module::Threshold,
        Module::ScribbleXdog,
    ];

    /// The CLI's and the settings file's name.
    pub fn name(self) -> &'static str {
        match self {
            Module::None => "none",
            Module::Canny => "canny",
            Module::Invert => "invert",
            Module::Threshold => "threshold",
            Module::ScribbleXdog => "scribble_xdog",
        }
    }

    /// The name the extension writes in `ControlNet N: "Module: …"` (its UI label).
    pub fn a1111_name(self) -> &'static str {
        match self {
            Module::Invert => "invert (from white bg & black line)",
            other => other.name(),
        }
    }

    /// The module of a CLI / settings name or an A1111 label.
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim();
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name || m.a1111_name() == name)
    }

    /// Threshold A and B sliders (`None` where the module has none).
    pub fn sliders(self) -> [Option<Slider>; 2] {
        let slider = |label, default, min, max| {
            Some(Slider {
                label,
                default,
                min,
                max,
            })
        };
        match self {
            Module::Canny => [
                slider("Canny low threshold", 100.0, 1.0, 255.0),
                slider("Canny high threshold", 200.0, 1.0, 255.0),
            ],
            Module::Threshold => [slider("Binarization threshold", 127.0, 0.0, 255.0), None],
            Module::ScribbleXdog => [slider("XDoG threshold", 32.0, 1.0, 64.0), None],
            Module::None | Module::Invert => [None, None],
        }
    }

    /// Whether the module runs at the preprocessor resolution.
    pub fn uses_resolution(self) -> bool {
        matches!(
            self,
            Module::Canny | Module::Threshold | Module::ScribbleXdog
        )
    }
}

/// How one ControlNet unit makes its map (A1111's unit fields, less model and weights).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MapSettings {
    pub module: Module,
    /// Threshold A and B (the extension writes 0.5 for a module without them).
    pub threshold_a: f32,
    pub threshold_b: f32,
    /// The preprocessor resolution: the short side the module works at.
    pub resolution: u32,
    /// Work at the resolution the generation size implies instead.
    pub pixel_perfect: bool,
    /// How the map is fitted to the generation size.
    pub resize: FitMode,
}

/// The extension's defaults: preprocessor resolution 512, "Crop and Resize".
pub const DEFAULT_RESOLUTION: u32 = 512;
/// Preprocessor resolutions the extension's slider allows.
pub const RESOLUTIONS: std::ops::RangeInclusive<u32> = 64..=2048;

impl MapSettings {
    /// `module` with its default thresholds, resolution 512, Crop and Resize.
    pub fn new(module: Module) -> Self {
        let [a, b] = module.sliders().map(|s| s.map_or(0.5, |s| s.default));
        Self {
            module,
            threshold_a: a,
            threshold_b: b,
            resolution: DEFAULT_RESOLUTION,
            pixel_perfect: false,
            resize: FitMode::Crop,
        }
    }

    /// Why these settings cannot make a map, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if !RESOLUTIONS.contains(&self.resolution) {
            return Err(format!(
                "a preprocessor resolution of {} is out of range ({}–{}; 512 is the default)",
                self.resolution,
                RESOLUTIONS.start(),
                RESOLUTIONS.end()
            ));
        }
        let sliders = self.module.sliders();
        for (slider, value) in sliders.iter().zip([self.threshold_a, self.threshold_b]) {
            if let Some(s) = slider
                && !(s.min..=s.max).contains(&value)
            {
                return Err(format!(
                    "{} {value} is out of range ({}–{}; {} is the default)",
                    s.label, s.min, s.max, s.default
                ));
            }
        }
        Ok(())
    }

    /// The resolution the module runs at for `image` and a generation of `target`.
    pub fn resolution_for(&self, image: (u32, u32), target: (u32, u32)) -> u32 {
        if self.pixel_perfect {
            pixel_perfect_resolution(image, target, self.resize)
        } else {
            self.resolution
        }
    }
}

/// The extension's "Pixel Perfect" resolution: the image's short side scaled as the resize
/// mode will scale it (`np.round`, ties to even).
pub fn pixel_perfect_resolution(
    (raw_w, raw_h): (u32, u32),
    (w, h): (u32, u32),
    resize: FitMode,
) -> u32 {
    let k0 = f64::from(h) / f64::from(raw_h);
    let k1 = f64::from(w) / f64::from(raw_w);
    let k = match resize {
        FitMode::Fill => k0.min(k1),
        FitMode::Resize | FitMode::Crop => k0.max(k1),
    };
    (k * f64::from(raw_h.min(raw_w))).round_ties_even() as u32
}

/// The most pixels a map may have on its way to the generation size (at the preprocessor
/// resolution, or scaled to cover the size): 32 MP, far above any usual case, well below
/// what a very wide image would ask for.
pub const MAX_MAP_PIXELS: u64 = 1 << 25;

/// The control map for a generation of `target` (`(width, height)`): the module's output
/// fitted by the resize mode. `Err` says why an image would need an outsized map.
pub fn control_map(
    image: &ImageRgb8,
    settings: &MapSettings,
    target: (u32, u32),
) -> Result<ImageRgb8, String> {
    if image.width == 0 || image.height == 0 || target.0 == 0 || target.1 == 0 {
        return Err("the control image or the image size is empty".into());
    }
    let resolution = settings.resolution_for((image.width, image.height), target);
    let too_big = |(w, h): (u32, u32), what: &str| {
        (u64::from(w) * u64::from(h) > MAX_MAP_PIXELS).then(|| {
            format!(
                "the {}x{} control image would become a {w}x{h} map {what}; crop it closer \
                 to the image's shape{}",
                image.width,
                image.height,
                if settings.module.uses_resolution() {
                    ", or lower the preprocessor resolution"
                } else {
                    ""
                }
            )
        })
    };
    let detected_size = if settings.module.uses_resolution() {
        scaled_short_side((image.width, image.height), resolution)
    } else {
        (image.width, image.height)
    };
    if let Some(e) = too_big(detected_size, "at the preprocessor resolution") {
        return Err(e);
    }
    let fitted = super::detectmap::scaled_size(detected_size, settings.resize, target);
    if let Some(e) = too_big(fitted, "before cropping") {
        return Err(e);
    }
    let detected = detect(image, settings, resolution);
    Ok(super::detectmap::fit(&detected, settings.resize, target))
}

/// `(w, h)` with its short side scaled to `resolution` (`np.round`, ties to even).
fn scaled_short_side((w, h): (u32, u32), resolution: u32) -> (u32, u32) {
    let (w, h) = (f64::from(w), f64::from(h));
    let k = f64::from(resolution) / w.min(h);
    (
        ((w * k).round_ties_even() as u32).max(1),
        ((h * k).round_ties_even() as u32).max(1),
    )
}

/// The module's map at `resolution` (before fitting).
pub fn detect(image: &ImageRgb8, settings: &MapSettings, resolution: u32) -> ImageRgb8 {
    let (a, b) = (settings.threshold_a, settings.threshold_b);
    match settings.module {
        Module::None => image.clone(),
        Module::Invert => map_pixels(image, |v| 255 - v),
        Module::Canny => at_resolution(image, resolution, |img| {
            let edges = canny(img, f64::from(a), f64::from(b));
            gray_to_rgb(&edges.pixels, edges.width, edges.height)
        }),
        Module::Threshold => at_resolution(image, resolution, |img| {
            let level = a;
            let out: Vec<u8> = img
                .pixels
                .chunks_exact(3)
                .map(|p| {
                    if f32::from(p[0].min(p[1]).min(p[2])) > level {
                        255
                    } else {
                        0
                    }
                })
                .collect();
            gray_to_rgb(&out, img.width, img.height)
        }),
        Module::ScribbleXdog => at_resolution(image, resolution, |img| {
            let out = super::xdog::scribble(img, a);
            gray_to_rgb(&out, img.width, img.height)
        }),
    }
}

/// The extension's `resize_image_with_pad`: the short side scaled to `resolution` (cubic up,
/// area down), the bottom and right padded by repeating edges to multiples of 64, `f` run
/// on that, and the padding cropped off its output.
fn at_resolution(
    image: &ImageRgb8,
    resolution: u32,
    f: impl Fn(&ImageRgb8) -> ImageRgb8,
) -> ImageRgb8 {
    let short = image.width.min(image.height);
    let how = if resolution > short {
        Interpolation::Cubic
    } else {
        Interpolation::Area
    };
    let size = scaled_short_side((image.width, image.height), resolution);
    let scaled = resize(image, size, how);
    let padded64 = (size.0.div_ceil(64) * 64, size.1.div_ceil(64) * 64);
    let padded = crate::canvas::extend_edges(&scaled, padded64, (0, 0));
    crop_top_left(&f(&padded), size)
}

fn map_pixels(image: &ImageRgb8, f: impl Fn(u8) -> u8) -> ImageRgb8 {
    ImageRgb8 {
        pixels: image.pixels.iter().map(|&v| f(v)).collect(),
        ..image.clone()
    }
}

/// A one-channel map made 3-channel, as the extension's `HWC3` does.
pub fn gray_to_rgb(gray: &[u8], width: u32, height: u32) -> ImageRgb8 {
    ImageRgb8 {
        width,
        height,
        pixels: gray.iter().flat_map(|&v| [v, v, v]).collect(),
    }
}

/// The top-left `size` of `img`.
fn crop_top_left(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    let stride = img.width as usize * 3;
    let pixels = (0..h as usize)
        .flat_map(|y| {
            img.pixels[y * stride..y * stride + w as usize * 3]
                .iter()
                .copied()
        })
        .collect();
    ImageRgb8 {
        width: w,
        height: h,
        pixels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixel_perfect_follows_the_resize_mode() {
        // A 64x48 image for a 24x40 generation: crop scales by max(40/48, 24/64).
        assert_eq!(
            pixel_perfect_resolution((64, 48), (24, 40), FitMode::Crop),
            40
        );
        assert_eq!(
            pixel_perfect_resolution((64, 48), (24, 40), FitMode::Resize),
            40
        );
        // Fill scales by min(..) = 0.375: 18.
        assert_eq!(
            pixel_perfect_resolution((64, 48), (24, 40), FitMode::Fill),
            18
        );
        // np.round ties to even: 0.5 * 5 = 2.5 -> 2.
        assert_eq!(pixel_perfect_resolution((5, 5), (2, 3), FitMode::Fill), 2);
    }

    #[test]
    fn modules_round_trip_their_names_and_defaults_are_the_extensions() {
        for m in Module::ALL {
            assert_eq!(Module::parse(m.name()), Some(m));
            assert_eq!(Module::parse(m.a1111_name()), Some(m));
        }
        let canny = MapSettings::new(Module::Canny);
        assert_eq!((canny.threshold_a, canny.threshold_b), (100.0, 200.0));
        assert_eq!(canny.resize, FitMode::Crop);
        let none = MapSettings::new(Module::None);
        assert_eq!((none.threshold_a, none.threshold_b), (0.5, 0.5));
        assert!(none.check().is_ok());
        let mut bad = canny;
        bad.threshold_b = 300.0;
        assert!(
            bad.check()
                .unwrap_err()
                .contains("Canny high threshold 300")
        );
        bad = canny;
        bad.resolution = 10;
        assert!(bad.check().unwrap_err().contains("resolution of 10"));
    }

    #[test]
    fn the_preprocessor_resolution_sets_the_short_side_and_the_padding_is_cropped() {
        let image = gray_to_rgb(&vec![200; 30 * 20], 30, 20);
        let settings = MapSettings::new(Module::Threshold);
        let map = detect(&image, &settings, 50);
        // Short side 20 -> 50, long side 30 * 2.5 = 75.
        assert_eq!((map.width, map.height), (75, 50));
        assert!(map.pixels.iter().all(|&v| v == 255));
    }
}
