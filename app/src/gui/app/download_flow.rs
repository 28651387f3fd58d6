//! The Download window's side of the app: starting a download into the models folder, and
//! loading or listing what arrives.

use std::path::PathBuf;

use super::EmberApp;
use crate::download::{self, catalogue};
use crate::gui::action::{Action, DownloadAction};
use crate::gui::downloads::Arrival;
use crate::gui::session::Level;

impl EmberApp {
    /// Where downloads go: the models folder, else the default one under the app's data.
    pub fn models_dir(&self) -> PathBuf {
        self.settings
            .models_dir
            .clone()
            .unwrap_or_else(|| self.paths.default_models.clone())
    }

    pub(super) fn perform_download(&mut self, action: DownloadAction) {
        match action {
            DownloadAction::Show(open) => self.downloads.open = open,
            DownloadAction::Cancel => self.downloads.cancel(),
            DownloadAction::Start(spec) => {
                let entry = catalogue::find(&spec);
                let started = download::resolve(&spec, None).and_then(|target| {
                    let dir = match entry {
                        Some(e) if !e.folder.is_empty() => self.models_dir().join(e.folder),
                        _ => self.models_dir(),
                    };
                    let label = entry.map_or_else(|| spec.clone(), |e| e.title.to_string());
                    let ctx = self.ctx.clone();
                    self.downloads
                        .start(target, dir, label, move || ctx.request_repaint())
                });
                if let Err(e) = started {
                    self.session.notify(Level::Error, e);
                }
            }
        }
    }

    /// Takes in the download's progress; a finished checkpoint is listed and loaded.
    pub(super) fn drain_downloads(&mut self) {
        let Some(arrival) = self.downloads.poll() else {
            return;
        };
        match arrival {
            Arrival::Done(path) => {
                let name = path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                self.session.notify(
                    Level::Info,
                    format!("downloaded {name} to {}", path.display()),
                );
                // The folder it went to becomes the models folder when there was none.
                let dir = self.models_dir();
                self.settings.models_dir = Some(dir.clone());
                self.scan_models(dir.clone());
                let is_checkpoint = path.parent() == Some(dir.as_path())
                    && crate::gui::models::is_model_path(&path);
                if is_checkpoint {
                    self.perform(Action::LoadModel(path));
                }
                self.downloads.open = false;
            }
            Arrival::Cancelled => self.session.notify(
                Level::Info,
                "download cancelled; starting it again resumes where it stopped",
            ),
            Arrival::Failed(e) => self
                .session
                .notify(Level::Error, format!("download failed: {e}")),
        }
    }
}
