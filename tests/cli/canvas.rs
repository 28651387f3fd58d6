//! `ember generate`'s canvas options end to end on the reference models of every family
//! (SD 1.x, SD 2.x v-prediction, SDXL): "only masked" inpainting keeps every pixel outside
//! the blurred mask byte for byte and writes its settings into the metadata; outpainting
//! grows the canvas to multiples of 8 and keeps the source; the masked-content modes and the
//! raw output run.

use ember_tests::{json, read_png_rgb, reference, run_input};
use inference::canvas::blur_mask;
use inference::imaging;

use crate::{arg, ember};

/// The reference models the canvas options are checked on, one per family.
const MODELS: [&str; 3] = ["sd15/pipeline", "sd2v/pipeline", "sdxl/pipeline"];

fn base_args(model: &str) -> Vec<String> {
    [
        "generate",
        "--model",
        &arg(&reference(model)),
        "--prompt",
        "a red door",
        "--steps",
        "4",
        "--seed",
        "5",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn run(dir: &std::path::Path, model: &str, extra: &[&str], out: &str) -> std::path::PathBuf {
    let mut args = base_args(model);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--out".to_string(), out.to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = ember(dir, &argv);
    assert!(
        output.status.success(),
        "ember {model} {extra:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir.join(out)
}

#[test]
fn only_masked_inpainting_keeps_unmasked_pixels_and_records_its_settings() {
    for model in MODELS {
        only_masked(model);
    }
}

fn only_masked(model: &str) {
    let dir = tempfile::tempdir().unwrap();
    let blend = json("sd15/runs/inpaint_blend.json");
    let (init, mask) = (
        run_input(&blend, "init_image").unwrap(),
        run_input(&blend, "mask_image").unwrap(),
    );
    let (init_s, mask_s) = (arg(&init), arg(&mask));
    let common = [
        "--init-image",
        &init_s,
        "--mask",
        &mask_s,
        "--inpaint-area",
        "masked",
        "--padding",
        "4",
    ];
    let out = run(dir.path(), model, &common, "masked.png");
    let (w, h, pixels) = read_png_rgb(&out);
    let source = imaging::load_rgb(&init, None).unwrap();
    assert_eq!(
        (w, h),
        (source.width, source.height),
        "the result has the source's size"
    );
    let blurred = blur_mask(&imaging::load_mask(&mask, Some((w, h))).unwrap(), 4);
    let mut kept = 0;
    for (i, &m) in blurred.pixels.iter().enumerate() {
        if m == 0 {
            assert_eq!(
                &pixels[i * 3..i * 3 + 3],
                &source.pixels[i * 3..i * 3 + 3],
                "pixel {i} outside the mask changed"
            );
            kept += 1;
        }
    }
    assert!(kept > 0, "the test mask leaves nothing unmasked");
    let text = imaging::read_png_text(&out).unwrap();
    let parameters = &text.iter().find(|(k, _)| k == "parameters").unwrap().1;
    for field in [
        "Denoising strength: 0.75",
        "Mask blur: 4",
        "Inpaint area: Only masked",
        "Masked area padding: 4",
        "Masked content: original",
        "Init image hash: ",
    ] {
        assert!(
            parameters.contains(field),
            "{field:?} missing from {parameters}"
        );
    }

    // The raw generation differs from the composite, and every masked-content mode runs.
    let raw = run(
        dir.path(),
        model,
        &[&common[..], &["--no-composite"]].concat(),
        "raw.png",
    );
    assert_ne!(read_png_rgb(&raw).2, pixels);
    for content in ["fill", "latent-noise", "latent-nothing"] {
        let out = run(
            dir.path(),
            model,
            &[&common[..], &["--masked-content", content]].concat(),
            &format!("{content}.png"),
        );
        assert_eq!(read_png_rgb(&out).0, w);
    }
}

#[test]
fn outpainting_grows_the_canvas_to_multiples_of_8_and_keeps_the_source() {
    for model in MODELS {
        outpaint(model);
    }
}

fn outpaint(model: &str) {
    let dir = tempfile::tempdir().unwrap();
    let blend = json("sd15/runs/inpaint_blend.json");
    let init = run_input(&blend, "init_image").unwrap();
    let source = imaging::load_rgb(&init, None).unwrap();
    let out = run(
        dir.path(),
        model,
        &[
            "--init-image",
            &arg(&init),
            "--outpaint",
            "0,13,0,0",
            "--mask-blur",
            "0",
        ],
        "out.png",
    );
    let (w, h, pixels) = read_png_rgb(&out);
    assert_eq!((w % 8, h % 8), (0, 0));
    assert_eq!(
        (w, h),
        ((source.width + 13).next_multiple_of(8), source.height)
    );
    for y in 0..source.height {
        for x in 0..source.width {
            let (o, s) = (
                ((y * w + x) * 3) as usize,
                ((y * source.width + x) * 3) as usize,
            );
            assert_eq!(
                &pixels[o..o + 3],
                &source.pixels[s..s + 3],
                "source pixel ({x}, {y})"
            );
        }
    }
    let text = imaging::read_png_text(&out).unwrap();
    // A1111 quotes values with commas.
    assert!(
        text.iter()
            .any(|(_, v)| v.contains("Outpaint: \"0,13,0,0\""))
    );
}
