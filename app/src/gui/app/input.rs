//! The app's own input: files dropped on the window or given on the command line, and its
//! keys (Ctrl+Enter generates, Esc cancels, the arrow keys step through the gallery).

use std::path::PathBuf;

use super::EmberApp;
use crate::gui::action::{Action, CanvasAction, ControlAction, ExtrasAction, View};
use crate::gui::session::Level;
use crate::gui::{gallery, models};

impl EmberApp {
    /// Dropped files, Ctrl+Enter, Esc and the gallery's arrow keys.
    pub(super) fn handle_input(&mut self, ctx: &egui::Context) -> Vec<Action> {
        let mut actions = Vec::new();
        // Esc answers the quit question (as "Don't quit") or closes the typed-path window,
        // not the running image.
        let asked = self.quitting.asked || self.path_prompt.is_some();
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
        // In the gallery the arrow keys step through the images (not while typing).
        if self.view == View::Gallery && !asked && !ctx.text_edit_focused() {
            let row = self.gallery.columns.max(1) as isize;
            // Every press counts, in order, several in one frame too (a busy frame).
            let steps: Vec<isize> = ctx.input_mut(|i| {
                let mut steps = Vec::new();
                i.events.retain(|event| {
                    let egui::Event::Key {
                        key,
                        pressed: true,
                        modifiers,
                        ..
                    } = event
                    else {
                        return true;
                    };
                    let step = match key {
                        _ if !modifiers.is_none() => return true,
                        egui::Key::ArrowLeft => -1,
                        egui::Key::ArrowRight => 1,
                        egui::Key::ArrowUp => -row,
                        egui::Key::ArrowDown => row,
                        _ => return true,
                    };
                    steps.push(step);
                    false
                });
                steps
            });
            let chosen = (!steps.is_empty()).then(|| self.gallery.stepped(&steps));
            if let Some(path) = chosen.flatten() {
                actions.push(Action::SelectImage(path));
            }
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
    pub(super) fn open_paths(
        &mut self,
        paths: Vec<PathBuf>,
        control_unit: Option<usize>,
    ) -> Vec<Action> {
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
}
