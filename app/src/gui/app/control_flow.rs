//! The ControlNet units' side of the app: adding and removing units, reading control
//! images (picked, dropped on a unit, the canvas's, or remembered from the last run) and
//! the request's ControlNets.

use std::path::{Path, PathBuf};

use inference::api::GenerateRequest;
use inference::imaging::ImageRgb8;

use super::EmberApp;
use super::canvas_flow::Incoming;
use crate::gui::action::ControlAction;
use crate::gui::controlnet::{self, ControlUnitSettings, MAX_UNITS};
use crate::gui::gallery::store::{Request, Rgba};
use crate::gui::session::Level;

impl EmberApp {
    /// Does what the ControlNet section asks.
    pub(super) fn perform_control(&mut self, action: ControlAction) {
        match action {
            ControlAction::AddUnit => {
                if self.settings.controlnet.len() < MAX_UNITS {
                    self.settings
                        .controlnet
                        .push(ControlUnitSettings::default());
                }
            }
            ControlAction::RemoveUnit(i) => {
                if i < self.settings.controlnet.len() {
                    self.settings.controlnet.remove(i);
                    if i < self.controls.units.len() {
                        self.controls.units.remove(i);
                    }
                    // Images still being read follow their units down.
                    self.incoming
                        .retain(|f| !matches!(f, Incoming::Control(u, _) if *u == i));
                    for f in &mut self.incoming {
                        if let Incoming::Control(u, _) = f
                            && *u > i
                        {
                            *u -= 1;
                        }
                    }
                }
            }
            ControlAction::OpenImage { unit, path } => self.read_control_image(unit, path),
            ControlAction::UseCanvasImage(unit) => {
                if let (Some(source), Some(s)) =
                    (&self.canvas.source, self.settings.controlnet.get_mut(unit))
                {
                    // The canvas image has no file: it is named by its pixels' hash.
                    let hash = inference::hashing::sha256_bytes(&source.pixels);
                    let path = PathBuf::from(format!("(canvas image {})", &hash[..8]));
                    s.image = Some(path.clone());
                    self.controls.unit(unit).image = Some((path, source.clone()));
                }
            }
            ControlAction::SetModel { unit, path } => {
                if let Some(s) = self.settings.controlnet.get_mut(unit) {
                    s.model = Some(path);
                    s.enabled = true;
                }
            }
        }
    }

    /// Reads `path` for unit `unit` (on the file thread; [`Self::control_file_opened`]
    /// takes the answer).
    pub(super) fn read_control_image(&mut self, unit: usize, path: PathBuf) {
        let Some(s) = self.settings.controlnet.get_mut(unit) else {
            return;
        };
        s.image = Some(path.clone());
        s.enabled = true;
        self.incoming.push(Incoming::Control(unit, path.clone()));
        self.files.send(Request::Open { path });
    }

    /// Reads the control images the settings remember (at start).
    pub(super) fn reload_control_images(&mut self) {
        let remembered: Vec<(usize, PathBuf)> = self
            .settings
            .controlnet
            .iter()
            .enumerate()
            .filter_map(|(i, u)| Some((i, u.image.clone()?)))
            .filter(|(_, p)| p.is_file())
            .collect();
        for (i, path) in remembered {
            self.incoming.push(Incoming::Control(i, path.clone()));
            self.files.send(Request::Open { path });
        }
    }

    /// A control image arrived for `unit` (or could not be read).
    pub(super) fn control_file_opened(
        &mut self,
        unit: usize,
        path: &Path,
        image: &Result<Rgba, String>,
    ) {
        let still_wanted = self
            .settings
            .controlnet
            .get(unit)
            .is_some_and(|u| u.image.as_deref() == Some(path));
        match image {
            Ok(rgba) if still_wanted => {
                self.controls.unit(unit).image = Some((path.to_path_buf(), on_white(rgba)));
            }
            Ok(_) => {}
            Err(e) => self
                .session
                .notify(Level::Error, format!("ControlNet {unit}: {e}")),
        }
    }

    /// Takes the units an image used: each finds its model by name among the models
    /// folder's ControlNets and keeps the image unit `i` has now; the other units are
    /// turned off. Says what is still to choose.
    pub(super) fn restore_controlnets(
        &mut self,
        units: Vec<(ControlUnitSettings, Option<String>)>,
    ) {
        let mut missing = Vec::new();
        let old = std::mem::take(&mut self.settings.controlnet);
        for (i, (mut unit, name)) in units.into_iter().enumerate().take(MAX_UNITS) {
            let previous = old.get(i);
            unit.image = previous.and_then(|u| u.image.clone());
            if !unit.enabled {
                // A unit the image used that Ember cannot run (said in the restore notice).
                unit.model = previous.and_then(|u| u.model.clone());
                self.settings.controlnet.push(unit);
                continue;
            }
            unit.model = name.as_deref().and_then(|name| self.find_controlnet(name));
            match (&name, &unit.model) {
                (Some(name), None) => {
                    // Keep the unit's own choice when it is the same network by name.
                    unit.model = previous.and_then(|u| u.model.clone()).filter(|p| {
                        p.file_stem()
                            .is_some_and(|s| s.to_string_lossy() == name.as_str())
                    });
                    if unit.model.is_none() {
                        missing.push(format!(
                            "ControlNet {i}: {name} is not in the models folder's ControlNet/"
                        ));
                    }
                }
                (None, _) => missing.push(format!("ControlNet {i}: the image names no model")),
                _ => {}
            }
            if unit.image.is_none() {
                missing.push(format!(
                    "ControlNet {i}: choose its control image (images keep none)"
                ));
            }
            self.settings.controlnet.push(unit);
        }
        // Units the image did not use stay, turned off.
        for mut unit in old.into_iter().skip(self.settings.controlnet.len()) {
            unit.enabled = false;
            self.settings.controlnet.push(unit);
        }
        if !missing.is_empty() {
            self.session.notify(Level::Warning, missing.join("; "));
        }
    }

    /// A ControlNet in the models folder whose file stem (or folder name) is `name`.
    fn find_controlnet(&self, name: &str) -> Option<PathBuf> {
        self.models
            .iter()
            .filter(|m| m.kind == crate::gui::models::EntryKind::ControlNet)
            .find(|m| {
                let stem = if m.path.is_dir() {
                    m.path.file_name()
                } else {
                    m.path.file_stem()
                };
                stem.is_some_and(|s| s.to_string_lossy() == name)
            })
            .map(|m| m.path.clone())
    }

    /// The request's ControlNets, their maps made at its size.
    pub(super) fn attach_controls(&self, request: &mut GenerateRequest) -> Result<(), String> {
        let size = (request.width, request.height);
        request.controlnets =
            controlnet::requests(&self.settings.controlnet, &self.controls, size)?;
        Ok(())
    }
}

/// An image made RGB as the ControlNet extension's `HWC3` makes it (over white).
fn on_white(rgba: &Rgba) -> ImageRgb8 {
    inference::imaging::rgba_over_white(rgba.width as u32, rgba.height as u32, &rgba.pixels)
}
