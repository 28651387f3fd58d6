//! `ember` end to end: the binary reproduces the reference runs from both layouts, and every
//! kind of bad input fails with a one-line error, a non-zero exit and no output file.
//!
//! Built as a test of the `ember` package (see app/Cargo.toml) so `CARGO_BIN_EXE_ember`
//! points at the real binary.

mod bad_input;
mod canvas;
mod controlnet;
#[cfg(target_os = "linux")]
mod cuda;
mod device;
mod devices;
mod download;
mod dynamic_prompts;
mod families;
mod hires;
mod info;
mod kill;
mod lora;
mod packaging;
mod plot;
mod prompts;
mod reproduce;
mod seamless;
mod seeds;
mod styles;
mod vae;
mod vae_tiling;
#[cfg(target_os = "linux")]
mod window;

use std::path::Path;
use std::process::{Command, Output};

/// Runs `ember` with `args` in `dir`.
pub fn ember(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .current_dir(dir)
        .env("EMBER_CACHE_DIR", dir.join("cache"))
        // The goldens are f32 on the CPU; `auto` would pick a GPU (and f16) where there is one.
        .env("EMBER_DEVICE", "cpu")
        .output()
        .expect("the ember binary runs")
}

/// An image's A1111 `parameters`, read back (panics where it has none).
pub fn parameters(path: &Path) -> inference::metadata::Parameters {
    let text = inference::imaging::read_png_text(path).unwrap();
    let (_, value) = (text.iter().find(|(k, _)| k == "parameters"))
        .unwrap_or_else(|| panic!("{} has no parameters", path.display()));
    inference::metadata::Parameters::parse(value)
}

/// The path as a string argument.
pub fn arg(path: &Path) -> String {
    path.to_str().expect("UTF-8 path").to_string()
}
