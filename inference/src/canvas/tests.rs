//! The canvas functions' properties.

use super::*;
use crate::imaging::{ImageGray8, ImageRgb8};

fn image(w: u32, h: u32) -> ImageRgb8 {
    let pixels = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
    ImageRgb8 {
        width: w,
        height: h,
        pixels,
    }
}

/// A mask with the rectangle `[x1, x2) x [y1, y2)` white.
fn rect_mask(w: u32, h: u32, r: Rect) -> ImageGray8 {
    let pixels = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .map(|(x, y)| {
            if x >= r.x1 && x < r.x2 && y >= r.y1 && y < r.y2 {
                255
            } else {
                0
            }
        })
        .collect();
    ImageGray8 {
        width: w,
        height: h,
        pixels,
    }
}

fn rect(x1: u32, y1: u32, x2: u32, y2: u32) -> Rect {
    Rect { x1, y1, x2, y2 }
}

#[test]
fn composite_keeps_every_unmasked_pixel_byte_for_byte() {
    let (original, generated) = (image(40, 24), {
        let mut g = image(40, 24);
        g.pixels.iter_mut().for_each(|v| *v = v.wrapping_add(77));
        g
    });
    let mask = blur_mask(&rect_mask(40, 24, rect(10, 4, 30, 20)), 2);
    let out = composite(&original, &generated, &mask);
    for (i, &m) in mask.pixels.iter().enumerate() {
        let (o, g, r) = (
            &original.pixels[i * 3..i * 3 + 3],
            &generated.pixels[i * 3..i * 3 + 3],
            &out.pixels[i * 3..i * 3 + 3],
        );
        match m {
            0 => assert_eq!(r, o, "pixel {i} outside the mask changed"),
            255 => assert_eq!(r, g, "pixel {i} inside the mask is not the generation"),
            _ => {}
        }
    }
    assert!(mask.pixels.contains(&0) && mask.pixels.contains(&255));
}

#[test]
fn blur_radius_zero_is_the_identity() {
    let mask = rect_mask(33, 17, rect(3, 4, 9, 12));
    assert_eq!(blur_mask(&mask, 0), mask);
    assert_ne!(blur_mask(&mask, 3), mask);
}

#[test]
fn crop_regions_grow_to_the_aspect_ratio_and_stay_inside_at_edges_and_corners() {
    let (w, h) = (200, 120);
    let cases = [
        ("centre", rect(90, 50, 110, 70)),
        ("top-left corner", rect(0, 0, 10, 10)),
        ("bottom-right corner", rect(190, 110, 200, 120)),
        ("left edge, tall", rect(0, 10, 5, 110)),
        ("bottom edge, wide", rect(20, 115, 180, 120)),
        ("everything", rect(0, 0, 200, 120)),
    ];
    for (what, r) in cases {
        let mask = rect_mask(w, h, r);
        for size in [(64, 64), (96, 64), (64, 128)] {
            let c = crop_region(&mask, 8, size).expect("a mask");
            assert!(
                c.x2 <= w && c.y2 <= h,
                "{what} {size:?}: {c:?} leaves the image"
            );
            assert!(
                c.x1 <= r.x1 && c.y1 <= r.y1 && c.x2 >= r.x2 && c.y2 >= r.y2,
                "{what}: {c:?} misses the mask"
            );
            // The aspect ratio matches unless the image is too small along that axis.
            let ratio = f64::from(c.width()) / f64::from(c.height());
            let target = f64::from(size.0) / f64::from(size.1);
            let clipped = c.width() == w || c.height() == h;
            assert!(
                clipped || (ratio - target).abs() / target < 0.05,
                "{what} {size:?}: {c:?} ratio {ratio}"
            );
        }
    }
    assert_eq!(
        crop_region(&rect_mask(w, h, rect(0, 0, 0, 0)), 8, (64, 64)),
        None
    );
}

#[test]
fn outpainting_keeps_sizes_multiples_of_8_and_masks_only_the_new_area() {
    let img = image(64, 48);
    for ext in [
        Extension {
            left: 10,
            right: 0,
            up: 0,
            down: 0,
        },
        Extension {
            left: 0,
            right: 13,
            up: 5,
            down: 0,
        },
        Extension {
            left: 7,
            right: 9,
            up: 3,
            down: 30,
        },
    ] {
        let (canvas, mask) = outpaint(&img, ext);
        assert_eq!((canvas.width % 8, canvas.height % 8), (0, 0), "{ext:?}");
        assert!(
            canvas.width >= 64 + ext.left + ext.right && canvas.height >= 48 + ext.up + ext.down
        );
        assert_eq!((mask.width, mask.height), (canvas.width, canvas.height));
        // The source sits unmasked and unchanged at (left, up).
        let (left, up) = (
            ext.left
                + if ext.right == 0 && ext.left > 0 {
                    (8 - (64 + ext.left) % 8) % 8
                } else {
                    0
                },
            ext.up
                + if ext.down == 0 && ext.up > 0 {
                    (8 - (48 + ext.up) % 8) % 8
                } else {
                    0
                },
        );
        for y in 0..48 {
            for x in 0..64 {
                let c = ((y + up) * canvas.width + x + left) as usize;
                let s = ((y * 64 + x) * 3) as usize;
                assert_eq!(mask.pixels[c], 0);
                assert_eq!(&canvas.pixels[c * 3..c * 3 + 3], &img.pixels[s..s + 3]);
            }
        }
        let masked = mask.pixels.iter().filter(|&&m| m == 255).count() as u32;
        assert_eq!(masked, canvas.width * canvas.height - 64 * 48);
    }
}

#[test]
fn only_masked_inpainting_pastes_back_inside_the_blurred_mask_only() {
    let source = image(160, 96);
    let mask = rect_mask(160, 96, rect(100, 60, 130, 90));
    let options = InpaintOptions {
        area: InpaintArea::OnlyMasked { padding: 16 },
        ..InpaintOptions::default()
    };
    let prepared = prepare(&source, &mask, (64, 64), &options).unwrap();
    assert_eq!((prepared.init.width, prepared.init.height), (64, 64));
    assert_eq!((prepared.mask.width, prepared.mask.height), (64, 64));
    let generated = ImageRgb8 {
        width: 64,
        height: 64,
        pixels: vec![200; 64 * 64 * 3],
    };
    let out = finish(&generated, &prepared.paste, true);
    assert_eq!((out.width, out.height), (160, 96));
    let blurred = blur_mask(&mask, options.mask_blur);
    for (i, &m) in blurred.pixels.iter().enumerate() {
        if m == 0 {
            assert_eq!(
                &out.pixels[i * 3..i * 3 + 3],
                &source.pixels[i * 3..i * 3 + 3]
            );
        }
    }
    let inside = ((75 * 160 + 115) * 3) as usize;
    assert_eq!(&out.pixels[inside..inside + 3], &[200, 200, 200]);
}

#[test]
fn fill_paints_the_masked_area_from_its_surroundings_and_keeps_the_rest() {
    let mut img = ImageRgb8 {
        width: 32,
        height: 32,
        pixels: vec![0; 32 * 32 * 3],
    };
    for p in img.pixels.chunks_exact_mut(3) {
        p.copy_from_slice(&[10, 120, 230]);
    }
    let mask = rect_mask(32, 32, rect(8, 8, 24, 24));
    // The masked pixels hold something else, which fill must replace.
    for y in 8..24 {
        for x in 8..24 {
            let i = ((y * 32 + x) * 3) as usize;
            img.pixels[i..i + 3].copy_from_slice(&[255, 0, 0]);
        }
    }
    let out = fill_masked(&img, &mask);
    for p in out.pixels.chunks_exact(3) {
        for (got, want) in p.iter().zip([10u8, 120, 230]) {
            assert!(got.abs_diff(want) <= 2, "{p:?}");
        }
    }
}

#[test]
fn fitting_gives_the_exact_size_in_every_mode() {
    let img = image(90, 40);
    for mode in [FitMode::Resize, FitMode::Crop, FitMode::Fill] {
        let out = fit(&img, (64, 64), mode);
        assert_eq!((out.width, out.height), (64, 64), "{mode:?}");
        assert_eq!(out.pixels.len(), 64 * 64 * 3);
        let mask = fit_mask(&rect_mask(90, 40, rect(0, 0, 45, 40)), (64, 64), mode);
        assert_eq!((mask.width, mask.height), (64, 64), "{mode:?}");
        // The left half stays masked, the right half not, whatever the mode.
        assert!(
            mask.pixels[32 * 64 + 2] > 128 && mask.pixels[32 * 64 + 61] < 128,
            "{mode:?}"
        );
    }
}

#[test]
fn generation_sizes_are_multiples_of_8_within_the_limits() {
    assert_eq!(generation_size(1000, 750), (1000, 744));
    assert_eq!(generation_size(1064, 750), (1064, 744));
    assert_eq!(generation_size(3, 9000), (8, crate::api::MAX_SIDE));
    assert_eq!(generation_size(512, 512), (512, 512));
}

#[test]
fn a_canvas_job_fits_hashes_and_records_like_for_the_app_and_the_cli() {
    let source = ImageRgb8 {
        width: 64,
        height: 32,
        pixels: (0..64 * 32 * 3).map(|i| (i % 251) as u8).collect(),
    };
    let options = CanvasOptions {
        inpaint: InpaintOptions::default(),
        fit: FitMode::Crop,
        composite: false,
    };
    // img2img: the resize mode applies, and the hash is of the source's own pixels.
    let job = canvas_job(&source, None, (32, 32), &options).unwrap();
    assert_eq!(job.init, fit(&source, (32, 32), FitMode::Crop));
    let hash = crate::hashing::sha256_bytes(&source.pixels);
    assert_eq!(
        job.fields,
        [("Init image hash".to_string(), hash[..10].to_string())]
    );
    assert!(job.mask.is_none());
    // Inpainting: the mask is fitted alike and the options are recorded.
    let mask = ImageGray8 {
        width: 64,
        height: 32,
        pixels: (0..64 * 32)
            .map(|i| if i % 64 < 32 { 255 } else { 0 })
            .collect(),
    };
    let job = canvas_job(&source, Some(&mask), (32, 32), &options).unwrap();
    assert_eq!(job.init.width, 32);
    assert_eq!(job.mask.as_ref().unwrap().width, 32);
    let text = job.fields_text();
    assert!(
        text.starts_with(&format!("Init image hash: {}", &hash[..10])),
        "{text}"
    );
    assert!(
        text.contains("Mask blur: 4") && text.contains("Composite: off"),
        "{text}"
    );
}

#[test]
fn a_paste_read_back_is_refused_when_its_box_or_mask_does_not_fit_its_canvas() {
    let source = image(40, 24);
    let mask = rect_mask(40, 24, rect(10, 5, 20, 15));
    let options = InpaintOptions {
        area: InpaintArea::OnlyMasked { padding: 4 },
        ..InpaintOptions::default()
    };
    let paste = prepare(&source, &mask, (16, 16), &options).unwrap().paste;
    let json = serde_json::to_value(&paste).unwrap();
    assert!(serde_json::from_value::<Paste>(json.clone()).is_ok());
    let edited = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut json = json.clone();
        edit(&mut json);
        serde_json::from_value::<Paste>(json)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    // A box past the canvas (a damaged queue.json) once made finishing resize to 25 GB.
    let far = edited(&|j| j["region"]["x2"] = 100_000_000.into());
    assert!(far.contains("is not inside its 40x24 canvas"), "{far}");
    let inverted = edited(&|j| j["region"]["x1"] = 39.into());
    assert!(inverted.contains("is not inside"), "{inverted}");
    let other_mask =
        edited(&|j| j["mask"] = serde_json::to_value(rect_mask(8, 8, rect(0, 0, 1, 1))).unwrap());
    assert!(
        other_mask.contains("mask is 8x8 but its canvas 40x24"),
        "{other_mask}"
    );
}

#[test]
fn a_whole_picture_paste_covers_the_canvas_whatever_size_comes_back() {
    let source = image(40, 24);
    let mask = rect_mask(40, 24, rect(10, 5, 20, 15));
    let paste = prepare(&source, &mask, (40, 24), &InpaintOptions::default())
        .unwrap()
        .paste;
    // Only a damaged kept queue could pair this canvas with a request of another size.
    let out = finish(&image(16, 16), &paste, true);
    assert_eq!((out.width, out.height), (40, 24));
    assert_eq!(out.pixels.len(), 40 * 24 * 3);
}

#[test]
fn a_whole_picture_rounded_to_multiples_of_8_comes_back_at_the_canvas_size_untouched_outside_the_mask()
 {
    // A canvas of 83x51 generates at 80x48 (multiples of 8).
    let source = image(83, 51);
    let mask = rect_mask(83, 51, rect(10, 5, 40, 35));
    let generated = ImageRgb8 {
        width: 80,
        height: 48,
        pixels: vec![255; 80 * 48 * 3],
    };
    let options = |fit| CanvasOptions {
        inpaint: InpaintOptions::default(),
        fit,
        composite: true,
    };
    let job = canvas_job(&source, Some(&mask), (80, 48), &options(FitMode::Resize)).unwrap();
    assert_eq!(
        (job.init.width, job.init.height),
        (80, 48),
        "generated at its size"
    );
    let out = job.finish(&generated);
    assert_eq!(
        (out.width, out.height),
        (83, 51),
        "back at the canvas's size"
    );
    let blurred = blur_mask(&mask, InpaintOptions::default().mask_blur);
    let mut kept = 0;
    for (i, &m) in blurred.pixels.iter().enumerate() {
        if m == 0 {
            assert_eq!(
                out.pixels[i * 3..i * 3 + 3],
                source.pixels[i * 3..i * 3 + 3]
            );
            kept += 1;
        }
    }
    assert!(
        kept > 83 * 51 / 4,
        "much of the canvas is outside the mask ({kept})"
    );
    assert_eq!(
        &out.pixels[(20 * 83 + 25) * 3..][..3],
        &[255; 3],
        "inside: generated"
    );
    // Crop and fill, and a size asked for, keep the generation's size, as A1111 does.
    let cropped = canvas_job(&source, Some(&mask), (80, 48), &options(FitMode::Crop)).unwrap();
    let out = cropped.finish(&generated);
    assert_eq!((out.width, out.height), (80, 48));
    let smaller = canvas_job(&source, Some(&mask), (40, 24), &options(FitMode::Resize)).unwrap();
    let out = smaller.finish(&image(40, 24));
    assert_eq!((out.width, out.height), (40, 24));
}
