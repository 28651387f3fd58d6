//! `--device auto` and `--precision auto`: `--verbose` says which device ran and why.

use std::process::Command;

use ember_tests::reference;

use crate::arg;

#[test]
fn the_automatic_device_says_which_it_is_and_why() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("auto.png");
    let output = Command::new(env!("CARGO_BIN_EXE_ember"))
        .env_remove("EMBER_DEVICE")
        .env("EMBER_CACHE_DIR", tmp.path().join("cache"))
        .args(["generate", "--model", &arg(&reference("sd15/pipeline"))])
        .args(["--prompt", "a lighthouse", "--steps", "1", "--verbose"])
        .args(["--out", &arg(&out)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(out.exists(), "the image is written");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("device: "))
        .unwrap_or_else(|| panic!("no device line in:\n{stderr}"));
    if line.contains("the CPU") {
        // Software renderers (lavapipe) are not chosen; the reason is given.
        assert!(
            line.contains("found no GPU") || line.contains("no GPU backend"),
            "{line}"
        );
        assert!(line.ends_with("precision: f32"), "{line}");
    } else {
        assert!(
            line.ends_with("precision: f16") || line.ends_with("precision: f32"),
            "{line}"
        );
    }
}
