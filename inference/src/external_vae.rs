//! A VAE other than the model's own (A1111's "SD VAE" setting, ComfyUI's Load VAE): the
//! request's choice, the file A1111's Automatic finds beside a checkpoint, and the swap into
//! a loaded model, whose own VAE is kept aside to come back.
//!
//! **Invariant:** the latents' scaling factor stays the model's (A1111 and ComfyUI keep the
//! model's latent format whatever VAE decodes), so only the pictures change.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::api::GenerateRequest;
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::models::vae::{Vae, VaeConfig};
use crate::weights::LoadOptions;
use crate::weights::vae_file::{self, VaeFile};

/// Which VAE decodes (and encodes) a request's images.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum VaeChoice {
    /// A VAE named after the checkpoint beside it (`x.vae.safetensors` for
    /// `x.safetensors`), else the model's own: A1111's default, "Automatic".
    #[default]
    Automatic,
    /// The model's own VAE (A1111's "None").
    ModelsOwn,
    /// This VAE file or diffusers VAE folder.
    File(#[serde(with = "crate::path_json")] PathBuf),
}

impl VaeChoice {
    /// `auto` (or `automatic`), `none` (or `own`), else a path.
    pub fn parse(text: &str) -> Self {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "automatic" => Self::Automatic,
            "none" | "own" => Self::ModelsOwn,
            _ => Self::File(PathBuf::from(text.trim())),
        }
    }

    /// What [`VaeChoice::parse`] reads back.
    pub fn name(&self) -> String {
        match self {
            Self::Automatic => "auto".into(),
            Self::ModelsOwn => "none".into(),
            Self::File(path) => path.display().to_string(),
        }
    }

    /// The VAE this choice means for the model at `model`; `None` = the model's own.
    pub fn file_for(&self, model: &Path) -> Option<PathBuf> {
        match self {
            Self::Automatic => beside_checkpoint(model),
            Self::ModelsOwn => None,
            Self::File(path) => Some(path.clone()),
        }
    }
}

/// A1111's "VAE near the checkpoint": `x.vae.pt`, `x.vae.ckpt` or `x.vae.safetensors`
/// beside `x.safetensors` (or beside a model folder `x`), the first found.
pub fn beside_checkpoint(model: &Path) -> Option<PathBuf> {
    let stem = if model.is_dir() {
        model.file_name()?
    } else {
        model.file_stem()?
    };
    let stem = stem.to_string_lossy();
    let dir = model.parent()?;
    ["pt", "ckpt", "safetensors"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.vae.{ext}")))
        .find(|p| p.is_file())
}

/// The VAEs in `dirs` (the `VAE/` folders): weight files and diffusers VAE folders, by
/// name within each folder.
pub fn files_in(dirs: &[PathBuf]) -> Vec<PathBuf> {
    const EXTENSIONS: [&str; 5] = ["safetensors", "ckpt", "pt", "pth", "bin"];
    let mut found = Vec::new();
    for dir in dirs {
        let mut here: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let weights = p.is_file()
                    && (p.extension().and_then(|e| e.to_str()))
                        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
                weights || (p.is_dir() && p.join("config.json").is_file())
            })
            .collect();
        here.sort();
        found.extend(here);
    }
    found
}

/// A model's VAE with what goes with it, to swap one for another.
pub struct VaeParts {
    pub vae: Vae,
    pub config: VaeConfig,
    pub precision: Precision,
    pub f32: OnceLock<Vae>,
}

/// What a model holds aside while another VAE is in it.
#[derive(Default)]
pub struct Swapped {
    own: Option<VaeParts>,
    file: Option<PathBuf>,
}

/// The VAE file last read, kept for the next request that asks for it.
pub struct LoadedVae {
    file: VaeFile,
    /// The networks' precision it was read for (its own follows from it).
    for_precision: Precision,
    /// A1111's `VAE hash` (the file's SHA-256, first 10 digits); none for a folder.
    hash: Option<String>,
}

/// What [`set_for_request`] put in.
#[derive(Debug, Default)]
pub struct VaeUse {
    /// The VAE's name and hash for the metadata (`VAE`, `VAE hash`); `None` = the
    /// model's own.
    pub used: Option<(String, Option<String>)>,
    /// What reading a new VAE file found (unused tensors), said once.
    pub warnings: Vec<String>,
}

/// Puts the VAE `request` asks for into `models` (the main model first, then the refiner
/// when it runs), reading it into `cache` unless it is there; the models' own come back
/// when it asks for them. `vae_upcast` as [`LoadOptions::vae_upcast`].
pub fn set_for_request(
    models: &mut [&mut Model],
    request: &GenerateRequest,
    cache: &mut Option<LoadedVae>,
    vae_upcast: bool,
) -> Result<VaeUse> {
    let Some(main) = models.first() else {
        return Ok(VaeUse::default());
    };
    let wanted = request.vae.file_for(&main.info.path);
    for model in models.iter_mut() {
        if model.swapped_vae.file != wanted {
            restore_own(model);
        }
    }
    let Some(path) = wanted else {
        return Ok(VaeUse::default());
    };
    let mut warnings = Vec::new();
    let main = &models[0];
    let fits = |c: &LoadedVae| {
        c.file.path == path
            && c.for_precision == main.precision
            && c.file.config.same_network(&main.vae_config)
    };
    if !cache.as_ref().is_some_and(fits) {
        *cache = None;
        let options = LoadOptions {
            vae_upcast,
            ..LoadOptions::new(main.device.clone(), main.precision)
        };
        let file = vae_file::load(&path, &main.vae_config, &options)?;
        warnings.extend(load_notes(&file));
        let hash = path
            .is_file()
            .then(|| crate::hashing::model_hash(&path, crate::hashing::cache_dir().as_deref()).ok())
            .flatten();
        *cache = Some(LoadedVae {
            file,
            for_precision: main.precision,
            hash,
        });
    }
    let loaded = cache.as_ref().expect("just filled");
    for model in models.iter_mut() {
        if model.swapped_vae.file.as_ref() == Some(&path) {
            continue;
        }
        let config = fitted(&loaded.file, &model.vae_config)?;
        let parts = VaeParts {
            // A clone shares the weights: main model and refiner hold one copy.
            vae: loaded.file.vae.clone(),
            config,
            precision: loaded.file.precision,
            f32: OnceLock::new(),
        };
        let own = model.replace_vae(parts);
        model.swapped_vae = Swapped {
            own: Some(own),
            file: Some(path.clone()),
        };
    }
    Ok(VaeUse {
        used: Some((loaded.file.name.clone(), loaded.hash.clone())),
        warnings,
    })
}

/// Gives `model` its own VAE back, if another is in it.
pub fn restore_own(model: &mut Model) {
    if let Some(own) = model.swapped_vae.own.take() {
        model.replace_vae(own);
    }
    model.swapped_vae.file = None;
}

/// The config the file's VAE runs under in `model`: the model's, with the file's
/// `force_upcast`; an error when the architectures differ (a refiner's VAE unlike the
/// main model's).
fn fitted(file: &VaeFile, own: &VaeConfig) -> Result<VaeConfig> {
    if !file.config.same_network(own) {
        return Err(Error::settings(format!(
            "the VAE {} does not fit the refiner, whose VAE is another architecture; choose the \
             model's own VAE",
            file.name
        )));
    }
    Ok(VaeConfig {
        force_upcast: file.config.force_upcast,
        ..own.clone()
    })
}

/// What a freshly read VAE file had beside its weights, as warnings.
fn load_notes(file: &VaeFile) -> Vec<String> {
    let unused = &file.report.unused;
    if unused.is_empty() {
        return Vec::new();
    }
    let shown: Vec<&str> = unused.iter().take(3).map(String::as_str).collect();
    vec![format!(
        "the VAE {} has {} tensor(s) a VAE does not use (e.g. {}); they were left out",
        file.name,
        unused.len(),
        shown.join(", ")
    )]
}

impl Model {
    /// Puts `parts` in as the model's VAE; returns the VAE that was in it.
    pub fn replace_vae(&mut self, parts: VaeParts) -> VaeParts {
        VaeParts {
            vae: std::mem::replace(&mut self.vae, parts.vae),
            config: std::mem::replace(&mut self.vae_config, parts.config),
            precision: std::mem::replace(&mut self.vae_precision, parts.precision),
            f32: std::mem::replace(&mut self.vae_f32, parts.f32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_read_back_what_they_write() {
        for choice in [
            VaeChoice::Automatic,
            VaeChoice::ModelsOwn,
            VaeChoice::File("/m/VAE/sdxl_vae.safetensors".into()),
        ] {
            assert_eq!(VaeChoice::parse(&choice.name()), choice);
        }
        assert_eq!(VaeChoice::parse("Automatic"), VaeChoice::Automatic);
        assert_eq!(VaeChoice::parse(" None "), VaeChoice::ModelsOwn);
    }

    #[test]
    fn automatic_finds_a_vae_named_after_the_checkpoint_beside_it() {
        let dir = std::env::temp_dir().join(format!("ember-vae-beside-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("folder_model")).unwrap();
        let model = dir.join("dream.safetensors");
        assert_eq!(
            VaeChoice::Automatic.file_for(&model),
            None,
            "none beside it"
        );
        std::fs::write(dir.join("dream.vae.safetensors"), b"x").unwrap();
        std::fs::write(dir.join("dream.vae.pt"), b"x").unwrap();
        std::fs::write(dir.join("folder_model.vae.ckpt"), b"x").unwrap();
        // A1111's order: .pt, .ckpt, then .safetensors.
        assert_eq!(beside_checkpoint(&model), Some(dir.join("dream.vae.pt")));
        assert_eq!(
            beside_checkpoint(&dir.join("folder_model")),
            Some(dir.join("folder_model.vae.ckpt"))
        );
        assert_eq!(VaeChoice::ModelsOwn.file_for(&model), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
