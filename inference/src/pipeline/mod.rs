//! Generation pipelines: text-to-image, image-to-image and inpainting, in one flow.

mod generate;
pub mod guidance;
mod image_inputs;
mod prompt;

pub use generate::{Observer, StepLatents, generate, plan_for};
