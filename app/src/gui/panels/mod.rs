//! The window's panels. Each gets [`Parts`]: the settings it shows and the canvas and
//! gallery view state to edit, the session and results to read; every other change is an
//! [`Action`] it returns for the app to perform. Panels cannot reach the worker, the file
//! services or the dialogs: the rule holds by construction.

mod canvas;
mod form;
mod gallery;
mod model;
mod output;

use egui::{Color32, RichText};

use super::action::{Action, View};
use std::path::PathBuf;

use super::canvas::CanvasState;
use super::display::Display;
use super::gallery::Gallery;
use super::models::ModelEntry;
use super::session::Level;
use super::session::Session;
use super::settings::Settings;

/// What the panels may touch (borrowed from the app for one frame).
pub struct Parts<'a> {
    /// The persisted settings the form and the canvas options edit.
    pub settings: &'a mut Settings,
    /// The canvas's mask, brush, view and textures.
    pub canvas: &'a mut CanvasState,
    /// The gallery's selection and thumbnail cache.
    pub gallery: &'a mut Gallery,
    pub session: &'a Session,
    pub display: &'a Display,
    pub models: &'a [ModelEntry],
    pub view: View,
    pub output_dir: PathBuf,
}

/// Draws the whole window.
pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>) -> Vec<Action> {
    let mut actions = Vec::new();
    egui::Panel::top("bar").show(ui, |ui| top_bar(ui, app, &mut actions));
    if !app.session.notices.is_empty() {
        egui::Panel::bottom("notices").show(ui, |ui| notices(ui, app, &mut actions));
    }
    match app.view {
        View::Generate => {
            egui::Panel::left("settings")
                .resizable(true)
                .default_size(320.0)
                .show(ui, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| form::draw(ui, app, &mut actions));
                });
            egui::Panel::right("model")
                .resizable(true)
                .default_size(280.0)
                .show(ui, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| model::draw(ui, app, &mut actions));
                });
            egui::CentralPanel::default().show(ui, |ui| output::draw(ui, app, &mut actions));
        }
        View::Canvas => canvas::draw(ui, app, &mut actions),
        View::Gallery => gallery::draw(ui, app, &mut actions),
    }
    hover_hint(ui);
    actions
}

fn top_bar(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    ui.horizontal(|ui| {
        ui.heading("Ember");
        ui.separator();
        for (view, name) in [
            (View::Generate, "Create"),
            (View::Canvas, "Canvas"),
            (View::Gallery, "Gallery"),
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
    });
}

fn notices(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    ui.horizontal(|ui| {
        ui.vertical(|ui| {
            for notice in &app.session.notices {
                let color = match notice.level {
                    Level::Info => ui.visuals().text_color(),
                    Level::Warning => Color32::from_rgb(230, 170, 40),
                    Level::Error => Color32::from_rgb(235, 80, 70),
                };
                ui.label(RichText::new(&notice.text).color(color));
            }
        });
        ui.with_layout(egui::Layout::right_to_left(egui::Align::TOP), |ui| {
            if ui.button("Dismiss").clicked() {
                actions.push(Action::DismissNotices);
            }
        });
    });
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
