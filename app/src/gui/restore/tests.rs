//! Tests of restoring settings from image metadata: A1111's emphasis names, an SDXL image's
//! refiner and second prompts, ComfyUI's and Fooocus' refiners, the SDE noise, seamless
//! tiling, and numbers that are not finite.

use inference::metadata::Parameters;
use inference::text::emphasis::Emphasis;

use super::*;

#[test]
fn an_a1111_emphasis_restores_by_a1111s_own_names() {
    for (name, expected) in [
        ("None", Emphasis::Off),
        ("No norm", Emphasis::NoNorm),
        ("Ignore", Emphasis::Ignore),
        ("Original", Emphasis::Original),
    ] {
        let text = format!("a (cat:1.3)\nSteps: 20, Seed: 1, Emphasis: {name}");
        let mut s = Settings::default();
        apply(
            &ImageMetadata::A1111(Parameters::parse(&text)),
            &mut s,
            true,
        );
        assert_eq!(s.emphasis, expected, "{name}");
        assert_eq!(s.emphasis.a1111_name(), name, "written back the same");
    }
    let mut s = Settings {
        emphasis: Emphasis::Off,
        ..Settings::default()
    };
    apply(
        &ImageMetadata::A1111(Parameters::parse("x\nSteps: 5")),
        &mut s,
        true,
    );
    assert_eq!(s.emphasis, Emphasis::Original, "no field: A1111's default");
}

#[test]
fn an_sdxl_a1111_image_restores_its_refiner_and_second_prompts() {
    let text = "a lighthouse\nNegative prompt: fog\nSteps: 30, Sampler: Euler, Schedule type: Automatic, \
                CFG scale: 5, Seed: 7, Size: 1024x1024, Model: sd_xl_base_1.0, \
                Refiner: sd_xl_refiner_1.0 [7440042bbd], Refiner switch at: 0.7, \
                Prompt 2: oil painting, CFG Rescale φ: 0.5, Aesthetic score: 7, \
                Original size: 4096x3003, Crop top left: \"0,64\"";
    let mut s = Settings::default();
    let r = apply(&ImageMetadata::A1111(Parameters::parse(text)), &mut s, true);
    assert_eq!(r.refiner.as_deref(), Some("sd_xl_refiner_1.0"));
    let model = r.model.as_ref().unwrap();
    assert_eq!(
        (model.name.as_deref(), model.hash.as_deref()),
        (Some("sd_xl_base_1.0"), None)
    );
    assert_eq!(s.refiner.switch_at, 0.7);
    assert_eq!(s.prompt_2, "oil painting");
    assert_eq!(s.cfg_rescale, 0.5);
    assert_eq!(s.refiner.aesthetic_score, 7.0);
    assert_eq!((s.width, s.height), (1024, 1024));
    let sc = s.size_conditioning;
    assert_eq!(
        (sc.original, sc.crop, sc.target),
        (Some((4096, 3003)), (0, 64), None)
    );
    apply(
        &ImageMetadata::A1111(Parameters::parse("x\nSteps: 5")),
        &mut s,
        true,
    );
    assert!(
        s.size_conditioning.to_request().is_default(),
        "an image without it restores the defaults"
    );
}

#[test]
fn comfy_and_fooocus_name_their_models_and_refiners() {
    let sampler = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    let base = sampler(&[
        ("steps", "25"),
        ("positive_text_l", "a cat"),
        ("positive_text_g", "a cat, photo"),
        ("ckpt_name", "base.safetensors"),
    ]);
    let second = sampler(&[
        ("steps", "25"),
        ("start_at_step", "20"),
        ("ckpt_name", "sdxl/refiner.safetensors"),
    ]);
    let mut s = Settings::default();
    let r = apply(
        &ImageMetadata::ComfyUi {
            samplers: vec![base, second],
            texts: vec![],
        },
        &mut s,
        false,
    );
    assert_eq!(r.refiner.as_deref(), Some("refiner"));
    assert_eq!(r.model.unwrap().name.as_deref(), Some("base"));
    assert_eq!(s.refiner.switch_at, 0.8);
    assert_eq!(
        (s.prompt.as_str(), s.prompt_2.as_str()),
        ("a cat", "a cat, photo")
    );

    let fooocus = sampler(&[
        ("prompt", "a dog"),
        ("base_model", "juggernautXL_v8Rundiffusion.safetensors"),
        ("base_model_hash", "AEB7E9E689"),
        ("refiner_model", "sd_xl_refiner_1.0.safetensors"),
        ("refiner_switch", "0.667"),
    ]);
    let r = apply(&ImageMetadata::Fooocus(fooocus), &mut s, false);
    assert_eq!(r.refiner.as_deref(), Some("sd_xl_refiner_1.0"));
    assert_eq!(
        r.model,
        Some(ImageModel {
            name: Some("juggernautXL_v8Rundiffusion".into()),
            hash: Some("aeb7e9e689".into())
        })
    );
    assert_eq!(s.refiner.switch_at, 0.667);
}

#[test]
fn an_image_names_its_model_by_hash_first_then_by_name() {
    use std::path::Path;
    let parse = |fields: &str| {
        let text = format!("x\nSteps: 5, {fields}");
        let mut s = Settings::default();
        apply(
            &ImageMetadata::A1111(Parameters::parse(&text)),
            &mut s,
            false,
        )
        .model
    };
    let named = parse("Model hash: 31E35C80FC, Model: sd_xl_base_1.0").unwrap();
    assert_eq!(named.describe(), "sd_xl_base_1.0 [31e35c80fc]");
    let file = Path::new("/models/SDXL/sd_xl_base_1.0.safetensors");
    assert!(
        named.is(file, None),
        "by name where the file's hash is not known"
    );
    assert!(named.is(file, Some("31e35c80fc")));
    assert!(
        !named.is(file, Some("0000000000")),
        "a file of that name with another hash is another model"
    );
    assert!(
        named.is(Path::new("/m/renamed.safetensors"), Some("31E35C80FC")),
        "a renamed file by its hash"
    );
    assert!(
        named.is(Path::new("/m/sd_xl_base_1.0"), None),
        "a diffusers folder"
    );
    assert!(!named.is(Path::new("/m/sd_xl_refiner_1.0.safetensors"), None));
    let old = parse("Model hash: 31e35c80, Model: sd_xl_base_1.0").unwrap();
    assert!(
        old.is(file, Some("31e35c80fc")),
        "an image's 8-digit first hash is no other hash kind: the name decides"
    );
    let hash_only = parse("Model hash: 31e35c80fc").unwrap();
    assert_eq!(hash_only.describe(), "the model of hash 31e35c80fc");
    assert!(!hash_only.is(file, None), "no name to go by");
    assert_eq!(parse("Seed: 1"), None);
    assert_eq!(
        parse("Model: None"),
        None,
        "Fooocus' and A1111's word for none"
    );
}

#[test]
fn sde_noise_is_brownian_unless_the_image_says_generator() {
    let text = |extra: &str| {
        format!("a fox\nSteps: 20, Sampler: DPM++ 2M SDE, Schedule type: Karras{extra}")
    };
    let mut s = Settings {
        sde_brownian: false,
        ..Settings::default()
    };
    apply(
        &ImageMetadata::A1111(Parameters::parse(&text(""))),
        &mut s,
        false,
    );
    assert!(s.sde_brownian, "A1111's images use Brownian trees");
    let generator = Parameters::parse(&text(", SDE noise: generator"));
    apply(&ImageMetadata::A1111(generator), &mut s, false);
    assert!(!s.sde_brownian);
}

#[test]
fn seamless_tiling_restores_from_a1111_fields_and_goes_off_without_them() {
    use inference::api::Seamless;
    let mut s = Settings::default();
    for (fields, expected) in [
        (", Tiling: True", Seamless::Both),
        (", Tile X: True, Tile Y: False", Seamless::X),
        (", Tiling: True, Tile X: False, Tile Y: True", Seamless::Y),
        ("", Seamless::Off),
    ] {
        let text = format!("a brick wall\nSteps: 20, Seed: 3{fields}");
        let r = apply(
            &ImageMetadata::A1111(Parameters::parse(&text)),
            &mut s,
            true,
        );
        assert_eq!(s.seamless, expected, "{fields}");
        assert_eq!(r.applied.contains(&"seamless tiling"), expected.is_on());
    }
    // Another tool's image has no such setting: it was made without.
    s.seamless = Seamless::Both;
    let fooocus = ImageMetadata::Fooocus(Default::default());
    apply(&fooocus, &mut s, true);
    assert_eq!(s.seamless, Seamless::Off);
}

/// "nan" and "inf" parse as `f32` but cannot be saved (JSON has no such numbers): restored,
/// they would make the settings file unreadable at the next start and every setting lost.
#[test]
fn non_finite_numbers_are_skipped_and_the_settings_still_save() {
    let text = "a fox\nSteps: 20, CFG scale: inf, Seed: 3, Size: 512x512, \
                Refiner: r, Refiner switch at: NaN, Aesthetic score: nan, \
                CFG Rescale φ: -inf, Denoising strength: nan, Hires upscale: inf, \
                Negative aesthetic score: 1e39";
    let mut s = Settings::default();
    let r = apply(&ImageMetadata::A1111(Parameters::parse(text)), &mut s, true);
    // 1e39 is a number, but no f32 one: it reads as infinite.
    for name in ["CFG scale", "CFG rescale", "negative aesthetic score"] {
        assert!(
            r.skipped.iter().any(|why| why.starts_with(name)),
            "{name} is reported skipped: {:?}",
            r.skipped
        );
    }
    assert_eq!(s.steps, 20, "the finite ones are applied");
    let dir = tempfile::tempdir().unwrap();
    let mut file = crate::gui::settings::SettingsFile::in_dir(dir.path());
    file.save(&s).unwrap();
    let loaded = file.load();
    assert!(loaded.problem.is_none(), "{:?}", loaded.problem);
    assert_eq!(loaded.settings.steps, 20);
}

#[test]
fn an_image_without_a_schedule_type_takes_the_schedule_it_was_made_with() {
    let restore = |fields: &str| {
        // What the form had before says nothing of the image.
        let mut s = Settings {
            schedule: ScheduleName::Beta,
            ..Settings::default()
        };
        let text = format!("a fox\nSteps: 20, {fields}, Seed: 1");
        apply(
            &ImageMetadata::A1111(Parameters::parse(&text)),
            &mut s,
            false,
        );
        (s.sampler, s.schedule)
    };
    // Before A1111 1.9 (no `Schedule type`): the model's own sigmas, as it was made.
    assert_eq!(
        restore("Sampler: Euler a"),
        (SamplerName::EulerAncestral, ScheduleName::Normal)
    );
    assert_eq!(
        restore("Sampler: DPM++ 2M SDE"),
        (SamplerName::DpmPp2MSde, ScheduleName::Normal)
    );
    assert_eq!(
        restore("Sampler: DPM++ 2M Karras"),
        (SamplerName::DpmPp2M, ScheduleName::Karras),
        "the schedule in the old name"
    );
    assert_eq!(
        restore("Sampler: DPM++ 3M SDE, Schedule type: Automatic"),
        (SamplerName::DpmPp3MSde, ScheduleName::Exponential)
    );
    assert_eq!(
        restore("Sampler: Euler, Schedule type: Karras"),
        (SamplerName::Euler, ScheduleName::Karras)
    );
    // Ember wrote a diffusers scheduler's own sigmas as Automatic before it wrote Normal.
    assert_eq!(
        restore(
            "Sampler: DPM++ 2M, Schedule type: Automatic, \
             Diffusers scheduler: DPMSolverMultistepScheduler"
        ),
        (SamplerName::DpmPp2M, ScheduleName::Normal)
    );
}

#[test]
fn a1111_images_restore_their_noise_source_and_seed_extras() {
    use inference::api::RngSource;
    let restore = |text: &str, with_seed: bool| {
        let mut s = Settings::default();
        s.noise.variation_seed = 3;
        let r = apply(
            &ImageMetadata::A1111(Parameters::parse(text)),
            &mut s,
            with_seed,
        );
        (s, r)
    };
    // Without `RNG`, A1111 made the image with its GPU noise: NV, as on NVIDIA cards.
    let (s, r) = restore("a cat\nSteps: 20, Seed: 5, Version: v1.10.1", true);
    assert_eq!(s.noise.rng, RngSource::Nv);
    assert!(r.summary().contains("NV"), "{}", r.summary());
    assert!(!s.noise.extras);
    // So were these: A1111 without git, before it wrote its version, Forge, SD.Next.
    for fields in [
        ", Version: 1.10.1",
        ", Version: <none>",
        "",
        ", Version: f2.0.1v1.10.1-previous-519",
        ", Version: f0.0.17v1.8.0rc-latest-276-g29be1da7",
        ", App: SD.Next, Version: f1e2d3c",
    ] {
        let (s, _) = restore(&format!("a cat\nSteps: 20, Seed: 5{fields}"), true);
        assert_eq!(s.noise.rng, RngSource::Nv, "{fields}");
    }
    // Ember's images from before it wrote `RNG`, Fooocus' and Civitai's in A1111's words,
    // and an unknown writer's are CPU noise.
    for fields in [
        ", Version: Ember 0.1.0",
        ", Version: Fooocus v2.5.5",
        ", Civitai resources: []",
        ", Version: f1e2d3c",
    ] {
        let (s, _) = restore(&format!("a cat\nSteps: 20, Seed: 5{fields}"), true);
        assert_eq!(s.noise.rng, RngSource::Cpu, "{fields}");
    }
    let text = "a cat\nSteps: 20, Seed: 5, Variation seed: 77, Variation seed strength: 0.35, \
                Seed resize from: 512x768, ENSD: 31337, RNG: CPU";
    let (s, r) = restore(text, true);
    assert_eq!(s.noise.rng, RngSource::Cpu);
    assert!(s.noise.extras && s.noise.variation_locked);
    assert_eq!(
        (s.noise.variation_seed, s.noise.variation_strength),
        (77, 0.35)
    );
    assert_eq!(s.noise.resize_from, (512, 768));
    assert_eq!(s.noise.eta_noise_seed_delta, 31337);
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    let request = s.noise.to_request();
    assert_eq!(request.variation.unwrap().seed, 77);
    // Without the seed, the variation seed stays as it was.
    let (s, _) = restore(text, false);
    assert_eq!(s.noise.variation_seed, 3);
    // Bad values are named, and the rest still restores.
    let (s, r) = restore(
        "a cat\nSteps: 20, Variation seed strength: 4, Seed resize from: 99999x2, RNG: TPU",
        true,
    );
    assert_eq!(s.noise.variation_strength, 0.0);
    assert_eq!(s.noise.resize_from, (0, 0));
    assert_eq!(r.skipped.len(), 3, "{:?}", r.skipped);
    assert_eq!(s.steps, 20);
}

#[test]
fn other_tools_images_restore_cpu_noise_without_extras() {
    let mut s = Settings::default();
    s.noise.rng = inference::api::RngSource::Nv;
    s.noise.extras = true;
    s.noise.variation_strength = 0.5;
    s.noise.eta_noise_seed_delta = 31337;
    let mut settings = BTreeMap::new();
    settings.insert("seed".to_string(), "9".to_string());
    apply(
        &ImageMetadata::ComfyUi {
            samplers: vec![settings],
            texts: vec!["a cat".into()],
        },
        &mut s,
        true,
    );
    assert_eq!(s.noise.rng, inference::api::RngSource::Cpu);
    assert!(!s.noise.extras);
    let request = s.noise.to_request();
    assert_eq!((request.variation, request.eta_noise_seed_delta), (None, 0));
}

#[test]
fn a_prompt_with_a_group_left_in_it_is_restored_to_make_the_same_image() {
    // Ember wrote the prompt the model read: `\{red|blue\}` typed gave literal braces.
    let text = "a {red|blue} sign\nNegative prompt: {dull}\nSteps: 5, Seed: 3, Template: a \\{red|blue\\} sign";
    let mut s = Settings::default();
    assert!(s.dynamic_prompts);
    apply(&ImageMetadata::A1111(Parameters::parse(text)), &mut s, true);
    assert_eq!(s.prompt, r"a \{red|blue\} sign");
    let made = crate::dynamic_prompts::resolve(&s.prompt, s.seed, 0, &[]).unwrap();
    assert_eq!(
        made.text, "a {red|blue} sign",
        "the prompt it was made with"
    );
    assert_eq!(s.negative_prompt, "{dull}", "plain braces stay as they are");
    // With dynamic prompts off the text is taken as it is.
    let mut off = Settings {
        dynamic_prompts: false,
        ..Settings::default()
    };
    apply(
        &ImageMetadata::A1111(Parameters::parse(text)),
        &mut off,
        true,
    );
    assert_eq!(off.prompt, "a {red|blue} sign");
}
