//! The torch CPU generator: every tensor of `rng/` reproduced bit for bit.

use ember_tests::{Fixtures, json, numel};
use inference::rng::{Mt19937, NormalKernel, TorchRng};

fn draw(rng: &mut TorchRng, op: &str, numel: usize) -> Vec<f32> {
    match op {
        "randn" => rng.randn(numel),
        "rand" => rng.rand(numel),
        other => panic!("unknown op {other} in rng/index.json"),
    }
}

fn assert_bits_equal(name: &str, ours: &[f32], theirs: &[f32]) {
    assert_eq!(ours.len(), theirs.len(), "{name}: length");
    let differing: Vec<usize> = (0..ours.len())
        .filter(|&i| ours[i].to_bits() != theirs[i].to_bits())
        .collect();
    assert!(
        differing.is_empty(),
        "{name}: {} of {} values differ; first at {}: ours {:e}, torch {:e}",
        differing.len(),
        ours.len(),
        differing[0],
        ours[differing[0]],
        theirs[differing[0]]
    );
}

#[test]
fn mt19937_raw_outputs() {
    let index = json("rng/index.json");
    let raw = index["mt19937_raw_outputs"]
        .as_object()
        .expect("raw outputs");
    assert!(!raw.is_empty());
    for (seed, outputs) in raw {
        let mut mt = Mt19937::new(seed.parse::<u64>().unwrap() as u32);
        let values: Vec<u32> = (0..630).map(|_| mt.next_u32()).collect();
        for (i, expected) in outputs["first_8"].as_array().unwrap().iter().enumerate() {
            assert_eq!(
                u64::from(values[i]),
                expected.as_u64().unwrap(),
                "seed {seed} output {i}"
            );
        }
        for (k, expected) in outputs["index_620_to_629"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            assert_eq!(
                u64::from(values[620 + k]),
                expected.as_u64().unwrap(),
                "seed {seed} output {}",
                620 + k
            );
        }
    }
}

#[test]
fn every_single_tensor_is_bit_exact() {
    let index = json("rng/index.json");
    let fixtures = Fixtures::load("rng/rng.safetensors");
    let tensors = index["tensors"].as_array().expect("tensor list");
    assert!(!tensors.is_empty());
    for entry in tensors {
        let name = entry["tensor"].as_str().unwrap();
        let seed = entry["seed"].as_u64().unwrap();
        let numel = numel(&entry["shape"]);
        let mut rng = TorchRng::new(seed);
        let ours = draw(&mut rng, entry["op"].as_str().unwrap(), numel);
        assert_bits_equal(name, &ours, &fixtures.get(name).f32());
    }
}

#[test]
fn sequences_share_one_generator_and_its_cached_normal() {
    let index = json("rng/index.json");
    let fixtures = Fixtures::load("rng/rng.safetensors");
    for sequence in index["sequences"].as_array().expect("sequences") {
        let mut rng = TorchRng::new(sequence["seed"].as_u64().unwrap());
        for op in sequence["ops"].as_array().unwrap() {
            let name = op["tensor"].as_str().unwrap();
            let ours = draw(&mut rng, op["op"].as_str().unwrap(), numel(&op["shape"]));
            assert_bits_equal(name, &ours, &fixtures.get(name).f32());
        }
    }
}

#[test]
fn scalar_kernel_matches_torch_without_avx2() {
    let index = json("rng/index.json");
    let fixtures = Fixtures::load("rng/rng.safetensors");
    let entries = index["scalar_kernel_values"]
        .as_array()
        .expect("scalar kernel list");
    assert!(!entries.is_empty());
    for entry in entries {
        let name = entry["tensor"].as_str().unwrap();
        let mut rng = TorchRng::with_kernel(entry["seed"].as_u64().unwrap(), NormalKernel::Scalar);
        let ours = rng.randn(numel(&entry["shape"]));
        assert_bits_equal(name, &ours, &fixtures.get(name).f32());
    }
}
