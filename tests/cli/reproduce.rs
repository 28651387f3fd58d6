//! `ember generate --scheduler-config` reproduces every supported `sd15/runs` run: the PNG
//! within 2 levels, `--save-latents` within the README's latent tolerance, from the
//! diffusers folder and from the single-file checkpoint.

use std::path::Path;

use ember_tests::{
    Fixtures, assert_close, inpainting_folder, read_png_rgb, reference, run_input, runs,
};
use inference::metadata::Parameters;
use inference::schedule::diffusers::SchedulerConfig;

use crate::{arg, ember};

fn reproduce(name: &str, layout: &str, run: &ember_tests::Json, model_args: &[String], dir: &Path) {
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
    flag("--width", run["width"].to_string());
    flag("--height", run["height"].to_string());
    flag("--steps", run["num_inference_steps"].to_string());
    flag("--cfg", run["guidance_scale"].to_string());
    flag("--seed", run["seed"].to_string());
    flag("--scheduler-config", arg(&config));
    if let Some(eta) = run["eta"].as_f64() {
        flag("--eta", eta.to_string());
    }
    if let Some(init) = run_input(run, "init_image") {
        flag("--init-image", arg(&init));
        flag("--strength", run["strength"].to_string());
    }
    if let Some(mask) = run_input(run, "mask_image") {
        flag("--mask", arg(&mask));
        // diffusers neither blurs the mask nor composites: turn Ember's canvas defaults off.
        flag("--mask-blur", "0".into());
    }
    let raw = run_input(run, "mask_image").is_some();
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

    let tensors = Fixtures::load(&format!("sd15/runs/{name}.safetensors"));
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
    let worst = pixels
        .iter()
        .zip(&theirs)
        .map(|(&a, &b)| (i64::from(a) - b).abs())
        .max()
        .unwrap();
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
}

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
    for (name, run) in runs() {
        if SchedulerConfig::from_json(&run["scheduler_config"].to_string()).is_err() {
            continue;
        }
        if run["model"]
            .as_str()
            .is_some_and(|m| m.contains("unet_inpaint"))
        {
            reproduce(&name, "inpainting-folder", &run, &inpaint, dir.path());
        } else {
            reproduce(&name, "folder", &run, &folder, dir.path());
            reproduce(&name, "single-file", &run, &single, dir.path());
        }
        done += 1;
    }
    assert!(
        done >= 9,
        "only {done} runs were reproduced through the CLI"
    );
}
