//! `ember generate --seamless both|x|y|off`: the setting reaches the image and its
//! parameters (A1111's `Tiling`, its Asymmetric tiling script's `Tile X` / `Tile Y`), and
//! a bad value or a clash with VAE tiles is one error line. (The wrapped convolutions are
//! checked against diffusers in `tests/reference/extra_runs.rs`.)

use std::path::Path;

use ember_tests::{read_png_rgb, reference};
use inference::imaging;
use inference::metadata::Parameters;

use crate::{arg, ember};

fn generate(dir: &Path, out: &str, extra: &[&str]) -> std::process::Output {
    let model = arg(&reference("sd15/pipeline"));
    let mut args = vec![
        "generate",
        "--model",
        &model,
        "--prompt",
        "a brick wall",
        "--steps",
        "2",
        "--seed",
        "9",
        "--width",
        "48",
        "--height",
        "32",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    ember(dir, &args)
}

/// The `parameters` text of `dir/name` as fields.
fn parameters(dir: &Path, name: &str) -> Parameters {
    let text = imaging::read_png_text(&dir.join(name)).unwrap();
    let (_, value) = text.iter().find(|(k, _)| k == "parameters").unwrap();
    Parameters::parse(value)
}

#[test]
fn each_axis_setting_makes_its_own_image_and_says_so_as_a1111_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut images = Vec::new();
    for mode in ["off", "both", "x", "y"] {
        let name = format!("{mode}.png");
        let out = generate(d, &name, &["--seamless", mode]);
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = parameters(d, &name);
        let fields = (p.get("Tiling"), p.get("Tile X"), p.get("Tile Y"));
        let expected = match mode {
            "off" => (None, None, None),
            "both" => (Some("True"), None, None),
            "x" => (None, Some("True"), Some("False")),
            _ => (None, Some("False"), Some("True")),
        };
        assert_eq!(fields, expected, "{mode}");
        images.push(read_png_rgb(&d.join(&name)).2);
    }
    for i in 0..images.len() {
        for j in i + 1..images.len() {
            assert_ne!(images[i], images[j], "settings {i} and {j} made one image");
        }
    }
}

#[test]
fn a_bad_value_and_vae_tiles_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (extra, says) in [
        (&["--seamless", "diagonal"][..], "off, both, x, y"),
        (
            &["--seamless", "both", "--vae-tiling", "on"][..],
            "VAE tiling to auto or off",
        ),
    ] {
        let out = generate(d, "bad.png", extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!d.join("bad.png").exists());
    }
}
