//! Where add-on files (embeddings, LoRAs, upscalers, preview decoders) sit relative to a model, by the conventions of
//! A1111 (`models/Stable-diffusion/x.safetensors` beside `embeddings/`, `models/Lora/`) and
//! ComfyUI (`models/checkpoints/` beside `models/embeddings/`, `models/loras/`).

use std::path::{Path, PathBuf};

/// Textual-inversion folder names.
pub const EMBEDDINGS: &[&str] = &["embeddings"];

/// LoRA folder names.
pub const LORAS: &[&str] = &["Lora", "loras", "LyCORIS"];

/// Upscaler model folder names (A1111's `ESRGAN/`, `RealESRGAN/`; ComfyUI's `upscale_models/`).
pub const UPSCALERS: &[&str] = &["ESRGAN", "RealESRGAN", "upscale_models"];

/// VAE folder names (A1111's `VAE`, ComfyUI's `vae`).
pub const VAES: &[&str] = &["VAE", "vae"];

/// TAESD preview decoder folder names (A1111's `VAE-taesd`, older `VAE-approx`; ComfyUI's
/// `vae_approx`).
pub const PREVIEW_DECODERS: &[&str] = &["VAE-taesd", "vae_approx", "VAE-approx"];

/// The folders named `names` beside `model` and one or two levels up; only those that exist.
pub fn near_model(model: &Path, names: &[&str]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut folder = model.parent();
    for _ in 0..3 {
        let Some(f) = folder else { break };
        for name in names {
            let candidate = f.join(name);
            if candidate.is_dir() && !dirs.contains(&candidate) {
                dirs.push(candidate);
            }
        }
        folder = f.parent();
    }
    dirs
}

/// The folders named `names` in a models folder, then those near the loaded `model`
/// (the app's search order); only those that exist.
pub fn for_app(models_dir: Option<&Path>, model: Option<&Path>, names: &[&str]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = models_dir
        .iter()
        .flat_map(|d| names.iter().map(|n| d.join(n)))
        .filter(|d| d.is_dir())
        .collect();
    for dir in model.map(|m| near_model(m, names)).unwrap_or_default() {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}
