//! The gallery: saved results listed newest first, a selected image with its parameters,
//! reusing its settings, and restoring settings from a dropped PNG, JPEG or WebP.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::action::View;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{
    Window, app, click, drop_files, fake_model, has_notice, open, press_in_one_frame, step_until,
};

/// A window with a loaded fake model and two saved results (seeds 700 and 701).
fn window_with_two_results(home: &std::path::Path) -> Window {
    let model = fake_model(home);
    let mut w = open(
        FakeEngine::new(Duration::from_millis(5)),
        Paths::under(home),
    );
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.prompt = "a lighthouse at dusk".into();
        s.negative_prompt = "blurry".into();
        s.steps = 7;
        s.cfg_scale = 6.5;
        s.width = 448;
        s.height = 320;
        s.seed = 700;
        s.seed_locked = true;
        s.batch_count = 2;
    }
    click(&mut w, "Generate");
    step_until(&mut w, "both images to be saved", |a| {
        a.session.running.is_none()
            && a.session.queue.is_empty()
            && std::fs::read_dir(home.join("outputs")).is_ok_and(|d| d.count() == 2)
            && a.display.results.iter().all(|s| s.path.is_some())
    });
    w
}

#[test]
fn results_are_listed_newest_first_and_a_selected_image_shows_its_parameters() {
    let home = tempfile::tempdir().unwrap();
    let mut w = window_with_two_results(home.path());
    click(&mut w, "Gallery");
    assert_eq!(app(&w).view, View::Gallery);
    step_until(&mut w, "the folder scan", |a| a.gallery.entries.len() == 2);
    let names: Vec<_> = app(&w)
        .gallery
        .entries
        .iter()
        .map(|e| e.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["00001-701.png", "00000-700.png"]);

    click(&mut w, "00000-700.png");
    step_until(&mut w, "the image to open", |a| {
        a.gallery
            .selected
            .as_ref()
            .is_some_and(|s| s.metadata.is_some())
    });
    w.get_by_label_contains("Seed: 700");
    w.get_by_label_contains("a lighthouse at dusk");
}

#[test]
fn reuse_settings_and_reuse_seed_bring_an_image_back_into_the_form() {
    let home = tempfile::tempdir().unwrap();
    let mut w = window_with_two_results(home.path());
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.prompt = "something else".into();
        s.steps = 30;
        s.width = 512;
        s.seed = 1;
    }
    click(&mut w, "Gallery");
    step_until(&mut w, "the folder scan", |a| a.gallery.entries.len() == 2);
    click(&mut w, "00001-701.png");
    step_until(&mut w, "the image to open", |a| {
        a.gallery
            .selected
            .as_ref()
            .is_some_and(|s| s.metadata.is_some())
    });
    click(&mut w, "Reuse settings");
    let s = &app(&w).settings;
    assert_eq!(app(&w).view, View::Generate, "back to the form");
    assert_eq!(s.prompt, "a lighthouse at dusk");
    assert_eq!(
        (s.steps, s.cfg_scale, s.width, s.height),
        (7, 6.5, 448, 320)
    );
    assert_eq!(s.seed, 1, "Reuse settings keeps the current seed");

    click(&mut w, "Gallery");
    click(&mut w, "Reuse seed");
    assert_eq!(app(&w).settings.seed, 701);
    assert!(app(&w).settings.seed_locked);
}

#[test]
fn a_dropped_png_restores_its_settings_and_a_plain_png_says_it_has_none() {
    let home = tempfile::tempdir().unwrap();
    let mut w = window_with_two_results(home.path());
    w.state_mut().as_mut().unwrap().settings.prompt = "changed".into();
    let saved = home.path().join("outputs").join("00000-700.png");
    drop_files(&mut w, &[&saved]);
    step_until(&mut w, "the settings to be restored", |a| {
        a.settings.prompt == "a lighthouse at dusk"
    });
    assert_eq!(app(&w).settings.negative_prompt, "blurry");
    assert_eq!(app(&w).settings.seed, 700);

    let plain = home.path().join("plain.png");
    image::RgbImage::new(8, 8).save(&plain).unwrap();
    drop_files(&mut w, &[&plain]);
    step_until(&mut w, "the notice", |a| {
        has_notice(a, "no generation settings")
    });
    assert_eq!(
        app(&w).settings.prompt,
        "a lighthouse at dusk",
        "nothing changed"
    );
}

/// Civitai's and A1111's JPEGs and ComfyUI's WebPs carry their settings in EXIF; dropped on
/// the window they restore as a PNG does (files from `tests/extra/make_exif_images.py`).
#[test]
fn a_dropped_jpeg_or_webp_restores_the_settings_in_its_exif() {
    let home = tempfile::tempdir().unwrap();
    let mut w = window_with_two_results(home.path());
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ember_tests::extra("exif/expected.json")).unwrap(),
    )
    .unwrap();
    let a1111 = expected["a1111_text"].as_str().unwrap();
    // The prompt has a character egui's bundled fonts lack (a musical clef): the window draws
    // a box for it, as the app does, where kittest would panic.
    w.ctx
        .set_missing_glyph_policy(egui::MissingGlyphPolicy::Tofu);
    drop_files(&mut w, &[&ember_tests::extra("exif/a1111.jpg")]);
    step_until(&mut w, "the JPEG's settings", |a| {
        Some(a.settings.prompt.as_str()) == a1111.lines().next()
    });
    assert_eq!(app(&w).settings.negative_prompt, "lowres, bad hands");
    assert_eq!(app(&w).settings.seed, 1234);

    drop_files(&mut w, &[&ember_tests::extra("exif/comfyui.webp")]);
    step_until(&mut w, "the WebP's ComfyUI graph", |a| {
        a.settings.prompt == "a red fox in snow"
    });
    assert_eq!(app(&w).settings.seed, 77);
}

/// "Save as" in the Output folder section: a JPEG (or WebP) result with its settings in
/// EXIF, listed in the gallery beside the PNGs and remembered in the settings.
#[test]
fn results_are_saved_as_the_chosen_format_with_their_settings() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    click(&mut w, "Save as");
    click(&mut w, "JPEG");
    assert_eq!(
        app(&w).settings.saving.kind,
        ember_app::gui::settings::FileKind::Jpeg
    );
    assert!(
        w.query_all_by_label("JPEG quality").next().is_some(),
        "a JPEG shows its quality"
    );
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.prompt, s.seed, s.seed_locked, s.steps) = ("a kite".into(), 31, true, 3);
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the JPEG to be saved", |a| {
        a.display.results.first().is_some_and(|s| s.path.is_some())
    });
    let saved = app(&w).display.results[0].path.clone().unwrap();
    assert_eq!(saved.file_name().unwrap(), "00000-31.jpg");
    let text = inference::imaging::read_image_text(&saved).unwrap();
    assert!(text[0].1.starts_with("a kite\n"), "{text:?}");
    click(&mut w, "Gallery");
    step_until(&mut w, "the gallery to list it", |a| {
        a.gallery.entries.len() == 1
    });
}

/// A GPU whose largest texture is smaller than the pictures (here 1024 pixels a side, the
/// least egui's font atlas takes; egui panics on a larger texture, wgpu refuses one): the results, the gallery's thumbnails and
/// its large view are shown scaled down, while the images keep and are saved at their size.
#[test]
fn pictures_larger_than_the_gpus_largest_texture_are_shown_scaled_down() {
    let home = tempfile::tempdir().unwrap();
    let model = fake_model(home.path());
    let mut w = open(
        FakeEngine::new(Duration::from_millis(5)),
        Paths::under(home.path()),
    );
    w.input_mut().max_texture_side = Some(1024);
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.width, s.height) = (2048, 1536);
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the image to be saved", |a| {
        a.display.results.len() == 1 && a.display.results[0].path.is_some()
    });
    let shown = &app(&w).display.results[0];
    assert_eq!(shown.size, [2048, 1536], "the image's own size");
    assert_eq!(shown.texture.size(), [1024, 768], "its texture, fitted");
    let saved = image::open(shown.path.as_ref().unwrap()).unwrap();
    assert_eq!((saved.width(), saved.height()), (2048, 1536), "saved whole");

    click(&mut w, "Gallery");
    step_until(&mut w, "the folder scan", |a| a.gallery.entries.len() == 1);
    let name = saved_name(&w);
    click(&mut w, &name);
    step_until(&mut w, "the large view", |a| {
        a.gallery
            .selected
            .as_ref()
            .is_some_and(|s| s.texture.is_some())
    });
    let selected = app(&w).gallery.selected.as_ref().unwrap();
    let [tw, th] = selected.texture.as_ref().unwrap().size();
    assert_eq!([tw, th], [1024, 768], "the large view, fitted");
}

fn saved_name(w: &Window) -> String {
    let entry = &app(w).gallery.entries[0];
    entry
        .path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The file name of the gallery's selected image.
fn selected_name(w: &Window) -> Option<String> {
    let selected = app(w).gallery.selected.as_ref();
    selected.map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
}

/// The arrow keys step through the gallery in its order (Left and Right one image, Up and
/// Down a row), stop at either end, count every press of a frame, and move nothing in
/// another view.
#[test]
fn the_arrow_keys_step_through_the_gallery() {
    let home = tempfile::tempdir().unwrap();
    let mut w = window_with_two_results(home.path());
    click(&mut w, "Gallery");
    step_until(&mut w, "the folder scan", |a| a.gallery.entries.len() == 2);
    let mut press = |key| {
        w.key_press(key);
        w.step();
        selected_name(&w)
    };
    let (newest, older) = (Some("00001-701.png".into()), Some("00000-700.png".into()));
    assert_eq!(
        press(egui::Key::ArrowRight),
        newest,
        "none selected: the first"
    );
    assert_eq!(press(egui::Key::ArrowRight), older);
    assert_eq!(press(egui::Key::ArrowRight), older, "the last stays");
    assert_eq!(press(egui::Key::ArrowLeft), newest);
    assert_eq!(press(egui::Key::ArrowLeft), newest, "the first stays");
    // Both fit one row: a row down stops at the last image, a row up at the first.
    assert_eq!(press(egui::Key::ArrowDown), older);
    assert_eq!(press(egui::Key::ArrowUp), newest);
    assert!(
        app(&w).gallery.columns >= 2,
        "the 1280-pixel window fits two thumbnails a row"
    );

    // Every press of a frame counts, in order: left, right, right from the first is one to
    // the right (right, right, left would be back at the first, as the second right stops
    // at the end).
    use egui::Key::{ArrowLeft, ArrowRight};
    press_in_one_frame(
        &mut w,
        egui::Modifiers::NONE,
        &[ArrowLeft, ArrowRight, ArrowRight],
    );
    assert_eq!(selected_name(&w), older, "all three presses counted");
    press_in_one_frame(
        &mut w,
        egui::Modifiers::NONE,
        &[ArrowRight, ArrowRight, ArrowLeft],
    );
    assert_eq!(
        selected_name(&w),
        newest,
        "the second right stopped at the end"
    );

    click(&mut w, "Create");
    w.key_press(ArrowRight);
    w.step();
    assert_eq!(
        selected_name(&w),
        newest,
        "the arrow keys belong to the gallery only"
    );
}
