//! The gallery's side of the app: the output folder, the selected image (open, reuse its
//! settings, copy its parameters, delete it), and switching views.

use std::path::PathBuf;

use super::{EmberApp, open_folder};
use crate::gui::action::View;
use crate::gui::gallery::store::Request;
use crate::gui::session::Level;

impl EmberApp {
    pub(super) fn set_output_folder(&mut self, dir: PathBuf) {
        self.settings.output_dir = Some(dir);
        self.gallery.show_dir(&self.output_dir(), &self.files);
    }

    /// Shows `view`; the gallery reads its folder again when shown.
    pub(super) fn show(&mut self, view: View) {
        self.view = view;
        if view == View::Gallery {
            self.gallery.show_dir(&self.output_dir(), &self.files);
        }
    }

    pub(super) fn select_image(&mut self, path: PathBuf) {
        self.gallery.select(&path);
        self.files.send(Request::Open { path });
    }

    /// Puts the selected image's settings back in the form (its seed too with `with_seed`).
    pub(super) fn reuse_settings(&mut self, with_seed: bool) {
        if let Some(selected) = self.gallery.selected.clone() {
            let metadata = selected.metadata.clone();
            self.restore_from(&selected.path, metadata.as_ref(), with_seed);
        }
    }

    /// Copies the selected image's parameters text (A1111's format) to the clipboard.
    pub(super) fn copy_parameters(&mut self) {
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

    pub(super) fn open_output_folder(&mut self) {
        if let Err(e) = open_folder::open_folder(&self.output_dir()) {
            self.session.notify(Level::Error, e);
        }
    }

    /// Moves the selected image to the trash (on the file thread; a failure leaves it).
    pub(super) fn delete_selected(&mut self) {
        if let Some(selected) = self.gallery.selected.take() {
            self.files.send(Request::Delete {
                path: selected.path,
            });
        }
    }
}
