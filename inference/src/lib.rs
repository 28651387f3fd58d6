//! The Ember engine: Stable Diffusion models, samplers, pipelines and weight loading.
//!
//! This crate never depends on a GUI toolkit. The app talks to it through plain-data types
//! (see ARCHITECTURE.md).

pub mod add_on_folders;
pub mod api;
pub mod bench;
pub mod canvas;
pub mod control;
#[cfg(feature = "cuda")]
mod cuda_device;
pub mod device;
pub mod error;
pub mod external_vae;
pub mod family;
mod gpu_failure;
pub mod hashing;
pub mod imaging;
pub mod lora;
pub mod memory;
pub mod metadata;
pub mod model;
pub mod models;
pub mod path_json;
pub mod pipeline;
pub mod preview;
pub mod rng;
pub mod sampling;
pub mod schedule;
pub mod text;
pub mod upscale;
pub mod weight_layout;
pub mod weights;
#[cfg(feature = "wgpu")]
mod wgpu_adapters;
#[cfg(feature = "wgpu")]
pub mod window_gpu;
pub mod worker;

pub use error::{Error, Result};
