//! The fuzz target for `queue.json`, the queue one Ember process keeps for the next (a
//! start-again, or a quit that kept its jobs): read back, its canvas jobs' images put back
//! onto their canvas as a finished job's are, and its unsaved images encoded as a save does.
//! A damaged or hand-edited file must give a clear error, never a panic at start or later.

use ember_app::gui::gallery::store::ToSave;
use ember_app::gui::queue_file::{Kept, KeptImage, KeptJob, KeptQueue};
use ember_app::gui::session::Work;
use inference::api::{GenerateRequest, MaskedContent};
use inference::canvas::{CanvasOptions, FitMode, InpaintArea, InpaintOptions, canvas_job};
use inference::imaging::{self, ImageGray8, ImageRgb8};
use inference::upscale::{UpscaleOptions, UpscaleRequest};
use inference::worker::JobId;

use super::Targets;
use crate::fake_engine::fake_image;

/// The largest generation the target finishes (the canvas work is per pixel: bigger inputs
/// would only make the round slow).
const MAX_PIXELS: u64 = 256 * 256;

impl Targets {
    /// Kept queues: an inpainting job of each area, an img2img one, an upscale and an
    /// unsaved image.
    pub fn queue_seeds(&self) -> Vec<Vec<u8>> {
        let source = fake_image(24, 16, 3);
        let mut mask = ImageGray8 {
            width: 24,
            height: 16,
            pixels: vec![0; 24 * 16],
        };
        mask.pixels[5 * 24 + 6..5 * 24 + 12].fill(255);
        let job = |area, mask: Option<&ImageGray8>| {
            let options = CanvasOptions {
                inpaint: InpaintOptions {
                    mask_blur: 2,
                    area,
                    masked_content: MaskedContent::Fill,
                },
                fit: FitMode::Crop,
                composite: true,
            };
            let canvas = canvas_job(&source, mask, (16, 16), &options).expect("seed canvas job");
            let request = GenerateRequest {
                width: 16,
                height: 16,
                init_image: Some(canvas.init.clone()),
                mask: canvas.mask.clone(),
                ..GenerateRequest::default()
            };
            KeptJob {
                work: Work::Generate(Box::new(request)),
                canvas: Some(canvas),
            }
        };
        let upscale = KeptJob {
            work: Work::Upscale(Box::new(UpscaleRequest {
                image: fake_image(4, 4, 1),
                model: "/models/ESRGAN/4x.pth".into(),
                options: UpscaleOptions::default(),
                source_parameters: None,
            })),
            canvas: None,
        };
        let unsaved = KeptImage::from(&ToSave {
            job: JobId(7),
            index: 0,
            image: fake_image(8, 8, 9),
            parameters: "a cat\nSteps: 20, Seed: 9".into(),
            extras: None,
            seed: 9,
            grid: false,
        });
        let kept = Kept::new(
            vec![
                job(InpaintArea::OnlyMasked { padding: 4 }, Some(&mask)),
                job(InpaintArea::Whole, Some(&mask)),
                job(InpaintArea::Whole, None),
                upscale,
            ],
            vec![unsaved],
        );
        vec![serde_json::to_vec(&kept).expect("seed queue")]
    }

    /// `queue.json` taken as the next process takes it, then used as it would be.
    pub fn queue(&self, bytes: &[u8]) -> bool {
        let dir = self.dir.join("config");
        std::fs::create_dir_all(&dir).expect("scratch config dir");
        std::fs::write(dir.join("queue.json"), bytes).expect("scratch queue.json");
        let Ok(kept) = KeptQueue::in_dir(&dir).take() else {
            return false;
        };
        for job in &kept.jobs {
            if let (Work::Generate(request), Some(canvas)) = (&job.work, &job.canvas) {
                if request.validate_settings().is_err()
                    || u64::from(request.width) * u64::from(request.height) > MAX_PIXELS
                {
                    continue;
                }
                // The images the worker would hand back, of the request's size.
                let generated = fake_image(request.width, request.height, 1);
                for finished in [canvas.finish(&generated), canvas.finish_raw(&generated)] {
                    whole_image(&finished);
                }
            }
        }
        for image in kept.unsaved {
            whole_image(&ToSave::from(image).image);
        }
        true
    }
}

/// Panics (a finding) unless `image` holds its size's values; then encodes it as a save does
/// (an error there is the save's to report).
fn whole_image(image: &ImageRgb8) {
    assert_eq!(
        image.pixels.len() as u64,
        u64::from(image.width) * u64::from(image.height) * 3,
        "an image of {}x{} with {} values",
        image.width,
        image.height,
        image.pixels.len()
    );
    if u64::from(image.width) * u64::from(image.height) <= MAX_PIXELS {
        let _ = imaging::encode_png(image, &[]);
    }
}
