//! The window's panels. Each gets [`Parts`]: the settings it shows and the canvas and
//! gallery view state to edit, the session and results to read; every other change is an
//! [`Action`] it returns for the app to perform. Panels cannot reach the worker, the file
//! services or the dialogs: the rule holds by construction.

mod canvas;
mod controlnet;
mod device;
mod downloads;
mod extras;
mod form;
mod gallery;
mod hints;
mod hires;
mod model;
mod output;
mod plot;
mod prompt_box;
mod quit;
mod seed;
mod size;
mod styles;

use egui::{Color32, RichText};

use super::action::{Action, View};
use std::path::PathBuf;

use super::canvas::CanvasState;
use super::dialogs::PathPrompt;
use super::display::Display;
use super::gallery::Gallery;
use super::models::ModelEntry;
use super::paths::Paths;
use super::session::Level;
use super::session::Session;
use super::settings::Settings;
use super::shared_device::DeviceNote;

/// What the panels may touch (borrowed from the app for one frame).
pub struct Parts<'a> {
    /// The persisted settings the form and the canvas options edit.
    pub settings: &'a mut Settings,
    /// The canvas's mask, brush, view and textures.
    pub canvas: &'a mut CanvasState,
    /// The ControlNet units' images, map previews and drop zones.
    pub controls: &'a mut super::controlnet::ControlUnits,
    /// The Extras view's image and last upscale.
    pub extras: &'a super::extras::ExtrasState,
    /// The Download window (its typed URL) and the download under way.
    pub downloads: &'a mut super::downloads::Downloads,
    /// Where downloads go: the models folder, else the default one.
    pub models_dir: PathBuf,
    /// The gallery's selection and thumbnail cache.
    pub gallery: &'a mut Gallery,
    pub session: &'a Session,
    pub display: &'a Display,
    pub models: &'a [ModelEntry],
    pub view: View,
    pub output_dir: PathBuf,
    /// Where the engine runs.
    pub device: &'a DeviceNote,
    /// The Device menu's list and a start-again asked for.
    pub device_choice: &'a super::device_choice::DeviceChoice,
    /// The window was asked to close with images still to make: ask what to do.
    pub quit_asked: bool,
    pub paths: &'a Paths,
    /// A path being typed, drawn as a small window.
    pub path_prompt: &'a mut Option<PathPrompt>,
    /// The prompt styles and the style editor's fields.
    pub styles: &'a mut super::styles::StyleStore,
    /// The X/Y/Z plots under way, in a line (their cells made, the grid being drawn).
    pub plot_status: Option<String>,
    /// Finished images no folder took, kept until saved.
    pub unsaved: usize,
    /// Images being saved now.
    pub saving: usize,
}

/// Finished images that neither the output folder nor the fallback took (a full disk, a
/// folder gone): kept in memory, and said so until they are saved.
fn unsaved(ui: &mut egui::Ui, count: usize, actions: &mut Vec<Action>) {
    ui.horizontal_wrapped(|ui| {
        let what = match count {
            1 => "A finished image is not saved: Ember keeps it until it is".to_string(),
            n => format!("{n} finished images are not saved: Ember keeps them until they are"),
        };
        ui.colored_label(
            ui.visuals().warn_fg_color,
            format!("{what}. Free some space or choose another output folder, then"),
        );
        if ui.button("Save again").clicked() {
            actions.push(Action::SaveAgain);
        }
    });
}

/// Draws the whole window.
pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>) -> Vec<Action> {
    let mut actions = Vec::new();
    egui::Panel::top("bar").show(ui, |ui| top_bar(ui, app, &mut actions));
    if !app.session.notices.is_empty() {
        egui::Panel::bottom("notices")
            .resizable(false)
            .show(ui, |ui| notices(ui, app, &mut actions));
    }
    if app.unsaved > 0 {
        egui::Panel::bottom("unsaved")
            .resizable(false)
            .show(ui, |ui| unsaved(ui, app.unsaved, &mut actions));
    }
    match app.view {
        View::Generate => {
            // Both side panels collapse (View menu, or dragging their edge shut and open);
            // the picture gets what is left.
            let width = ui.available_width();
            let mut settings_open = app.settings.layout.settings_panel;
            egui::Panel::left("settings")
                .resizable(true)
                .default_size(320.0)
                .max_size((width * 0.45).max(240.0))
                .show_collapsible(ui, &mut settings_open, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| form::draw(ui, app, &mut actions));
                });
            app.settings.layout.settings_panel = settings_open;
            let shown = app.settings.layout.model_panel_shown(width);
            let mut model_open = shown;
            egui::Panel::right("model")
                .resizable(true)
                .default_size(280.0)
                .max_size((width * 0.35).max(220.0))
                .show_collapsible(ui, &mut model_open, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| model::draw(ui, app, &mut actions));
                });
            if model_open != shown {
                app.settings.layout.model_panel = Some(model_open);
            }
            egui::CentralPanel::default().show(ui, |ui| output::draw(ui, app, &mut actions));
        }
        View::Canvas => canvas::draw(ui, app, &mut actions),
        View::Gallery => gallery::draw(ui, app, &mut actions),
        View::Extras => extras::draw(ui, app, &mut actions),
    }
    path_prompt(ui, app, &mut actions);
    if app.downloads.open {
        downloads::window(ui, app, &mut actions);
    }
    styles::editor(ui, app, &mut actions);
    if app.quit_asked {
        quit::question(ui, app, &mut actions);
    }
    hover_hint(ui);
    actions
}

/// The typed-path window: a path for the purpose a dialog could not serve. The field has
/// the focus when it opens; Enter uses the path (once it exists), Escape cancels.
fn path_prompt(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    let Some(prompt) = app.path_prompt.as_mut() else {
        return;
    };
    let mut close = ui.input_mut(|i| i.consume_key(egui::Modifiers::NONE, egui::Key::Escape));
    egui::Window::new("Type a path")
        .collapsible(false)
        .resizable(false)
        .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
        .show(ui.ctx(), |ui| {
            ui.label(prompt.purpose.title());
            let label = ui.label("Path");
            let field = ui
                .add(
                    egui::TextEdit::singleline(&mut prompt.text)
                        .desired_width(420.0)
                        .hint_text(prompt.purpose.example()),
                )
                .labelled_by(label.id);
            if !prompt.focused {
                field.request_focus();
                prompt.focused = true;
            }
            // A single-line field gives up the focus on Enter.
            let entered = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let path = std::path::PathBuf::from(prompt.text.trim());
            let exists = !prompt.text.trim().is_empty() && path.exists();
            if !prompt.text.trim().is_empty() && !exists {
                ui.colored_label(Color32::from_rgb(235, 80, 70), "no such file or folder");
            }
            ui.horizontal(|ui| {
                let used = ui
                    .add_enabled(exists, egui::Button::new("Use this path"))
                    .clicked();
                if used || (entered && exists) {
                    actions.push(prompt.purpose.action(path));
                    close = true;
                }
                if ui.button("Cancel").clicked() {
                    close = true;
                }
            });
        });
    if close {
        *app.path_prompt = None;
    }
}

fn top_bar(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    ui.horizontal(|ui| {
        ui.heading("Ember");
        ui.separator();
        for (view, name) in [
            (View::Generate, "Create"),
            (View::Canvas, "Canvas"),
            (View::Gallery, "Gallery"),
            (View::Extras, "Extras"),
        ] {
            if ui.selectable_label(app.view == view, name).clicked() && app.view != view {
                actions.push(Action::Show(view));
            }
        }
        ui.separator();
        let model = match &app.session.model {
            super::session::ModelState::Empty => "no model".to_string(),
            super::session::ModelState::Loading { path, .. } => format!(
                "loading {}…",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            super::session::ModelState::Ready(m) => format!("{} · {}", m.name, m.family),
        };
        ui.label(model);
        if !app.session.queue.is_empty() {
            ui.separator();
            ui.label(format!("{} queued", app.session.queue.len()));
        }
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            ui.menu_button("Help", |ui| help(ui, app));
            ui.menu_button("View", |ui| view_menu(ui, app));
            // Open while choosing: the choice and the start-again button show together.
            let stays_open = egui::containers::menu::MenuConfig::new()
                .close_behavior(egui::PopupCloseBehavior::CloseOnClickOutside);
            egui::containers::menu::MenuButton::new("Device")
                .config(stays_open)
                .ui(ui, |ui| device::menu(ui, app, actions));
            if !app.device.short.is_empty() {
                ui.label(RichText::new(&app.device.short).weak())
                    .on_hover_text(&app.device.detail);
            }
        });
    });
}

/// Which side panels show (the model panel follows the window's width until set here).
fn view_menu(ui: &mut egui::Ui, app: &mut Parts<'_>) {
    let layout = &mut app.settings.layout;
    ui.checkbox(&mut layout.settings_panel, "Settings panel");
    let width = ui.ctx().content_rect().width();
    let mut shown = layout.model_panel_shown(width);
    if ui.checkbox(&mut shown, "Model panel").changed() {
        layout.model_panel = Some(shown);
    }
    if layout.model_panel.is_some()
        && ui
            .button("Model panel: follow the window")
            .on_hover_text("Shown when the window is wide, hidden when it is narrow")
            .clicked()
    {
        layout.model_panel = None;
    }
}

/// Where Ember runs, where it keeps things, how to get models and GPU support.
fn help(ui: &mut egui::Ui, app: &Parts<'_>) {
    ui.set_max_width(420.0);
    ui.strong(format!("Ember {}", env!("CARGO_PKG_VERSION")));
    if !app.device.detail.is_empty() {
        ui.label(&app.device.detail);
    }
    ui.separator();
    ui.label(
        "Models: drop a .safetensors or .ckpt checkpoint (SD 1.x, SD 2.x, SDXL) or a \
         diffusers folder on the window, choose a models folder in the model panel, or \
         download one (Download… in the model panel: SD 1.5, SDXL, or any Hugging Face or \
         Civitai link).",
    );
    ui.label(format!("Settings: {}", app.paths.config_dir.display()));
    ui.label(format!("Images: {}", app.output_dir.display()));
    ui.separator();
    ui.label("Ctrl+Enter generates; Esc stops the running image.");
    ui.label("In a prompt, Ctrl+Up / Ctrl+Down weight the word or selection.");
    ui.label(
        "On the canvas, B and E pick the brush or the eraser, [ and ] size it, Ctrl+Z undoes.",
    );
    ui.label("In the gallery, the arrow keys step through the images.");
}

/// Notices shown unless "show all" is on.
const VISIBLE_NOTICES: usize = 3;

/// The newest notices, each with its own close button; older ones behind "show all".
fn notices(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    let all = &app.session.notices;
    let shown = if app.session.all_notices {
        all.len()
    } else {
        VISIBLE_NOTICES
    };
    let hidden = all.len().saturating_sub(shown);
    let list = egui::ScrollArea::vertical()
        .max_height(160.0)
        .auto_shrink([false, true]);
    list.show(ui, |ui| {
        for (i, notice) in all[hidden..].iter().enumerate() {
            let color = match notice.level {
                Level::Info => ui.visuals().text_color(),
                Level::Warning => Color32::from_rgb(230, 170, 40),
                Level::Error => Color32::from_rgb(235, 80, 70),
            };
            ui.horizontal(|ui| {
                if ui
                    .small_button("×")
                    .on_hover_text("Dismiss this notice")
                    .clicked()
                {
                    actions.push(Action::DismissNotice(notice.id));
                }
                // The first row keeps room for the panel's buttons at its right.
                let room = if i == 0 { 220.0 } else { 0.0 };
                ui.scope(|ui| {
                    ui.set_max_width((ui.available_width() - room).max(80.0));
                    ui.add(egui::Label::new(RichText::new(&notice.text).color(color)).wrap());
                });
                if i == 0 {
                    ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                        notice_buttons(ui, app, hidden, actions);
                    });
                }
            });
        }
    });
}

/// Dismiss all, and Show all / Show fewer when there are more than a few.
fn notice_buttons(ui: &mut egui::Ui, app: &Parts<'_>, hidden: usize, actions: &mut Vec<Action>) {
    let all = &app.session.notices;
    if ui.small_button("Dismiss all").clicked() {
        actions.push(Action::DismissNotices);
    }
    if hidden > 0 {
        if ui
            .small_button(format!("Show all ({})", all.len()))
            .clicked()
        {
            actions.push(Action::ShowAllNotices(true));
        }
    } else if app.session.all_notices
        && all.len() > VISIBLE_NOTICES
        && ui.small_button("Show fewer").clicked()
    {
        actions.push(Action::ShowAllNotices(false));
    }
}

/// While a file is dragged over the window, say what dropping it does.
fn hover_hint(ui: &egui::Ui) {
    let hovering = ui.ctx().input(|i| !i.raw.hovered_files.is_empty());
    if hovering {
        let painter = ui.ctx().layer_painter(egui::LayerId::new(
            egui::Order::Foreground,
            egui::Id::unique("drop-hint"),
        ));
        let rect = ui.ctx().content_rect();
        painter.rect_filled(rect, 0.0, Color32::from_black_alpha(180));
        painter.text(
            rect.center(),
            egui::Align2::CENTER_CENTER,
            "Drop a checkpoint to load it, or an image to reuse its settings",
            egui::TextStyle::Heading.resolve(ui.style()),
            Color32::WHITE,
        );
    }
}
