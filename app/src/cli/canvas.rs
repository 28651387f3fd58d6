//! `ember generate`'s canvas options (outpainting, mask blur, "only masked", masked content,
//! the composite) turned into the engine's init image and mask, and the results put back.

use std::path::Path;

use inference::api::MaskedContent;
use inference::canvas::{self, Extension, InpaintArea, InpaintOptions, Paste};
use inference::imaging::{self, ImageGray8, ImageRgb8};
use inference::metadata::Parameters;

use super::GenerateArgs;

/// The engine's image inputs for one `ember generate`, and how to finish its outputs.
pub struct Canvas {
    pub init: Option<ImageRgb8>,
    pub mask: Option<ImageGray8>,
    pub masked_content: MaskedContent,
    paste: Option<Paste>,
    composite: bool,
    fields: Vec<(&'static str, String)>,
}

/// Parses `--outpaint L,R,U,D`.
pub fn parse_extension(text: &str) -> Result<Extension, String> {
    let parts: Vec<u32> = text
        .split(',')
        .map(|p| p.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("--outpaint wants four pixel counts L,R,U,D, got {text:?}"))?;
    let [left, right, up, down] = parts[..] else {
        return Err(format!(
            "--outpaint wants four pixel counts L,R,U,D, got {text:?}"
        ));
    };
    if [left, right, up, down].iter().any(|&p| p > 2048) || left + right + up + down == 0 {
        return Err("--outpaint: each side 0..=2048 pixels, and at least one above 0".into());
    }
    Ok(Extension {
        left,
        right,
        up,
        down,
    })
}

/// Checks the canvas flags that need no file, before the model loads.
pub fn validate(args: &GenerateArgs) -> Result<(), String> {
    let canvas_flag = args.outpaint.is_some()
        || args.inpaint_area != "whole"
        || args.masked_content != "original"
        || args.no_composite;
    if canvas_flag && args.init_image.is_none() {
        return Err(
            "--outpaint, --inpaint-area, --masked-content and --no-composite need --init-image"
                .into(),
        );
    }
    if args.outpaint.is_some() && args.mask.is_some() {
        return Err("--outpaint makes its own mask (the new area); drop --mask".into());
    }
    if let Some(ext) = &args.outpaint {
        parse_extension(ext)?;
    }
    area(args)?;
    MaskedContent::parse(&args.masked_content).map_err(|e| e.to_string())?;
    if args.mask_blur > 256 {
        return Err(format!(
            "--mask-blur must be 0..=256 pixels, got {}",
            args.mask_blur
        ));
    }
    Ok(())
}

fn area(args: &GenerateArgs) -> Result<InpaintArea, String> {
    match args.inpaint_area.as_str() {
        "whole" => Ok(InpaintArea::Whole),
        "masked" => Ok(InpaintArea::OnlyMasked {
            padding: args.padding,
        }),
        other => Err(format!(
            "--inpaint-area must be whole or masked, got {other:?}"
        )),
    }
}

/// The generation size when no `--width`/`--height` is given, if the canvas decides it: the
/// outpainted canvas (whole picture), else `None` (the caller's rules).
pub fn canvas_size(args: &GenerateArgs) -> Result<Option<(u32, u32)>, String> {
    match (&args.outpaint, &args.init_image) {
        (Some(ext), Some(path)) if area(args)? == InpaintArea::Whole => {
            let source = imaging::load_rgb(path, None).map_err(|e| e.to_string())?;
            let (canvas, _) = canvas::outpaint(&source, parse_extension(ext)?);
            Ok(Some((canvas.width, canvas.height)))
        }
        _ => Ok(None),
    }
}

impl Canvas {
    /// Loads the init image (and mask, or the outpainting mask) for a generation of `size`.
    pub fn load(args: &GenerateArgs, size: (u32, u32)) -> Result<Self, String> {
        let err = |e: inference::Error| e.to_string();
        let masked_content = MaskedContent::parse(&args.masked_content).map_err(err)?;
        let mut canvas = Canvas {
            init: None,
            mask: None,
            masked_content,
            paste: None,
            composite: !args.no_composite,
            fields: Vec::new(),
        };
        let Some(path) = &args.init_image else {
            return Ok(canvas);
        };
        let area = area(args)?;
        let (source, mask) = match (&args.outpaint, &args.mask) {
            (Some(ext), _) => {
                // The canvas grows from the source at its own size.
                let source = imaging::load_rgb(path, None).map_err(err)?;
                let (source, mask) = canvas::outpaint(&source, parse_extension(ext)?);
                canvas.fields.push(("Outpaint", ext.replace(' ', "")));
                (source, Some(mask))
            }
            (None, Some(mask_path)) => {
                let source = load_source(path, area, size)?;
                let mask = imaging::load_mask(mask_path, Some((source.width, source.height)))
                    .map_err(err)?;
                (source, Some(mask))
            }
            (None, None) => (load_source(path, area, size)?, None),
        };
        let source_hash = inference::hashing::sha256_file(path).map_err(err)?;
        canvas
            .fields
            .push(("Init image hash", source_hash[..10].to_string()));
        let Some(mask) = mask else {
            canvas.init = Some(canvas::resize(&source, size));
            return Ok(canvas);
        };
        let options = InpaintOptions {
            mask_blur: args.mask_blur,
            area,
            masked_content,
        };
        let prepared = canvas::prepare(&source, &mask, size, &options).map_err(err)?;
        canvas
            .fields
            .push(("Mask blur", args.mask_blur.to_string()));
        if let InpaintArea::OnlyMasked { padding } = area {
            canvas.fields.push(("Inpaint area", "Only masked".into()));
            canvas
                .fields
                .push(("Masked area padding", padding.to_string()));
        }
        canvas
            .fields
            .push(("Masked content", masked_content.a1111_name().into()));
        if !canvas.composite {
            canvas.fields.push(("Composite", "off".into()));
        }
        canvas.init = Some(prepared.init);
        canvas.mask = Some(prepared.mask);
        canvas.paste = Some(prepared.paste);
        Ok(canvas)
    }

    /// A generated image, put back onto the source where this was inpainting.
    pub fn finish(&self, generated: &ImageRgb8) -> ImageRgb8 {
        match &self.paste {
            Some(paste) => canvas::finish(generated, paste, self.composite),
            None => generated.clone(),
        }
    }

    /// Adds the canvas settings to an image's metadata.
    pub fn annotate(&self, parameters: &mut Parameters) {
        for (key, value) in &self.fields {
            parameters.push(key, value);
        }
    }
}

/// The source image: at its own size for "only masked" (the crop is resized instead), else
/// at the generation size (outpainting grows it afterwards, so it keeps its own size too).
fn load_source(path: &Path, area: InpaintArea, size: (u32, u32)) -> Result<ImageRgb8, String> {
    let keep_size = area != InpaintArea::Whole;
    imaging::load_rgb(path, (!keep_size).then_some(size)).map_err(|e| e.to_string())
}
