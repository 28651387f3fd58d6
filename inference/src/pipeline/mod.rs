//! Generation pipelines: text-to-image, image-to-image and inpainting, in one flow, for every
//! model family, with an optional refiner taking over part-way and an optional hires fix.

mod denoiser;
mod denoising;
mod encode;
mod generate;
pub mod guidance;
pub mod hires;
mod image_inputs;
mod observer;
pub mod prompt;
pub mod residency;
pub mod scheduled;
mod start;
mod torch_mean;
pub mod unet_run;
pub mod vae_plan;
pub mod vae_run;

pub use generate::{generate, generate_refined, plan_for};
pub use hires::generate_hires;
pub use observer::{Observer, StepLatents};
