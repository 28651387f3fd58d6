//! `ember generate`'s ControlNet flags: each `--controlnet DIR` with the n-th
//! `--control-image`, `--control-scale`, `--control-start`, `--control-end`,
//! `--control-preprocess` and `--canny`, made into the request's ControlNets.

use inference::api::ControlRequest;
use inference::control::canny::canny;
use inference::imaging::{ImageRgb8, load_rgb};

use super::GenerateArgs;

/// The ControlNets the flags describe, their maps at `size`.
pub fn requests(args: &GenerateArgs, size: (u32, u32)) -> Result<Vec<ControlRequest>, String> {
    let n = args.controlnet.len();
    if args.control_image.len() != n {
        return Err(format!(
            "{n} --controlnet but {} --control-image: give one image per ControlNet",
            args.control_image.len()
        ));
    }
    let too_many = |flag: &str, count: usize| {
        (count > n).then(|| format!("{count} {flag} for {n} --controlnet"))
    };
    if let Some(e) = too_many("--control-scale", args.control_scale.len())
        .or(too_many("--control-start", args.control_start.len()))
        .or(too_many("--control-end", args.control_end.len()))
        .or(too_many(
            "--control-preprocess",
            args.control_preprocess.len(),
        ))
    {
        return Err(e);
    }
    let mut cannies = args.canny.iter();
    (0..n)
        .map(|i| {
            let model = args.controlnet[i].clone();
            if !model.join("config.json").is_file() && !model.is_file() {
                return Err(format!(
                    "--controlnet {}: neither a ControlNet file nor a diffusers ControlNet folder",
                    model.display()
                ));
            }
            let image = load_rgb(&args.control_image[i], Some(size)).map_err(|e| e.to_string())?;
            let preprocess = args
                .control_preprocess
                .get(i)
                .map_or("none", String::as_str);
            let (image, preprocessor) = match preprocess {
                "none" => (image, "none".to_string()),
                "invert" => (invert(&image), "invert".to_string()),
                "canny" => {
                    let (low, high) = thresholds(cannies.next().map(String::as_str))?;
                    (edges(&image, low, high), format!("canny {low},{high}"))
                }
                other => {
                    return Err(format!(
                        "--control-preprocess {other:?}: use none, canny or invert"
                    ));
                }
            };
            Ok(ControlRequest {
                model,
                image,
                scale: args.control_scale.get(i).copied().unwrap_or(1.0),
                start: args.control_start.get(i).copied().unwrap_or(0.0),
                end: args.control_end.get(i).copied().unwrap_or(1.0),
                preprocessor,
            })
        })
        .collect()
}

/// `--canny LOW,HIGH` (A1111's defaults 100, 200).
fn thresholds(flag: Option<&str>) -> Result<(f64, f64), String> {
    let Some(flag) = flag else {
        return Ok((100.0, 200.0));
    };
    let parsed = flag
        .split_once(',')
        .and_then(|(a, b)| Some((a.trim().parse::<f64>().ok()?, b.trim().parse::<f64>().ok()?)))
        .filter(|(a, b)| (0.0..=1000.0).contains(a) && (0.0..=1000.0).contains(b));
    parsed.ok_or_else(|| format!("--canny {flag:?}: give LOW,HIGH, e.g. 100,200"))
}

/// A1111's `invert` preprocessor: `255 - v`.
fn invert(image: &ImageRgb8) -> ImageRgb8 {
    ImageRgb8 {
        pixels: image.pixels.iter().map(|&v| 255 - v).collect(),
        ..image.clone()
    }
}

/// The Canny map made 3-channel, as the extension's `HWC3` does.
fn edges(image: &ImageRgb8, low: f64, high: f64) -> ImageRgb8 {
    let gray = canny(image, low, high);
    ImageRgb8 {
        width: gray.width,
        height: gray.height,
        pixels: gray.pixels.iter().flat_map(|&v| [v, v, v]).collect(),
    }
}
