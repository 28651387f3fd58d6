//! Weight loading: files, layouts (diffusers folder, single-file checkpoint), key maps,
//! model-family detection and strict application to the Burn modules.

pub mod apply;
mod configs;
pub mod controlnet;
pub mod detect;
mod file_names;
mod fit;
mod folder;
pub mod inspect;
pub mod keymap;
pub mod loader;
pub mod pickle_guard;
pub mod plan;
pub mod prediction;
pub mod random;
pub mod restore;
mod safetensors_file;
mod single_file;
pub mod source;
pub mod vae_file;

pub use apply::{ComponentReport, NamedTensor, apply_strict};
pub use loader::{LoadOptions, load};
pub use restore::WeightSources;
pub use source::{FileFormat, TensorFile};
