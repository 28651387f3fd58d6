//! Memory: what this process holds (its peak resident set, for `ember bench` and
//! `ember generate --verbose`), what is free, and what a generation will need, so a request
//! that cannot fit is refused before a long load rather than failing (or swapping) later.

use std::sync::Mutex;

use burn::tensor::Device;

use crate::api::VaeTiling;
use crate::error::{Error, Result};
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;
use crate::models::vae_tiles::VaeTiles;

/// The process's peak resident set size in bytes (`VmHWM` in `/proc/self/status`), where the
/// platform reports it (Linux); `None` elsewhere.
pub fn peak_resident_bytes() -> Option<u64> {
    status_field("VmHWM:")
}

/// The process's current resident set size in bytes (`VmRSS`).
pub fn resident_bytes() -> Option<u64> {
    status_field("VmRSS:")
}

fn status_field(name: &str) -> Option<u64> {
    kib_field(&std::fs::read_to_string("/proc/self/status").ok()?, name)
}

/// A `Name:   1234 kB` line of a `/proc` file, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Memory free for a new job: `EMBER_MEMORY_LIMIT` (bytes, or with a `K`/`M`/`G` suffix)
/// when set, else the kernel's `MemAvailable` (Linux); `None` when neither is known.
pub fn available_bytes() -> Option<u64> {
    if let Ok(limit) = std::env::var("EMBER_MEMORY_LIMIT") {
        return parse_bytes(&limit);
    }
    kib_field(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable:",
    )
}

/// Memory free for a new job on `device`. On the CPU: [`available_bytes`]. On a GPU: its
/// own memory ([`EMBER_GPU_MEMORY`](gpu_memory_bytes), else what the driver reported when
/// the device opened) less what Burn holds there now (the loaded weights); `None` where
/// the driver says nothing (Metal, DirectX 12).
pub fn available_on(device: &Device) -> Option<u64> {
    if *device == Device::flex() {
        return available_bytes();
    }
    let capacity = gpu_memory_bytes(device)?;
    let in_use = device.memory_pool_usage().map_or(0, |u| u.bytes_in_use);
    Some(capacity.saturating_sub(in_use))
}

/// A GPU's memory: `EMBER_GPU_MEMORY` (bytes, or with a `K`/`M`/`G` suffix; to share a card,
/// or to try a small card's budget on a large one) when set, else what
/// [`set_gpu_memory_bytes`] recorded for `device`.
pub fn gpu_memory_bytes(device: &Device) -> Option<u64> {
    if let Ok(limit) = std::env::var("EMBER_GPU_MEMORY") {
        return parse_bytes(&limit);
    }
    let known = GPU_MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    known
        .iter()
        .find(|(d, _)| d == device)
        .map(|(_, bytes)| *bytes)
}

/// Records how much memory the driver says `device` has (called when a GPU device opens).
pub fn set_gpu_memory_bytes(device: &Device, bytes: u64) {
    let mut known = GPU_MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    known.retain(|(d, _)| d != device);
    known.push((device.clone(), bytes));
}

/// The GPU devices this process opened, with their memory (one or two in practice).
static GPU_MEMORY: Mutex<Vec<(Device, u64)>> = Mutex::new(Vec::new());

/// `123`, `512M`, `8G`, `1.5G` as bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
    let value: f64 = number.trim().parse().ok()?;
    let scale = match unit {
        'B' => 1.0,
        'K' => 1024.0,
        'M' => 1024.0 * 1024.0,
        'G' => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    (value >= 0.0).then_some((value * scale) as u64)
}

/// What a generation needs, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The networks' weights at the chosen precision.
    pub weights: u64,
    /// Activations, latents and scratch space at their peak.
    pub working: u64,
}

impl Estimate {
    pub fn total(&self) -> u64 {
        self.weights + self.working
    }
}

/// What one generation of `width` x `height` with `rows` UNet rows (batch, doubled by
/// classifier-free guidance) needs on a model of `parameters` weights of `weight_bytes`
/// each. `materialised_attention` counts full attention matrices (backends without a
/// flash-attention path); Ember's CPU kernel works in tiles and needs none.
///
/// The working memory is the UNet's skip connections plus the largest level's transient
/// tensors (the feed-forward is 8 channels wide per channel), or the VAE decoder at full
/// resolution (one image at a time; the smallest tile the plan may choose when
/// `vae_tiling` allows tiles and the whole image would need more), whichever is larger,
/// with a margin, plus 256 MiB of scratch (on wgpu a convolution's im2col band and the VAE
/// attention's slice of scores, at most 128 MiB each): an estimate to refuse the impossible,
/// not an exact count.
pub fn estimate(
    parameters: u64,
    weight_bytes: u64,
    unet: &UNetConfig,
    vae: &VaeConfig,
    (width, height): (u32, u32),
    rows: usize,
    (materialised_attention, vae_tiling): (bool, VaeTiling),
) -> Estimate {
    const F32: u64 = 4;
    let f = vae.factor();
    let (h0, w0) = (height as usize / f, width as usize / f);
    let level_size = |i: usize| unet.block_out_channels[i] * (h0 >> i).max(1) * (w0 >> i).max(1);
    let levels = unet.levels();
    let skips: usize = (0..levels)
        .map(|i| (unet.layers_per_block + 1) * level_size(i))
        .sum();
    let transient = 16 * (0..levels).map(level_size).max().unwrap_or(0);
    let mut unet_bytes = (rows * (skips + transient)) as u64 * F32;
    if materialised_attention {
        let tokens = (h0 * w0) as u64;
        let heads = unet.heads.iter().copied().max().unwrap_or(1) as u64;
        unet_bytes += rows as u64 * heads * tokens * tokens * F32;
    }
    let whole = vae_bytes(vae, (width, height), materialised_attention);
    let vae_bytes = match vae_tiling {
        VaeTiling::Off => whole,
        VaeTiling::On | VaeTiling::Auto => {
            // The plan halves tiles until they fit: count the smallest.
            let side = VaeTiles::smallest(vae)
                .sample
                .min(width.max(height) as usize) as u32;
            whole.min(vae_bytes(vae, (side, side), materialised_attention))
        }
    };
    let working = unet_bytes.max(vae_bytes) * 5 / 4 + 256 * 1024 * 1024;
    Estimate {
        weights: parameters * weight_bytes,
        working,
    }
}

/// The VAE's working memory on a whole `width` x `height` image: the decoder's widest
/// level at full resolution, a handful of activations and a 3x3 convolution's unfolded
/// input (measured: 4.4 GiB peak for a 1024² SD 1.5 decode on the CPU).
pub fn vae_bytes(
    vae: &VaeConfig,
    (width, height): (u32, u32),
    materialised_attention: bool,
) -> u64 {
    const F32: u64 = 4;
    let pixels = u64::from(width) * u64::from(height);
    let mut bytes = 8 * vae.block_out_channels[0] as u64 * pixels * F32;
    if materialised_attention {
        let f = vae.factor() as u64;
        let tokens = pixels / (f * f);
        bytes += tokens * tokens * F32;
    }
    bytes
}

/// Where the memory a job needs would be: the computer's (the CPU device) or a GPU's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryOf {
    Host,
    Gpu,
}

impl MemoryOf {
    pub fn of(device: &Device) -> Self {
        if *device == Device::flex() {
            MemoryOf::Host
        } else {
            MemoryOf::Gpu
        }
    }
}

/// An error when `estimate` does not fit in `available` bytes of `memory`, saying what
/// would help: half precision where the weights are f32, VAE tiles unless the image is
/// seamless (whose VAE runs whole).
pub fn check_fits(
    estimate: Estimate,
    (available, memory): (u64, MemoryOf),
    (half_precision_helps, vae_tiles_help): (bool, bool),
) -> Result<()> {
    if estimate.total() <= available {
        return Ok(());
    }
    let mut hints = Vec::new();
    match (half_precision_helps, memory) {
        (true, MemoryOf::Host) => hints.push("--precision bf16 (halves the weights)"),
        (true, MemoryOf::Gpu) => hints.push("--precision f16 (halves the weights)"),
        (false, _) => {}
    }
    hints.push("a smaller size or batch");
    match memory {
        MemoryOf::Host => hints.push("closing other programs"),
        MemoryOf::Gpu => {
            hints.push(if vae_tiles_help {
                "--vae-tiling auto"
            } else {
                "seamless tiling off (a seamless image's VAE runs on the whole image)"
            });
            hints.push("--device cpu (the computer's memory)");
        }
    }
    let free = match memory {
        MemoryOf::Host => "is free",
        MemoryOf::Gpu => "of GPU memory is free",
    };
    Err(Error::settings(format!(
        "this generation needs about {} ({} of weights and {} of working memory) but only {} {free}; try {}",
        human_bytes(estimate.total()),
        human_bytes(estimate.weights),
        human_bytes(estimate.working),
        human_bytes(available),
        hints.join(", ")
    )))
}

/// `1.23 GiB` / `456.7 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_suffixes() {
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("1.5k"), Some(1536));
        assert_eq!(parse_bytes("1000"), Some(1000));
        assert_eq!(parse_bytes("lots"), None);
    }

    #[test]
    fn sdxl_at_1024_fits_24_gib_in_bf16_and_not_4_gib() {
        let family = crate::family::Family::Sdxl.spec();
        let unet = (family.unet_preset)(4);
        let vae = family.vae_preset();
        // SDXL base: 2.57 G UNet + 0.82 G text encoders + 0.08 G VAE parameters.
        let bf16 = estimate(
            3_470_000_000,
            2,
            &unet,
            &vae,
            (1024, 1024),
            2,
            (false, VaeTiling::Off),
        );
        assert!(bf16.total() < 16 << 30, "{bf16:?}");
        assert!(check_fits(bf16, (24 << 30, MemoryOf::Host), (false, true)).is_ok());
        let err = check_fits(bf16, (4 << 30, MemoryOf::Host), (false, true))
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs about") && err.contains("free"), "{err}");
        let f32 = estimate(
            3_470_000_000,
            4,
            &unet,
            &vae,
            (1024, 1024),
            2,
            (false, VaeTiling::Off),
        );
        assert!(f32.weights == 2 * bf16.weights && f32.working == bf16.working);
        // Materialised attention at 4096 tokens a level adds gigabytes.
        let naive = estimate(
            3_470_000_000,
            2,
            &unet,
            &vae,
            (1024, 1024),
            2,
            (true, VaeTiling::Off),
        );
        assert!(naive.working > bf16.working + (1 << 30));
    }

    #[test]
    fn sdxl_at_1024_fits_an_8_gib_gpu_in_f16_only_with_vae_tiles() {
        let family = crate::family::Family::Sdxl.spec();
        let (unet, vae) = ((family.unet_preset)(4), family.vae_preset());
        let at = |tiling| {
            estimate(
                3_470_000_000,
                2,
                &unet,
                &vae,
                (1024, 1024),
                2,
                (false, tiling),
            )
        };
        let gpu = (8 << 30, MemoryOf::Gpu);
        let err = check_fits(at(VaeTiling::Off), gpu, (false, true))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("of GPU memory is free") && err.contains("--vae-tiling auto"),
            "{err}"
        );
        // A seamless image's VAE never tiles: the hint is to turn that off instead.
        let seamless = check_fits(at(VaeTiling::Off), gpu, (false, false))
            .unwrap_err()
            .to_string();
        assert!(
            seamless.contains("seamless tiling off") && !seamless.contains("--vae-tiling"),
            "{seamless}"
        );
        assert!(
            check_fits(at(VaeTiling::Auto), gpu, (false, true)).is_ok(),
            "{:?}",
            at(VaeTiling::Auto)
        );
    }

    #[test]
    fn a_2048_sd15_image_fits_24_gib_only_with_vae_tiles() {
        let spec = crate::family::Family::Sd1.spec();
        let (unet, vae) = ((spec.unet_preset)(4), spec.vae_preset());
        let parameters = 1_066_000_000;
        let at = |tiling| estimate(parameters, 4, &unet, &vae, (2048, 2048), 2, (false, tiling));
        let whole = at(VaeTiling::Off);
        assert!(
            check_fits(whole, (24 << 30, MemoryOf::Host), (false, true)).is_err(),
            "{whole:?}"
        );
        for tiling in [VaeTiling::Auto, VaeTiling::On] {
            let tiled = at(tiling);
            assert!(
                check_fits(tiled, (24 << 30, MemoryOf::Host), (false, true)).is_ok(),
                "{tiled:?}"
            );
        }
        // Allowing tiles never makes an estimate larger; even a 512² image may run in
        // 256 px tiles where memory is short.
        let small = |tiling| estimate(parameters, 4, &unet, &vae, (512, 512), 2, (false, tiling));
        assert!(small(VaeTiling::Auto).total() <= small(VaeTiling::Off).total());
    }

    #[test]
    fn linux_reports_a_peak_at_least_the_current_size() {
        if cfg!(target_os = "linux") {
            // The current size first: other tests' threads grow it meanwhile, and the peak
            // read after it can only be larger.
            let now = resident_bytes().expect("VmRSS on Linux");
            let peak = peak_resident_bytes().expect("VmHWM on Linux");
            assert!(peak >= now && now > 0, "peak {peak}, now {now}");
        }
    }
}
