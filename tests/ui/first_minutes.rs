//! What an artist meets in the first minutes (issue "the app as an artist meets it"), with
//! the fake engine: a failed load keeps the working model and stays out of Recent,
//! cancelling shows at once and Esc spares the queue, notices expire or close one by one,
//! and the Canvas tab shows the same progress as Create.

use std::time::{Duration, Instant};

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_app::gui::session::{Level, ModelState};
use ember_tests::fake_engine::FakeEngine;

use crate::{app, click, drop_files, fake_model, has_notice, open, scroll_and_click, step_until};

#[test]
fn a_failed_load_keeps_the_working_model_and_stays_out_of_recent() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let broken = home.path().join("broken.safetensors");
    std::fs::write(&broken, b"not a checkpoint").unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());

    drop_files(&mut w, &[&broken]);
    step_until(&mut w, "the broken load to fail", |a| {
        has_notice(a, "could not load")
    });
    let a = app(&w);
    assert_eq!(
        a.session.model().map(|m| m.path.clone()),
        Some(model.clone()),
        "the working model is kept"
    );
    let notice = &a.session.notices.last().unwrap().text;
    assert!(
        notice.contains("broken.safetensors") && notice.contains("is still loaded"),
        "{notice}"
    );
    assert_eq!(
        notice.matches("broken.safetensors").count(),
        1,
        "the file is named once: {notice}"
    );
    assert_eq!(a.settings.last_model.as_deref(), Some(model.as_path()));
    assert!(
        !a.settings.recent_models.contains(&broken),
        "a file that failed is not in Recent"
    );
    w.get_by_label("Generate");
    click(&mut w, "Generate");
    step_until(&mut w, "the kept model to generate", |a| {
        !a.display.results.is_empty()
    });
}

#[test]
fn cancel_shows_at_once_esc_spares_the_queue_and_cancel_all_empties_it() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let mut w = open(
        FakeEngine::new(Duration::from_millis(150)),
        Paths::under(home.path()),
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.steps = 40;
        s.batch_count = 3;
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the first image to run", |a| {
        a.session.running.as_ref().is_some_and(|r| r.step >= 1)
    });
    let first = app(&w).session.running.as_ref().unwrap().id;

    w.key_press(egui::Key::Escape);
    w.step();
    assert!(
        app(&w)
            .session
            .running
            .as_ref()
            .is_some_and(|r| r.cancelling),
        "Esc marks the job cancelling at once"
    );
    w.get_all_by_label("Cancelling…").next().expect("shown");
    assert_eq!(
        app(&w).session.queue.len(),
        2,
        "Esc asks nothing of the queue"
    );

    step_until(&mut w, "the next image to start", |a| {
        a.session.running.as_ref().is_some_and(|r| r.id != first)
    });
    assert_eq!(app(&w).session.queue.len(), 1, "the queue goes on");
    click(&mut w, "Cancel all");
    assert!(app(&w).session.queue.is_empty());
    step_until(&mut w, "the running image to stop", |a| {
        a.session.running.is_none()
    });
    assert!(app(&w).display.results.is_empty(), "nothing finished");
}

#[test]
fn info_notices_expire_errors_stay_until_closed_and_a_success_clears_old_errors() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    let session = &mut w.state_mut().as_mut().unwrap().session;
    session.notify(Level::Error, "first error");
    session.notify(Level::Info, "an info");
    session.notify(Level::Warning, "a warning");
    session.notify(Level::Info, "another info");
    session.notify(Level::Info, "another info");
    assert_eq!(
        session.notices.len(),
        4,
        "a repeated notice is renewed, not added"
    );
    w.step();
    w.get_by_label("Show all (4)");
    assert!(
        w.query_by_label("first error").is_none(),
        "only the newest three show"
    );
    click(&mut w, "Show all (4)");
    w.get_by_label("first error");

    let session = &mut w.state_mut().as_mut().unwrap().session;
    let next = session.expire(Instant::now() + Duration::from_secs(7));
    let left: Vec<_> = session.notices.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(
        left,
        ["first error", "a warning"],
        "info notices go after 6 s"
    );
    assert!(next.is_some(), "the warning's expiry is scheduled");
    session.expire(Instant::now() + Duration::from_secs(3600));
    assert_eq!(session.notices.len(), 1, "an error stays");
    w.step();
    let close = w.get_all_by_label("×").count();
    assert_eq!(close, 1, "each notice has its own close");
    click(&mut w, "×");
    assert!(
        app(&w).session.notices.is_empty(),
        "{:?}",
        app(&w).session.notices
    );

    // A failed load's error goes when a model then loads.
    drop_files(&mut w, &[&home.path().join("gone.safetensors")]);
    step_until(&mut w, "the load to fail", |a| {
        has_notice(a, "does not exist")
    });
    drop_files(&mut w, &[&fake_model(home.path())]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    assert!(
        !has_notice(app(&w), "does not exist"),
        "{:?}",
        app(&w).session.notices
    );
    assert!(matches!(app(&w).session.model, ModelState::Ready(_)));
}

#[test]
fn the_canvas_tab_shows_progress_and_the_live_preview() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let picture = home.path().join("picture.png");
    image::RgbImage::from_pixel(64, 48, image::Rgb([90, 120, 200]))
        .save(&picture)
        .unwrap();
    let mut w = open(
        FakeEngine::new(Duration::from_millis(100)),
        Paths::under(home.path()),
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    click(&mut w, "Canvas");
    drop_files(&mut w, &[&picture]);
    step_until(&mut w, "the image on the canvas", |a| {
        a.canvas.source.is_some()
    });
    w.state_mut().as_mut().unwrap().settings.steps = 30;
    click(&mut w, "Generate");
    step_until(&mut w, "a preview", |a| {
        a.display.preview.is_some() && a.session.running.as_ref().is_some_and(|r| r.step >= 2)
    });
    w.get_all_by_label_contains("step ")
        .next()
        .expect("the progress bar's step");
    w.get_by_label("Preview");
    click(&mut w, "Cancel");
    step_until(&mut w, "the job to stop", |a| a.session.running.is_none());
}

#[test]
fn outpainting_after_a_result_extends_the_result_and_says_to_generate() {
    use ember_app::gui::action::{Action, CanvasAction};
    use inference::imaging::ImageRgb8;

    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    let pasted = ImageRgb8 {
        width: 40,
        height: 24,
        pixels: vec![90; 40 * 24 * 3],
    };
    let a = w.state_mut().as_mut().unwrap();
    a.perform(Action::Canvas(CanvasAction::ImagePasted(Box::new(pasted))));
    a.settings.canvas.outpaint_pixels = 16;
    a.settings.steps = 2;
    w.step();
    // The outpaint buttons are at the foot of the canvas panel.
    scroll_and_click(&mut w, "Right");
    w.get_by_label_contains("Press Generate to fill it");
    click(&mut w, "Generate");
    step_until(&mut w, "the outpainted result", |a| {
        a.canvas.result.is_some()
    });
    assert!(
        w.query_by_label_contains("Press Generate").is_none(),
        "the hint goes once generating"
    );
    let (result, _) = app(&w).canvas.result.clone().unwrap();
    assert_eq!((result.width, result.height), (56, 24));

    scroll_and_click(&mut w, "Down");
    let source = app(&w).canvas.source.clone().unwrap();
    assert_eq!((source.width, source.height), (56, 40));
    assert_eq!(
        &source.pixels[..56 * 24 * 3],
        &result.pixels[..],
        "the result, not the pasted image, is extended"
    );
    assert_eq!(app(&w).canvas.size, (56, 40));
}

#[test]
fn a_small_window_hides_the_model_panel_and_keeps_the_result_and_its_button_in_view() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let mut w = crate::open_sized(
        FakeEngine::new(Duration::ZERO),
        Paths::under(home.path()),
        [800.0, 600.0],
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    assert!(
        w.query_by_label("Native size").is_none(),
        "the model panel folds away below 1100 points"
    );
    w.state_mut().as_mut().unwrap().settings.steps = 2;
    click(&mut w, "Generate");
    step_until(&mut w, "the image to be saved", |a| {
        a.display.results.iter().any(|s| s.path.is_some())
    });
    let button = w.get_by_label("Send to canvas").rect();
    assert!(
        button.right() <= 800.0 && button.bottom() <= 600.0,
        "{button:?}"
    );

    click(&mut w, "View");
    click(&mut w, "Model panel");
    assert_eq!(
        app(&w).settings.layout.model_panel,
        Some(true),
        "the user's choice is kept"
    );
    for _ in 0..30 {
        w.step(); // the panel slides in
    }
    w.get_by_label("Native size");
}

#[test]
fn a_nonstandard_checkpoint_asks_for_its_config_folder_and_a_typed_path_serves_without_a_dialog() {
    use ember_app::gui::action::Action;
    use ember_app::gui::dialogs::PathPurpose;

    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("nonstandard.safetensors");
    std::fs::write(&file, b"fake").unwrap();
    let config = home.path().join("its-config");
    std::fs::create_dir_all(&config).unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    drop_files(&mut w, &[&file]);
    step_until(&mut w, "the load to fail", |a| {
        a.session.needs_config.is_some()
    });
    w.get_by_label("Choose config folder…");

    // No portal: the dialog returns at once, and the app offers a typed path.
    let purpose = PathPurpose::ConfigFor {
        model: file.clone(),
        role: inference::worker::ModelRole::Main,
    };
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::DialogFailed(purpose));
    w.step();
    w.step(); // a new window sizes itself on its first frame
    assert!(has_notice(app(&w), "xdg-desktop-portal"));
    w.get_by_label("Path").focus();
    w.step();
    w.get_by_label("Path")
        .type_text(&config.join("missing").display().to_string());
    w.step();
    w.get_by_label("no such file or folder");
    w.get_by_label("Path").focus();
    w.step();
    for _ in 0.."missing".len() + 1 {
        w.key_press(egui::Key::Backspace);
    }
    w.step();
    click(&mut w, "Use this path");
    step_until(&mut w, "the model to load with its config", |a| {
        a.session.model().is_some()
    });
    let a = app(&w);
    assert_eq!(a.settings.config_dirs.get(&file), Some(&config));
    assert!(a.path_prompt.is_none() && a.session.needs_config.is_none());
}

#[test]
fn the_models_list_shows_loadable_models_and_folds_the_add_ons_by_kind() {
    use ember_app::gui::action::Action;

    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    for dir in ["Stable-diffusion", "Lora", "embeddings"] {
        std::fs::create_dir_all(models.join(dir)).unwrap();
    }
    std::fs::copy(
        ember_tests::reference("sd15/checkpoint.safetensors"),
        models.join("Stable-diffusion/dreamy.safetensors"),
    )
    .unwrap();
    std::fs::write(models.join("Lora/inkstyle.safetensors"), b"lora").unwrap();
    std::fs::write(models.join("embeddings/badhands.pt"), b"ti").unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::SetModelsFolder(models));
    step_until(&mut w, "the scan", |a| a.models.len() == 3);
    w.get_by_label_contains("dreamy.safetensors");
    w.get_by_label("LoRA (1)");
    w.get_by_label("Embeddings (1)");
    assert!(
        w.query_by_label_contains("inkstyle").is_none(),
        "add-ons are folded away from the models"
    );
    click(&mut w, "LoRA (1)");
    w.get_by_label("inkstyle");

    // Hashes are lazy: the list shows one once the engine has hashed the model for an
    // image's metadata (the fake engine does not hash, so the test does it in its place).
    use ember_app::gui::models::Hash;
    let dreamy = app(&w).models[0].path.clone();
    assert_eq!(app(&w).models[0].hash, Hash::NotYet);
    let hash = inference::hashing::model_hash(&dreamy, inference::hashing::cache_dir().as_deref())
        .unwrap();
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::LoadModel(dreamy));
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    w.state_mut().as_mut().unwrap().settings.steps = 1;
    click(&mut w, "Generate");
    step_until(&mut w, "the hash to show", |a| {
        a.models[0].hash == Hash::Known(hash.clone())
    });
}
