//! ControlNet inputs: a request's ControlNets, the preprocessors that turn an image into a
//! control map, and loading the networks a request names into the model.

pub mod canny;
pub mod detectmap;
mod morphology;
pub mod preprocess;
pub mod resize;
mod xdog;

pub use preprocess::{MapSettings, Module, control_map};

use std::path::PathBuf;

use crate::imaging::ImageRgb8;

/// One ControlNet of a request (A1111's ControlNet unit).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ControlRequest {
    /// A ControlNet single file or diffusers folder.
    #[serde(with = "crate::path_json")]
    pub model: PathBuf,
    /// The control map at the generation size (already preprocessed: [`control_map`]).
    pub image: ImageRgb8,
    /// `controlnet_conditioning_scale` (A1111's "Control Weight").
    pub scale: f32,
    /// The fractions of the steps where it starts and stops guiding (A1111's "Starting /
    /// Ending Control Step", diffusers' `control_guidance_start` / `_end`).
    pub start: f32,
    pub end: f32,
    /// How the map was made (preprocessor, thresholds, resolution, resize mode), for
    /// metadata.
    pub map: MapSettings,
}

use crate::api::GenerateRequest;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::weights::LoadOptions;

/// Loads the ControlNets `request` names into `model` (each folder once) and drops those it
/// no longer names.
pub fn set_for_request(model: &mut Model, request: &GenerateRequest) -> Result<()> {
    for (i, c) in request.controlnets.iter().enumerate() {
        let fraction = |v: f32| (0.0..=1.0).contains(&v);
        if !fraction(c.start) || !fraction(c.end) || c.start > c.end {
            return Err(Error::settings(format!(
                "ControlNet {i}: start {} and end {} must be fractions of the steps with start <= end",
                c.start, c.end
            )));
        }
        if !c.scale.is_finite() || c.scale.abs() > 10.0 {
            return Err(Error::settings(format!(
                "ControlNet {i}: a scale of {} is out of range (-10 to 10; 1 is the default)",
                c.scale
            )));
        }
    }
    let wanted: Vec<&std::path::Path> = request
        .controlnets
        .iter()
        .map(|c| c.model.as_path())
        .collect();
    model
        .controlnets
        .retain(|(path, _)| wanted.contains(&path.as_path()));
    for path in wanted {
        if model.controlnets.iter().any(|(p, _)| p == path) {
            continue;
        }
        let config = crate::weights::controlnet::config_of(path)?;
        crate::weights::controlnet::check_fit(&config, &model.unet_config).map_err(|why| {
            let assumed = if path.is_file() && !path.with_file_name("config.json").is_file() {
                " (a single file without a config.json beside it is read as SD 1.5's \
                 architecture: put the ControlNet's diffusers config.json next to it)"
            } else {
                ""
            };
            Error::invalid_model(
                path,
                format!(
                    "this ControlNet does not fit the loaded model ({}): {why}{assumed}",
                    model.spec().label
                ),
            )
        })?;
        let options = LoadOptions::new(model.device.clone(), model.precision);
        let net = crate::weights::controlnet::load(path, &options)?;
        model.controlnets.push((path.to_path_buf(), net));
    }
    Ok(())
}
