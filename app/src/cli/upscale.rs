//! `ember upscale IMG --model FILE`: an ESRGAN / Real-ESRGAN upscale (A1111's Extras tab),
//! the source's generation parameters kept and the upscale added as A1111's `extras` text.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use clap::Args;
use inference::device::DeviceKind;
use inference::imaging;
use inference::upscale::{self, ChannelOrder, UpscaleOptions};

/// `ember upscale` options.
#[derive(Args, Debug)]
pub struct UpscaleArgs {
    /// The image to upscale (PNG, JPEG, WebP, BMP).
    pub image: PathBuf,
    /// An ESRGAN / Real-ESRGAN model (.pth or .safetensors; A1111 keeps them in
    /// models/ESRGAN).
    #[arg(long)]
    pub model: PathBuf,
    /// The factor (1 to 8; default: the model's own). Larger factors run the model again;
    /// a Lanczos resize makes the exact size.
    #[arg(long)]
    pub scale: Option<f32>,
    /// Tile side in input pixels (smaller uses less memory).
    #[arg(long, default_value_t = 256)]
    pub tile: u32,
    /// Pixels neighbouring tiles share (blended, so no seam shows).
    #[arg(long, default_value_t = 32)]
    pub overlap: u32,
    /// The colour order the network sees: rgb (what the models were trained on; ComfyUI)
    /// or bgr (A1111's).
    #[arg(long, default_value = "rgb")]
    pub channel_order: String,
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Output image: .png, .jpg or .webp (lossless), the settings kept as `ember generate`
    /// writes them.
    #[arg(long)]
    pub out: PathBuf,
    /// A .jpg output's quality, 1–100.
    #[arg(long, default_value_t = inference::imaging::DEFAULT_JPEG_QUALITY)]
    pub jpeg_quality: u8,
}

pub fn run(args: &UpscaleArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let format = super::generate::check_image_out(&args.out, args.jpeg_quality)?;
    let options = UpscaleOptions {
        scale: args.scale,
        tile: args.tile,
        overlap: args.overlap,
        channel_order: ChannelOrder::parse(&args.channel_order).map_err(err)?,
    };
    if let Some(scale) = args.scale {
        upscale::check_scale(scale).map_err(err)?;
    }
    let image = imaging::load_rgb(&args.image, None).map_err(err)?;
    let device = DeviceKind::parse(&args.device)
        .map_err(err)?
        .device()
        .map_err(err)?;
    let model = upscale::load(&args.model, &device).map_err(err)?;
    let scale = args.scale.unwrap_or(model.scale() as f32);
    upscale::target_size((image.width, image.height), scale).map_err(err)?;
    let terminal = std::io::stderr().is_terminal();
    let mut on_tile = |done: usize, total: usize| {
        if terminal {
            eprint!("\r\x1b[2Ktile {done}/{total}");
            let _ = std::io::stderr().flush();
        }
        ControlFlow::Continue(())
    };
    let result = upscale::upscale(&model, &image, &options, &mut on_tile).map_err(err)?;
    if terminal {
        eprintln!();
    }
    // The source's own parameters travel with it; A1111 writes the upscale as `extras`.
    // (a JPEG's or WebP's EXIF comment too; the first when a PNG has two).
    let mut chunks: Vec<(String, String)> = imaging::read_image_text(&args.image)
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == "parameters")
        .into_iter()
        .collect();
    chunks.push(("extras".into(), upscale::extras_text(scale, &model.name)));
    let text: Vec<(&str, &str)> = chunks
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    super::write::write_image(&args.out, &result, format, &text)
}
