//! The VAE in tiles against diffusers' `enable_tiling()` (`tests/extra/vae_tiles`, made by
//! `tests/extra/make_vae_tiles.py` on the seeded tiny VAE of `tests/extra/models/sd2`):
//! decode and encode with partial tiles at the right and bottom edges; a cancel between
//! tiles.

use std::cell::Cell;
use std::ops::ControlFlow;
use std::path::Path;

use burn::tensor::{Device, Tensor, TensorData};
use ember_tests::{Fixture, Fixtures, assert_close_scaled};
use inference::api::{GenerateRequest, Progress, Stage, VaeTiling};
use inference::device::{Precision, tensor_to_vec};
use inference::imaging::ImageRgb8;
use inference::models::vae_tiles::VaeTiles;
use inference::pipeline::{Observer, generate};
use inference::weights::{LoadOptions, load};

/// The README's tolerance for VAE goldens (relative to the largest magnitude).
const TOL: f64 = 1e-4;

fn tensor(f: &Fixture) -> Tensor<4> {
    let dims: [usize; 4] = f.shape.clone().try_into().unwrap();
    Tensor::from_data(TensorData::new(f.f32(), dims), &Device::flex())
}

/// A copy of the model folder `from` in `dir` whose tokenizer has the vocabulary of
/// `assets/clip` (the committed tiny models leave it out).
fn with_vocabulary(from: &Path, dir: &Path) -> std::path::PathBuf {
    let out = dir.join("model");
    for entry in walk(from) {
        let target = out.join(entry.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&entry, target).unwrap();
    }
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/clip");
    for file in ["vocab.json", "merges.txt"] {
        std::fs::copy(assets.join(file), out.join("tokenizer").join(file)).unwrap();
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn tiled_decode_and_encode_match_diffusers() {
    let extra = Path::new(env!("CARGO_MANIFEST_DIR")).join("extra");
    let golden = Fixtures::load_path(&extra.join("vae_tiles/sd2.safetensors"));
    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let dir = tempfile::tempdir().unwrap();
    let model = load(
        &with_vocabulary(&extra.join("models/sd2"), dir.path()),
        &options,
    )
    .unwrap();
    let tiles = VaeTiles::of(&model.vae_config);
    let z = tensor(golden.get("decode_in"));
    let [_, _, h, w] = z.dims();
    assert!(
        tiles.split_decode([h, w]),
        "the case must need tiles: {tiles:?}"
    );

    let tiled = tensor_to_vec(model.vae.decode_tiled(z.clone(), tiles));
    assert_close_scaled(
        "tiled decode",
        &tiled,
        &golden.get("decode_tiled").f64(),
        TOL,
    );
    let whole = tensor_to_vec(model.vae.decode(z));
    assert_close_scaled(
        "whole decode",
        &whole,
        &golden.get("decode_whole").f64(),
        TOL,
    );

    let image = tensor(golden.get("encode_in"));
    let posterior = model.vae.encode_tiled(image, tiles);
    assert_close_scaled(
        "tiled encode mean",
        &tensor_to_vec(posterior.mean),
        &golden.get("encode_tiled_mean").f64(),
        TOL,
    );
    assert_close_scaled(
        "tiled encode logvar",
        &tensor_to_vec(posterior.logvar),
        &golden.get("encode_tiled_logvar").f64(),
        TOL,
    );
}

/// `auto` tiles only when the whole-image VAE would not fit the memory free, and says so;
/// `on` tiles without a word; `off` never; an image of one tile is never split.
#[test]
fn auto_tiles_when_memory_is_short_and_says_so() {
    use inference::pipeline::vae_plan::VaePlan;
    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let model = load(&ember_tests::reference("sd15/pipeline"), &options).unwrap();
    let tiles = VaeTiles::of(&model.vae_config);
    let request = |size: u32, vae_tiling| inference::api::GenerateRequest {
        width: size,
        height: size,
        vae_tiling,
        ..Default::default()
    };
    let big = (tiles.sample * 2) as u32;
    let short = VaePlan::decide(&model, &request(big, VaeTiling::Auto), Some(1024));
    assert_eq!(short.tiles, Some(tiles));
    let warning = short.warning.unwrap();
    assert!(
        warning.contains(&format!("{} px tiles", tiles.sample)),
        "{warning}"
    );
    let plenty = VaePlan::decide(&model, &request(big, VaeTiling::Auto), Some(1 << 40));
    assert_eq!((plenty.tiles, plenty.warning), (None, None));
    let on = VaePlan::decide(&model, &request(big, VaeTiling::On), Some(1 << 40));
    assert_eq!((on.tiles, on.warning), (Some(tiles), None));
    let off = VaePlan::decide(&model, &request(big, VaeTiling::Off), Some(1024));
    assert_eq!(off.tiles, None);
    let small = tiles.sample as u32;
    let one_tile = VaePlan::decide(&model, &request(small, VaeTiling::On), Some(1024));
    assert_eq!(one_tile.tiles, None);
}

/// Says to stop at the `stop_at`th time it is asked during `stage` (from its report to the
/// next stage's).
struct CancelDuring {
    stage: Stage,
    inside: bool,
    asked: Cell<usize>,
    stop_at: usize,
}

impl CancelDuring {
    fn new(stage: Stage, stop_at: usize) -> Self {
        CancelDuring {
            stage,
            inside: false,
            asked: Cell::new(0),
            stop_at,
        }
    }
}

impl Observer for CancelDuring {
    fn progress(&mut self, progress: Progress) -> ControlFlow<()> {
        self.inside = progress.stage == self.stage;
        ControlFlow::Continue(())
    }
    fn interrupted(&self) -> bool {
        if !self.inside {
            return false;
        }
        self.asked.set(self.asked.get() + 1);
        self.asked.get() >= self.stop_at
    }
}

/// The reference model, and a request for an image of two tiles a side, tiled.
fn two_tiles_a_side(steps: u32) -> (inference::model::Model, GenerateRequest) {
    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let model = load(&ember_tests::reference("sd15/pipeline"), &options).unwrap();
    let big = (VaeTiles::of(&model.vae_config).sample * 2) as u32;
    let mut request = model.request("a lighthouse", 5);
    (request.width, request.height, request.steps) = (big, big, steps);
    request.vae_tiling = VaeTiling::On;
    (model, request)
}

/// Runs `request` with `observer`: it must end cancelled, after `asked` questions.
fn ends_cancelled(
    model: &inference::model::Model,
    request: &GenerateRequest,
    mut observer: CancelDuring,
    asked: usize,
) {
    let result = generate(model, request, &mut observer);
    assert!(
        matches!(result, Err(inference::Error::Cancelled)),
        "{:?}",
        result.map(|g| g.images.len())
    );
    assert_eq!(observer.asked.get(), asked, "stopped at the second tile");
}

/// Cancelling while the VAE decodes in tiles stops it before the next tile: the job ends
/// cancelled, not finished minutes later (a large decode on the CPU).
#[test]
fn a_cancel_during_a_tiled_decode_stops_it_between_tiles() {
    let (model, request) = two_tiles_a_side(1);
    // The decode's first question comes before the image, its second before the first
    // tile: the third is before the second tile.
    ends_cancelled(&model, &request, CancelDuring::new(Stage::Decoding, 3), 3);
}

/// Cancelling while the VAE encodes an img2img init image in tiles stops it before the
/// next tile, as the decode does.
#[test]
fn a_cancel_during_a_tiled_encode_stops_it_between_tiles() {
    let (model, mut request) = two_tiles_a_side(2);
    let side = request.width;
    request.init_image = Some(ImageRgb8 {
        width: side,
        height: side,
        pixels: vec![128; (side * side * 3) as usize],
    });
    request.strength = 0.5;
    // The encode's first question comes before the first tile.
    ends_cancelled(
        &model,
        &request,
        CancelDuring::new(Stage::EncodingImage, 2),
        2,
    );
}
