//! The architectures of a model's networks: the released presets, a diffusers folder's
//! `config.json` files, and the checks that the pieces fit together and that Ember runs
//! the UNet's inputs.

use std::path::Path;

use crate::error::{Error, Result};
use crate::family::Family;
use crate::models::clip::ClipConfig;
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;

/// The architectures of a model's networks.
pub(super) struct Configs {
    pub family: Family,
    /// One per text encoder of the family, in its order.
    pub encoders: Vec<ClipConfig>,
    pub unet: UNetConfig,
    pub vae: VaeConfig,
}

impl Configs {
    /// The released models' architectures.
    pub fn preset(family: Family, unet_in_channels: usize) -> Self {
        let spec = family.spec();
        Self {
            family,
            encoders: spec.encoders.iter().map(|e| (e.preset)()).collect(),
            unet: (spec.unet_preset)(unet_in_channels),
            vae: spec.vae_preset(),
        }
    }

    /// Configs from a diffusers-style folder. A component without a `config.json` takes
    /// its config from `preset`, or is an error without one.
    pub fn from_dir(dir: &Path, family: Family, preset: Option<Configs>) -> Result<Self> {
        let (mut encoders, unet, vae) = match preset {
            Some(p) => (
                p.encoders.into_iter().map(Some).collect(),
                Some(p.unet),
                Some(p.vae),
            ),
            None => (vec![None; family.spec().encoders.len()], None, None),
        };
        let encoders = family
            .spec()
            .encoders
            .iter()
            .zip(encoders.iter_mut())
            .map(|(e, fallback)| read_config(dir, e.folder, ClipConfig::from_json, fallback.take()))
            .collect::<Result<_>>()?;
        Ok(Self {
            family,
            encoders,
            unet: read_config(dir, "unet", UNetConfig::from_json, unet)?,
            vae: read_config(dir, "vae", VaeConfig::from_json, vae)?,
        })
    }

    /// Checks that the pieces fit together: the encoders' widths add up to the UNet's
    /// cross-attention width, and SDXL's pooled width and time ids to its addition input.
    /// A mismatch means parts of different models were put together.
    pub fn check_fit(&self, path: &Path) -> Result<()> {
        let spec = self.family.spec();
        let widths: Vec<String> = spec
            .encoders
            .iter()
            .zip(&self.encoders)
            .map(|(e, c)| format!("{} {}", e.folder, c.hidden_size))
            .collect();
        let context: usize = self.encoders.iter().map(|c| c.hidden_size).sum();
        if context != self.unet.cross_attention_dim {
            return Err(Error::invalid_model(
                path,
                format!(
                    "the UNet expects {}-wide text conditioning but the text encoders give {context} ({}): these pieces belong to different models",
                    self.unet.cross_attention_dim,
                    widths.join(" + ")
                ),
            ));
        }
        let pooled: usize = spec
            .encoders
            .iter()
            .zip(&self.encoders)
            .filter(|(e, _)| e.pooled)
            .map(|(_, c)| c.projection_dim.unwrap_or(0))
            .sum();
        match (spec.time_ids, self.unet.addition) {
            (Some(ids), Some(add))
                if add.input_dim == pooled + ids.count() * add.time_embed_dim =>
            {
                Ok(())
            }
            (None, None) => Ok(()),
            (Some(ids), Some(add)) => Err(Error::invalid_model(
                path,
                format!(
                    "the UNet's added conditioning takes {} values, not the {pooled} pooled + {} x {} time ids of an {}: these pieces belong to different models",
                    add.input_dim,
                    ids.count(),
                    add.time_embed_dim,
                    self.family
                ),
            )),
            (Some(_), None) => Err(Error::invalid_model(
                path,
                format!(
                    "the UNet takes no pooled text or size conditioning, so it is not an {} UNet",
                    self.family
                ),
            )),
            (None, Some(_)) => Err(Error::invalid_model(
                path,
                format!(
                    "the UNet takes SDXL's pooled text and size conditioning, but the text encoders are {}'s",
                    self.family
                ),
            )),
        }
    }

    /// The size the UNet was trained at, in pixels.
    pub fn native_size(&self) -> (u32, u32) {
        let side = (self.unet.sample_size * self.vae.factor()) as u32;
        (side, side)
    }
}

/// Parses `dir/component/config.json`, or returns `fallback` when the file is absent.
fn read_config<T>(
    dir: &Path,
    component: &str,
    parse: fn(&str) -> Result<T>,
    fallback: Option<T>,
) -> Result<T> {
    let path = dir.join(component).join("config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text).map_err(|e| Error::invalid_model(&path, e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fallback.ok_or_else(|| {
            Error::invalid_model(
                dir,
                format!("incomplete diffusers folder: {component}/config.json is missing"),
            )
        }),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Refuses a UNet whose inputs Ember does not make, before any weight is read: it runs the
/// family's `c` latent channels in and out, or `2c + 1` in for inpainting (the latents, the
/// masked image's latents and the mask). SD 2's depth model (5 in) and InstructPix2Pix (8)
/// load otherwise, and would fail at the first step.
pub(super) fn check_unet_channels(configs: &Configs, path: &Path) -> Result<()> {
    let c = configs.family.spec().latent_channels;
    let (inputs, outputs) = (configs.unet.in_channels, configs.unet.out_channels);
    if outputs == c && (inputs == c || inputs == 2 * c + 1) {
        return Ok(());
    }
    let which = match (inputs, c) {
        (5, 4) => " (as SD 2's depth model, which also takes a depth map)",
        (8, 4) => " (as InstructPix2Pix, which also takes the input image's latents)",
        _ => "",
    };
    Err(Error::unsupported_model(
        path,
        format!(
            "its UNet takes {inputs} channels in and gives {outputs}{which}; Ember runs {} \
             UNets of {c} channels in and out, or {} in for inpainting",
            configs.family,
            2 * c + 1
        ),
    ))
}
