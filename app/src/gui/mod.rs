//! The desktop app: an eframe window (wgpu renderer) around [`app::EmberApp`], with one
//! inference worker thread and background threads for files, thumbnails and model scans.
//!
//! **Invariant:** this module never names a Burn type: the engine is built by `inference`
//! (on the CPU, or on egui's own wgpu device with the `gpu` feature).

pub mod action;
pub mod app;
pub mod canvas;
pub mod controlnet;
pub mod device_choice;
pub mod dialogs;
pub mod display;
pub mod downloads;
pub mod extras;
pub mod gallery;
pub mod hires;
pub mod models;
mod panels;
pub mod paths;
pub mod plot;
pub mod prompt_edit;
pub mod queue_file;
pub mod restore;
pub mod service;
pub mod session;
pub mod settings;
pub mod shared_device;
pub mod start_again;
pub mod styles;
pub mod termination;
pub mod texture;
pub mod window_gpu_lost;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use app::EmberApp;
use paths::Paths;

/// The eframe glue: egui memory and window geometry persist in eframe's storage; Ember's own
/// settings in `settings.json` (see [`settings`]). `app` is `None` only while Ember stops to
/// start again on a new device ([`window_gpu_lost`]).
struct EframeApp {
    app: Option<EmberApp>,
    window_gpu: Option<window_gpu_lost::WindowGpuWatch>,
    /// Set when the window closes to start again on the Device menu's choice.
    start_again: Arc<AtomicBool>,
}

impl eframe::App for EframeApp {
    /// Runs before each frame, also while the window is minimised (when `ui` does not run).
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        if let Some(app) = &mut self.app {
            if termination::requested() {
                app.end_on_request();
            }
            app.check_close(ctx);
        }
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        // Checked before egui draws this frame: its renderer panics on a lost device.
        if self.window_gpu.as_mut().is_some_and(|w| w.is_lost()) {
            self.start_again_after_gpu_lost();
        }
        if let Some(app) = &mut self.app {
            app.frame(ui);
            if app.starts_again() {
                self.start_again.store(true, Ordering::Relaxed);
            }
        }
    }

    fn save(&mut self, _storage: &mut dyn eframe::Storage) {
        if let Some(app) = &mut self.app {
            app.save_settings();
        }
    }
}

impl EframeApp {
    /// The window's device is lost: saves the settings, stops the worker (its job ends
    /// unfinished; saved images are files already) and starts Ember again, or stops it after
    /// repeated losses (see [`window_gpu_lost::after_loss`]).
    fn start_again_after_gpu_lost(&mut self) -> ! {
        use window_gpu_lost::{AfterLoss, after_loss, earlier_losses};
        let uptime = self
            .window_gpu
            .as_ref()
            .map(|w| w.uptime())
            .unwrap_or_default();
        let mut output = None;
        if let Some(mut app) = self.app.take() {
            app.save_settings();
            // Saves take milliseconds; a disk that hangs must not keep Ember from starting.
            app.wait_for_saves(std::time::Duration::from_secs(5));
            if let Err(e) = app.keep_queue() {
                eprintln!("warning: {e}");
            }
            output = Some(app.output_dir());
            drop(app);
        }
        match after_loss(earlier_losses(), uptime) {
            AfterLoss::Restart {
                losses,
                engine_on_cpu,
            } => {
                eprintln!("ember: the window's GPU device was lost; starting again");
                let reason = start_again::Reason::GpuLost {
                    losses,
                    engine_on_cpu,
                };
                if let Err(e) = start_again::start_again(reason) {
                    eprintln!(
                        "error: the GPU device was lost and Ember could not start again: {e}"
                    );
                    std::process::exit(1);
                }
                std::process::exit(0);
            }
            AfterLoss::GiveUp => {
                let output = output.unwrap_or_default();
                eprintln!("{}", window_gpu_lost::gave_up_message(&output));
                std::process::exit(1);
            }
        }
    }
}

/// Opens the window with `files` opened in it (models load, images restore their
/// settings); returns when it is closed (after the worker has been joined).
pub fn run(files: Vec<std::path::PathBuf>) -> ExitCode {
    let paths = Paths::from_env();
    // eframe saves there without creating the folder; a failure only costs the geometry.
    let _ = std::fs::create_dir_all(&paths.config_dir);
    shared_device::use_setting(settings::SettingsFile::in_dir(&paths.config_dir).peek_device());
    let mut options = window_options(&paths);
    let handed_over = shared_device::prepare(&mut options);
    let (mut result, mut opened) = open_window(options, paths.clone(), files.clone());
    if let (Err(e @ eframe::Error::Wgpu(_)), true, false) = (&result, handed_over, opened.started) {
        // The device opened for the engine's kernels cannot present this window (a GPU
        // without a display connection beside the one that drives it): the window makes its
        // own device, the engine opens the GPU by itself (eframe reuses its event loop).
        // Other failures (no display at all) would only fail again.
        let why = e.to_string();
        eprintln!(
            "warning: the window could not open on the GPU device Ember's kernels need \
             ({why}); opening it on a device of its own"
        );
        shared_device::window_refused_the_device(why);
        let mut options = window_options(&paths);
        shared_device::prepare_without_handing_over(&mut options);
        (result, opened) = open_window(options, paths, files);
    }
    match result {
        Ok(()) if opened.start_again.load(Ordering::Relaxed) => {
            // The window has closed and the worker has stopped: the device is free.
            eprintln!("ember: starting again on the device chosen in the Device menu");
            match start_again::start_again(start_again::Reason::DeviceChosen) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!(
                        "error: Ember could not start again ({e}); start it again by hand: \
                         the device choice and the queue are saved"
                    );
                    ExitCode::FAILURE
                }
            }
        }
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "error: could not open the window: {e}\n\
                 Ember needs a display and a Vulkan, Metal, DirectX 12 or OpenGL driver; \
                 the command line (`ember generate --help`) works without one. \
                 EMBER_DEVICE=cpu lets the window pick its own GPU device (on Vulkan Ember \
                 otherwise opens the one its kernels need)."
            );
            ExitCode::FAILURE
        }
    }
}

/// The window's size, title, icon and persistence, before its GPU device is chosen.
fn window_options(paths: &Paths) -> eframe::NativeOptions {
    eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Ember")
            .with_app_id("ember")
            .with_inner_size([1280.0, 820.0])
            .with_min_inner_size([720.0, 480.0])
            .with_drag_and_drop(true)
            .with_icon(icon()),
        persist_window: true,
        // Window geometry and egui's memory live beside settings.json (so under EMBER_HOME).
        persistence_path: Some(paths.config_dir.join("window.ron")),
        ..Default::default()
    }
}

/// What became of a window [`open_window`] ran.
struct Opened {
    /// The app had started in it (then its engine held the GPU device: nothing is retried).
    started: bool,
    /// It closed to start again on the Device menu's choice.
    start_again: Arc<AtomicBool>,
}

/// Runs the window until it is closed, or returns why it could not open.
fn open_window(
    options: eframe::NativeOptions,
    paths: Paths,
    files: Vec<std::path::PathBuf>,
) -> (eframe::Result, Opened) {
    let started = Arc::new(AtomicBool::new(false));
    let started_here = started.clone();
    let start_again = Arc::new(AtomicBool::new(false));
    let start_again_here = start_again.clone();
    let result = eframe::run_native(
        "Ember",
        options,
        Box::new(move |cc| {
            started_here.store(true, Ordering::Relaxed);
            let (engine, note) = shared_device::engine(cc);
            let mut app = EmberApp::with_files(&cc.egui_ctx, engine, paths, files);
            termination::watch(&cc.egui_ctx);
            app.session.notify(session::Level::Info, note.short.clone());
            if let Some(problem) = &note.problem {
                app.session.notify(session::Level::Warning, problem.clone());
            }
            // A device asked for that could not open left the choice to `auto` for this start.
            if let (Ok(wanted), None) = (shared_device::wanted_device(), &note.problem) {
                app.device_choice.running = wanted.kind;
            }
            app.device = note;
            let losses = window_gpu_lost::earlier_losses();
            app.device_choice.overridden = std::env::var("EMBER_DEVICE")
                .ok()
                .filter(|name| !name.trim().is_empty())
                .map(|name| match losses {
                    // Set by `start_again` after the second loss, not by the user.
                    2.. if name == "cpu" => {
                        "The GPU stopped working twice, so this start runs on the CPU".into()
                    }
                    _ => format!(
                        "EMBER_DEVICE={name} is set, so it decided the device at this start"
                    ),
                });
            if let Some(text) = window_gpu_lost::notice_after_restart(losses) {
                app.session.notify(session::Level::Error, text);
            }
            Ok(Box::new(EframeApp {
                app: Some(app),
                window_gpu: cc
                    .wgpu_render_state
                    .as_ref()
                    .map(window_gpu_lost::WindowGpuWatch::new),
                start_again: start_again_here,
            }))
        }),
    );
    let started = started.load(Ordering::Relaxed);
    (
        result,
        Opened {
            started,
            start_again,
        },
    )
}

/// The window icon (`assets/icon.png`, drawn from `assets/icon.svg`), built into the binary.
fn icon() -> std::sync::Arc<egui::IconData> {
    const PNG: &[u8] = include_bytes!("../../../assets/icon.png");
    // The PNG is ours and fixed (`icon_decodes` checks it); a failure would only cost the icon.
    let icon = match image::load_from_memory(PNG) {
        Ok(image) => {
            let rgba = image.into_rgba8();
            egui::IconData {
                width: rgba.width(),
                height: rgba.height(),
                rgba: rgba.into_raw(),
            }
        }
        Err(_) => egui::IconData::default(),
    };
    std::sync::Arc::new(icon)
}

#[cfg(test)]
mod tests {
    #[test]
    fn icon_decodes() {
        let icon = super::icon();
        assert_eq!((icon.width, icon.height), (256, 256));
        assert_eq!(icon.rgba.len(), 256 * 256 * 4);
    }
}
