//! The models' side of the app: the models folder and its scan, loading a model or a
//! refiner (with the config folder chosen for it before), and the hashes an image needs.

use std::path::{Path, PathBuf};

use inference::worker::{CancelToken, ModelRole};

use super::EmberApp;
use crate::gui::action::Action;
use crate::gui::models;
use crate::gui::restore::ImageModel;
use crate::gui::session::Level;

impl EmberApp {
    /// Lists the models folder `dir` (stopping the hashing of an earlier scan).
    pub(super) fn scan_models(&mut self, dir: PathBuf) {
        self.models_scan.cancel();
        self.models_scan = CancelToken::new();
        self.models_service.send(models::Request::Scan {
            dir,
            stop: self.models_scan.clone(),
        });
    }

    /// A new models folder: its list replaces the old one's.
    pub(super) fn set_models_folder(&mut self, dir: PathBuf) {
        self.settings.models_dir = Some(dir.clone());
        self.models.clear();
        self.scan_models(dir);
    }

    pub(super) fn rescan_models(&mut self) {
        if let Some(dir) = self.settings.models_dir.clone() {
            self.scan_models(dir);
        }
    }

    /// After an image, the models it used have been hashed (for its metadata): show them.
    pub(super) fn look_up_model_hashes(&self) {
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

    /// Loads `path` as `role`, with the config folder chosen for it before, if any; a model
    /// already being loaded there goes on loading (a second click does not start over).
    pub(super) fn load_model(&mut self, role: ModelRole, path: &Path) {
        if self.session.is_loading(role, path) || self.session.refuse_when_stopped() {
            return;
        }
        let config = self.settings.config_dirs.get(path).cloned();
        let command = self.session.load_into(role, path, config);
        self.worker.send(command);
        // The load goes ahead of the images still waiting: they are made with this model
        // (a plot's cells for a checkpoint keep theirs).
        let waiting = self.session.waiting_for_any_model();
        if role == ModelRole::Main && waiting > 0 {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let images = if waiting == 1 { "image" } else { "images" };
            self.session.notify(
                Level::Info,
                format!("the {waiting} {images} waiting in the queue will be made with {name}"),
            );
        }
    }

    /// Loads `model` as `role` with the config folder `config`, remembered for it.
    pub(super) fn load_with_config(&mut self, model: PathBuf, config: PathBuf, role: ModelRole) {
        if self.session.refuse_when_stopped() {
            return;
        }
        self.settings
            .config_dirs
            .insert(model.clone(), config.clone());
        let command = self.session.load_into(role, &model, Some(config));
        self.worker.send(command);
    }

    /// Turns the refiner on with the model at `path`, or off (`None`, unloading it).
    pub(super) fn set_refiner(&mut self, path: Option<PathBuf>) {
        match path {
            Some(path) => {
                self.settings.refiner.model = Some(path.clone());
                self.settings.refiner.enabled = true;
                self.load_model(ModelRole::Refiner, &path);
            }
            None => {
                self.settings.refiner.enabled = false;
                if self.session.stopped.is_some() {
                    return;
                }
                let command = self.session.unload_refiner();
                self.worker.send(command);
            }
        }
    }

    /// After a restore: loads the model the image was made with when it is not the one
    /// loaded (or being loaded) and the models folder or Recent holds it (found by hash,
    /// else by name where the hash is not known), or says that the image will come out
    /// differently. The restored size then belongs to that model, so it is kept when the
    /// model loads.
    pub(super) fn restore_model(&mut self, wanted: Option<&ImageModel>) {
        let Some(wanted) = wanted else { return };
        if self.session.stopped.is_some() {
            return;
        }
        let known_hash = |path: &Path| {
            self.models
                .iter()
                .find(|e| e.path == path)
                .and_then(|e| match &e.hash {
                    models::Hash::Known(hash) => Some(hash.clone()),
                    _ => None,
                })
        };
        if let Some(path) = self.session.model_path().map(Path::to_path_buf)
            && wanted.is(&path, known_hash(&path).as_deref())
        {
            if self.session.model().is_none() {
                // The model loading is the image's: the size waits for it.
                self.settings.size_for = None;
            }
            return;
        }
        self.settings.size_for = None;
        let loadable = (self.models.iter()).filter(|e| e.kind == models::EntryKind::Model);
        let by_hash = loadable.clone().find(|e| {
            matches!(&e.hash, models::Hash::Known(h) if wanted.hash.as_deref() == Some(h.as_str()))
        });
        let found = by_hash
            .or_else(|| {
                loadable
                    .clone()
                    .find(|e| wanted.is(&e.path, known_hash(&e.path).as_deref()))
            })
            .map(|e| e.path.clone())
            .or_else(|| {
                (self.settings.recent_models.iter())
                    .find(|p| p.exists() && wanted.is(p, known_hash(p).as_deref()))
                    .cloned()
            });
        let wanted_name = wanted.describe();
        if let Some(path) = found {
            self.session.notify(
                Level::Info,
                format!("loading {wanted_name}, the model the image was made with"),
            );
            self.perform(Action::LoadModel(path));
            return;
        }
        let instead = match self.session.model() {
            Some(loaded) => format!("it will be made with {} and look different", loaded.name),
            None => "load it to make the same image".to_string(),
        };
        let missing = match (&wanted.name, &wanted.hash) {
            (None, Some(hash)) => format!(
                "the image names its model only by its hash {hash}, which no model in the \
                 models folder that Ember has hashed (those that made an image) has"
            ),
            _ => format!(
                "the image was made with {wanted_name}, which is not in the models folder or \
                 Recent"
            ),
        };
        self.session
            .notify(Level::Warning, format!("{missing}: {instead}"));
    }
}
