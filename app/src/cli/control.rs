//! `ember generate`'s ControlNet flags: each `--controlnet DIR` with the n-th
//! `--control-image`, `--control-scale`, `--control-start`, `--control-end`,
//! `--control-preprocess`, `--control-resize` and `--control-res`; `--canny` goes with the
//! n-th canny unit and `--control-threshold` with the n-th threshold or scribble unit.

use inference::api::ControlRequest;
use inference::canvas::FitMode;
use inference::control::{MapSettings, Module, control_map};
use inference::imaging::load_rgb_over_white;

use super::GenerateArgs;

/// The ControlNets the flags describe, their maps made at `size`.
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
        .or(too_many("--control-resize", args.control_resize.len()))
        .or(too_many("--control-res", args.control_res.len()))
    {
        return Err(e);
    }
    let mut cannies = args.canny.iter();
    let mut thresholds = args.control_threshold.iter();
    let requests = (0..n)
        .map(|i| {
            let model = args.controlnet[i].clone();
            if !model.join("config.json").is_file() && !model.is_file() {
                return Err(format!(
                    "--controlnet {}: neither a ControlNet file nor a diffusers ControlNet folder",
                    model.display()
                ));
            }
            let map = map_settings(args, i, &mut cannies, &mut thresholds)?;
            let image = load_rgb_over_white(&args.control_image[i]).map_err(|e| e.to_string())?;
            Ok(ControlRequest {
                model,
                image: control_map(&image, &map, size)
                    .map_err(|e| format!("ControlNet {i}: {e}"))?,
                scale: args.control_scale.get(i).copied().unwrap_or(1.0),
                start: args.control_start.get(i).copied().unwrap_or(0.0),
                end: args.control_end.get(i).copied().unwrap_or(1.0),
                map,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if cannies.next().is_some() {
        return Err("more --canny than canny ControlNets".into());
    }
    if thresholds.next().is_some() {
        return Err("more --control-threshold than threshold / scribble_xdog ControlNets".into());
    }
    Ok(requests)
}

/// The n-th unit's preprocessor, thresholds, resolution and resize mode.
fn map_settings<'a>(
    args: &GenerateArgs,
    i: usize,
    cannies: &mut impl Iterator<Item = &'a String>,
    thresholds: &mut impl Iterator<Item = &'a f32>,
) -> Result<MapSettings, String> {
    let name = args
        .control_preprocess
        .get(i)
        .map_or("none", String::as_str);
    let module = Module::parse(name).ok_or_else(|| {
        format!(
            "--control-preprocess {name:?}: use none, canny, invert, threshold or scribble_xdog"
        )
    })?;
    let mut map = MapSettings::new(module);
    match module {
        Module::Canny => {
            if let Some(flag) = cannies.next() {
                (map.threshold_a, map.threshold_b) = canny_thresholds(flag)?;
            }
        }
        Module::Threshold | Module::ScribbleXdog => {
            if let Some(&t) = thresholds.next() {
                map.threshold_a = t;
            }
        }
        Module::None | Module::Invert => {}
    }
    if let Some(name) = args.control_resize.get(i) {
        map.resize = FitMode::parse(name)
            .ok_or_else(|| format!("--control-resize {name:?}: use crop, resize or fill"))?;
    }
    match args.control_res.get(i).map(|s| s.trim()) {
        None => {}
        Some("pixel-perfect") => map.pixel_perfect = true,
        Some(res) => {
            map.resolution = res.parse().map_err(|_| {
                format!(
                    "--control-res {res:?}: give a number of pixels (e.g. 512) or pixel-perfect"
                )
            })?;
        }
    }
    map.check().map_err(|e| format!("ControlNet {i}: {e}"))?;
    Ok(map)
}

/// `--canny LOW,HIGH`.
fn canny_thresholds(flag: &str) -> Result<(f32, f32), String> {
    flag.split_once(',')
        .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
        .ok_or_else(|| format!("--canny {flag:?}: give LOW,HIGH, e.g. 100,200"))
}
