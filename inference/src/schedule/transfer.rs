//! diffusers' DDIM and PNDM step arithmetic: integer timesteps, each update a DDIM transfer
//! from one training timestep's `alpha_cumprod` to another's.
//!
//! Both schedulers step from `t` to `t - N // steps`, not to the next listed timestep. With
//! `leading` spacing (and step counts dividing N) the two coincide; with `trailing` or
//! `linspace` spacing the sample lands between listed timesteps and the next model call sees
//! it at its own timestep anyway. PNDM's first step transfers its stored sample from
//! `t_1 + N // steps` (its `counter == 1` branch), and img2img slices its call list with
//! the repeated entry in it, so a partial PNDM run starts with a model call whose timestep
//! is not the sample's. [`AlphaTransfer::calls`] spells out every model call's
//! `(model, from, to)` noise levels so the samplers in
//! [`crate::sampling::alpha_transfer`] reproduce all of this exactly.

use super::DiscreteSchedule;
pub use crate::sampling::Transfer;

/// Which scheduler's bookkeeping the calls follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferKind {
    Ddim,
    /// PNDM with `skip_prk_steps` (pseudo linear multistep).
    Pndm,
}

/// The integer-timestep description of a DDIM or PNDM run.
#[derive(Clone, Debug)]
pub struct AlphaTransfer {
    pub kind: TransferKind,
    /// diffusers' `scheduler.timesteps` (PNDM: with its repeated second entry), after an
    /// img2img start has sliced it.
    pub timesteps: Vec<i64>,
    /// `N // steps` of the full schedule.
    pub stride: i64,
    /// `alphas_cumprod` of the training schedule.
    alphas_cumprod: Vec<f64>,
    /// `final_alpha_cumprod`: the `alpha_cumprod` past the first timestep.
    final_alpha_cumprod: f64,
    /// Whether the model predicts v: PNDM combines the raw model outputs of several calls
    /// before converting them to epsilon (at the transfer's own timestep).
    pub combines_v: bool,
}

impl AlphaTransfer {
    /// The run of `steps` steps over `timesteps` (diffusers' `_timesteps`, descending).
    pub fn new(
        kind: TransferKind,
        timesteps: &[i64],
        train_timesteps: usize,
        table: &DiscreteSchedule,
        final_alpha_cumprod: f64,
    ) -> Self {
        let steps = timesteps.len();
        let calls = match kind {
            TransferKind::Ddim => timesteps.to_vec(),
            // `concat([ts[:-1], ts[-2:-1], ts[-1:]])[::-1]` over the ascending list.
            TransferKind::Pndm if steps > 1 => {
                let mut calls = vec![timesteps[0], timesteps[1]];
                calls.extend_from_slice(&timesteps[1..]);
                calls
            }
            TransferKind::Pndm => timesteps.to_vec(),
        };
        Self {
            kind,
            timesteps: calls,
            stride: (train_timesteps / steps) as i64,
            alphas_cumprod: table.alphas_cumprod.clone(),
            final_alpha_cumprod,
            combines_v: false,
        }
    }

    /// The noise level of an integer timestep (`final_alpha_cumprod` below 0).
    pub fn sigma(&self, t: i64) -> f32 {
        let alpha = if t < 0 {
            self.final_alpha_cumprod
        } else {
            self.alphas_cumprod[(t as usize).min(self.alphas_cumprod.len() - 1)]
        };
        DiscreteSchedule::sigma_of_alpha_cumprod(alpha) as f32
    }

    /// Every model call, in order.
    pub fn calls(&self) -> Vec<Transfer> {
        let k = self.stride;
        self.timesteps
            .iter()
            .enumerate()
            .map(|(j, &t)| {
                let model = self.sigma(t);
                if self.kind == TransferKind::Pndm && j == 1 {
                    // `prev_timestep = timestep; timestep = timestep + N // steps`.
                    Transfer {
                        model,
                        from: self.sigma(t + k),
                        to: model,
                    }
                } else {
                    Transfer {
                        model,
                        from: model,
                        to: self.sigma(t - k),
                    }
                }
            })
            .collect()
    }

    /// The noise levels at the start of each step, then where the last step lands: PNDM's
    /// first step makes two calls.
    pub fn step_sigmas(&self) -> Vec<f32> {
        let calls = self.calls();
        let mut sigmas: Vec<f32> = match self.kind {
            TransferKind::Pndm if calls.len() > 1 => std::iter::once(calls[0].model)
                .chain(calls[2..].iter().map(|c| c.model))
                .collect(),
            _ => calls.iter().map(|c| c.model).collect(),
        };
        sigmas.push(calls.last().expect("at least one call").to);
        sigmas
    }

    /// Drops the first `drop` entries of the call list, as diffusers' img2img
    /// `timesteps[t_start * order:]` does (PNDM's repeated entry included).
    pub fn drop_first(&mut self, drop: usize) {
        let drop = drop.min(self.timesteps.len() - 1);
        self.timesteps.drain(..drop);
    }

    /// Every `(sigma, timestep)` pair a call uses, for the UNet's timestep input.
    pub fn timestep_pairs(&self) -> (Vec<f32>, Vec<f64>) {
        self.timesteps
            .iter()
            .map(|&t| (self.sigma(t), t as f64))
            .unzip()
    }
}
