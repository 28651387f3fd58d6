//! The canvas mode with the real engine on the reference model: drop an image, paint a
//! stroke with the pointer, undo / redo it, invert the mask (and undo that with Ctrl+Z),
//! inpaint, and find the result in the gallery with its inpainting parameters and every
//! pixel outside the blurred mask unchanged; and the brush keys.

use egui::{Modifiers, Vec2};
use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_tests::{json, run_input};
use inference::canvas::blur_mask;
use inference::imaging::{self, read_png_text};

use crate::{
    Window, app, click, drop_files, open, open_with_reference_model, press_in_one_frame, step_until,
};

fn masked(w: &Window) -> usize {
    app(w)
        .canvas
        .mask
        .as_ref()
        .map_or(0, |m| m.pixels.iter().filter(|&&v| v > 0).count())
}

#[test]
fn paint_undo_invert_then_inpaint_and_find_it_in_the_gallery() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open_with_reference_model(home.path());

    let form_size = (app(&w).settings.width, app(&w).settings.height);
    click(&mut w, "Canvas");
    let source_path = run_input(&json("sd15/runs/inpaint_blend.json"), "init_image").unwrap();
    drop_files(&mut w, &[&source_path]);
    step_until(&mut w, "the image on the canvas", |a| {
        a.canvas.source.is_some()
    });
    let source = imaging::load_rgb(&source_path, None).unwrap();
    assert_eq!(
        app(&w).canvas.size,
        (source.width, source.height),
        "generates at the image's size"
    );
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        form_size,
        "Create keeps its own size"
    );

    // A horizontal stroke across the middle of the painter.
    w.state_mut().as_mut().unwrap().settings.canvas.brush_size = 6.0;
    w.step();
    let rect = w
        .get_all_by_label("Canvas")
        .map(|n| n.rect())
        .max_by(|a, b| a.area().total_cmp(&b.area()))
        .unwrap();
    let (from, to) = (
        rect.center() - Vec2::new(rect.width() / 8.0, 0.0),
        rect.center() + Vec2::new(rect.width() / 8.0, 0.0),
    );
    w.hover_at(from);
    w.step();
    w.drag_at(from);
    w.step();
    for t in [0.25, 0.5, 0.75, 1.0] {
        w.hover_at(from + (to - from) * t);
        w.step();
    }
    w.drop_at(to);
    w.step();
    let painted = masked(&w);
    assert!(painted > 0, "the stroke painted nothing");
    assert!(painted < (source.width * source.height) as usize / 2);

    click(&mut w, "Undo");
    assert_eq!(masked(&w), 0, "undo removes the stroke");
    click(&mut w, "Redo");
    assert_eq!(masked(&w), painted, "redo brings it back");
    let stroke = app(&w).canvas.mask.clone().unwrap();
    click(&mut w, "Invert mask");
    let inverted = app(&w).canvas.mask.clone().unwrap();
    assert!(
        stroke
            .pixels
            .iter()
            .zip(&inverted.pixels)
            .all(|(&a, &b)| b == 255 - a),
        "inverted"
    );
    w.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    w.step();
    assert_eq!(masked(&w), painted, "Ctrl+Z undoes the inversion");
    let mask = app(&w).canvas.mask.clone().unwrap();

    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.prompt = "a red door".into();
        s.steps = 4;
        s.sampler = inference::schedule::named::SamplerName::Euler;
        s.schedule = inference::schedule::named::ScheduleName::Normal;
        s.seed = 3;
        s.seed_locked = true;
        s.canvas.mask_blur = 2;
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the inpainted image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    let saved = app(&w).display.results[0].path.clone().unwrap();
    assert!(
        app(&w).canvas.result.is_some(),
        "the canvas shows the result"
    );

    let out = imaging::load_rgb(&saved, None).unwrap();
    assert_eq!((out.width, out.height), (source.width, source.height));
    let blurred = blur_mask(&mask, 2);
    for (i, &m) in blurred.pixels.iter().enumerate() {
        if m == 0 {
            assert_eq!(
                &out.pixels[i * 3..i * 3 + 3],
                &source.pixels[i * 3..i * 3 + 3],
                "pixel {i} outside the mask changed"
            );
        }
    }
    let text = read_png_text(&saved).unwrap();
    let parameters = &text.iter().find(|(k, _)| k == "parameters").unwrap().1;
    for field in [
        "Denoising strength: 0.75",
        "Mask blur: 2",
        "Masked content: original",
        "Init image hash: ",
    ] {
        assert!(
            parameters.contains(field),
            "{field:?} missing from {parameters}"
        );
    }

    click(&mut w, "Gallery");
    step_until(&mut w, "the gallery to list it", |a| {
        a.gallery.entries.iter().any(|e| e.path == saved)
    });
}

#[test]
fn a_pasted_image_goes_on_the_canvas_and_outpainting_grows_it() {
    use ember_app::gui::action::{Action, CanvasAction};
    use ember_tests::fake_engine::FakeEngine;
    use inference::imaging::ImageRgb8;

    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(std::time::Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    let pasted = ImageRgb8 {
        width: 40,
        height: 24,
        pixels: vec![90; 40 * 24 * 3],
    };
    // What the clipboard thread sends back after "Paste image".
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::Canvas(CanvasAction::ImagePasted(Box::new(
            pasted.clone(),
        ))));
    w.step();
    assert_eq!(app(&w).canvas.source.as_ref(), Some(&pasted));
    assert_eq!(app(&w).canvas.size, (40, 24));

    w.state_mut()
        .as_mut()
        .unwrap()
        .settings
        .canvas
        .outpaint_pixels = 16;
    // The outpaint buttons sit below the form: scrolled to, as a person would.
    crate::scroll_and_click(&mut w, "Right");
    let source = app(&w).canvas.source.clone().unwrap();
    assert_eq!((source.width, source.height), (56, 24));
    assert_eq!(app(&w).canvas.size, (56, 24));
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (512, 512),
        "outpainting leaves Create's size alone"
    );
    w.get_by_label_contains("Press Generate to fill it");
    let mask = app(&w).canvas.mask.clone().unwrap();
    for y in 0..24 {
        for x in 0..56 {
            let expected = if x >= 40 { 255 } else { 0 };
            assert_eq!(mask.pixels[y * 56 + x], expected, "mask at ({x}, {y})");
        }
    }
}

#[test]
fn an_odd_sized_source_and_outpaint_give_a_size_generate_accepts() {
    use ember_app::gui::action::{Action, CanvasAction};
    use ember_tests::fake_engine::FakeEngine;
    use inference::imaging::ImageRgb8;

    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(std::time::Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    let pasted = ImageRgb8 {
        width: 43,
        height: 27,
        pixels: vec![90; 43 * 27 * 3],
    };
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.perform(Action::Canvas(CanvasAction::ImagePasted(Box::new(pasted))));
    app_mut.settings.canvas.outpaint_pixels = 13;
    w.step();
    assert_eq!(app(&w).canvas.size, (40, 24));
    for side in ["Right", "Down"] {
        click(&mut w, side);
        let (width, height) = app(&w).canvas.size;
        assert_eq!(
            (width % 8, height % 8),
            (0, 0),
            "after {side}: {width}x{height}"
        );
        let source = app(&w).canvas.source.clone().unwrap();
        assert!(width <= source.width && width + 8 > source.width);
        assert!(height <= source.height && height + 8 > source.height);
    }
}

/// The brush keys: E the eraser, B the brush, `[` and `]` the size by 1.25 a press (every
/// press of a frame counted), and none of them while a text field has the keyboard.
#[test]
fn the_brush_keys_pick_the_tool_and_size_it() {
    let home = tempfile::tempdir().unwrap();
    let engine = ember_tests::fake_engine::FakeEngine::new(std::time::Duration::ZERO);
    let mut w = open(engine, Paths::under(home.path()));
    w.step();
    click(&mut w, "Canvas");
    w.state_mut().as_mut().unwrap().settings.canvas.brush_size = 40.0;
    w.key_press(egui::Key::E);
    w.step();
    assert!(app(&w).canvas.brush.erase, "E: the eraser");
    w.key_press(egui::Key::B);
    w.step();
    assert!(!app(&w).canvas.brush.erase, "B: the brush");

    // Three presses in one frame all count.
    press_in_one_frame(&mut w, egui::Modifiers::NONE, &[egui::Key::OpenBracket; 3]);
    let size = app(&w).settings.canvas.brush_size;
    assert!((size - 40.0 / 1.25f32.powi(3)).abs() < 1e-3, "{size}");
    w.key_press(egui::Key::CloseBracket);
    w.step();
    let size = app(&w).settings.canvas.brush_size;
    assert!((size - 40.0 / 1.25f32.powi(2)).abs() < 1e-3, "{size}");

    // `]` stops at the slider's end.
    press_in_one_frame(
        &mut w,
        egui::Modifiers::NONE,
        &[egui::Key::CloseBracket; 40],
    );
    w.step();
    assert_eq!(app(&w).settings.canvas.brush_size, 512.0);
    w.state_mut().as_mut().unwrap().settings.canvas.brush_size = size;
    w.step();

    w.get_by_label("Prompt").focus();
    w.step();
    w.key_press(egui::Key::E);
    w.key_press(egui::Key::CloseBracket);
    w.step();
    assert!(
        !app(&w).canvas.brush.erase,
        "typed into the prompt, not the brush"
    );
    assert_eq!(app(&w).settings.canvas.brush_size, size);

    // With the settings panel folded away, the keys still size the brush that paints.
    w.state_mut()
        .as_mut()
        .unwrap()
        .settings
        .layout
        .settings_panel = false;
    w.state_mut()
        .as_mut()
        .unwrap()
        .settings
        .canvas
        .brush_hardness = 0.25;
    w.step();
    w.key_press(egui::Key::Escape); // the prompt gives the keyboard back
    w.step();
    w.key_press(egui::Key::CloseBracket);
    w.step();
    let a = app(&w);
    assert!(!a.settings.layout.settings_panel);
    assert!((a.settings.canvas.brush_size - size * 1.25).abs() < 1e-3);
    assert_eq!(
        (a.canvas.brush.size, a.canvas.brush.hardness),
        (a.settings.canvas.brush_size, 0.25)
    );
}

/// A canvas job's result becomes the canvas's only while the image it was made from is on
/// the canvas (Outpaint goes on from that result), and canvas jobs that end without an
/// image (cleared, cancelled) let go of their image and mask.
#[test]
fn a_result_from_a_replaced_image_is_saved_not_shown_and_ended_jobs_let_go() {
    use ember_app::gui::action::{Action, CanvasAction};
    use ember_tests::fake_engine::FakeEngine;
    use inference::imaging::ImageRgb8;

    let home = tempfile::tempdir().unwrap();
    let model = crate::fake_model(home.path());
    let mut w = open(
        FakeEngine::new(std::time::Duration::from_millis(10)),
        Paths::under(home.path()),
    );
    w.step();
    crate::drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    let paste = |w: &mut Window, value: u8| {
        let image = ImageRgb8 {
            width: 40,
            height: 24,
            pixels: vec![value; 40 * 24 * 3],
        };
        let app = w.state_mut().as_mut().unwrap();
        app.perform(Action::Canvas(CanvasAction::ImagePasted(Box::new(image))));
        w.step();
    };
    paste(&mut w, 90);
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.steps, s.batch_count) = (30, 3);
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the first job to run", |a| {
        a.session.running.as_ref().is_some_and(|r| r.step >= 1)
    });
    assert_eq!(app(&w).canvas_jobs_waiting(), 3);

    // Another image while the first one's jobs run.
    paste(&mut w, 200);
    step_until(&mut w, "the first job's image", |a| {
        a.display.results.iter().any(|s| s.path.is_some())
    });
    assert!(
        app(&w).canvas.result.is_none(),
        "the first image's result is saved, not taken for the second image's"
    );
    click(&mut w, "Clear queue");
    w.get_all_by_label("Cancel").next().unwrap().click();
    step_until(&mut w, "the job to stop", |a| a.session.running.is_none());
    assert_eq!(app(&w).canvas_jobs_waiting(), 0, "nothing kept for them");
    assert!(app(&w).canvas.jobs_from_source.is_empty());

    // A job from the image on the canvas gives it its result.
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.steps, s.batch_count) = (2, 1);
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the canvas result", |a| a.canvas.result.is_some());
    assert_eq!(app(&w).canvas_jobs_waiting(), 0);
}

/// An image wider than Ember reads does not go on the canvas (its jobs could not be kept in
/// the queue file, nor the canvas opened again), as a pasted one does not.
#[test]
fn an_image_past_the_largest_side_stays_off_the_canvas() {
    use ember_tests::fake_engine::FakeEngine;

    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(std::time::Duration::ZERO),
        Paths::under(home.path()),
    );
    w.step();
    click(&mut w, "Canvas");
    let wide = home.path().join("panorama.png");
    image::GrayImage::new(imaging::MAX_INPUT_SIDE + 8, 1)
        .save(&wide)
        .unwrap();
    drop_files(&mut w, &[&wide]);
    let limit = format!("up to {} pixels a side", imaging::MAX_INPUT_SIDE);
    step_until(&mut w, "the refusal", |a| {
        crate::has_notice(a, "panorama.png cannot go on the canvas") && crate::has_notice(a, &limit)
    });
    assert!(app(&w).canvas.source.is_none());
}
