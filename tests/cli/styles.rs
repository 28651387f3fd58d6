//! `ember generate --style NAME`: A1111 styles from a styles.csv (the app's, or
//! `--styles-file`) make the prompts the image records, in the order given; an unknown
//! style is one error line naming the styles there are. (How styles make prompts is checked
//! against A1111's own code in `app/src/styles/tests.rs`.)

use std::path::Path;
use std::process::Command;

use ember_tests::reference;

use crate::{arg, ember};

const STYLES: &str = "name,prompt,negative_prompt\r\n\
    Masterpiece,\"masterpiece, best quality\",\"worst quality\"\r\n\
    Watercolor,\"a watercolor painting of {prompt}, paper texture\",photo\r\n";

fn args<'a>(model: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "generate",
        "--model",
        model,
        "--prompt",
        "a fox",
        "--negative",
        "ugly",
        "--steps",
        "1",
        "--seed",
        "3",
        "--width",
        "32",
        "--height",
        "32",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    args
}

/// The image's prompt and negative prompt as its `parameters` record them.
fn prompts(path: &Path) -> (String, String) {
    let p = crate::parameters(path);
    (p.prompt, p.negative_prompt)
}

#[test]
fn styles_from_a_file_make_the_prompts_the_image_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("my styles.csv");
    std::fs::write(&file, STYLES).unwrap();
    let (model, file) = (arg(&reference("sd15/pipeline")), arg(&file));
    let extra = [
        "--styles-file",
        &file,
        "--style",
        "Watercolor",
        "--style",
        "Masterpiece",
    ];
    let out = ember(d, &args(&model, "styled.png", &extra));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        prompts(&d.join("styled.png")),
        (
            "a watercolor painting of a fox, paper texture, masterpiece, best quality".into(),
            "ugly, photo, worst quality".into()
        )
    );

    let out = ember(
        d,
        &args(
            &model,
            "x.png",
            &["--styles-file", &file, "--style", "Nope"],
        ),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "{stderr}");
    assert!(
        line.contains("no style is named \"Nope\"")
            && line.contains("it has Masterpiece, Watercolor"),
        "{stderr}"
    );
    assert!(!d.join("x.png").exists());
}

#[test]
fn without_a_file_the_style_comes_from_the_apps_styles_csv() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("home/config")).unwrap();
    std::fs::write(d.join("home/config/styles.csv"), STYLES).unwrap();
    let model = arg(&reference("sd15/pipeline"));
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args(&model, "styled.png", &["--style", "Masterpiece"]))
        .current_dir(d)
        .env("EMBER_HOME", d.join("home"))
        .env("EMBER_CACHE_DIR", d.join("cache"))
        .env("EMBER_DEVICE", "cpu")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        prompts(&d.join("styled.png")).0,
        "a fox, masterpiece, best quality"
    );
}
