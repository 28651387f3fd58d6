//! Engine behaviour the GUI relies on: progress, cancellation, per-image seeds, NaN
//! detection, metadata and costing (load reports: `load_report`; half precision:
//! `half_precision`).

use std::ops::ControlFlow;

use burn::tensor::Device;
use ember_tests::{Fixture, pixel_diff, reference, write_edited_checkpoint};
use inference::api::{GenerateRequest, Progress, SamplerChoice, SdeNoise, Stage};
use inference::device::Precision;
use inference::metadata::{self, ImageMetadata, Parameters};
use inference::model::Model;
use inference::pipeline::generate;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::weights::{LoadOptions, load};
use inference::{Error, imaging};

pub(crate) fn model(precision: Precision) -> Model {
    let options = LoadOptions {
        config_dir: None,
        ..LoadOptions::new(Device::flex(), precision)
    };
    load(&reference("sd15/pipeline"), &options).unwrap()
}

pub(crate) fn request(model: &Model, seed: u64) -> GenerateRequest {
    let mut r = model.request("a red ball on a table", seed);
    r.negative_prompt = "blurry".into();
    r.steps = 6;
    r.sampler = SamplerChoice::Named {
        sampler: SamplerName::EulerAncestral,
        schedule: ScheduleName::Karras,
    };
    r
}

/// Options for the sd15 single-file checkpoint (its architecture from `--config`).
pub(crate) fn single_file_options() -> LoadOptions {
    LoadOptions {
        config_dir: Some(reference("sd15/pipeline")),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    }
}

pub(crate) fn quiet(_: Progress) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

#[test]
fn progress_reports_every_stage_and_step_in_order() {
    let m = model(Precision::F32);
    let mut seen = Vec::new();
    let mut observer = |p: Progress| {
        seen.push((p.stage, p.step, p.total));
        ControlFlow::Continue(())
    };
    generate(&m, &request(&m, 1), &mut observer).unwrap();
    let steps: Vec<usize> = seen
        .iter()
        .filter(|(s, _, _)| *s == Stage::Denoising)
        .map(|(_, i, _)| *i)
        .collect();
    assert_eq!(
        steps,
        (0..=6).collect::<Vec<_>>(),
        "denoising reports 0 of 6, then every step"
    );
    assert_eq!(seen.first().map(|s| s.0), Some(Stage::EncodingPrompt));
    assert_eq!(seen.last().map(|s| s.0), Some(Stage::Decoding));
}

#[test]
fn cancelling_stops_within_one_step() {
    let m = model(Precision::F32);
    let mut last_step = 0;
    let mut observer = |p: Progress| {
        if p.stage == Stage::Denoising {
            last_step = p.step;
        }
        if p.step == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let result = generate(&m, &request(&m, 1), &mut observer);
    assert!(
        matches!(result, Err(Error::Cancelled)),
        "cancelled generation returns Cancelled"
    );
    assert_eq!(last_step, 2, "no step ran after the cancel request");
}

/// Cancels from inside a step: `interrupted` says yes on its `after`-th question.
struct InterruptAfter {
    asked: std::cell::Cell<usize>,
    after: usize,
    steps_done: usize,
}

impl inference::pipeline::Observer for InterruptAfter {
    fn progress(&mut self, p: Progress) -> ControlFlow<()> {
        if p.stage == Stage::Denoising {
            self.steps_done = p.step;
        }
        ControlFlow::Continue(())
    }

    fn interrupted(&self) -> bool {
        self.asked.set(self.asked.get() + 1);
        self.asked.get() >= self.after
    }
}

#[test]
fn a_cancel_inside_a_step_stops_the_unet_between_blocks() {
    let m = model(Precision::F32);
    let mut observer = InterruptAfter {
        asked: Default::default(),
        after: usize::MAX,
        steps_done: 0,
    };
    let r = request(&m, 1);
    generate(&m, &r, &mut observer).unwrap();
    // Euler a: one UNet call per step.
    let per_call = observer.asked.get() / r.steps as usize;
    assert!(
        per_call >= 4,
        "the UNet asked {per_call} times per call; it must ask between its blocks"
    );
    // Now say yes in the middle of the first UNet call.
    let mut observer = InterruptAfter {
        asked: Default::default(),
        after: per_call / 2,
        steps_done: 0,
    };
    let result = generate(&m, &r, &mut observer);
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(observer.steps_done, 0, "the first step did not finish");
    assert_eq!(
        observer.asked.get(),
        per_call / 2,
        "it stopped at the first yes"
    );
}

#[test]
fn every_image_of_a_batch_is_its_own_seeds_image() {
    let m = model(Precision::F32);
    let init =
        imaging::load_rgb(&reference("sd15/runs/input_init_image.png"), Some((24, 40))).unwrap();
    // Euler a draws from each image's generator; DPM++ 2M SDE from each image's Brownian tree.
    let samplers = [
        (false, SamplerName::EulerAncestral),
        (true, SamplerName::EulerAncestral),
        (false, SamplerName::DpmPp2MSde),
    ];
    for (img2img, sampler) in samplers {
        let mut batch = request(&m, 100);
        batch.batch = 3;
        batch.sampler = SamplerChoice::Named {
            sampler,
            schedule: ScheduleName::Karras,
        };
        if img2img {
            batch.init_image = Some(init.clone());
            (batch.width, batch.height, batch.strength) = (24, 40, 0.7);
        }
        let together = generate(&m, &batch, &mut quiet).unwrap();
        for i in 0..3 {
            let mut single = batch.clone();
            single.batch = 1;
            single.seed = 100 + i as u64;
            let alone = generate(&m, &single, &mut quiet).unwrap();
            let a = &together.images[i].pixels;
            let (worst, _) = pixel_diff(a, &alone.images[0].pixels);
            assert!(
                worst <= 1,
                "{sampler} img2img={img2img}: image {i} differs from its seed's run by {worst} levels"
            );
        }
    }
}

#[test]
fn non_finite_values_stop_the_generation_naming_the_stage() {
    // Scale the UNet's output convolution so far up that its output overflows to infinity.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overflow.safetensors");
    let scale_up = |name: &str, t: &mut Fixture| {
        if name == "model.diffusion_model.out.2.weight" {
            *t = Fixture::from_f32(
                t.shape.clone(),
                &t.f32().iter().map(|v| v * 3e38).collect::<Vec<_>>(),
            );
        }
        true
    };
    write_edited_checkpoint(&path, scale_up, Vec::new());
    let options = single_file_options();
    let m = load(&path, &options).unwrap();
    match generate(&m, &request(&m, 1), &mut quiet) {
        Err(Error::NonFinite { stage }) => {
            assert!(stage.contains("UNet (step 1 of 6)"), "stage: {stage}")
        }
        other => panic!("expected a non-finite error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn sde_noise_choice_changes_the_sde_samplers_only_and_is_recorded() {
    let m = model(Precision::F32);
    let image = |sampler, sde_noise| {
        let mut r = request(&m, 9);
        r.sampler = SamplerChoice::Named {
            sampler,
            schedule: ScheduleName::Karras,
        };
        r.sde_noise = sde_noise;
        let generation = generate(&m, &r, &mut quiet).unwrap();
        let text = metadata::for_generation(
            &r,
            metadata::ModelRef {
                info: &m.info,
                hash: None,
            },
            None,
            0,
        )
        .to_text();
        (generation.images[0].pixels.clone(), text)
    };
    for sampler in [SamplerName::DpmPpSde, SamplerName::DpmPp2MSde] {
        let (tree, tree_text) = image(sampler, SdeNoise::BrownianTree);
        let (drawn, drawn_text) = image(sampler, SdeNoise::Generator);
        assert_ne!(tree, drawn, "{sampler}: the noise source changes the image");
        assert!(!tree_text.contains("SDE noise"), "{tree_text}");
        assert!(drawn_text.contains("SDE noise: generator"), "{drawn_text}");
    }
    let (a, a_text) = image(SamplerName::EulerAncestral, SdeNoise::BrownianTree);
    let (b, b_text) = image(SamplerName::EulerAncestral, SdeNoise::Generator);
    assert_eq!(a, b, "Euler a never uses a Brownian tree");
    assert_eq!(a_text, b_text);
}

#[test]
fn metadata_round_trips_and_reads_other_tools() {
    let m = model(Precision::F32);
    let mut r = request(&m, 42);
    r.prompt = "a cat, sitting: on a mat\nsecond line".into();
    let params = metadata::for_generation(
        &r,
        metadata::ModelRef {
            info: &m.info,
            hash: Some("0123456789"),
        },
        None,
        2,
    );
    let text = params.to_text();
    let parsed = Parameters::parse(&text);
    assert_eq!(parsed, params, "what Ember writes it reads back");
    assert_eq!(
        parsed.get("Seed"),
        Some("44"),
        "image 2 of the batch has seed + 2"
    );
    assert_eq!(parsed.get("Sampler"), Some("Euler a"));
    assert_eq!(parsed.get("Schedule type"), Some("Karras"));

    // An A1111 infotext with a quoted value containing commas.
    let a1111 = "masterpiece, 1girl\nNegative prompt: lowres, bad hands\nSteps: 28, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, Seed: 3456, Size: 512x768, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Lora hashes: \"add_detail: 7c6bad76eb54, x: 1\", Version: v1.10.1";
    let p = Parameters::parse(a1111);
    assert_eq!(p.prompt, "masterpiece, 1girl");
    assert_eq!(p.negative_prompt, "lowres, bad hands");
    assert_eq!(p.get("Lora hashes"), Some("add_detail: 7c6bad76eb54, x: 1"));
    assert_eq!(p.get("Version"), Some("v1.10.1"));

    let comfy = r#"{"3": {"class_type": "KSampler", "inputs": {"seed": 7, "steps": 20, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}}, "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 768, "batch_size": 1}}, "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a fox", "clip": ["4", 1]}}, "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry", "clip": ["4", 1]}}}"#;
    match metadata::from_text_chunks(&[("prompt".into(), comfy.into())]) {
        Some(ImageMetadata::ComfyUi { samplers, texts }) => {
            assert_eq!(texts, vec!["a fox".to_string(), "blurry".to_string()]);
            let linked = |k: &str| samplers[0].get(k).map(String::as_str);
            assert_eq!(
                linked("positive"),
                Some("a fox"),
                "the sampler's prompt links are followed"
            );
            assert_eq!(linked("negative"), Some("blurry"));
            assert_eq!(
                (linked("width"), linked("height")),
                (Some("512"), Some("768"))
            );
            assert_eq!(
                samplers[0].get("sampler_name").map(String::as_str),
                Some("euler")
            );
            assert!(
                !samplers[0].contains_key("model"),
                "links to other nodes are not settings"
            );
        }
        other => panic!("not read as ComfyUI: {other:?}"),
    }
}

#[test]
fn cost_refuses_what_cannot_fit_and_times_large_requests() {
    use inference::worker::estimate::{Speed, cost};
    let m = model(Precision::F32);
    let mut small = request(&m, 1);
    (small.width, small.height) = (64, 64);
    let mut speed = Speed::default();
    let c = cost(&m, &small, (&mut speed, &|| false), None).unwrap();
    assert_eq!(c.time, None, "a small request is not timed");
    assert!(speed.0.is_none(), "nor is the device measured for it");

    let mut big = request(&m, 1);
    (big.width, big.height) = (4096, 4096);
    let e = cost(&m, &big, (&mut speed, &|| false), Some(1 << 30))
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs about") && e.contains("free"), "{e}");

    let mut large = request(&m, 1);
    (large.width, large.height) = (1024, 1024);
    let cancelled = cost(&m, &large, (&mut Speed::default(), &|| true), None);
    assert!(
        matches!(cancelled, Err(Error::Cancelled)),
        "a cancel stops the speed measurement: {cancelled:?}"
    );
    let c = cost(&m, &large, (&mut speed, &|| false), None).unwrap();
    let t1 = c.time.expect("a large request is timed");
    assert!(speed.0.is_some_and(|s| s > 0.0), "the speed was measured");
    (large.width, large.height) = (2048, 2048);
    let t4 = cost(&m, &large, (&mut speed, &|| false), None)
        .unwrap()
        .time
        .unwrap();
    let ratio = t4.as_secs_f64() / t1.as_secs_f64();
    assert!(
        (3.9..4.1).contains(&ratio),
        "4x the pixels, {ratio}x the time"
    );
    large.steps *= 2;
    let t8 = cost(&m, &large, (&mut speed, &|| false), None)
        .unwrap()
        .time
        .unwrap();
    assert!((t8.as_secs_f64() / t4.as_secs_f64() - 2.0).abs() < 0.01);
}
