//! The app's side of its background services' replies: saved, listed, opened and deleted
//! files, model scans and hashes, and restoring settings from an image's metadata.

use std::path::Path;

use inference::metadata::ImageMetadata;

use super::EmberApp;
use crate::gui::action::{Action, View};
use crate::gui::session::Level;
use crate::gui::{gallery, models, restore};

impl EmberApp {
    pub(super) fn on_file_reply(&mut self, reply: gallery::store::Reply) {
        use gallery::store::Reply;
        if matches!(reply, Reply::Saved { .. } | Reply::SaveFailed { .. }) {
            self.saves_in_flight = self.saves_in_flight.saturating_sub(1);
        }
        match reply {
            Reply::Saved {
                job,
                index,
                path,
                problem,
            } => {
                if let Some(problem) = problem {
                    self.session.notify(Level::Warning, problem);
                }
                self.display.saved(job, index, &path);
                self.gallery.added(&path);
            }
            Reply::SaveFailed { error, unsaved } => {
                let which = if self.display.results_job == Some(unsaved.job) {
                    format!("image {}: ", unsaved.index + 1)
                } else {
                    String::new()
                };
                self.session.notify(
                    Level::Error,
                    format!("{which}{error}; it is kept until it is saved (Save again)"),
                );
                self.unsaved.push(*unsaved);
            }
            Reply::Scanned { dir, entries } => self.gallery.listed(&dir, entries),
            Reply::Opened {
                path,
                image,
                metadata,
            } => {
                if self.canvas_file_opened(&path, &image)
                    || self.extras_file_opened(&path, &image, metadata.as_ref())
                {
                    return;
                }
                if let Some(i) = self.restoring.iter().position(|p| *p == path) {
                    self.restoring.remove(i);
                    match image {
                        Ok(_) => self.restore_from(&path, metadata.as_ref(), true),
                        Err(e) => self.session.notify(Level::Error, e),
                    }
                } else {
                    self.gallery.opened(&self.ctx, &path, image, metadata);
                }
            }
            Reply::Deleted { path, result } => match result {
                Ok(()) => {
                    self.gallery.removed(&path);
                    self.session.notify(
                        Level::Info,
                        format!("moved {} to the trash", path.display()),
                    );
                }
                Err(e) => self.session.notify(Level::Error, e),
            },
        }
    }

    pub(super) fn on_models_reply(&mut self, reply: models::Reply) {
        match reply {
            models::Reply::Listed { dir, entries } => {
                if self.settings.models_dir.as_deref() == Some(dir.as_path()) {
                    self.models = entries;
                }
            }
            models::Reply::Hashed { path, hash } => {
                if let Some(entry) = self.models.iter_mut().find(|e| e.path == path) {
                    entry.hash = models::Hash::Known(hash);
                }
            }
            models::Reply::LoraDiffers {
                name,
                recorded,
                found,
            } => {
                let text = match found {
                    Ok(hash) => format!(
                        "the LoRA {name} in your folders (hash {hash}) is not the file the \
                         image used ({recorded}): the image may come out differently"
                    ),
                    Err(e) => format!("the LoRA {name} could not be checked: {e}"),
                };
                self.session.notify(Level::Warning, text);
            }
        }
    }

    pub(super) fn restore_from(
        &mut self,
        path: &Path,
        metadata: Option<&ImageMetadata>,
        with_seed: bool,
    ) {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        match metadata {
            Some(meta) => {
                let size_before = (self.settings.width, self.settings.height);
                let mut restored = restore::apply(meta, &mut self.settings, with_seed);
                if restored.applied.contains(&"prompt")
                    && self.styles.take_from_restored(&mut self.settings)
                {
                    restored.applied.push("styles");
                }
                if (self.settings.width, self.settings.height) != size_before {
                    // The image's size, as if typed: for the model loaded, or kept by the
                    // one loading (`restore_model` says which when the image names one).
                    self.settings.size_for = self
                        .session
                        .model()
                        .map(|m| m.native_size.0.min(m.native_size.1));
                }
                self.session
                    .notify(Level::Info, format!("{name}: {}", restored.summary()));
                self.restore_model(restored.model.as_ref());
                self.restore_refiner(restored.refiner.as_deref());
                if let Some(vae) = &restored.vae {
                    self.restore_vae(vae.as_deref());
                }
                self.restore_controlnets(restored.controlnets);
                self.check_restored_loras(meta);
                self.view = View::Generate;
            }
            None => self.session.notify(
                Level::Warning,
                format!("{name} has no generation settings Ember can read"),
            ),
        }
    }

    /// Says which LoRAs a restored prompt's `<lora:…>` tags name that the LoRA folders do
    /// not hold, with the hash the image recorded (`Lora hashes`) to find the file by.
    fn check_restored_loras(&mut self, meta: &ImageMetadata) {
        // The prompt as the image had it: a style's text may hold a LoRA tag too.
        let s = &self.settings;
        let prompt = (self.styles.apply(&s.styles, &s.prompt, &s.negative_prompt))
            .map_or_else(|_| s.prompt.clone(), |(prompt, _)| prompt);
        let Ok((_, tags)) = inference::lora::tags::extract(&prompt) else {
            return;
        };
        if tags.is_empty() {
            return;
        }
        let hashes: Vec<(String, String)> = match meta {
            ImageMetadata::A1111(p) => p
                .get("Lora hashes")
                .map(|v| {
                    v.split(',')
                        .filter_map(|pair| pair.split_once(':'))
                        .map(|(n, h)| (n.trim().to_string(), h.trim().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let dirs = self.lora_dirs();
        // Found ones are hashed on the models thread and compared there (files are large).
        let checks: Vec<(String, std::path::PathBuf, String)> = tags
            .iter()
            .filter_map(|tag| {
                let path = inference::lora::tags::find(&tag.name, &dirs)?;
                let (_, hash) = hashes.iter().find(|(n, _)| *n == tag.name)?;
                Some((tag.name.clone(), path, hash.clone()))
            })
            .collect();
        if !checks.is_empty() {
            self.models_service
                .send(models::Request::CheckLoras(checks));
        }
        let missing: Vec<String> = tags
            .iter()
            .filter(|tag| inference::lora::tags::find(&tag.name, &dirs).is_none())
            .map(|tag| match hashes.iter().find(|(n, _)| *n == tag.name) {
                Some((_, hash)) => format!("{} [{hash}]", tag.name),
                None => tag.name.clone(),
            })
            .collect();
        if !missing.is_empty() {
            self.session.notify(
                Level::Warning,
                format!(
                    "this image used LoRAs the LoRA folders do not hold: {}; add them to the \
                     models folder's Lora/ or the image will come out without them",
                    missing.join(", ")
                ),
            );
        }
    }

    /// Chooses the VAE a restored image names: Automatic when that is what finds it (a VAE
    /// beside the checkpoint) or when the image names none, else the models folder's file
    /// of that name; a warning when there is none.
    pub(super) fn restore_vae(&mut self, name: Option<&str>) {
        use inference::api::VaeChoice;
        let file_name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name else {
            self.settings.vae = VaeChoice::Automatic;
            return;
        };
        let automatic = (self.session.model_path())
            .and_then(inference::external_vae::beside_checkpoint)
            .is_some_and(|p| file_name(&p).as_deref() == Some(name));
        if automatic {
            self.settings.vae = VaeChoice::Automatic;
            return;
        }
        let found = (self.models.iter())
            .filter(|m| m.kind == models::EntryKind::Vae)
            .find(|m| file_name(&m.path).as_deref() == Some(name))
            .map(|m| m.path.clone());
        match found {
            Some(path) => self.settings.vae = VaeChoice::File(path),
            None => self.session.notify(
                Level::Warning,
                format!(
                    "the image was made with the VAE {name}, which is not in the models \
                     folder's VAE folder; add it there and choose it under VAE, or the \
                     picture will differ"
                ),
            ),
        }
    }

    /// Uses the refiner a restored image names, found by name in the models folder (A1111
    /// turns the refiner off for an image without one, and so does Ember).
    pub(super) fn restore_refiner(&mut self, name: Option<&str>) {
        let Some(name) = name else {
            if self.settings.refiner.enabled {
                self.perform(Action::SetRefiner(None));
            }
            return;
        };
        let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
        let found = self
            .models
            .iter()
            .find(|m| stem(&m.path).as_deref() == Some(name))
            .map(|m| m.path.clone())
            .or_else(|| {
                self.settings
                    .refiner
                    .model
                    .clone()
                    .filter(|p| stem(p).as_deref() == Some(name))
            });
        match found {
            Some(path) => self.perform(Action::SetRefiner(Some(path))),
            None => self.session.notify(
                Level::Warning,
                format!(
                    "the image was refined with {name}, which is not in the models folder; choose it under Refiner"
                ),
            ),
        }
    }
}
