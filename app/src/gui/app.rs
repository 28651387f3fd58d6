//! [`EmberApp`]: the UI thread's state and its frame: drain the worker and file threads
//! within a time budget, draw the panels, then perform what they asked for.
//!
//! **Invariants:** nothing here blocks (file work, dialogs and inference run on their own
//! threads); every result is sent to be saved the moment it arrives; errors become notices.

mod canvas_flow;
mod control_flow;
mod device_flow;
mod download_flow;
mod extras_flow;
mod generate;
mod open_folder;
mod quit_flow;
mod replies;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use egui::{ColorImage, TextureOptions};
use inference::imaging::ImageRgb8;
use inference::rng::random_seed;
use inference::worker::{CancelToken, Engine, JobId, ModelRole, ResultImage, WorkerHandle};

use super::action::{Action, CanvasAction, ControlAction, ExtrasAction, View};
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
    /// Canvas jobs whose results must be put back onto their source.
    canvas_jobs: HashMap<JobId, inference::canvas::CanvasJob>,
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
        let settings_file = SettingsFile::in_dir(&paths.config_dir);
        let loaded = settings_file.load();
        let mut session = Session::default();
        if let Some(problem) = loaded.problem {
            session.notify(Level::Warning, problem);
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
            worker,
            files,
            models_service,
            models_scan: CancelToken::new(),
            dialogs: Dialogs::new(wake(ctx)),
            ctx: ctx.clone(),
            paths,
            device: DeviceNote::default(),
            device_choice: DeviceChoice::default(),
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

    /// Lists the models folder `dir` (stopping the hashing of an earlier scan).
    fn scan_models(&mut self, dir: PathBuf) {
        self.models_scan.cancel();
        self.models_scan = CancelToken::new();
        self.models_service.send(models::Request::Scan {
            dir,
            stop: self.models_scan.clone(),
        });
    }

    /// After an image, the models it used have been hashed (for its metadata): show them.
    fn look_up_model_hashes(&self) {
        let used = [self.session.model(), self.session.refiner()];
        let paths: Vec<PathBuf> = self
            .models
            .iter()
            .filter(|e| e.hash == models::Hash::NotYet)
            .filter(|e| used.iter().flatten().any(|m| m.path == e.path))
            .map(|e| e.path.clone())
            .collect();
        if !paths.is_empty() {
            self.models_service.send(models::Request::LookUp { paths });
        }
    }

    /// The folder results are saved in.
    pub fn output_dir(&self) -> PathBuf {
        self.settings
            .output_dir
            .clone()
            .unwrap_or_else(|| self.paths.default_output.clone())
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
            },
        ));
        for action in actions {
            self.perform(action);
        }
        if let Some(command) = self.session.next_command() {
            self.worker.send(command);
        }
    }

    /// Takes in worker events, the newest preview and file replies, for at most
    /// [`DRAIN_BUDGET`]; what is left waits for the next frame (which is requested).
    fn drain(&mut self) {
        let start = Instant::now();
        while start.elapsed() < DRAIN_BUDGET {
            let Some(event) = self.worker.try_event() else {
                break;
            };
            // Only a model that loaded joins Recent and is loaded at the next start.
            if let inference::worker::Event::ModelLoaded {
                summary,
                role: ModelRole::Main,
                ..
            } = &event
            {
                self.settings.remember_model(&summary.path);
            }
            if let inference::worker::Event::GpuLost { error, .. } = &event {
                self.device = DeviceNote::after_gpu_lost(error);
            }
            if let Some(finished) = self.session.apply(event, Instant::now()) {
                self.show_results(finished.id, finished.images);
                self.look_up_model_hashes();
            }
        }
        if start.elapsed() >= DRAIN_BUDGET {
            self.ctx.request_repaint();
        }
        if let Some(preview) = self.worker.take_preview()
            && self
                .session
                .running
                .as_ref()
                .is_some_and(|r| r.id == preview.job)
        {
            self.display.preview_step = preview.step;
            let image = color_image(&preview.image);
            match &mut self.display.preview {
                Some(texture) => texture.set(image, TextureOptions::LINEAR),
                None => {
                    self.display.preview = Some(self.ctx.load_texture(
                        "preview",
                        image,
                        TextureOptions::LINEAR,
                    ));
                }
            }
        }
        while let Some(reply) = self.files.try_recv() {
            self.on_file_reply(reply);
        }
        while let Some(reply) = self.models_service.try_recv() {
            self.on_models_reply(reply);
        }
        self.gallery.drain(&self.ctx);
        self.drain_downloads();
        for picked in self.dialogs.drain() {
            self.perform(picked);
        }
    }

    fn show_results(&mut self, id: JobId, mut images: Vec<ResultImage>) {
        if let Some(job) = self.canvas_jobs.remove(&id) {
            self.finish_canvas(&job, &mut images);
        }
        self.display.preview = None;
        self.display.results.clear();
        self.display.results_job = Some(id);
        for (i, result) in images.into_iter().enumerate() {
            let texture = self.ctx.load_texture(
                format!("result-{i}"),
                color_image(&result.image),
                TextureOptions::LINEAR,
            );
            self.display.results.push((texture, None));
            self.files.send(gallery::store::Request::Save {
                job: id,
                index: i,
                dir: self.output_dir(),
                fallback_dir: self.paths.fallback_output.clone(),
                image: result.image,
                parameters: result.parameters,
                extras: result.extras,
                seed: result.seed,
            });
        }
    }

    /// Dropped files, Ctrl+Enter and Esc.
    fn handle_input(&mut self, ctx: &egui::Context) -> Vec<Action> {
        let mut actions = Vec::new();
        // Esc answers the quit question (as "Don't quit"), not the running image.
        let asked = self.quitting.asked;
        let (dropped, pointer, generate, cancel) = ctx.input_mut(|i| {
            let dropped: Vec<PathBuf> = i
                .raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .collect();
            let generate = i.consume_key(egui::Modifiers::COMMAND, egui::Key::Enter);
            let cancel = !asked && i.consume_key(egui::Modifiers::NONE, egui::Key::Escape);
            // Where the pointer is now, not where it last was: during an OS drag some
            // platforms report no pointer, and the drop then goes where files usually go.
            (dropped, i.pointer.hover_pos(), generate, cancel)
        });
        // An image dropped on a ControlNet unit is its control image.
        let control_unit = pointer.and_then(|p| self.controls.unit_at(p));
        actions.extend(self.open_paths(dropped, control_unit));
        if generate {
            actions.push(Action::Generate);
        }
        if cancel {
            actions.push(Action::Cancel);
        }
        actions
    }

    /// Files given on the command line (`ember model.safetensors`, `ember image.png`, what a
    /// desktop entry's `%F` passes): opened as if dropped on the window.
    pub fn open_files(&mut self, paths: Vec<PathBuf>) {
        for action in self.open_paths(paths, None) {
            self.perform(action);
        }
    }

    /// What dropping `paths` does: models load, images restore their settings (or go to the
    /// canvas, the Extras view, or the ControlNet unit they were dropped on).
    fn open_paths(&mut self, paths: Vec<PathBuf>, control_unit: Option<usize>) -> Vec<Action> {
        let mut actions = Vec::new();
        for path in paths {
            if let Some(unit) = control_unit.filter(|_| gallery::is_image_path(&path)) {
                actions.push(Action::Control(ControlAction::OpenImage { unit, path }));
            } else if models::is_model_path(&path) {
                actions.push(Action::LoadModel(path));
            } else if gallery::is_image_path(&path) && self.view == View::Canvas {
                actions.push(Action::Canvas(CanvasAction::OpenImage(path)));
            } else if gallery::is_image_path(&path) && self.view == View::Extras {
                actions.push(Action::Extras(ExtrasAction::OpenImage(path)));
            } else if gallery::is_image_path(&path) {
                self.restoring.push(path.clone());
                self.files.send(gallery::store::Request::Open { path });
            } else {
                self.session.notify(
                    Level::Warning,
                    format!(
                        "{} is neither a model (.safetensors, .ckpt, diffusers folder) nor an image",
                        path.display()
                    ),
                );
            }
        }
        actions
    }

    /// Does what an action asks.
    pub fn perform(&mut self, action: Action) {
        match action {
            Action::Canvas(canvas) => self.perform_canvas(canvas),
            Action::Control(control) => self.perform_control(control),
            Action::Extras(extras) => self.perform_extras(extras),
            Action::Download(download) => self.perform_download(download),
            Action::Device(device) => self.perform_device(device),
            Action::Quit(quit) => self.perform_quit(quit),
            Action::Notice(text) => self.session.notify(Level::Warning, text),
            Action::Generate => self.generate(),
            Action::Cancel => {
                if self.session.running.is_some() {
                    self.session.cancel_running();
                } else {
                    self.session.cancel_loading();
                }
            }
            Action::SetModelsFolder(dir) => {
                self.settings.models_dir = Some(dir.clone());
                self.models.clear();
                self.scan_models(dir);
            }
            Action::SetOutputFolder(dir) => {
                self.settings.output_dir = Some(dir);
                self.gallery.show_dir(&self.output_dir(), &self.files);
            }
            Action::ClearQueue => self.session.clear_queue(),
            Action::CancelAll => {
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
            Action::AddToPrompt(word) => {
                let prompt = &mut self.settings.prompt;
                let trimmed = prompt.trim_end().len();
                prompt.truncate(trimmed);
                if !prompt.is_empty() && !prompt.ends_with(',') {
                    prompt.push(',');
                }
                if !prompt.is_empty() {
                    prompt.push(' ');
                }
                prompt.push_str(&word);
            }
            Action::LoadModel(path) => {
                let config = self.settings.config_dirs.get(&path).cloned();
                let command = self.session.load_into(ModelRole::Main, &path, config);
                self.worker.send(command);
            }
            Action::LoadWithConfig {
                model,
                config,
                role,
            } => {
                self.settings
                    .config_dirs
                    .insert(model.clone(), config.clone());
                let command = self.session.load_into(role, &model, Some(config));
                self.worker.send(command);
            }
            Action::SetRefiner(Some(path)) => {
                self.settings.refiner.model = Some(path.clone());
                self.settings.refiner.enabled = true;
                let config = self.settings.config_dirs.get(&path).cloned();
                let command = self.session.load_into(ModelRole::Refiner, &path, config);
                self.worker.send(command);
            }
            Action::SetRefiner(None) => {
                self.settings.refiner.enabled = false;
                let command = self.session.unload_refiner();
                self.worker.send(command);
            }
            Action::CancelLoad => self.session.cancel_loading(),
            Action::RescanModels => {
                if let Some(dir) = self.settings.models_dir.clone() {
                    self.scan_models(dir);
                }
            }
            Action::Show(view) => {
                self.view = view;
                if view == View::Gallery {
                    self.gallery.show_dir(&self.output_dir(), &self.files);
                }
            }
            Action::SelectImage(path) => {
                self.gallery.select(&path);
                self.files.send(gallery::store::Request::Open { path });
            }
            Action::ReuseSettings { with_seed } => {
                if let Some(selected) = self.gallery.selected.clone() {
                    let metadata = selected.metadata.clone();
                    self.restore_from(&selected.path, metadata.as_ref(), with_seed);
                }
            }
            Action::CopyParameters => {
                if let Some(text) = self
                    .gallery
                    .selected
                    .as_ref()
                    .and_then(|s| s.parameters_text())
                {
                    self.ctx.copy_text(text);
                    self.session.notify(Level::Info, "parameters copied");
                }
            }
            Action::OpenOutputFolder => {
                if let Err(e) = open_folder::open_folder(&self.output_dir()) {
                    self.session.notify(Level::Error, e);
                }
            }
            Action::DeleteSelected => {
                if let Some(selected) = self.gallery.selected.take() {
                    self.files.send(gallery::store::Request::Delete {
                        path: selected.path,
                    });
                }
            }
            Action::DismissNotices => self.session.notices.clear(),
            Action::DismissNotice(id) => self.session.dismiss(id),
            Action::ShowAllNotices(all) => self.session.all_notices = all,
            Action::RollSeed => self.settings.seed = random_seed(),
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

/// An RGB image as an egui image.
pub fn color_image(image: &ImageRgb8) -> ColorImage {
    ColorImage::from_rgb([image.width as usize, image.height as usize], &image.pixels)
}

/// Without its threads the app cannot work at all; the OS refusing a thread is fatal.
fn spawn_failed(e: std::io::Error) -> ! {
    panic!("could not start a thread: {e}")
}
