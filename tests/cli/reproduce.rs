//! `ember generate --scheduler-config` reproduces every supported `sd15/runs` run: the PNG
//! within 2 levels, `--save-latents` within the README's latent tolerance, from the
//! diffusers folder and from the single-file checkpoint. [`reproduce`] serves the other
//! families' runs too (`families`).

use std::path::Path;

use ember_tests::{
    Fixtures, Json, assert_close, inpainting_folder, read_png_rgb, reference, run_input_in, runs,
};
use inference::metadata::Parameters;
use inference::schedule::diffusers::SchedulerConfig;

use crate::{arg, ember};

/// `[height, width]` as the `WxH` of a size flag.
fn size_flag(v: &Json) -> Option<String> {
    let a = v.as_array()?;
    Some(format!("{}x{}", a.get(1)?, a.first()?))
}

/// The SDXL flags a run's settings call for.
fn sdxl_flags(run: &Json, flag: &mut dyn FnMut(&str, String)) {
    if let Some(p) = run["prompt_2"].as_str() {
        flag("--prompt-2", p.into());
    }
    if let Some(p) = run["negative_prompt_2"].as_str() {
        flag("--negative-2", p.into());
    }
    if let Some(size) = size_flag(&run["original_size"]) {
        flag("--original-size", size);
    }
    if let Some(size) = size_flag(&run["target_size"]) {
        flag("--target-size", size);
    }
    if let Some(c) = run["crops_coords_top_left"].as_array() {
        flag("--crop-top-left", format!("{},{}", c[1], c[0]));
    }
    if let Some(score) = run["aesthetic_score"].as_f64() {
        flag("--aesthetic-score", score.to_string());
    }
    if let Some(score) = run["negative_aesthetic_score"].as_f64() {
        flag("--negative-aesthetic-score", score.to_string());
    }
    if let Some(switch) = run["denoising_end"].as_f64() {
        flag("--refiner-switch", switch.to_string());
    }
}

/// Runs `ember generate` with a run's settings (from `runs_dir`, e.g. `sd15/runs`) on the
/// model `model_args` names and checks the PNG, the latents and the metadata.
pub fn reproduce(
    runs_dir: &str,
    name: &str,
    layout: &str,
    run: &Json,
    model_args: &[String],
    dir: &Path,
) -> inference::metadata::Parameters {
    let label = format!("{name}-{layout}");
    let config = dir.join(format!("{label}-scheduler.json"));
    std::fs::write(&config, run["scheduler_config"].to_string()).unwrap();
    let out = dir.join(format!("{label}.png"));
    let latents = dir.join(format!("{label}.safetensors"));
    let mut args: Vec<String> = model_args.to_vec();
    let mut flag = |k: &str, v: String| {
        args.push(k.to_string());
        args.push(v);
    };
    flag("--prompt", run["prompt"].as_str().unwrap().into());
    flag(
        "--negative",
        run["negative_prompt"].as_str().unwrap_or("").into(),
    );
    sdxl_flags(run, &mut flag);
    flag("--width", run["width"].to_string());
    flag("--height", run["height"].to_string());
    flag("--steps", run["num_inference_steps"].to_string());
    flag("--cfg", run["guidance_scale"].to_string());
    flag("--seed", run["seed"].to_string());
    flag("--scheduler-config", arg(&config));
    if let Some(eta) = run["eta"].as_f64() {
        flag("--eta", eta.to_string());
    }
    if let Some(init) = run_input_in(runs_dir, run, "init_image") {
        flag("--init-image", arg(&init));
        flag("--strength", run["strength"].to_string());
    }
    if let Some(mask) = run_input_in(runs_dir, run, "mask_image") {
        flag("--mask", arg(&mask));
        // diffusers neither blurs the mask nor composites: turn Ember's canvas defaults off.
        flag("--mask-blur", "0".into());
    }
    let raw = run_input_in(runs_dir, run, "mask_image").is_some();
    flag("--out", arg(&out));
    flag("--save-latents", arg(&latents));
    if raw {
        args.push("--no-composite".into());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = ember(dir, &[&["generate"], &argv[..]].concat());
    assert!(
        output.status.success(),
        "{label}: ember failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let tensors = Fixtures::load(&format!("{runs_dir}/{name}.safetensors"));
    let final_ref = tensors.get("final_latents").f64();
    let ours = Fixtures::load_path(&latents).get("latents").f32();
    let max = final_ref.iter().fold(0f64, |m, v| m.max(v.abs()));
    assert_close(
        &format!("{name}: --save-latents"),
        &ours,
        &final_ref,
        1e-4 * max,
        0.0,
    );

    let (w, h, pixels) = read_png_rgb(&out);
    assert_eq!(
        (w, h),
        (
            run["width"].as_u64().unwrap() as u32,
            run["height"].as_u64().unwrap() as u32
        )
    );
    let theirs = tensors.get("image_u8").i64();
    let (worst, _) = ember_tests::pixel_diff(&pixels, &theirs);
    assert!(
        worst <= 2,
        "{name}: PNG differs from diffusers' by {worst} levels"
    );

    let chunks = inference::imaging::read_png_text(&out).unwrap();
    let text = &chunks
        .iter()
        .find(|(k, _)| k == "parameters")
        .expect("parameters chunk")
        .1;
    let params = Parameters::parse(text);
    assert_eq!(params.prompt, run["prompt"].as_str().unwrap());
    assert_eq!(params.get("Seed"), Some(run["seed"].to_string().as_str()));
    assert_eq!(
        params.get("Steps"),
        Some(run["num_inference_steps"].to_string().as_str())
    );
    assert_eq!(params.get("Size"), Some(format!("{w}x{h}").as_str()));
    params
}

/// Every SD 1.x run through `ember generate` from the diffusers folder, and the first of each
/// pipeline from the single-file checkpoint too: the layouts load identical weights (the
/// reference test `components::every_layout_gives_identical_outputs`), so the other runs
/// from the single file would check the samplers again (100 s of a 2-core machine in all).
#[test]
fn cli_reproduces_every_supported_run_from_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let folder = vec!["--model".to_string(), arg(&reference("sd15/pipeline"))];
    let single = vec![
        "--model".to_string(),
        arg(&reference("sd15/checkpoint.safetensors")),
        "--config".to_string(),
        arg(&reference("sd15/pipeline")),
    ];
    let inpaint_dir = inpainting_folder();
    let inpaint = vec!["--model".to_string(), arg(inpaint_dir.path())];
    let mut done = 0;
    let mut pipelines = std::collections::HashSet::new();
    for (name, run) in runs() {
        if SchedulerConfig::from_json(&run["scheduler_config"].to_string()).is_err() {
            continue;
        }
        if run["model"]
            .as_str()
            .is_some_and(|m| m.contains("unet_inpaint"))
        {
            reproduce(
                "sd15/runs",
                &name,
                "inpainting-folder",
                &run,
                &inpaint,
                dir.path(),
            );
        } else {
            reproduce("sd15/runs", &name, "folder", &run, &folder, dir.path());
            if pipelines.insert(run["pipeline"].to_string()) {
                reproduce("sd15/runs", &name, "single-file", &run, &single, dir.path());
            }
        }
        done += 1;
    }
    assert!(done > 0, "no run was reproduced through the CLI");
}
