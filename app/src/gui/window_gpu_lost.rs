//! The window's own GPU device lost (a driver reset, a GPU taken away): egui can never draw
//! on it again (its renderer panics on the next frame), so Ember saves its settings, stops its
//! worker and starts again in a new process, which opens a new device and says what happened.
//!
//! The worker's own recovery (`inference::worker`'s `GpuLost`: the engine goes on on the CPU)
//! covers an engine on a device the window does not draw with (CUDA); when the engine shares
//! the window's device, this restart is what keeps the app usable.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use eframe::egui_wgpu::{RenderState, wgpu};

/// How many times in a row the window's device was lost, each soon after the last start;
/// set on the process started again.
pub(super) const LOSSES: &str = "EMBER_WINDOW_GPU_LOSSES";
/// A file whose creation destroys the window's device, as a lost GPU: the only way to see
/// this path on a machine whose GPU never fails (`packaging/screenshot.sh` under Xvfb).
pub(super) const DESTROY_WHEN: &str = "EMBER_DEBUG_DESTROY_WINDOW_GPU_WHEN";
/// A loss this long after the start is counted afresh: the GPU had worked meanwhile.
const SOON: Duration = Duration::from_secs(10 * 60);

/// Watches the window's wgpu device, once a frame, before egui draws on it.
pub struct WindowGpuWatch {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// Four bytes the probe writes to.
    probe: wgpu::Buffer,
    destroy_when: Option<PathBuf>,
    started: Instant,
}

impl WindowGpuWatch {
    pub fn new(state: &RenderState) -> Self {
        let probe = state.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("Ember device-lost probe"),
            size: 4,
            usage: wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Self {
            device: state.device.clone(),
            queue: state.queue.clone(),
            probe,
            destroy_when: std::env::var_os(DESTROY_WHEN).map(PathBuf::from),
            started: Instant::now(),
        }
    }

    /// Whether the device is lost. wgpu refuses a staging buffer on a lost device (the
    /// call egui's renderer panics on) and reports it nowhere else: its device-lost errors go
    /// only to the lost callback, which Burn's runtime holds when the engine shares the device.
    /// A device too short of memory for four bytes counts too: egui would fail the same way.
    pub fn is_lost(&mut self) -> bool {
        if self.destroy_when.as_ref().is_some_and(|file| file.exists()) {
            self.destroy_when = None;
            self.device.destroy();
        }
        let four = NonZeroU64::new(4).expect("4 is not zero");
        self.queue.write_buffer_with(&self.probe, 0, four).is_none()
    }

    /// How long this process's window has run.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}

/// What Ember does once the window's device is lost.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterLoss {
    /// Start again; `engine_on_cpu` after a second loss soon after the last start, as Ember's
    /// own kernels may be what the driver stops (Windows resets a GPU busy for 2 s).
    Restart { losses: u32, engine_on_cpu: bool },
    /// The third loss soon after a start: Ember stops, saying why.
    GiveUp,
}

/// What to do after a loss `uptime` after this process started, given the losses that led
/// to it ([`LOSSES`] as this process was started).
pub fn after_loss(earlier_losses: u32, uptime: Duration) -> AfterLoss {
    let losses = if uptime < SOON { earlier_losses + 1 } else { 1 };
    match losses {
        1 => AfterLoss::Restart {
            losses,
            engine_on_cpu: false,
        },
        2 => AfterLoss::Restart {
            losses,
            engine_on_cpu: true,
        },
        _ => AfterLoss::GiveUp,
    }
}

/// The losses that led to this process ([`LOSSES`]); 0 for a normal start.
pub fn earlier_losses() -> u32 {
    std::env::var(LOSSES)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The notice a process started again after `losses` shows, none for a normal start.
#[must_use]
pub fn notice_after_restart(losses: u32) -> Option<String> {
    if losses == 0 {
        return None;
    }
    // As `after_loss` chose for this process.
    let engine = if losses >= 2 {
        " It happened twice, so images are now made on the CPU (slower); \
         restart Ember to use the GPU again."
    } else {
        ""
    };
    Some(format!(
        "The GPU stopped working (a driver reset or the GPU taken away), so Ember started \
         again on a new device. Saved images, settings and the queue are kept; an image being \
         made then starts over.{engine}"
    ))
}

/// Why Ember stopped instead of starting again, for the terminal.
pub fn gave_up_message(output: &std::path::Path) -> String {
    format!(
        "error: the GPU stopped working three times, each soon after Ember started again; \
         Ember stopped. Saved images are in {}. Check the GPU's driver, or start Ember with \
         EMBER_DEVICE=cpu.",
        output.display()
    )
}

#[cfg(test)]
mod tests {
    use super::{AfterLoss, SOON, after_loss, notice_after_restart};
    use std::time::Duration;

    #[test]
    fn a_loss_restarts_then_moves_the_engine_off_the_gpu_then_gives_up() {
        let soon = Duration::from_secs(30);
        let restart = |losses, engine_on_cpu| AfterLoss::Restart {
            losses,
            engine_on_cpu,
        };
        assert_eq!(after_loss(0, soon), restart(1, false));
        assert_eq!(after_loss(1, soon), restart(2, true));
        assert_eq!(after_loss(2, soon), AfterLoss::GiveUp);
        // A GPU that worked for a while starts the count again.
        let later = SOON + Duration::from_secs(1);
        assert_eq!(after_loss(2, later), restart(1, false));
    }

    #[test]
    fn only_a_restarted_ember_says_why_and_where_it_now_runs() {
        assert_eq!(notice_after_restart(0), None);
        let first = notice_after_restart(1).unwrap();
        assert!(first.contains("started again on a new device"), "{first}");
        assert!(!first.contains("CPU"), "{first}");
        let second = notice_after_restart(2).unwrap();
        assert!(second.contains("made on the CPU"), "{second}");
    }
}
