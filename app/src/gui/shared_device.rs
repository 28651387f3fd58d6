//! Picks the engine's device: the window's own wgpu device (feature `wgpu`) or the CPU.
//!
//! With the `wgpu` feature, on a Vulkan adapter the window is handed the device cubecl opens for
//! Burn's SPIR-V kernels; elsewhere eframe is asked for a device with all of the adapter's
//! features and limits (egui alone asks for the defaults, too little for Burn's kernels). Burn
//! is registered on that same device and queue. The Device menu's saved choice, or
//! `EMBER_DEVICE` over it, names another device as `--device` does (`cpu`, `gpu`/`wgpu`, or
//! apart from the window's device `wgpu:N`, a GPU `ember devices` lists, and `cuda[:N]`,
//! Burn's CUDA backend in a `--features cuda` build); one that cannot open leaves the choice
//! to `auto`, with a notice.
//! A window that cannot open on the device it is handed (it cannot present with it, as a
//! compute GPU beside the one driving the display) is opened again on one eframe picks, and
//! the engine then opens its GPU by itself, as `ember generate --device auto` does.

use inference::device::{DeviceKind, OpenedDevice, Precision};
use inference::worker::BurnEngine;

/// Adjusts the window options before the window (and its GPU device) is created; returns
/// whether the window is handed the device opened for the engine's kernels.
pub fn prepare(options: &mut eframe::NativeOptions) -> bool {
    #[cfg(feature = "wgpu")]
    {
        // Only an engine on the window's wgpu device runs on the device the window is handed.
        let shared = matches!(
            wanted_device().map(|w| w.kind),
            Ok(DeviceKind::Auto | DeviceKind::Wgpu)
        );
        if shared && hand_over_vulkan_device(options) {
            return true;
        }
        request_full_device(options);
    }
    #[cfg(not(feature = "wgpu"))]
    let _ = options;
    false
}

/// [`prepare`] for a window that could not open on the device it was handed: it makes its
/// own, as eframe picks it (one that can present to the window).
pub fn prepare_without_handing_over(options: &mut eframe::NativeOptions) {
    #[cfg(feature = "wgpu")]
    request_full_device(options);
    #[cfg(not(feature = "wgpu"))]
    let _ = options;
}

/// Why the window could not open on the device opened for the engine's kernels, once it
/// failed to: the engine then opens a GPU device of its own ([`engine`]).
static WINDOW_REFUSED_THE_DEVICE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records that the window could not open on the device it was handed, and why.
pub fn window_refused_the_device(why: String) {
    let _ = WINDOW_REFUSED_THE_DEVICE.set(why);
}

/// Where the engine runs, for the status line (`short`) and the Help menu (`detail`).
#[derive(Clone, Debug, Default)]
pub struct DeviceNote {
    pub short: String,
    pub detail: String,
    /// Why the device asked for is not the one in use, for a notice.
    pub problem: Option<String>,
}

impl DeviceNote {
    /// Where the engine runs once its GPU was lost mid-session (`error` says how): the CPU.
    pub fn after_gpu_lost(error: &str) -> Self {
        Self {
            short: "Running on the CPU (the GPU stopped working)".into(),
            detail: format!("Running on the CPU: {error}."),
            problem: None,
        }
    }
}

/// How to get GPU support, for the Help menu when the engine runs on the CPU.
const GPU_HELP: &str = "Ember uses a GPU through Vulkan, Metal or DirectX 12 when the \
    machine has one and Ember was built with the `wgpu` feature (the default).";

/// The Device menu's saved choice ([`use_setting`]), read before the window opens.
static DEVICE_SETTING: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Takes the saved Device menu choice (`settings.json`'s `device`) for this process; call
/// before [`prepare`]. `EMBER_DEVICE` decides over it.
pub fn use_setting(name: String) {
    let _ = DEVICE_SETTING.set(name);
}

/// The device the engine is asked for, and who asked, in words for the Help menu
/// ("EMBER_DEVICE=cpu", "the Device menu's choice, cpu"); `None`: nobody, so `auto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub kind: DeviceKind,
    pub by: Option<String>,
}

/// `EMBER_DEVICE` as `--device` reads it, else the Device menu's choice, else `auto`. A saved
/// name this version does not know (a newer version's) reads as `auto`, as other settings
/// fall back; a wrong `EMBER_DEVICE` is an error (the engine then runs on the CPU).
pub fn wanted_device() -> Result<Wanted, String> {
    if let Ok(name) = std::env::var("EMBER_DEVICE")
        && !name.trim().is_empty()
    {
        let kind = DeviceKind::parse(&name).map_err(|e| format!("EMBER_DEVICE={name}: {e}"))?;
        return Ok(Wanted {
            kind,
            by: Some(format!("EMBER_DEVICE={name}")),
        });
    }
    let setting = DEVICE_SETTING.get().map(|name| DeviceKind::parse(name));
    Ok(match setting {
        Some(Ok(kind)) if kind != DeviceKind::Auto => Wanted {
            kind,
            by: Some(format!("the Device menu's choice, {kind}")),
        },
        _ => Wanted {
            kind: DeviceKind::Auto,
            by: None,
        },
    })
}

/// The engine for this window, and where it runs. A GPU that was asked for by name and
/// cannot open leaves the choice to `auto`, and the note's `problem` says why.
pub fn engine(cc: &eframe::CreationContext<'_>) -> (BurnEngine, DeviceNote) {
    let wanted = match wanted_device() {
        Err(why) => return cpu_engine(&why),
        Ok(wanted) => wanted,
    };
    let by = wanted.by.as_deref().unwrap_or("");
    let mut problem = None;
    match wanted.kind {
        DeviceKind::Cpu => return cpu_engine(by),
        kind @ (DeviceKind::Cuda(_) | DeviceKind::WgpuAdapter(_)) => match engine_apart(kind, by) {
            Ok(engine) => return engine,
            Err(why) => {
                let mut asked = by.to_string();
                if let Some(first) = asked.get_mut(..1) {
                    first.make_ascii_uppercase();
                }
                problem = Some(format!(
                    "{asked} could not open: {why}. Ember chose a device itself; the Device \
                     menu changes it."
                ));
            }
        },
        DeviceKind::Auto | DeviceKind::Wgpu => {}
    }
    let force = wanted.kind == DeviceKind::Wgpu;
    let (engine, mut note) = auto_engine(cc, force);
    if let Some(problem) = problem {
        note.detail = format!("{problem}\n{}", note.detail);
        note.problem = Some(problem);
    }
    (engine, note)
}

/// The engine on the window's device when it is a real GPU (any adapter if `force`), else on
/// the CPU.
fn auto_engine(cc: &eframe::CreationContext<'_>, force: bool) -> (BurnEngine, DeviceNote) {
    #[cfg(feature = "wgpu")]
    {
        if let Some(why) = WINDOW_REFUSED_THE_DEVICE.get() {
            return gpu::own_engine(why, force).unwrap_or_else(|why| cpu_engine(&why));
        }
        gpu::shared_engine(cc, force).unwrap_or_else(|why| cpu_engine(&why))
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = (cc, force);
        cpu_engine("this build has no GPU support (build with `--features wgpu`)")
    }
}

/// The engine on a GPU apart from the window's device, as `by` names it (`kind`): Burn's
/// CUDA backend (a build with `--features cuda`), or a numbered wgpu adapter. Previews reach
/// the window as pixels, as they do from the CPU.
fn engine_apart(kind: DeviceKind, by: &str) -> Result<(BurnEngine, DeviceNote), String> {
    let opened = kind.open().map_err(|e| e.to_string())?;
    let (engine, precision, vae) = engine_on(&opened)?;
    // The description is the GPU's name, then its details in parentheses.
    let gpu = (opened.description.rsplit_once(" (")).map_or("the GPU", |(gpu, _)| gpu);
    let through = match kind {
        DeviceKind::Cuda(_) => "Burn's CUDA backend",
        _ => "wgpu",
    };
    let note = DeviceNote {
        short: format!("Running on {gpu} ({kind}, {precision})"),
        detail: format!(
            "Running on {} through {through} ({by}), in {precision}{vae}; the window draws \
             on a device of its own.",
            opened.description
        ),
        problem: None,
    };
    Ok((engine, note))
}

/// The engine on `opened` in `--precision auto`, its precision, and what that means for the
/// VAE in words.
fn engine_on(opened: &OpenedDevice) -> Result<(BurnEngine, Precision, &'static str), String> {
    let (precision, vae_upcast) =
        inference::device::choose_precision("auto", opened).map_err(|e| e.to_string())?;
    let vae = if vae_upcast {
        ", the VAE in f32 unless it is f16-safe"
    } else {
        ""
    };
    let engine = BurnEngine::new(opened.device.clone(), precision).with_vae_upcast(vae_upcast);
    Ok((engine, precision, vae))
}

fn cpu_engine(why: &str) -> (BurnEngine, DeviceNote) {
    let device = DeviceKind::Cpu
        .device()
        .expect("the CPU backend is always built in");
    let note = DeviceNote {
        short: "Running on the CPU".into(),
        detail: format!("Running on the CPU: {why}.\n{GPU_HELP}"),
        problem: None,
    };
    (BurnEngine::new(device, Precision::F32), note)
}

/// Why the engine must not run on the window's device, when cubecl could not open the Vulkan
/// device its SPIR-V kernels need (the window then made an ordinary one of its own).
#[cfg(feature = "wgpu")]
static WINDOW_DEVICE_UNFIT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Gives the window the Vulkan device cubecl opens for Burn's SPIR-V kernels (see
/// `inference::window_gpu`); false where the window should make its own device.
#[cfg(feature = "wgpu")]
fn hand_over_vulkan_device(options: &mut eframe::NativeOptions) -> bool {
    use eframe::egui_wgpu::{WgpuSetup, WgpuSetupExisting};
    let WgpuSetup::CreateNew(create) = &options.wgpu_options.wgpu_setup else {
        return false;
    };
    match inference::window_gpu::open_for_window(create.power_preference) {
        Ok(Some(shared)) => {
            options.wgpu_options.wgpu_setup = WgpuSetup::Existing(WgpuSetupExisting {
                instance: shared.instance,
                adapter: shared.adapter,
                device: shared.device,
                queue: shared.queue,
            });
            true
        }
        Ok(None) => false,
        Err(why) => {
            let _ = WINDOW_DEVICE_UNFIT.set(why);
            false
        }
    }
}

#[cfg(feature = "wgpu")]
fn request_full_device(options: &mut eframe::NativeOptions) {
    use eframe::egui_wgpu::WgpuSetup;
    use std::sync::Arc;
    if let WgpuSetup::CreateNew(create) = &mut options.wgpu_options.wgpu_setup {
        create.device_descriptor = Arc::new(|adapter| {
            inference::device::full_device_descriptor(adapter, "Ember window and engine device")
        });
    }
}

#[cfg(feature = "wgpu")]
mod gpu {
    use super::engine_on;
    use eframe::egui_wgpu::wgpu;
    use inference::device::{DeviceKind, OpenedDevice, SharedWgpu, shared_wgpu_device};
    use inference::worker::BurnEngine;

    /// Burn on the window's device when it is a real GPU (or `force`), else the reason why not.
    pub fn shared_engine(
        cc: &eframe::CreationContext<'_>,
        force: bool,
    ) -> Result<(BurnEngine, super::DeviceNote), String> {
        let state = cc
            .wgpu_render_state
            .as_ref()
            .ok_or("the window has no wgpu device")?;
        if let Some(why) = super::WINDOW_DEVICE_UNFIT.get() {
            return Err(why.clone());
        }
        let info = state.adapter.get_info();
        if info.backend == wgpu::Backend::Gl {
            return Err(format!("{} is only available through OpenGL", info.name));
        }
        let real_gpu = matches!(
            info.device_type,
            wgpu::DeviceType::DiscreteGpu
                | wgpu::DeviceType::IntegratedGpu
                | wgpu::DeviceType::VirtualGpu
        );
        if !real_gpu && !force {
            return Err(format!(
                "the window's adapter ({}) is a software renderer; set EMBER_DEVICE=gpu to use it anyway",
                info.name
            ));
        }
        let device = shared_wgpu_device(SharedWgpu {
            instance: state.instance.clone(),
            adapter: state.adapter.clone(),
            device: state.device.clone(),
            queue: state.queue.clone(),
        })
        .map_err(|e| e.to_string())?;
        let opened = OpenedDevice {
            device: device.clone(),
            gpu: true,
            description: info.name.clone(),
        };
        let (engine, precision, vae) = engine_on(&opened)?;
        let memory = match inference::memory::gpu_memory_bytes(&device) {
            Some(bytes) => format!(", {} of memory", inference::memory::human_bytes(bytes)),
            None => String::new(),
        };
        let kernels = inference::device::kernel_language(&device).unwrap_or("no");
        let note = super::DeviceNote {
            short: format!("Running on {} ({precision})", info.name),
            detail: format!(
                "Running on {} ({:?}{memory}, {kernels} kernels), sharing the window's GPU \
                 device, in {precision}{vae}.",
                info.name, info.backend
            ),
            problem: None,
        };
        Ok((engine, note))
    }

    /// Burn on a GPU device of its own, as `ember generate --device auto` opens it (`wgpu`
    /// if `force`: software renderers too), when the window could not present with the one
    /// opened for it (`why`); else why not.
    pub fn own_engine(why: &str, force: bool) -> Result<(BurnEngine, super::DeviceNote), String> {
        let kind = if force {
            DeviceKind::Wgpu
        } else {
            DeviceKind::Auto
        };
        let opened = kind.open().map_err(|e| e.to_string())?;
        if !opened.gpu {
            return Err(format!(
                "the window could not open on the GPU device opened for Ember's kernels \
                 ({why}), and {}",
                opened.description
            ));
        }
        let (engine, precision, vae) = engine_on(&opened)?;
        // The description is the adapter's name, then its details in parentheses.
        let name = (opened.description.rsplit_once(" (")).map_or("the GPU", |(name, _)| name);
        let note = super::DeviceNote {
            short: format!("Running on {name} ({precision})"),
            detail: format!(
                "Running on {}, on a device of its own, in {precision}{vae}: the window could \
                 not open on it ({why}) and draws on a device it chose itself.",
                opened.description
            ),
            problem: None,
        };
        Ok((engine, note))
    }
}
