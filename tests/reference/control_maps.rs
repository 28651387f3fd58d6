//! ControlNet control maps against OpenCV (`tests/extra/control`, made by
//! `tests/extra/make_control_maps.py` from A1111's ControlNet extension's steps): every
//! preprocessor that needs no network at its resolution (and Pixel Perfect's), then the map
//! fitted by each resize mode, through `inference::control::control_map`.
//!
//! Tolerance: exact wherever no step enlarges (area, nearest, the whole-number 2x / 4x
//! shrinks, every preprocessor on such maps); where one does, OpenCV's cubic enlargement
//! rounds a value one level the
//! other way (its wheel's cubic path; measured at most 1 level on under 3% of the values of
//! noisy images). So `none` maps may differ by 1 level (measured: 81 of 27,648 values in
//! one case), and maps a preprocessor made from an enlarged image may differ wherever that
//! level moved an edge: at most 2% of values allowed (measured: 24 of 2,880 in the canny
//! case at resolution 512, every step after the enlargement checked exact on its own).
//! Area shrinking, nearest, Canny, threshold, XDoG, the border median, Otsu, `nake_nms`
//! and the thinning matched exactly in every case.

use std::path::{Path, PathBuf};

use inference::canvas::FitMode;
use inference::control::{MapSettings, Module, control_map};
use inference::imaging::load_rgb;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("extra/control")
}

#[test]
fn control_maps_match_the_extensions_opencv_steps() {
    let text = std::fs::read_to_string(dir().join("cases.json")).unwrap();
    let cases: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = cases["cases"].as_array().unwrap();
    assert!(cases.len() >= 10, "the case list is complete");
    let mut failures = Vec::new();
    for case in cases {
        let image = load_rgb(&dir().join(case["input"].as_str().unwrap()), None).unwrap();
        let expected = load_rgb(&dir().join(case["expected"].as_str().unwrap()), None).unwrap();
        let module = Module::parse(case["module"].as_str().unwrap()).unwrap();
        let number = |key: &str| case[key].as_f64().unwrap();
        let map = MapSettings {
            module,
            threshold_a: number("threshold_a") as f32,
            threshold_b: number("threshold_b") as f32,
            resolution: number("resolution") as u32,
            pixel_perfect: case["pixel_perfect"].as_bool().unwrap(),
            resize: FitMode::parse(case["resize"].as_str().unwrap()).unwrap(),
        };
        let target = (number("width") as u32, number("height") as u32);
        assert_eq!(
            map.resolution_for((image.width, image.height), target),
            number("pixel_perfect_resolution") as u32,
            "{case}: preprocessor resolution"
        );
        let ours = control_map(&image, &map, target).unwrap();
        assert_eq!((ours.width, ours.height), target, "{case}");
        let diffs: Vec<u8> = ours
            .pixels
            .iter()
            .zip(&expected.pixels)
            .map(|(a, b)| a.abs_diff(*b))
            .collect();
        let differing = diffs.iter().filter(|&&d| d > 0).count();
        let worst = diffs.iter().copied().max().unwrap_or(0);
        // Where no step enlarges (no cubic resize), every value must match exactly.
        let enlarged = (module.uses_resolution()
            && map.resolution_for((image.width, image.height), target)
                > image.width.min(image.height))
            || enlarges(&image, &map, target);
        let binary = module != Module::None;
        let allowed = match (enlarged, binary) {
            (false, _) => 0,
            (true, true) => diffs.len() / 50,
            (true, false) => diffs.len(),
        };
        let worst_allowed = if binary { 255 } else { 1 };
        if differing > allowed || worst > worst_allowed {
            failures.push(format!(
                "{}: {differing} of {} values differ (worst {worst})",
                case["expected"],
                diffs.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A very wide image would need an outsized map at the preprocessor resolution (or to cover
/// the image size): refused with the sizes, before any work.
#[test]
fn outsized_maps_are_refused() {
    let image = inference::imaging::ImageRgb8 {
        width: 16_000,
        height: 100,
        pixels: vec![128; 16_000 * 100 * 3],
    };
    let canny = MapSettings::new(Module::Canny);
    let err = control_map(&image, &canny, (512, 512)).unwrap_err();
    assert!(
        err.contains("16000x100") && err.contains("preprocessor resolution"),
        "{err}"
    );
    let none = MapSettings::new(Module::None);
    let err = control_map(&image, &none, (512, 512)).unwrap_err();
    assert!(err.contains("before cropping"), "{err}");
    // Stretching needs no outsized map.
    let stretch = MapSettings {
        resize: FitMode::Resize,
        ..none
    };
    assert!(control_map(&image, &stretch, (512, 512)).is_ok());
}

/// Whether fitting the map to `target` enlarges it (a cubic resize: OpenCV rounds a few
/// values one level apart from Ember there).
fn enlarges(image: &inference::imaging::ImageRgb8, map: &MapSettings, target: (u32, u32)) -> bool {
    let resolution = map.resolution_for((image.width, image.height), target);
    let detected = if map.module.uses_resolution() {
        let k = f64::from(resolution) / f64::from(image.width.min(image.height));
        (
            (f64::from(image.width) * k).round() as u32,
            (f64::from(image.height) * k).round() as u32,
        )
    } else {
        (image.width, image.height)
    };
    let scaled = inference::control::detectmap::scaled_size(detected, map.resize, target);
    u64::from(scaled.0) * u64::from(scaled.1) > u64::from(detected.0) * u64::from(detected.1)
}
