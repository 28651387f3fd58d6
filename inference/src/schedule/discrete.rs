//! The training noise schedule of a discrete-time (DDPM) model: betas, alphas_cumprod and
//! the sigma of every one of the 1000 training timesteps, with the sigma <-> timestep maps.
//!
//! Two libraries compute the same table with different arithmetic, and matching a tool
//! means using its arithmetic: diffusers builds it with float32 torch ops, ComfyUI in float64
//! (see `../shared/reference/README.md`, "SD 1.x discrete model").

use crate::error::{Error, Result};

/// How the betas are spaced over the training timesteps.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum BetaSchedule {
    /// `linspace(sqrt(start), sqrt(end), n) ** 2` (every SD 1.x/2.x/XL model).
    ScaledLinear { start: f64, end: f64 },
    /// `linspace(start, end, n)`.
    Linear { start: f64, end: f64 },
}

impl BetaSchedule {
    /// The schedule every Stable Diffusion 1.x/2.x/XL checkpoint was trained with.
    pub const SD: BetaSchedule = BetaSchedule::ScaledLinear {
        start: 0.00085,
        end: 0.012,
    };
}

/// Whose arithmetic builds the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableArithmetic {
    /// diffusers: float32 `torch.linspace`, `** 2`, `1 - b`, `cumprod` (double accumulator,
    /// float32 outputs), then `((1 - ac) / ac) ** 0.5` in float32.
    DiffusersF32,
    /// ComfyUI: everything in float64, sigmas stored as float32.
    ComfyF64,
    /// k-diffusion's `DiscreteEpsDDPMDenoiser` (A1111): float64 table cast to float32, then
    /// sigmas and log-sigmas in float32.
    KDiffusionF32,
}

/// Sigmas of every training timestep and the maps between sigma and timestep.
#[derive(Clone, Debug)]
pub struct DiscreteSchedule {
    /// `alphas_cumprod[t]` as the library holds it (float32 values for diffusers).
    pub alphas_cumprod: Vec<f64>,
    /// `sigma[t] = sqrt((1 - ac) / ac)`, as float32 values.
    pub sigmas: Vec<f32>,
    /// `log(sigma[t])` as the library holds it.
    pub log_sigmas: Vec<f64>,
}

impl DiscreteSchedule {
    /// Builds the table for `num_train_timesteps` steps.
    pub fn new(
        betas: BetaSchedule,
        num_train_timesteps: usize,
        arithmetic: TableArithmetic,
    ) -> Result<Self> {
        if !(2..=100_000).contains(&num_train_timesteps) {
            return Err(Error::settings(format!(
                "num_train_timesteps must be between 2 and 100000, got {num_train_timesteps}"
            )));
        }
        let n = num_train_timesteps;
        match arithmetic {
            TableArithmetic::DiffusersF32 => {
                let betas: Vec<f32> = match betas {
                    BetaSchedule::ScaledLinear { start, end } => {
                        torch_linspace_f32(start.sqrt() as f32, end.sqrt() as f32, n)
                            .into_iter()
                            .map(|b| b * b)
                            .collect()
                    }
                    BetaSchedule::Linear { start, end } => {
                        torch_linspace_f32(start as f32, end as f32, n)
                    }
                };
                let mut acc = 1.0f64;
                let alphas_cumprod: Vec<f32> = betas
                    .iter()
                    .map(|&b| {
                        acc *= f64::from(1.0f32 - b);
                        acc as f32
                    })
                    .collect();
                let sigmas: Vec<f32> = alphas_cumprod
                    .iter()
                    .map(|&ac| ((1.0 - ac) / ac).sqrt())
                    .collect();
                let log_sigmas = sigmas.iter().map(|&s| f64::from(s.ln())).collect();
                Ok(Self {
                    alphas_cumprod: alphas_cumprod.into_iter().map(f64::from).collect(),
                    sigmas,
                    log_sigmas,
                })
            }
            TableArithmetic::ComfyF64 | TableArithmetic::KDiffusionF32 => {
                let betas: Vec<f64> = match betas {
                    BetaSchedule::ScaledLinear { start, end } => {
                        linspace_f64(start.sqrt(), end.sqrt(), n)
                            .into_iter()
                            .map(|b| b * b)
                            .collect()
                    }
                    BetaSchedule::Linear { start, end } => linspace_f64(start, end, n),
                };
                let mut acc = 1.0f64;
                let alphas_cumprod: Vec<f64> = betas
                    .iter()
                    .map(|&b| {
                        acc *= 1.0 - b;
                        acc
                    })
                    .collect();
                if arithmetic == TableArithmetic::KDiffusionF32 {
                    let ac32: Vec<f32> = alphas_cumprod.iter().map(|&ac| ac as f32).collect();
                    let sigmas: Vec<f32> =
                        ac32.iter().map(|&ac| ((1.0 - ac) / ac).sqrt()).collect();
                    return Ok(Self {
                        alphas_cumprod: ac32.into_iter().map(f64::from).collect(),
                        log_sigmas: sigmas.iter().map(|&s| f64::from(s.ln())).collect(),
                        sigmas,
                    });
                }
                let exact: Vec<f64> = alphas_cumprod
                    .iter()
                    .map(|&ac| ((1.0 - ac) / ac).sqrt())
                    .collect();
                Ok(Self {
                    alphas_cumprod,
                    sigmas: exact.iter().map(|&s| s as f32).collect(),
                    log_sigmas: exact.iter().map(|&s| f64::from(s.ln() as f32)).collect(),
                })
            }
        }
    }

    /// Number of training timesteps.
    pub fn len(&self) -> usize {
        self.sigmas.len()
    }

    /// The same model trained with a zero-terminal-SNR schedule (Lin et al. 2023,
    /// algorithm 1): `sqrt(alphas_cumprod)` shifted to end at 0 and rescaled to keep its
    /// start. The last entry's alpha is then raised from 0 to a tiny value so its sigma is
    /// finite, as both libraries do: diffusers' Euler-family schedulers use `2^-24`, ComfyUI
    /// `4.8973451890853435e-08`.
    pub fn rescaled_to_zero_terminal_snr(&self, arithmetic: TableArithmetic) -> Self {
        let sqrt: Vec<f64> = self.alphas_cumprod.iter().map(|ac| ac.sqrt()).collect();
        let (first, last) = (sqrt[0], sqrt[sqrt.len() - 1]);
        let mut alphas_cumprod: Vec<f64> = sqrt
            .iter()
            .map(|s| {
                let scaled = (s - last) * first / (first - last);
                scaled * scaled
            })
            .collect();
        let n = alphas_cumprod.len();
        alphas_cumprod[n - 1] = match arithmetic {
            TableArithmetic::DiffusersF32 => 2f64.powi(-24),
            _ => 4.897_345_189_085_343_5e-8,
        };
        let exact: Vec<f64> = alphas_cumprod
            .iter()
            .map(|&ac| Self::sigma_of_alpha_cumprod(ac))
            .collect();
        let sigmas: Vec<f32> = match arithmetic {
            TableArithmetic::ComfyF64 => exact.iter().map(|&s| s as f32).collect(),
            _ => alphas_cumprod
                .iter()
                .map(|&ac| {
                    let ac = ac as f32;
                    ((1.0 - ac) / ac).sqrt()
                })
                .collect(),
        };
        let log_sigmas = match arithmetic {
            TableArithmetic::ComfyF64 => exact.iter().map(|&s| f64::from(s.ln() as f32)).collect(),
            _ => sigmas.iter().map(|&s| f64::from(s.ln())).collect(),
        };
        Self {
            alphas_cumprod,
            sigmas,
            log_sigmas,
        }
    }

    /// Always false: a schedule has at least two timesteps.
    pub fn is_empty(&self) -> bool {
        self.sigmas.is_empty()
    }

    /// The smallest sigma (timestep 0).
    pub fn sigma_min(&self) -> f32 {
        self.sigmas[0]
    }

    /// The largest sigma (the last timestep).
    pub fn sigma_max(&self) -> f32 {
        self.sigmas[self.len() - 1]
    }

    /// The sigma of a timestep given as `sqrt((1 - ac) / ac)` from `alphas_cumprod`.
    pub fn sigma_of_alpha_cumprod(alpha_cumprod: f64) -> f64 {
        ((1.0 - alpha_cumprod) / alpha_cumprod).sqrt()
    }

    /// k-diffusion / diffusers `_sigma_to_t`: the fractional timestep whose log-sigma lies
    /// at `sigma`, interpolating linearly in log sigma between table entries.
    pub fn sigma_to_t(&self, sigma: f64) -> f64 {
        let log_sigma = sigma.max(1e-10).ln();
        let n = self.log_sigmas.len();
        // Index of the last table entry not above log_sigma, clipped to [0, n - 2].
        let count = self
            .log_sigmas
            .iter()
            .filter(|&&ls| log_sigma - ls >= 0.0)
            .count();
        let low = count.saturating_sub(1).min(n - 2);
        let (lo, hi) = (self.log_sigmas[low], self.log_sigmas[low + 1]);
        let w = ((lo - log_sigma) / (lo - hi)).clamp(0.0, 1.0);
        (1.0 - w) * low as f64 + w * (low + 1) as f64
    }

    /// ComfyUI `ModelSamplingDiscrete.timestep`: the training timestep whose log-sigma is
    /// nearest to `log(sigma)` (an integer).
    pub fn nearest_timestep(&self, sigma: f32) -> usize {
        let log_sigma = f64::from(sigma.ln());
        let mut best = 0;
        let mut best_dist = f64::INFINITY;
        for (i, &ls) in self.log_sigmas.iter().enumerate() {
            let dist = (log_sigma - ls).abs();
            if dist < best_dist {
                best = i;
                best_dist = dist;
            }
        }
        best
    }

    /// ComfyUI `ModelSamplingDiscrete.sigma`: log-linear interpolation of the table at a
    /// fractional timestep (clamped to the table).
    pub fn sigma_at(&self, t: f64) -> f32 {
        let t = t.clamp(0.0, (self.len() - 1) as f64);
        let low = t.floor() as usize;
        let high = t.ceil() as usize;
        let w = (t - t.floor()) as f32;
        let log_sigma = (1.0 - w) * self.log_sigmas[low] as f32 + w * self.log_sigmas[high] as f32;
        log_sigma.exp()
    }

    /// Linear interpolation of the sigma table at a fractional timestep (numpy `interp`,
    /// as diffusers' Euler-family schedulers do), in float64.
    pub fn sigma_interp(&self, t: f64) -> f64 {
        let t = t.clamp(0.0, (self.len() - 1) as f64);
        let low = t.floor() as usize;
        let high = (low + 1).min(self.len() - 1);
        let w = t - low as f64;
        let (a, b) = (f64::from(self.sigmas[low]), f64::from(self.sigmas[high]));
        a + (b - a) * w
    }
}

/// `torch.linspace(start, end, n)` for float32: the step is computed in float32 and the
/// second half counts back from `end`, as ATen's CPU kernel does.
pub fn torch_linspace_f32(start: f32, end: f32, n: usize) -> Vec<f32> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f32;
    let halfway = n / 2;
    (0..n)
        .map(|i| {
            if i < halfway {
                start + step * i as f32
            } else {
                end - step * (n - 1 - i) as f32
            }
        })
        .collect()
}

/// `numpy.linspace(start, end, n)` in float64.
pub fn linspace_f64(start: f64, end: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f64;
    (0..n)
        .map(|i| {
            if i == n - 1 {
                end
            } else {
                start + step * i as f64
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_terminal_snr_keeps_the_start_and_ends_near_pure_noise() {
        for arithmetic in [TableArithmetic::ComfyF64, TableArithmetic::DiffusersF32] {
            let plain = DiscreteSchedule::new(BetaSchedule::SD, 1000, arithmetic).unwrap();
            let zsnr = plain.rescaled_to_zero_terminal_snr(arithmetic);
            let rel = (zsnr.sigmas[0] - plain.sigmas[0]).abs() / plain.sigmas[0];
            assert!(rel < 1e-5, "{arithmetic:?}: first sigma moved by {rel}");
            // sqrt((1 - a) / a) at the clamped last alpha: 4096 (diffusers), ~4519 (ComfyUI).
            assert!(
                zsnr.sigma_max() > 4000.0,
                "{arithmetic:?}: {}",
                zsnr.sigma_max()
            );
            assert!(zsnr.sigmas.windows(2).all(|w| w[0] < w[1]));
            // Below the end the rescale only lowers the signal: every sigma grows.
            assert!(
                zsnr.sigmas
                    .iter()
                    .zip(&plain.sigmas)
                    .all(|(z, p)| z >= &(p * 0.99999))
            );
        }
    }
}
