//! `ember generate | info | bench | upscale | download`: argument parsing and error reporting.
//!
//! Every failure is one line on stderr starting with `error:` and a non-zero exit status;
//! nothing is written when a command fails.

mod args;
mod bench;
mod bench_generate;
mod canvas;
mod control;
mod download;
pub use download::progress_line as download_progress_line;
mod generate;
mod hires;
mod info;
mod upscale;
mod write;

pub use args::{BenchArgs, GenerateArgs};

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Ember: Stable Diffusion image generation. Without a command, opens the desktop app.
#[derive(Parser, Debug)]
#[command(name = "ember", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Files to open in the app: checkpoints load, images restore their settings.
    files: Vec<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate images from a prompt (and optionally an init image and mask).
    Generate(Box<GenerateArgs>),
    /// Describe a checkpoint (family, layout, dtypes) or an image's generation parameters.
    Info {
        /// A checkpoint file, a diffusers folder or an image.
        file: PathBuf,
    },
    /// Time a network of the real architecture with random weights (no file needed).
    Bench(BenchArgs),
    /// Upscale an image with an ESRGAN / Real-ESRGAN model (A1111's Extras tab).
    Upscale(upscale::UpscaleArgs),
    /// Download a model (a URL, or a well-known checkpoint by name), resumable and checked.
    Download(download::DownloadArgs),
    /// List the devices `--device` and `EMBER_DEVICE` can name (`wgpu:N`, `cuda:N`).
    Devices,
}

/// Runs `ember` with the given arguments; returns the process exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let bench_logs = configure_gpu_runtime(cli.command.as_ref());
    let result = match cli.command {
        None => {
            // A typo of a command must not open a window complaining about a file.
            if let Some(missing) = cli.files.iter().find(|f| !f.exists()) {
                eprintln!(
                    "error: {} is neither a file nor a command (commands: generate, info, \
                     bench, upscale, download; `ember --help`)",
                    missing.display()
                );
                return ExitCode::from(2);
            }
            // Absolute, so a model remembered as the last one loads from anywhere.
            let files = cli
                .files
                .iter()
                .map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.clone()))
                .collect();
            return crate::gui::run(files);
        }
        Some(Command::Generate(args)) => generate::run(&args),
        Some(Command::Info { file }) => info::run(&file),
        Some(Command::Bench(args)) => bench::run(&args, bench_logs.as_ref()),
        Some(Command::Upscale(args)) => upscale::run(&args),
        Some(Command::Download(args)) => download::run(&args),
        Some(Command::Devices) => {
            list_devices();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Before any GPU device opens: Burn's autotune results and compiled kernels are kept in
/// Ember's cache folder across runs; a benchmark also logs the decisions it makes (to say
/// which attention kernel ran) and the kernels it compiles to the returned files, and with
/// `--retune` tunes everything again.
fn configure_gpu_runtime(command: Option<&Command>) -> Option<bench::BenchLogs> {
    let bench = match command {
        Some(Command::Bench(args)) => Some(args),
        _ => None,
    };
    let log = |what: &str| {
        let name = format!("ember-bench-{what}-{}.log", std::process::id());
        std::env::temp_dir().join(name)
    };
    let settings = inference::device::GpuRuntime {
        cache_dir: inference::hashing::cache_dir().map(|dir| dir.join("gpu")),
        drivers: may_open_a_gpu(command).then(inference::device::gpu_drivers_fingerprint),
        tuning_log: bench.map(|_| log("tuning")),
        retune: bench.is_some_and(|args| args.retune),
        compile_log: bench.map(|_| log("compiled")),
    };
    inference::device::configure_gpu_runtime(&settings);
    Some(bench::BenchLogs {
        tuning: settings.tuning_log?,
        compiled: settings.compile_log?,
    })
}

/// Whether `command` may open a GPU device (the window does): only then are the adapters
/// listed to name their drivers, so that a command that never touches a GPU never waits on
/// (or trips over) a driver.
fn may_open_a_gpu(command: Option<&Command>) -> bool {
    let not_cpu = |device: &str| !device.trim().eq_ignore_ascii_case("cpu");
    match command {
        None => true,
        Some(Command::Generate(args)) => args.device.as_deref().is_none_or(not_cpu),
        Some(Command::Bench(args)) => not_cpu(&args.device),
        Some(Command::Upscale(args)) => not_cpu(&args.device),
        Some(Command::Info { .. } | Command::Download(_) | Command::Devices) => false,
    }
}

/// `ember devices`: each device `--device` can name, and what it is.
fn list_devices() {
    let rows = inference::device::list_devices();
    let width = rows.iter().map(|row| row.name.len()).max().unwrap_or(0);
    for row in rows {
        println!("{:width$}  {}", row.name, row.description);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(args: &[&str]) -> Option<Command> {
        Cli::try_parse_from(args).expect("valid arguments").command
    }

    #[test]
    fn only_commands_that_may_open_a_gpu_list_its_drivers() {
        assert!(may_open_a_gpu(None), "the window");
        assert!(may_open_a_gpu(
            command(&["ember", "bench", "unet", "--device", "wgpu"]).as_ref()
        ));
        assert!(
            !may_open_a_gpu(command(&["ember", "bench", "unet"]).as_ref()),
            "bench's default is the CPU"
        );
        assert!(!may_open_a_gpu(
            command(&["ember", "bench", "unet", "--device", "CPU"]).as_ref()
        ));
        assert!(!may_open_a_gpu(command(&["ember", "devices"]).as_ref()));
        assert!(!may_open_a_gpu(
            command(&["ember", "info", "model.safetensors"]).as_ref()
        ));
    }
}
