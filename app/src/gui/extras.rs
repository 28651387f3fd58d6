//! The Extras view's state (A1111's Extras tab): the persisted upscaler choice, factor and
//! channel order, and the runtime source image with its texture and parameters.

use std::path::PathBuf;

use egui::TextureHandle;
use inference::imaging::ImageRgb8;
use inference::upscale::{ChannelOrder, UpscaleOptions, UpscaleRequest, target_size};
use inference::worker::JobId;
use serde::{Deserialize, Serialize};

/// What the Extras view remembers between runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtrasSettings {
    /// The ESRGAN model file.
    pub upscaler: Option<PathBuf>,
    /// "Scale by" (A1111's default 4).
    pub scale: f32,
    /// Feed the network BGR, as A1111 does (off: RGB, what the models were trained on).
    pub a1111_channels: bool,
}

impl Default for ExtrasSettings {
    fn default() -> Self {
        Self {
            upscaler: None,
            scale: 4.0,
            a1111_channels: false,
        }
    }
}

/// The image being upscaled.
#[derive(Clone, Debug)]
pub struct ExtrasSource {
    pub path: PathBuf,
    pub image: ImageRgb8,
    /// Its A1111 parameters, kept on the result.
    pub parameters: Option<String>,
}

/// The Extras view's runtime state.
#[derive(Default)]
pub struct ExtrasState {
    pub source: Option<ExtrasSource>,
    pub texture: Option<TextureHandle>,
    /// The last upscale queued from here (its result is what the view shows).
    pub job: Option<JobId>,
}

impl ExtrasSettings {
    /// The job for `source`, or what is missing.
    pub fn request(&self, source: Option<&ExtrasSource>) -> Result<UpscaleRequest, String> {
        let source = source.ok_or("open an image to upscale first")?;
        let model = self
            .upscaler
            .clone()
            .ok_or("choose an upscaler model (ESRGAN / Real-ESRGAN .pth or .safetensors)")?;
        let size = (source.image.width, source.image.height);
        target_size(size, self.scale).map_err(|e| e.to_string())?;
        Ok(UpscaleRequest {
            image: source.image.clone(),
            model,
            options: UpscaleOptions {
                scale: Some(self.scale),
                channel_order: if self.a1111_channels {
                    ChannelOrder::Bgr
                } else {
                    ChannelOrder::Rgb
                },
                ..UpscaleOptions::default()
            },
            source_parameters: source.parameters.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_needs_an_image_a_model_and_a_sane_factor() {
        let source = ExtrasSource {
            path: "a.png".into(),
            image: ImageRgb8 {
                width: 100,
                height: 80,
                pixels: vec![0; 100 * 80 * 3],
            },
            parameters: Some("a cat\nSeed: 3".into()),
        };
        let mut s = ExtrasSettings::default();
        assert!(s.request(None).unwrap_err().contains("open an image"));
        assert!(s.request(Some(&source)).unwrap_err().contains("upscaler"));
        s.upscaler = Some("4x.pth".into());
        let r = s.request(Some(&source)).unwrap();
        assert_eq!(r.options.scale, Some(4.0));
        assert_eq!(r.options.channel_order, ChannelOrder::Rgb);
        assert_eq!(r.source_parameters.as_deref(), Some("a cat\nSeed: 3"));
        s.scale = 50.0;
        assert!(
            s.request(Some(&source))
                .unwrap_err()
                .contains("between 1 and 8")
        );
    }
}
