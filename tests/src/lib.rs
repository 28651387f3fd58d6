//! Shared helpers for Ember's reference tests: finding `../shared/reference`, reading its
//! safetensors and JSON files, and comparing our numbers with theirs under a stated tolerance.
//!
//! A test that cannot find the reference tree fails; it never passes silently.

use std::path::{Path, PathBuf};

pub use serde_json::Value as Json;

mod compare;
pub mod cuda_stand_in;
pub mod fake_engine;
mod fixtures;
pub mod fuzz;
pub mod http_server;
pub mod torch_file;

pub use compare::{Diff, assert_close, assert_close_scaled, diff, pixel_diff};
pub use fixtures::{Fixture, Fixtures};

/// Runs the test `name` (its path in this test binary) again in a child process, with
/// `child_flag` set there and `configure` applied to its command, and fails unless it
/// passed: for a test that needs a process of its own (an environment read once, a library
/// path). The child sees `child_flag` and runs the test's body.
pub fn run_test_in_child(
    name: &str,
    child_flag: &str,
    configure: impl FnOnce(&mut std::process::Command),
) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    configure(&mut command);
    let output = command
        .args(["--exact", name, "--nocapture"])
        .env(child_flag, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{text}"
    );
}

/// The reference tree: `$EMBER_REFERENCE` when set, else `../shared/reference` beside the
/// repository. Panics with a message saying where it looked when the tree is missing.
pub fn reference_root() -> PathBuf {
    let root = match std::env::var_os("EMBER_REFERENCE") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference"),
    };
    assert!(
        root.join("README.md").is_file(),
        "reference tree not found at {} (set EMBER_REFERENCE to its path)",
        root.display()
    );
    root
}

/// A path inside the reference tree; panics if it does not exist.
pub fn reference(rel: &str) -> PathBuf {
    let path = reference_root().join(rel);
    assert!(path.exists(), "reference file missing: {}", path.display());
    path
}

/// A path in `tests/extra`, the fixtures Ember's own scripts made (in the repository, read
/// whatever the reference tree is).
pub fn extra(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("extra")
        .join(rel)
}

/// Reads and parses a JSON file from the reference tree.
pub fn json(rel: &str) -> Json {
    let path = reference(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file in a reference folder whose name ends with `suffix`, sorted.
pub fn files_in(rel_dir: &str, suffix: &str) -> Vec<PathBuf> {
    let dir = reference(rel_dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("readable dir entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix))
        })
        .collect();
    files.sort();
    files
}

/// The element count of a JSON shape (`[1, 4, 8, 8]`).
pub fn numel(shape: &Json) -> usize {
    shape
        .as_array()
        .expect("a shape is an array")
        .iter()
        .map(|d| d.as_u64().expect("a dimension") as usize)
        .product()
}

/// Every run of `sd15/runs` (name, JSON).
pub fn runs() -> Vec<(String, Json)> {
    runs_in("sd15/runs")
}

/// The run's input image file (`"input_init_image.png"` or `"input_mask.png (white = ...)"`).
pub fn run_input(run: &Json, key: &str) -> Option<PathBuf> {
    run_input_in("sd15/runs", run, key)
}

/// [`run_input`] for a run of another folder (`sdxl/runs`).
pub fn run_input_in(dir: &str, run: &Json, key: &str) -> Option<PathBuf> {
    let text = run[key].as_str()?;
    Some(reference(dir).join(text.split_whitespace().next()?))
}

/// Every run of a runs folder (`sdxl/runs`): (name, JSON), sorted.
pub fn runs_in(dir: &str) -> Vec<(String, Json)> {
    files_in(dir, ".json")
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let run = json(&format!("{dir}/{name}.json"));
            (name, run)
        })
        .collect()
}

/// The single-file checkpoint holding the same weights as a reference folder.
pub fn single_file_of(folder: &str) -> &'static str {
    match folder {
        "sd15/pipeline" => "sd15/checkpoint.safetensors",
        "sd2v/pipeline" => "sd2v/checkpoint.safetensors",
        "sdxl/pipeline" => "sdxl/checkpoint.safetensors",
        "sdxl/refiner" => "sdxl/refiner_checkpoint.safetensors",
        other => panic!("no single file is known for {other}"),
    }
}

/// The folders a run's `model` names: the base and, for a two-stage run
/// (`"sdxl/pipeline (stage 1) + sdxl/refiner (stage 2)"`), the refiner.
pub fn run_models(run: &Json) -> (String, Option<String>) {
    let folders: Vec<String> = run["model"]
        .as_str()
        .expect("a run names its model")
        .split(['+', ' ', '(', ')'])
        .filter(|w| w.contains('/'))
        .map(str::to_string)
        .collect();
    (folders[0].clone(), folders.get(1).cloned())
}

/// Copies the sd15 pipeline into a temporary diffusers folder whose UNet is
/// `sd15/unet_inpaint` (how a real 9-channel inpainting model is laid out).
pub fn inpainting_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let copy_dir = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    };
    let pipeline = reference("sd15/pipeline");
    for component in ["text_encoder", "tokenizer", "vae", "scheduler"] {
        copy_dir(&pipeline.join(component), &dir.path().join(component));
    }
    copy_dir(&reference("sd15/unet_inpaint"), &dir.path().join("unet"));
    std::fs::copy(
        pipeline.join("model_index.json"),
        dir.path().join("model_index.json"),
    )
    .unwrap();
    dir
}

/// Decodes an 8-bit RGB PNG: (width, height, pixels).
pub fn read_png_rgb(path: &Path) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(
        info.color_type,
        png::ColorType::Rgb,
        "{} is not RGB",
        path.display()
    );
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Writes the sd15 single-file checkpoint to `dst` with `edit` applied to every tensor
/// (returning false drops it) and `extra` tensors added: damaged or extended checkpoints
/// for tests.
pub fn write_edited_checkpoint(
    dst: &Path,
    edit: impl FnMut(&str, &mut Fixture) -> bool,
    extra: Vec<(String, Fixture)>,
) {
    write_edited("sd15/checkpoint.safetensors", dst, edit, extra);
}

/// [`write_edited_checkpoint`] for any safetensors file of the reference tree.
pub fn write_edited(
    src_rel: &str,
    dst: &Path,
    edit: impl FnMut(&str, &mut Fixture) -> bool,
    extra: Vec<(String, Fixture)>,
) {
    write_edited_file(&reference(src_rel), dst, edit, extra);
}

/// [`write_edited`] for a safetensors file anywhere (`tests/extra`'s).
pub fn write_edited_file(
    src: &Path,
    dst: &Path,
    mut edit: impl FnMut(&str, &mut Fixture) -> bool,
    extra: Vec<(String, Fixture)>,
) {
    let src = Fixtures::load_path(src);
    let mut kept: Vec<(String, Fixture)> = Vec::new();
    for (name, mut tensor) in src.tensors {
        if edit(&name, &mut tensor) {
            kept.push((name, tensor));
        }
    }
    kept.extend(extra);
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = kept
        .iter()
        .map(|(n, t)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(t.dtype, t.shape.clone(), &t.bytes).unwrap(),
            )
        })
        .collect();
    std::fs::write(dst, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// The diffusers scheduler classes the engine issue requires; tests check that a run of
/// each was reproduced.
pub fn required_scheduler_classes() -> [inference::schedule::diffusers::SchedulerClass; 13] {
    use inference::schedule::diffusers::SchedulerClass as C;
    [
        C::EulerDiscrete,
        C::EulerAncestralDiscrete,
        C::Ddim,
        C::DpmSolverMultistep,
        C::HeunDiscrete,
        C::LmsDiscrete,
        C::KDpm2Discrete,
        C::KDpm2AncestralDiscrete,
        C::DpmSolverSde,
        C::Ddpm,
        C::UniPcMultistep,
        C::DeisMultistep,
        C::Lcm,
    ]
}

/// Every final-named PNG in `dir` decodes with its metadata; returns how many there are.
pub fn check_whole_pngs(dir: &Path, what: &str) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if path.extension().is_some_and(|e| e == "png") && !hidden {
            inference::imaging::load_rgb(&path, None)
                .unwrap_or_else(|e| panic!("{what}: {} is half-written: {e}", path.display()));
            let text = inference::imaging::read_png_text(&path).unwrap();
            assert!(
                text.iter().any(|(k, _)| k == "parameters"),
                "{what}: {} lost its metadata",
                path.display()
            );
            count += 1;
        }
    }
    count
}

/// A `.safetensors` file holding f32 tensors `(name, shape, values)`.
pub fn safetensors_bytes(tensors: &[(&str, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, values)| values.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), data)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                    .expect("the shape fits the values");
            (name.to_string(), view)
        })
        .collect();
    safetensors::serialize(views, None).expect("serialise")
}
