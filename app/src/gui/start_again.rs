//! Starting Ember again in a new process: after the window's GPU device was lost
//! ([`super::window_gpu_lost`]), or to run the engine on the device chosen in the Device menu
//! ([`super::device_choice`]). The new process opens no files: the last model loads from the
//! settings, which are saved first.

use super::window_gpu_lost::{DESTROY_WHEN, LOSSES};

/// Why Ember starts again, which decides the new process's environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The window's device was lost, the `losses`th time in a row; after the second the engine
    /// runs on the CPU (see [`super::window_gpu_lost::after_loss`]).
    GpuLost { losses: u32, engine_on_cpu: bool },
    /// The Device menu's choice is to take effect.
    DeviceChosen,
}

/// Starts Ember again (without waiting for it).
pub fn start_again(reason: Reason) -> std::io::Result<()> {
    let mut command = std::process::Command::new(std::env::current_exe()?);
    // The device the new process opens must not be destroyed on purpose again.
    command.env_remove(DESTROY_WHEN);
    match reason {
        Reason::GpuLost {
            losses,
            engine_on_cpu,
        } => {
            command.env(LOSSES, losses.to_string());
            if engine_on_cpu {
                command.env("EMBER_DEVICE", "cpu");
            }
        }
        // The menu's choice decides in the new process (EMBER_DEVICE would decide over it),
        // and losses of the old device say nothing about the new one.
        Reason::DeviceChosen => {
            command.env_remove("EMBER_DEVICE").env_remove(LOSSES);
        }
    }
    command.spawn().map(drop)
}
