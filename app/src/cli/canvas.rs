//! `ember generate`'s canvas options (outpainting, mask blur, "only masked", masked content,
//! the composite, the resize mode) turned into the engine's init image and mask through
//! [`canvas::canvas_job`], the app's path too, and the results put back.

use inference::api::MaskedContent;
use inference::canvas::{
    self, CanvasJob, CanvasOptions, Extension, FitMode, InpaintArea, InpaintOptions,
};
use inference::imaging::{self, ImageRgb8};
use inference::metadata::Parameters;

use super::GenerateArgs;

/// The engine's image inputs for one `ember generate`, and how to finish its outputs (the
/// same [`canvas_job`] the app's canvas uses).
pub struct Canvas {
    pub job: Option<CanvasJob>,
    /// `--outpaint` as given, for the metadata.
    outpaint: Option<String>,
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
    fit_mode(args)?;
    if args.mask_blur > 256 {
        return Err(format!(
            "--mask-blur must be 0..=256 pixels, got {}",
            args.mask_blur
        ));
    }
    Ok(())
}

fn fit_mode(args: &GenerateArgs) -> Result<FitMode, String> {
    FitMode::parse(&args.resize_mode).ok_or_else(|| {
        format!(
            "--resize-mode must be resize, crop or fill, got {:?}",
            args.resize_mode
        )
    })
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
        let Some(path) = &args.init_image else {
            return Ok(Canvas {
                job: None,
                outpaint: None,
            });
        };
        // The source at its own size: the canvas fits it (and its mask) to `size`.
        let source = imaging::load_rgb(path, None).map_err(err)?;
        let (source, mask) = match (&args.outpaint, &args.mask) {
            (Some(ext), _) => {
                let (source, mask) = canvas::outpaint(&source, parse_extension(ext)?);
                (source, Some(mask))
            }
            (None, Some(mask_path)) => {
                let mask = imaging::load_mask(mask_path, Some((source.width, source.height)))
                    .map_err(err)?;
                (source, Some(mask))
            }
            (None, None) => (source, None),
        };
        let options = CanvasOptions {
            inpaint: InpaintOptions {
                mask_blur: args.mask_blur,
                area: area(args)?,
                masked_content: MaskedContent::parse(&args.masked_content).map_err(err)?,
            },
            fit: fit_mode(args)?,
            composite: !args.no_composite,
        };
        let job = canvas::canvas_job(&source, mask.as_ref(), size, &options).map_err(err)?;
        Ok(Canvas {
            job: Some(job),
            outpaint: args.outpaint.as_ref().map(|ext| ext.replace(' ', "")),
        })
    }

    /// A generated image, put back onto the source where this was inpainting.
    pub fn finish(&self, generated: &ImageRgb8) -> ImageRgb8 {
        match &self.job {
            Some(job) => job.finish(generated),
            None => generated.clone(),
        }
    }

    /// Adds the canvas settings to an image's metadata.
    pub fn annotate(&self, parameters: &mut Parameters) {
        if let Some(ext) = &self.outpaint {
            parameters.push("Outpaint", ext);
        }
        for (key, value) in self.job.iter().flat_map(|j| &j.fields) {
            parameters.push(key, value);
        }
    }
}
