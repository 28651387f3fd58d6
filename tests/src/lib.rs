//! Shared helpers for Ember's reference tests: finding `../shared/reference`, reading its
//! safetensors and JSON files, and comparing our numbers with theirs under a stated tolerance.
//!
//! A test that cannot find the reference tree fails; it never passes silently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use serde_json::Value as Json;

pub mod cuda_stand_in;
pub mod fake_engine;
pub mod fuzz;
pub mod http_server;
pub mod torch_file;

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

/// One tensor of a fixture file, converted to f64 (floats) or i64 (integers).
#[derive(Clone, Debug)]
pub struct Fixture {
    pub shape: Vec<usize>,
    pub dtype: safetensors::Dtype,
    pub bytes: Vec<u8>,
}

impl Fixture {
    /// A float32 tensor.
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self {
            shape,
            dtype: safetensors::Dtype::F32,
            bytes,
        }
    }

    /// The values as f32 (float32 tensors only).
    pub fn f32(&self) -> Vec<f32> {
        assert_eq!(
            self.dtype,
            safetensors::Dtype::F32,
            "tensor is {:?}, not F32",
            self.dtype
        );
        self.bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    /// The values as f64, from any float dtype.
    pub fn f64(&self) -> Vec<f64> {
        match self.dtype {
            safetensors::Dtype::F32 => self.f32().into_iter().map(f64::from).collect(),
            safetensors::Dtype::F64 => self
                .bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            other => panic!("tensor is {other:?}, not a float"),
        }
    }

    /// The values as i64, from any integer dtype.
    pub fn i64(&self) -> Vec<i64> {
        match self.dtype {
            safetensors::Dtype::I64 => self
                .bytes
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            safetensors::Dtype::U8 => self.bytes.iter().map(|&b| i64::from(b)).collect(),
            safetensors::Dtype::I16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| i64::from(i16::from_le_bytes([b[0], b[1]])))
                .collect(),
            other => panic!("tensor is {other:?}, not an integer"),
        }
    }
}

/// All tensors of a safetensors file in the reference tree, by name.
pub struct Fixtures {
    pub path: PathBuf,
    pub tensors: BTreeMap<String, Fixture>,
}

impl Fixtures {
    /// Loads `rel` (relative to the reference root).
    pub fn load(rel: &str) -> Self {
        Self::load_path(&reference(rel))
    }

    /// Loads a safetensors file by absolute path.
    pub fn load_path(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tensors = st
            .tensors()
            .into_iter()
            .map(|(name, view)| {
                let fixture = Fixture {
                    shape: view.shape().to_vec(),
                    dtype: view.dtype(),
                    bytes: view.data().to_vec(),
                };
                (name, fixture)
            })
            .collect();
        Self {
            path: path.to_path_buf(),
            tensors,
        }
    }

    /// A tensor by name; panics naming the file if it is absent.
    pub fn get(&self, name: &str) -> &Fixture {
        self.tensors
            .get(name)
            .unwrap_or_else(|| panic!("{}: no tensor {name}", self.path.display()))
    }

    /// Whether the file holds a tensor of that name.
    pub fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

/// How far apart two tensors are.
#[derive(Clone, Copy, Debug)]
pub struct Diff {
    pub max_abs: f64,
    pub max_abs_expected: f64,
    pub worst_index: usize,
}

/// Elementwise comparison statistics (also fails on NaN/inf in `actual`).
///
/// Panics when the lengths differ: a truncated or padded output must never pass.
pub fn diff(actual: &[f32], expected: &[f64]) -> Diff {
    assert_eq!(
        actual.len(),
        expected.len(),
        "element count differs: ours {}, reference {}",
        actual.len(),
        expected.len()
    );
    let mut d = Diff {
        max_abs: 0.0,
        max_abs_expected: 0.0,
        worst_index: 0,
    };
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        assert!(a.is_finite(), "non-finite value {a} at index {i}");
        let err = (f64::from(a) - e).abs();
        if err > d.max_abs {
            d.max_abs = err;
            d.worst_index = i;
        }
        d.max_abs_expected = d.max_abs_expected.max(e.abs());
    }
    d
}

/// The largest per-channel difference between two 8-bit images, in levels, and how many
/// values differ. Panics when the lengths differ (a cropped image must never pass).
pub fn pixel_diff<A: Copy + Into<i64>, B: Copy + Into<i64>>(
    ours: &[A],
    theirs: &[B],
) -> (i64, usize) {
    assert_eq!(
        ours.len(),
        theirs.len(),
        "image sizes differ: ours {} values, reference {}",
        ours.len(),
        theirs.len()
    );
    let mut worst = 0;
    let mut off = 0;
    for (&a, &b) in ours.iter().zip(theirs) {
        let d = (a.into() - b.into()).abs();
        worst = worst.max(d);
        off += usize::from(d != 0);
    }
    (worst, off)
}

/// Asserts `|actual - expected| <= atol + rel_to_max * max|expected|` everywhere and returns
/// the statistics. `what` names the quantity in the failure message.
pub fn assert_close(
    what: &str,
    actual: &[f32],
    expected: &[f64],
    atol: f64,
    rel_to_max: f64,
) -> Diff {
    let d = diff(actual, expected);
    let bound = atol + rel_to_max * d.max_abs_expected;
    assert!(
        d.max_abs <= bound,
        "{what}: max |diff| {:.3e} at index {} (ours {}, reference {}) exceeds {:.3e} \
         (atol {atol:e} + {rel_to_max:e} x max|ref| {:.3e})",
        d.max_abs,
        d.worst_index,
        actual[d.worst_index],
        expected[d.worst_index],
        bound,
        d.max_abs_expected
    );
    if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
        eprintln!(
            "{what}: max |diff| {:.2e} (max |ref| {:.2e}, bound {:.2e})",
            d.max_abs, d.max_abs_expected, bound
        );
    }
    d
}

/// Asserts `|actual - expected| <= tol * max(1, max|expected|)` everywhere: the reference
/// README's "abs 1e-4 (or 1e-4 of the tensor's max magnitude)" form.
pub fn assert_close_scaled(what: &str, actual: &[f32], expected: &[f64], tol: f64) -> Diff {
    assert_eq!(
        actual.len(),
        expected.len(),
        "{what}: element count differs"
    );
    let max = expected.iter().fold(0f64, |m, v| m.max(v.abs()));
    assert_close(what, actual, expected, tol * max.max(1.0), 0.0)
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
    mut edit: impl FnMut(&str, &mut Fixture) -> bool,
    extra: Vec<(String, Fixture)>,
) {
    let src = Fixtures::load(src_rel);
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
