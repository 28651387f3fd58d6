//! Generation pipelines: text-to-image, image-to-image and inpainting.

pub mod guidance;
