//! Burn modules for the Stable Diffusion components. Field names follow the diffusers /
//! transformers state-dict keys, so a diffusers file loads (almost) by identity.
//!
//! **Invariant:** no I/O and no randomness here; weights come from [`crate::weights`].

pub mod clip;
pub(crate) mod config_json;
pub mod controlnet;
pub mod layers;
pub mod transformer;
pub mod unet;
pub mod vae;
pub mod vae_tiles;
