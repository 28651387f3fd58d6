//! One path from a source image, an optional mask and the canvas options to the engine's
//! inputs and back, shared by the app's canvas and `ember generate`, so both make the same
//! image and write the same metadata for the same settings.

use super::{
    FitMode, InpaintArea, InpaintOptions, Paste, blur_mask, finish, fit, fit_mask, prepare,
};
use crate::api::MaskedContent;
use crate::error::Result;
use crate::imaging::{ImageGray8, ImageRgb8};

/// The canvas options of one generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CanvasOptions {
    pub inpaint: InpaintOptions,
    /// How a whole-picture source of another size becomes the generation size.
    pub fit: FitMode,
    /// Composite the results over the source through the blurred mask.
    pub composite: bool,
}

/// What the engine gets from a canvas, and how its images are put back.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct CanvasJob {
    pub init: ImageRgb8,
    /// `Some` when inpainting.
    pub mask: Option<ImageGray8>,
    pub masked_content: MaskedContent,
    paste: Option<Paste>,
    composite: bool,
    /// A1111-style `Key: value` settings for each image's metadata.
    pub fields: Vec<(String, String)>,
}

/// The job for a generation of `size` from `source` (at its own size: the canvas, or a file
/// as decoded) and `mask` (the same size; `None`: img2img).
///
/// `Init image hash` is the SHA-256 of the source's RGB pixels, whatever they came from.
pub fn canvas_job(
    source: &ImageRgb8,
    mask: Option<&ImageGray8>,
    size: (u32, u32),
    options: &CanvasOptions,
) -> Result<CanvasJob> {
    let hash = crate::hashing::sha256_bytes(&source.pixels);
    let mut fields = vec![("Init image hash".to_string(), hash[..10].to_string())];
    let inpaint = options.inpaint;
    let resized = (source.width, source.height) != size;
    let Some(mask) = mask else {
        return Ok(CanvasJob {
            init: fit(source, size, options.fit),
            mask: None,
            masked_content: inpaint.masked_content,
            paste: None,
            composite: options.composite,
            fields,
        });
    };
    // A whole-picture generation fits the canvas to its size first ("only masked" crops
    // the canvas at its own size instead).
    let (source_at_own_size, mask_at_own_size) = (source, mask);
    let fitted;
    let (source, mask) = match inpaint.area {
        InpaintArea::Whole if resized => {
            fitted = (
                fit(source, size, options.fit),
                fit_mask(mask, size, options.fit),
            );
            (&fitted.0, &fitted.1)
        }
        _ => (source, mask),
    };
    let mut prepared = prepare(source, mask, size, &inpaint)?;
    // A whole picture generated at the canvas's own size rounded down to multiples of 8
    // goes back at the canvas's size, over the canvas itself: what the mask leaves stays
    // exactly as it was instead of coming back resampled and smaller. A size asked for
    // (another size or resize mode) gives the generation's size, as in A1111.
    let own_size = super::generation_size(source_at_own_size.width, source_at_own_size.height);
    let rounded_only = resized && size == own_size && options.fit == FitMode::Resize;
    if inpaint.area == InpaintArea::Whole && rounded_only {
        prepared.paste = Paste {
            source: source_at_own_size.clone(),
            mask: blur_mask(mask_at_own_size, inpaint.mask_blur),
            region: None,
        };
    }
    fields.push(("Mask blur".into(), inpaint.mask_blur.to_string()));
    if let InpaintArea::OnlyMasked { padding } = inpaint.area {
        fields.push(("Inpaint area".into(), "Only masked".into()));
        fields.push(("Masked area padding".into(), padding.to_string()));
    }
    fields.push((
        "Masked content".into(),
        inpaint.masked_content.a1111_name().into(),
    ));
    if !options.composite {
        fields.push(("Composite".into(), "off".into()));
    }
    Ok(CanvasJob {
        init: prepared.init,
        mask: Some(prepared.mask),
        masked_content: inpaint.masked_content,
        paste: Some(prepared.paste),
        composite: options.composite,
        fields,
    })
}

impl CanvasJob {
    /// The size [`CanvasJob::finish`] gives an image generated at `generated`: the
    /// source's when it is pasted back.
    pub fn finished_size(&self, generated: (u32, u32)) -> (u32, u32) {
        self.paste
            .as_ref()
            .map_or(generated, |p| (p.source.width, p.source.height))
    }

    /// A generated image put back onto the source (inpainting), composited unless the
    /// options said not to; img2img images as they are.
    pub fn finish(&self, generated: &ImageRgb8) -> ImageRgb8 {
        self.finish_with(generated, self.composite)
    }

    /// [`CanvasJob::finish`] without the composite (the raw generation, pasted back).
    pub fn finish_raw(&self, generated: &ImageRgb8) -> ImageRgb8 {
        self.finish_with(generated, false)
    }

    fn finish_with(&self, generated: &ImageRgb8, composite: bool) -> ImageRgb8 {
        match &self.paste {
            Some(paste) => finish(generated, paste, composite),
            None => generated.clone(),
        }
    }

    /// The fields as metadata text (`Key: value, Key: value`).
    pub fn fields_text(&self) -> String {
        self.fields
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
