//! `ember generate --vae-tiling auto|on|off`: `on` decodes (and encodes an init image) in
//! the VAE's tiles, `auto` with the memory free keeps the whole image, a bad value is one
//! error line. (The tiles themselves are checked against diffusers in
//! `tests/reference/vae_tiles.rs`, and `auto`'s choice against a memory budget in
//! `pipeline::vae_plan`'s tests.)

use std::path::Path;

use ember_tests::{read_png_rgb, reference};

use crate::{arg, ember};

/// txt2img on the reference SD 1.5 folder at 64x48: larger than its VAE's 32 px tiles.
fn generate(dir: &Path, out: &str, extra: &[&str]) -> std::process::Output {
    let model = arg(&reference("sd15/pipeline"));
    let mut args = vec![
        "generate",
        "--model",
        &model,
        "--prompt",
        "a lighthouse",
        "--steps",
        "2",
        "--seed",
        "5",
        "--width",
        "64",
        "--height",
        "48",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    ember(dir, &args)
}

fn pixels(dir: &Path, name: &str) -> Vec<u8> {
    read_png_rgb(&dir.join(name)).2
}

#[test]
fn tiles_are_used_when_asked_and_auto_keeps_the_whole_image_when_it_fits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, mode) in [("off.png", "off"), ("on.png", "on"), ("auto.png", "auto")] {
        let out = generate(d, name, &["--vae-tiling", mode]);
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("tiles"), "{mode} said: {stderr}");
    }
    let (off, on, auto) = (
        pixels(d, "off.png"),
        pixels(d, "on.png"),
        pixels(d, "auto.png"),
    );
    assert_eq!(auto, off, "with memory free, auto decodes the whole image");
    assert_ne!(
        on, off,
        "on decodes in tiles (each tile's GroupNorm sees only its tile)"
    );

    // An init image of that size is encoded in tiles too: the latents img2img ends with
    // (before any decoding) differ between on and off.
    let source = arg(&d.join("off.png"));
    for mode in ["on", "off"] {
        let latents = arg(&d.join(format!("{mode}.latents")));
        let out = generate(
            d,
            &format!("img2img_{mode}.png"),
            &[
                "--init-image",
                &source,
                "--strength",
                "0.5",
                "--vae-tiling",
                mode,
                "--save-latents",
                &latents,
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let read = |mode: &str| std::fs::read(d.join(format!("{mode}.latents"))).unwrap();
    assert_ne!(read("on"), read("off"));

    let bad = generate(d, "bad.png", &["--vae-tiling", "sometimes"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(stderr.contains("auto, on, off"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!d.join("bad.png").exists());
}
