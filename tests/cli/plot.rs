//! `ember generate --plot-x/-y/-z`: A1111's X/Y/Z plot from the command line. Each cell is
//! the image its settings make alone, written with its own settings; the grid holds the
//! cells where A1111's layout puts them, with the plot's fields in its metadata; bad plots
//! fail before anything is made. (Value syntax and layout: `app/src/plot/tests.rs`.)

use std::path::Path;

use ember_tests::reference;
use inference::imaging::{self, ImageRgb8};

use crate::{arg, ember, parameters};

const SIDE: u32 = 32;

fn args<'a>(model: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "generate",
        "--model",
        model,
        "--prompt",
        "a red fox",
        "--negative",
        "ugly",
        "--seed",
        "3",
        "--width",
        "32",
        "--height",
        "32",
        "--sampler",
        "euler",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    args
}

fn load(path: &Path) -> ImageRgb8 {
    imaging::load_rgb(path, None).unwrap()
}

#[test]
fn a_plot_writes_each_cell_as_made_alone_and_their_grid() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = arg(&reference("sd15/pipeline"));
    let plot = [
        "--steps",
        "1",
        "--plot-x",
        "Steps: 1, 2",
        "--plot-y",
        "Seed: 3, -1",
    ];
    let out = ember(d, &args(&model, "plot.png", &plot));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("image 4 of 4: Steps: 2, Seed: "),
        "{stderr}"
    );

    let grid = parameters(&d.join("plot.png"));
    assert_eq!(grid.get("Script"), Some("X/Y/Z plot"));
    assert_eq!(grid.get("X Type"), Some("Steps"));
    assert_eq!(grid.get("X Values"), Some("1, 2"));
    assert_eq!(grid.get("Y Type"), Some("Seed"));
    let fixed = grid.get("Fixed Y Values").unwrap().to_string();
    let (first, drawn) = fixed.split_once(", ").unwrap();
    assert_eq!(first, "3");
    // X runs fastest: cell i is (i % 2, i / 2), with the seed drawn for -1 in row 1.
    for i in 0..4 {
        let cell = parameters(&d.join(format!("plot-{i}.png")));
        assert_eq!(cell.get("Steps"), Some(["1", "2"][i % 2]), "cell {i}");
        assert_eq!(cell.get("Seed"), Some([first, drawn][i / 2]), "cell {i}");
        assert_eq!(cell.get("Script"), None);
    }

    // The cell with 2 steps and seed 3 is the image those settings make alone.
    let alone = ember(d, &args(&model, "alone.png", &["--steps", "2"]));
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    assert_eq!(load(&d.join("plot-1.png")), load(&d.join("alone.png")));

    // A1111's layout: Y labels in 3/4 of a cell's width on the left, X labels above, the
    // cells below them pixel for pixel.
    let image = load(&d.join("plot.png"));
    let pad_left = SIDE * 3 / 4;
    assert_eq!(image.width, pad_left + 2 * SIDE);
    let pad_top = image.height - 2 * SIDE;
    assert!(pad_top > 0);
    for i in 0..4u32 {
        let cell = load(&d.join(format!("plot-{i}.png")));
        let (left, top) = (pad_left + (i % 2) * SIDE, pad_top + (i / 2) * SIDE);
        for y in 0..SIDE {
            let row = |img: &ImageRgb8, x0: u32, y0: u32| {
                let at = ((y0 + y) * img.width + x0) as usize * 3;
                img.pixels[at..at + SIDE as usize * 3].to_vec()
            };
            assert_eq!(
                row(&image, left, top),
                row(&cell, 0, 0),
                "cell {i}, row {y}"
            );
        }
    }
}

#[test]
fn a_bad_plot_is_one_error_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No such model: each error below comes before the model is loaded.
    let model = arg(&d.join("not yet downloaded.safetensors"));
    let cases: [(&[&str], &str); 7] = [
        (&["--plot-x", "Steps 1, 2"], "TYPE: VALUES"),
        (&["--plot-x", "Colour: red"], "no axis \"Colour\""),
        (&["--plot-x", "Steps: 1, 2", "--batch", "2"], "--batch"),
        (&["--plot-y", "Prompt S/R: wolf, cat"], "\"wolf\""),
        (&["--plot-x", "Sampler: Euler, Nope"], "Nope"),
        (&["--plot-z", "Steps: 10, 0"], "Steps: 0"),
        (&["--plot-x", "Denoising: 0.5"], "hires fix"),
    ];
    for (extra, says) in cases {
        let out = ember(d, &args(&model, "bad.png", extra));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{extra:?}: {stderr}");
        assert!(!d.join("bad.png").exists() && !d.join("bad-0.png").exists());
    }
}

#[test]
fn a_checkpoint_axis_loads_the_models_beside_the_model_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The folder layout and the single file of one model: the same weights, two models.
    let model = arg(&reference("sd15/pipeline"));
    let plot = [
        "--steps",
        "2",
        "--plot-x",
        "Checkpoint name: checkpoint, pipeline",
        "--plot-y",
        "Seed: 3, 4",
        "--vae",
        "none",
    ];
    let out = ember(d, &args(&model, "plot.png", &plot));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // One checkpoint at a time: its two cells, then the other's.
    let single = reference("sd15/checkpoint.safetensors");
    let loads = stderr.lines().filter(|l| l.starts_with("loading ")).count();
    assert_eq!(loads, 2, "checkpoint, then pipeline again: {stderr}");
    assert!(
        stderr.contains(&format!("loading {}", single.display())),
        "{stderr}"
    );
    let cells: Vec<(String, Vec<u8>)> = (0..4)
        .map(|i| {
            let path = d.join(format!("plot-{i}.png"));
            let p = parameters(&path);
            (p.get("Model").unwrap().to_string(), load(&path).pixels)
        })
        .collect();
    let models: Vec<&str> = cells.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(models, ["checkpoint", "checkpoint", "pipeline", "pipeline"]);
    // Bit-identical weights: each seed's image is the same from either model.
    assert_eq!(cells[0].1, cells[2].1);
    assert_eq!(cells[1].1, cells[3].1);
    assert_ne!(cells[0].1, cells[1].1);
    let grid = parameters(&d.join("plot.png"));
    assert_eq!(grid.get("X Type"), Some("Checkpoint name"));

    let missing = ember(
        d,
        &args(
            &model,
            "missing.png",
            &["--plot-x", "Checkpoint name: nowhere"],
        ),
    );
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        stderr.contains("no checkpoint named \"nowhere\""),
        "{stderr}"
    );
}
