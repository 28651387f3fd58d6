//! Generating with the fake engine: the empty state, loading by drop, progress, saving,
//! cancelling, the queue, settings that survive a restart, and a GPU lost mid-job.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_app::gui::session::ModelState;
use ember_tests::fake_engine::FakeEngine;
use inference::imaging::read_png_text;

use crate::{app, click, drop_files, fake_model, has_notice, open, step_until};

#[test]
fn a_fresh_window_asks_for_a_checkpoint_and_generate_says_why_it_cannot_run() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    w.get_by_label(
        "Drop a Stable Diffusion checkpoint here, choose a models folder, or download one",
    );
    w.get_by_label("No model loaded.");
    click(&mut w, "Generate");
    assert!(
        has_notice(app(&w), "load a model first"),
        "{:?}",
        app(&w).session.notices
    );
    assert!(app(&w).session.running.is_none() && app(&w).session.queue.is_empty());
}

/// While a model loads, Generate says to wait: the job is built from the model's
/// capabilities (an SDXL model's second prompts, the refiner, the LoRA folders beside it),
/// which are not known yet.
#[test]
fn generate_waits_for_the_model_being_loaded() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    w.state_mut().as_mut().unwrap().session.model = ModelState::Loading {
        path: home.path().join("big-model.safetensors"),
        step: 1,
        total: 4,
        cancel: inference::worker::CancelToken::new(),
    };
    w.step();
    click(&mut w, "Generate");
    assert!(
        has_notice(app(&w), "big-model.safetensors is still loading"),
        "{:?}",
        app(&w).session.notices
    );
    assert!(app(&w).session.running.is_none() && app(&w).session.queue.is_empty());
}

#[test]
fn a_dropped_model_loads_and_generate_shows_progress_then_saves_the_png() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let mut w = open(
        FakeEngine::new(Duration::from_millis(60)),
        Paths::under(home.path()),
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    w.get_by_label("Family");
    let ready = "Type a prompt and press Generate (Ctrl+Enter)";
    w.get_by_label(ready);
    assert_eq!(
        app(&w).settings.last_model.as_deref(),
        Some(model.as_path())
    );
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (64, 64),
        "the size follows the model's native side from the default 512×512"
    );
    assert!(has_notice(
        app(&w),
        "size 64×64 for fake's native 64 px (was 512×512)"
    ));

    let prompt = w.get_by_label("Prompt");
    prompt.focus();
    w.step();
    w.get_by_label("Prompt").type_text("a red fox");
    w.step();
    assert_eq!(app(&w).settings.prompt, "a red fox");
    w.state_mut().as_mut().unwrap().settings.steps = 12;
    w.state_mut().as_mut().unwrap().settings.seed_locked = true;
    w.state_mut().as_mut().unwrap().settings.seed = 4242;

    click(&mut w, "Generate");
    step_until(&mut w, "denoising progress", |a| {
        a.session.running.as_ref().is_some_and(|r| r.step >= 3)
    });
    w.get_by_label_contains("step ");
    w.get_by_label("seed 4242");
    step_until(&mut w, "the image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    assert!(
        w.query_by_label(ready).is_none(),
        "the image took its place"
    );
    let saved = app(&w).display.results[0].path.clone().unwrap();
    assert_eq!(saved.parent(), Some(home.path().join("outputs").as_path()));
    assert_eq!(saved.file_name().unwrap(), "00000-4242.png");
    let png = image::open(&saved).unwrap();
    assert_eq!(
        (png.width(), png.height()),
        (64, 64),
        "the size in the form"
    );
    let text = read_png_text(&saved).unwrap();
    let parameters = &text.iter().find(|(k, _)| k == "parameters").unwrap().1;
    assert!(
        parameters.starts_with("a red fox\n") && parameters.contains("Seed: 4242"),
        "{parameters}"
    );
}

#[test]
fn cancel_stops_the_running_job_and_the_queue_can_be_cleared() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let engine = FakeEngine::new(Duration::from_millis(50));
    let steps_run = engine.steps_run.clone();
    let mut w = open(engine, Paths::under(home.path()));
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    {
        let settings = &mut w.state_mut().as_mut().unwrap().settings;
        settings.steps = 100;
        settings.batch_count = 3;
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the first job to run", |a| {
        a.session.running.as_ref().is_some_and(|r| r.step >= 1)
    });
    assert_eq!(
        app(&w).session.queue.len(),
        2,
        "batch count 3: one runs, two wait"
    );
    w.get_by_label_contains("queued: seeds");
    click(&mut w, "Clear queue");
    assert!(app(&w).session.queue.is_empty());
    w.get_all_by_label("Cancel").next().unwrap().click();
    step_until(&mut w, "the job to stop", |a| a.session.running.is_none());
    let run = steps_run.load(std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    w.step();
    assert_eq!(
        steps_run.load(std::sync::atomic::Ordering::SeqCst),
        run,
        "nothing runs after cancel"
    );
    assert!(run < 100, "cancelled mid-job ({run} steps)");
    assert!(
        app(&w).display.results.is_empty(),
        "a cancelled job saves nothing"
    );
    assert!(
        !home.path().join("outputs").exists()
            || std::fs::read_dir(home.path().join("outputs"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn settings_survive_a_restart_and_the_last_model_reloads() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    {
        let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
        w.step();
        drop_files(&mut w, &[&model]);
        step_until(&mut w, "the model to load", |a| a.session.model().is_some());
        let app = w.state_mut().as_mut().unwrap();
        app.settings.prompt = "kept prompt".into();
        app.settings.cfg_scale = 9.5;
        app.save_settings();
    }
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    assert_eq!(app(&w).settings.prompt, "kept prompt");
    assert_eq!(app(&w).settings.cfg_scale, 9.5);
    step_until(&mut w, "the last model to reload", |a| {
        a.session.model().is_some()
    });
    assert_eq!(
        w.get_by_label("Prompt").value().as_deref(),
        Some("kept prompt")
    );
}

#[test]
fn a_corrupt_settings_file_is_kept_aside_and_the_app_opens_with_defaults() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("settings.json"), b"{\"prompt\": \"half writ").unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    assert!(
        has_notice(app(&w), "settings"),
        "{:?}",
        app(&w).session.notices
    );
    assert!(
        config.join("settings.json.bad").exists(),
        "the broken file is kept for the user"
    );
    assert!(matches!(app(&w).session.model, ModelState::Empty));
}

#[test]
fn a_missing_model_fails_with_a_notice_and_junk_drops_are_named() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    let junk = home.path().join("notes.txt");
    std::fs::write(&junk, b"hello").unwrap();
    drop_files(&mut w, &[&junk]);
    assert!(
        has_notice(app(&w), "neither a model"),
        "{:?}",
        app(&w).session.notices
    );
    drop_files(&mut w, &[&home.path().join("gone.safetensors")]);
    step_until(&mut w, "the load to fail", |a| {
        has_notice(a, "does not exist")
    });
    assert!(matches!(app(&w).session.model, ModelState::Empty));
    click(&mut w, "Dismiss all");
    assert!(app(&w).session.notices.is_empty());
}

#[test]
fn every_sampler_and_schedule_is_in_the_menus_by_its_a1111_name() {
    use inference::api::SamplerChoice;
    use inference::schedule::named::{SamplerName, ScheduleName};

    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    // Open the sampler menu (the combo box is labelled by its caption) and pick a newer
    // sampler by its label.
    click(&mut w, "Sampler");
    for name in SamplerName::ALL {
        assert!(
            w.query_by_label(name.a1111_name()).is_some(),
            "{} is not in the sampler menu",
            name.a1111_name()
        );
    }
    click(&mut w, "DPM++ 2M SDE");
    assert_eq!(app(&w).settings.sampler.comfy_name(), "dpmpp_2m_sde");

    click(&mut w, "Schedule");
    for name in ScheduleName::ALL {
        assert!(
            w.query_by_label(name.a1111_name()).is_some(),
            "{} is not in the schedule menu",
            name.a1111_name()
        );
    }
    click(&mut w, "Align Your Steps");
    let request = app(&w).request().unwrap();
    assert!(
        matches!(
            request.sampler,
            SamplerChoice::Named {
                sampler: SamplerName::DpmPp2MSde,
                schedule: ScheduleName::AlignYourSteps
            }
        ),
        "{:?}",
        request.sampler
    );
}

#[test]
fn the_sde_noise_checkbox_reaches_the_request() {
    use inference::api::SdeNoise;

    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    assert_eq!(
        app(&w).request().unwrap().sde_noise,
        SdeNoise::BrownianTree,
        "ComfyUI's and A1111's default"
    );
    click(&mut w, "Advanced");
    click(&mut w, "Brownian-tree SDE noise");
    assert!(!app(&w).settings.sde_brownian);
    assert_eq!(app(&w).request().unwrap().sde_noise, SdeNoise::Generator);
}

#[test]
fn the_vae_tiling_menu_reaches_the_request_and_is_remembered() {
    use inference::api::VaeTiling;

    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let mut w = open(FakeEngine::new(Duration::from_millis(1)), paths.clone());
    w.step();
    assert_eq!(app(&w).request().unwrap().vae_tiling, VaeTiling::Auto);
    click(&mut w, "Advanced");
    click(&mut w, "VAE tiling");
    click(&mut w, "On");
    assert_eq!(app(&w).request().unwrap().vae_tiling, VaeTiling::On);
    // What eframe's save hook does on closing.
    w.state_mut().as_mut().unwrap().save_settings();
    drop(w);
    let w = open(FakeEngine::new(Duration::from_millis(1)), paths);
    assert_eq!(
        app(&w).settings.vae_tiling,
        VaeTiling::On,
        "kept in settings.json"
    );
}

#[test]
fn closing_the_window_mid_generation_stops_the_job_promptly() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let engine = FakeEngine::new(Duration::from_millis(50));
    let steps_run = engine.steps_run.clone();
    let mut w = open(engine, Paths::under(home.path()));
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    w.state_mut().as_mut().unwrap().settings.steps = 1000;
    click(&mut w, "Generate");
    step_until(&mut w, "the job to run", |a| {
        a.session.running.as_ref().is_some_and(|r| r.step >= 1)
    });
    // eframe drops the app when the window closes: the worker handle goes with it.
    let start = std::time::Instant::now();
    drop(w);
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_secs(2),
        "closing waited {waited:?} for a 1000-step job"
    );
    let run = steps_run.load(std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        steps_run.load(std::sync::atomic::Ordering::SeqCst),
        run,
        "the job went on after the window closed"
    );
}

/// The GPU lost mid-job: a notice says so and that Ember goes on on the CPU, the status line
/// says the CPU, the model loads again by itself, the job starts over on the CPU and saves its
/// image, and the next generation (the same prompt) saves its image too.
#[test]
fn a_gpu_lost_mid_job_moves_to_the_cpu_and_the_model_comes_back() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)).on_gpu(),
        Paths::under(home.path()),
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    w.state_mut().as_mut().unwrap().settings.prompt = "lose the gpu".into();
    w.state_mut().as_mut().unwrap().settings.steps = 2;

    click(&mut w, "Generate");
    step_until(&mut w, "the failure", |a| {
        has_notice(a, "the GPU stopped working while generating")
    });
    assert!(has_notice(app(&w), "Ember goes on on the CPU"));
    w.get_by_label("Running on the CPU (the GPU stopped working)");
    assert!(has_notice(app(&w), "starts over on the CPU"));
    step_until(&mut w, "the lost job's image to be saved on the CPU", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    assert!(app(&w).session.model().is_some(), "the model loaded again");
    let said = (app(&w).session.notices.iter())
        .filter(|n| n.text.contains("stopped working"))
        .count();
    assert_eq!(said, 1, "said once, not again as the job's failure");
    let first = app(&w).display.results_job;

    click(&mut w, "Generate");
    step_until(&mut w, "the next image to be saved on the CPU", |a| {
        a.display.results_job != first
            && !a.display.results.is_empty()
            && a.display.results.iter().all(|s| s.path.is_some())
    });
    assert!(has_notice(app(&w), "Ember goes on on the CPU"), "it stays");
}
