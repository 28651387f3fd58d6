//! `ember generate --vae auto|none|FILE`: a VAE file or folder decodes in place of the
//! model's own and is written as A1111 writes it (`VAE hash`, `VAE`); a missing file is one
//! error line before anything loads; a file that is not a VAE says why, with no image
//! written. (The VAE's pictures are checked against the runs in
//! `tests/reference/external_vae.rs`.)

use std::path::Path;

use ember_tests::{read_png_rgb, reference};

use crate::{arg, ember, parameters};

fn generate(dir: &Path, out: &str, vae: &str) -> std::process::Output {
    let model = arg(&reference("sd15/pipeline"));
    let args = [
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
        "64",
        "--out",
        out,
        "--vae",
        vae,
    ];
    ember(dir, &args)
}

#[test]
fn a_vae_folder_decodes_and_is_written_in_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let folder = d.join("my-vae");
    std::fs::create_dir_all(&folder).unwrap();
    for entry in std::fs::read_dir(reference("sd15/pipeline/vae"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(entry.path(), folder.join(entry.file_name())).unwrap();
    }
    for (out, vae) in [
        ("own.png", "none"),
        ("folder.png", folder.to_str().unwrap()),
    ] {
        let run = generate(d, out, vae);
        assert!(
            run.status.success(),
            "{vae}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let own = parameters(&d.join("own.png"));
    assert_eq!(own.get("VAE"), None);
    let chosen = parameters(&d.join("folder.png"));
    assert_eq!(chosen.get("VAE"), Some("my-vae"));
    assert_eq!(
        chosen.get("VAE hash"),
        None,
        "A1111 hashes VAE files, not folders"
    );
    // The model's own VAE weights, from its own folder: the same picture.
    assert_eq!(
        read_png_rgb(&d.join("own.png")).2,
        read_png_rgb(&d.join("folder.png")).2
    );
}

#[test]
fn a_missing_or_wrong_vae_is_one_error_line_and_no_image() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let checkpoint = arg(&reference("sd15/checkpoint.safetensors"));
    for (vae, says) in [
        (
            "missing.safetensors",
            "--vae: missing.safetensors does not exist",
        ),
        (checkpoint.as_str(), "whole checkpoint"),
    ] {
        let run = generate(d, "x.png", vae);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{vae} was taken");
        assert!(stderr.contains(says), "{vae}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!d.join("x.png").exists(), "{vae}: an image was written");
    }
}
