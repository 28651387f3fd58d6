//! The desktop app driven through its widgets (egui_kittest: find by label, click, step),
//! with the fake engine for the flows and the real engine on the reference model.

mod add_ons;
mod canvas;
mod device;
mod download;
mod dynamic_prompts;
mod families;
mod files;
mod first_minutes;
mod flows;
mod forever;
mod gallery;
mod model_slots;
mod plot;
mod previews;
mod prompts;
mod quit;
mod real_engine;
mod restore_model;
mod seamless;
mod seeds;
mod styles;
mod typed_path;
mod upscale;
mod vae;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use ember_app::gui::app::EmberApp;
use ember_app::gui::paths::Paths;
use inference::worker::Engine;

/// The app in a 1280×820 test window, created on the first frame (it needs the window's
/// context for its wake-up callbacks and textures).
pub type Window = Harness<'static, Option<EmberApp>>;

pub fn open(engine: impl Engine + 'static, paths: Paths) -> Window {
    open_sized(engine, paths, [1280.0, 820.0])
}

/// The app in a test window of `size` points.
pub fn open_sized(engine: impl Engine + 'static, paths: Paths, size: [f32; 2]) -> Window {
    let mut pending = Some((engine, paths));
    Harness::builder().with_size(size).build_ui_state(
        move |ui, app: &mut Option<EmberApp>| {
            let app = app.get_or_insert_with(|| {
                let (engine, paths) = pending.take().expect("created once");
                EmberApp::new(ui.ctx(), engine, paths)
            });
            // As eframe's `logic` runs it before each frame.
            app.check_close(ui.ctx());
            app.frame(ui);
        },
        None,
    )
}

pub fn app(window: &Window) -> &EmberApp {
    window.state().as_ref().expect("the first frame ran")
}

/// Steps the window (as the event loop would, woken by the worker) until `done` holds.
pub fn step_until(window: &mut Window, what: &str, done: impl Fn(&EmberApp) -> bool) {
    let start = Instant::now();
    loop {
        window.step();
        if window.state().as_ref().is_some_and(&done) {
            window.step();
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}; notices: {:?}",
            window.state().as_ref().map(|a| &a.session.notices)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Clicks the first widget labelled `label` (some labels appear in two panels) as a person
/// does: a frame with the pointer over it, then the click.
pub fn click(window: &mut Window, label: &str) {
    fn node<'a>(window: &'a Window, label: &'a str) -> egui_kittest::Node<'a> {
        window
            .get_all_by_label(label)
            .next()
            .unwrap_or_else(|| panic!("no widget labelled {label:?}"))
    }
    node(window, label).hover();
    window.step();
    node(window, label).click();
    window.step();
    window.step();
}

/// Scrolls the first widget labelled `label` into view (a panel's scroll area), then clicks it.
pub fn scroll_and_click(window: &mut Window, label: &str) {
    window
        .get_all_by_label(label)
        .next()
        .unwrap_or_else(|| panic!("no widget labelled {label:?}"))
        .scroll_to_me();
    // Scrolling is animated: let it finish.
    for _ in 0..30 {
        window.step();
    }
    click(window, label);
}

/// Drops files on the window, as the OS does.
pub fn drop_files(window: &mut Window, paths: &[&Path]) {
    for path in paths {
        let file: egui::DroppedFileHandle = Arc::new(Dropped(path.to_path_buf()));
        window.input_mut().dropped_files.push(file);
    }
    window.step();
    window.step();
}

#[derive(Debug)]
struct Dropped(PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

/// The app with the fake engine (40 ms a step) in `home`, a fake model loaded and `jobs`
/// images asked for, the first under way and the others waiting.
pub fn busy(home: &Path, jobs: usize) -> Window {
    let engine = ember_tests::fake_engine::FakeEngine::new(Duration::from_millis(40));
    busy_on(home, engine, 20, jobs)
}

/// The app on `engine` in `home` with a fake model loaded and `jobs` images of `steps`
/// steps asked for (a batch count), the first under way and the others waiting,
/// so that what is asked meanwhile waits behind them in the worker.
pub fn busy_on(home: &Path, engine: impl Engine + 'static, steps: u32, jobs: usize) -> Window {
    let mut w = with_fake_model(home, engine);
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.steps, s.batch_count) = (steps, jobs as u32);
    }
    // One click queues them all at once: the first cannot end before the last is queued.
    click(&mut w, "Generate");
    w.state_mut().as_mut().unwrap().settings.batch_count = 1;
    step_until(&mut w, "the jobs to be under way and waiting", |a| {
        a.session.running.as_ref().is_some_and(|r| r.step >= 1) && a.session.queue.len() + 1 == jobs
    });
    w
}

/// The app on `engine` in `home` with a fake model dropped and loaded.
pub fn with_fake_model(home: &Path, engine: impl Engine + 'static) -> Window {
    let model = fake_model(home);
    let mut w = open(engine, Paths::under(home));
    w.step();
    drop_files(&mut w, &[&model]);
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    w
}

/// How many PNG files `dir` holds (none where it does not exist).
pub fn pngs_in(dir: &Path) -> usize {
    let files = std::fs::read_dir(dir).into_iter().flatten().flatten();
    files
        .filter(|f| f.path().extension().is_some_and(|e| e == "png"))
        .count()
}

/// Presses `keys` (with `modifiers` held) in one frame, as a busy frame receives them
/// (`key_press` gives each press a frame of its own).
pub fn press_in_one_frame(window: &mut Window, modifiers: egui::Modifiers, keys: &[egui::Key]) {
    let events = &mut window.input_mut().events;
    events.push(egui::Event::ModifiersChanged(modifiers));
    for &key in keys {
        events.push(egui::Event::Key {
            key,
            physical_key: None,
            pressed: true,
            repeat: false,
            modifiers,
        });
    }
    events.push(egui::Event::ModifiersChanged(egui::Modifiers::NONE));
    window.step();
}

/// Writes `dir/name`: a small PNG whose A1111 `parameters` are `text`.
pub fn a1111_png(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    let image = inference::imaging::ImageRgb8 {
        width: 8,
        height: 8,
        pixels: vec![90; 8 * 8 * 3],
    };
    let png = inference::imaging::encode_png(&image, &[("parameters", text)]).unwrap();
    std::fs::write(&path, png).unwrap();
    path
}

/// Whether some notice contains `text`.
pub fn has_notice(app: &EmberApp, text: &str) -> bool {
    app.session.notices.iter().any(|n| n.text.contains(text))
}

/// A file the fake engine accepts as a model (it only checks the path exists).
pub fn fake_model(dir: &Path) -> PathBuf {
    let path = dir.join("fake-model.safetensors");
    std::fs::write(&path, b"fake").unwrap();
    path
}

/// The app with the real engine (CPU) in `home`, the reference model dropped and loaded.
pub fn open_with_reference_model(home: &Path) -> Window {
    use inference::device::{DeviceKind, Precision};
    let engine =
        inference::worker::BurnEngine::new(DeviceKind::Cpu.device().unwrap(), Precision::F32);
    let mut w = open(engine, ember_app::gui::paths::Paths::under(home));
    w.step();
    drop_files(&mut w, &[&ember_tests::reference("sd15/pipeline")]);
    step_until(&mut w, "the reference model to load", |a| {
        a.session.model().is_some()
    });
    w
}
