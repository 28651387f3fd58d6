//! [`EmberApp`]: the UI thread's state and its frame: drain the worker and file threads
//! within a time budget, draw the panels, then perform what they asked for.
//!
//! **Invariants:** nothing here blocks (file work, dialogs and inference run on their own
//! threads); every result is sent to be saved the moment it arrives; errors become notices.

mod canvas_flow;
mod control_flow;
mod device_flow;
mod download_flow;
mod events;
mod extras_flow;
mod gallery_flow;
mod generate;
mod input;
mod model_flow;
mod open_folder;
mod plot_flow;
mod quit_flow;
mod replies;
mod styles_flow;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use egui::ColorImage;
use inference::imaging::ImageRgb8;
use inference::rng::random_seed;
use inference::worker::{CancelToken, Engine, JobId, ModelRole, WorkerHandle};

use super::action::{Action, View};
use super::canvas::CanvasState;
use super::device_choice::DeviceChoice;
use super::dialogs::{Dialogs, PathPrompt};
use super::display::Display;
use super::gallery::Gallery;
use super::models::{self, ModelEntry};
use super::paths::Paths;
use super::service::{Order, Service};
use super::session::{Level, Session};
use super::settings::{Settings, SettingsFile};
use super::shared_device::DeviceNote;
use super::styles::StyleStore;
use super::{gallery, panels};

/// How long one frame may spend taking in events before drawing.
const DRAIN_BUDGET: Duration = Duration::from_millis(10);

/// The whole app; `frame` is one UI frame.
pub struct EmberApp {
    pub settings: Settings,
    settings_file: SettingsFile,
    pub session: Session,
    pub view: View,
    pub display: Display,
    pub gallery: Gallery,
    pub models: Vec<ModelEntry>,
    pub paths: Paths,
    /// Where the engine runs (the status line and Help).
    pub device: DeviceNote,
    /// The Device menu: the machine's devices, and a start-again on the chosen one.
    pub device_choice: DeviceChoice,
    /// The prompt styles (`styles.csv`) and the style editor.
    pub styles: StyleStore,
    /// Closing with images still to make: the question and its answer.
    pub quitting: quit_flow::Quitting,
    /// A path being typed (when a dialog could not open, or asked for).
    pub path_prompt: Option<PathPrompt>,
    /// Images dropped on the window whose settings should be restored when read.
    restoring: Vec<PathBuf>,
    /// The canvas mode's image, mask and view.
    pub canvas: CanvasState,
    /// Files being read for the canvas or a ControlNet unit.
    incoming: Vec<canvas_flow::Incoming>,
    /// The ControlNet units' images and map previews.
    pub controls: crate::gui::controlnet::ControlUnits,
    /// The Extras view's image and its last upscale.
    pub extras: crate::gui::extras::ExtrasState,
    /// An image being read for the Extras view.
    extras_incoming: Option<PathBuf>,
    /// The Download window and the download under way.
    pub downloads: crate::gui::downloads::Downloads,
    /// Finished images that no folder took (see `gallery::store::Reply::SaveFailed`), kept
    /// until they are saved: "Save again", and a question before quitting.
    pub unsaved: Vec<gallery::store::ToSave>,
    /// Images sent to be saved whose reply has not come: one may yet come back unsaved, so a
    /// start-again or a close waits for them.
    saves_in_flight: usize,
    /// Canvas jobs whose results must be put back onto their source.
    canvas_jobs: HashMap<JobId, inference::canvas::CanvasJob>,
    /// X/Y/Z plots whose cells are being made.
    pub plots: crate::gui::plot::Plots,
    worker: WorkerHandle,
    files: Service<gallery::store::Request, gallery::store::Reply>,
    models_service: Service<models::Request, models::Reply>,
    /// Stops the running models scan's hashing (a rescan, or the app closing).
    models_scan: CancelToken,
    dialogs: Dialogs,
    ctx: egui::Context,
}

impl EmberApp {
    /// Starts the worker around `engine` and the file threads; loads the settings and the
    /// last model.
    pub fn new(ctx: &egui::Context, engine: impl Engine + 'static, paths: Paths) -> Self {
        Self::with_files(ctx, engine, paths, Vec::new())
    }

    /// [`EmberApp::new`], then `files` opened as if dropped (a model among them is loaded
    /// instead of the last one).
    pub fn with_files(
        ctx: &egui::Context,
        engine: impl Engine + 'static,
        paths: Paths,
        opened: Vec<PathBuf>,
    ) -> Self {
        let wake = |ctx: &egui::Context| {
            let ctx = ctx.clone();
            move || ctx.request_repaint()
        };
        let mut settings_file = SettingsFile::in_dir(&paths.config_dir);
        let loaded = settings_file.load();
        let mut session = Session::default();
        if let Some(problem) = loaded.problem {
            session.notify(Level::Warning, problem);
        }
        let styles = StyleStore::open(&paths.config_dir);
        if let Some(problem) = &styles.problem {
            session.notify(Level::Warning, problem.clone());
        }
        let worker = WorkerHandle::spawn(engine, wake(ctx)).unwrap_or_else(|e| spawn_failed(e));
        let files = Service::spawn("files", Order::Fifo, wake(ctx), gallery::store::serve)
            .unwrap_or_else(|e| spawn_failed(e));
        let models_service = Service::spawn("models", Order::Fifo, wake(ctx), models::serve)
            .unwrap_or_else(|e| spawn_failed(e));
        // Panel dividers a little brighter than egui's default, so the panels read as panels.
        ctx.global_style_mut(|style| {
            style.visuals.widgets.noninteractive.bg_stroke.color = egui::Color32::from_gray(85);
        });
        let mut app = Self {
            gallery: Gallery::new(wake(ctx)),
            settings: loaded.settings,
            settings_file,
            session,
            view: View::Generate,
            display: Display::default(),
            models: Vec::new(),
            restoring: Vec::new(),
            canvas: CanvasState::default(),
            incoming: Vec::new(),
            controls: Default::default(),
            extras: Default::default(),
            extras_incoming: None,
            downloads: Default::default(),
            canvas_jobs: HashMap::new(),
            plots: Default::default(),
            unsaved: Vec::new(),
            saves_in_flight: 0,
            worker,
            files,
            models_service,
            models_scan: CancelToken::new(),
            dialogs: Dialogs::new(wake(ctx)),
            ctx: ctx.clone(),
            paths,
            device: DeviceNote::default(),
            device_choice: DeviceChoice::default(),
            styles,
            quitting: Default::default(),
            path_prompt: None,
        };
        if let Some(dir) = app.settings.models_dir.clone() {
            app.scan_models(dir);
        }
        let model_given = opened.iter().any(|p| models::is_model_path(p));
        if let Some(path) = app
            .settings
            .last_model
            .clone()
            .filter(|p| p.exists() && !model_given)
        {
            app.perform(Action::LoadModel(path));
        }
        let refiner = &app.settings.refiner;
        if let Some(path) = refiner
            .model
            .clone()
            .filter(|p| refiner.enabled && p.exists())
        {
            app.perform(Action::SetRefiner(Some(path)));
        }
        app.reload_control_images();
        app.open_files(opened);
        app.take_kept_queue();
        app
    }

    /// The folder results are saved in.
    pub fn output_dir(&self) -> PathBuf {
        self.settings
            .output_dir
            .clone()
            .unwrap_or_else(|| self.paths.default_output.clone())
    }

    /// How many canvas jobs wait to be pasted back (each holds its image and mask).
    pub fn canvas_jobs_waiting(&self) -> usize {
        self.canvas_jobs.len()
    }

    /// Writes the settings file (eframe calls this periodically and on exit).
    pub fn save_settings(&mut self) {
        if let Err(e) = self.settings_file.save(&self.settings) {
            self.session
                .notify(Level::Error, format!("could not save settings: {e}"));
        }
    }

    /// One frame: take in what arrived, handle input, draw, act.
    pub fn frame(&mut self, ui: &mut egui::Ui) {
        self.drain();
        // Before drawing: the next image of Generate forever shows as queued, never a frame
        // with nothing under way.
        self.keep_generating();
        self.device_frame();
        self.quit_frame();
        if let Some(next) = self.session.expire(Instant::now()) {
            self.ctx
                .request_repaint_after(next.saturating_duration_since(Instant::now()));
        }
        let mut actions = self.handle_input(ui.ctx());
        // Drop zones are where the units are drawn this frame (none while folded away).
        for unit in &mut self.controls.units {
            unit.drop_zone = None;
        }
        let output_dir = self.output_dir();
        let models_dir = self.models_dir();
        actions.extend(panels::draw(
            ui,
            &mut panels::Parts {
                settings: &mut self.settings,
                canvas: &mut self.canvas,
                controls: &mut self.controls,
                extras: &self.extras,
                downloads: &mut self.downloads,
                models_dir,
                gallery: &mut self.gallery,
                session: &self.session,
                display: &self.display,
                models: &self.models,
                view: self.view,
                output_dir,
                device: &self.device,
                device_choice: &self.device_choice,
                quit_asked: self.quitting.asked,
                paths: &self.paths,
                path_prompt: &mut self.path_prompt,
                styles: &mut self.styles,
                plot_status: self
                    .plots
                    .status(self.session.running.as_ref().map(|r| r.id)),
                unsaved: self.unsaved.len(),
                saving: self.saves_in_flight,
            },
        ));
        for action in actions {
            self.perform(action);
        }
        if let Some(command) = self.session.next_command() {
            self.worker.send(command);
        }
    }

    /// Does what an action asks.
    pub fn perform(&mut self, action: Action) {
        match action {
            Action::Canvas(canvas) => self.perform_canvas(canvas),
            Action::Control(control) => self.perform_control(control),
            Action::Extras(extras) => self.perform_extras(extras),
            Action::Download(download) => self.perform_download(download),
            Action::Device(device) => self.perform_device(device),
            Action::Styles(styles) => self.perform_styles(styles),
            Action::Quit(quit) => self.perform_quit(quit),
            Action::Notice(text) => self.session.notify(Level::Warning, text),
            Action::Generate => {
                let _ = self.generate();
            }
            Action::GenerateForever(on) => {
                self.session.forever = on;
                // The first image is queued at the start of the next frame.
                self.ctx.request_repaint();
            }
            // The running image only: an Esc meant for a job that ended in this very frame
            // must not stop a model load (the model panel's "Cancel loading" does that).
            Action::Cancel => self.session.cancel_running(),
            Action::SetModelsFolder(dir) => self.set_models_folder(dir),
            Action::SetOutputFolder(dir) => self.set_output_folder(dir),
            Action::ClearQueue => self.session.clear_queue(),
            Action::CancelAll => {
                self.session.forever = false;
                self.session.clear_queue();
                self.session.cancel_running();
            }
            Action::Pick(purpose) => self.dialogs.pick(purpose),
            Action::DialogFailed(purpose) => {
                self.session.notify(
                    Level::Warning,
                    "no file dialog could open (on Linux Ember's dialogs need \
                     xdg-desktop-portal); type the path instead",
                );
                self.path_prompt = Some(PathPrompt::new(purpose));
            }
            Action::TypePath(purpose) => self.path_prompt = Some(PathPrompt::new(purpose)),
            Action::AddToPrompt(word) => add_to_prompt(&mut self.settings.prompt, &word),
            Action::LoadModel(path) => self.load_model(ModelRole::Main, &path),
            Action::LoadWithConfig {
                model,
                config,
                role,
            } => self.load_with_config(model, config, role),
            Action::SetRefiner(path) => self.set_refiner(path),
            Action::CancelLoad => self.session.cancel_loading(),
            Action::RescanModels => self.rescan_models(),
            Action::Show(view) => self.show(view),
            Action::SelectImage(path) => self.select_image(path),
            Action::ReuseSettings { with_seed } => self.reuse_settings(with_seed),
            Action::CopyParameters => self.copy_parameters(),
            Action::OpenOutputFolder => self.open_output_folder(),
            Action::DeleteSelected => self.delete_selected(),
            Action::DismissNotices => self.session.notices.clear(),
            Action::SaveAgain => self.save_again(),
            Action::DismissNotice(id) => self.session.dismiss(id),
            Action::ShowAllNotices(all) => self.session.all_notices = all,
            Action::RollSeed => self.settings.seed = random_seed(),
            Action::RollVariationSeed => self.settings.noise.variation_seed = random_seed(),
        }
    }
}

impl Drop for EmberApp {
    /// Hashing a large models folder must not hold up closing the window: the models
    /// thread is joined when its service drops, so its work is stopped first.
    fn drop(&mut self) {
        self.models_scan.cancel();
    }
}

/// Appends `word` to `prompt` as a new comma-separated item.
fn add_to_prompt(prompt: &mut String, word: &str) {
    let trimmed = prompt.trim_end().len();
    prompt.truncate(trimmed);
    if !prompt.is_empty() && !prompt.ends_with(',') {
        prompt.push(',');
    }
    if !prompt.is_empty() {
        prompt.push(' ');
    }
    prompt.push_str(word);
}

/// An RGB image as an egui image.
pub fn color_image(image: &ImageRgb8) -> ColorImage {
    ColorImage::from_rgb([image.width as usize, image.height as usize], &image.pixels)
}

/// Without its threads the app cannot work at all; the OS refusing a thread is fatal.
fn spawn_failed(e: std::io::Error) -> ! {
    panic!("could not start a thread: {e}")
}

#[cfg(test)]
mod tests {
    use super::add_to_prompt;

    #[test]
    fn a_word_added_to_the_prompt_is_a_new_comma_separated_item() {
        for (prompt, added) in [
            ("", "trigger"),
            ("a cat", "a cat, trigger"),
            ("a cat,", "a cat, trigger"),
            ("a cat,  \n", "a cat, trigger"),
            ("  ", "trigger"),
        ] {
            let mut prompt = prompt.to_string();
            add_to_prompt(&mut prompt, "trigger");
            assert_eq!(prompt, added);
        }
    }
}
