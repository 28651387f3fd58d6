//! torchsde's Brownian tree against every Brownian draw recorded in the reference tree:
//! k-diffusion's `BrownianTreeNoiseSampler` runs (`samplers_kdiffusion`, entropy listed per
//! run) regenerated from their entropy and query times alone.

use ember_tests::{Fixtures, assert_close, json, numel};
use inference::rng::brownian::BrownianNoise;

/// Unit-variance noise; the port follows torch's float32 operations one by one, so only
/// rounding in a different summation order could differ (none is expected).
const TOL: f64 = 1e-6;

#[test]
fn every_recorded_kdiffusion_brownian_draw_is_regenerated_from_its_entropy() {
    let index = json("samplers_kdiffusion/index.json");
    let mut checked = 0;
    for entry in index["runs"].as_array().expect("runs") {
        let name = entry["name"].as_str().unwrap();
        let run = json(&format!("samplers_kdiffusion/runs/{name}.json"));
        if run["noise"] != "brownian" {
            continue;
        }
        let tree = &run["brownian_tree"];
        let get = |key: &str| tree[key].as_f64().expect(key) as f32;
        let numel = numel(&run["shape"]);
        let entropy = tree["entropy"].as_u64().expect("entropy");
        let mut noise = BrownianNoise::new(
            (get("sigma_min"), get("sigma_max")),
            &[entropy],
            numel,
            inference::api::RngSource::Cpu,
        );
        let tensors = Fixtures::load(&format!("samplers_kdiffusion/runs/{name}.safetensors"));
        for draw in run["draws"].as_array().expect("draws") {
            let at = |key: &str| draw[key].as_f64().expect(key) as f32;
            let ours = noise.sample(at("sigma"), at("sigma_next"));
            let recorded = tensors.get(draw["tensor"].as_str().unwrap()).f64();
            assert_close(
                &format!("{name}: {}", draw["tensor"]),
                &ours,
                &recorded,
                TOL,
                0.0,
            );
            checked += 1;
        }
    }
    // Every draw the tree records was compared above; a tree without any is no test.
    assert!(checked > 0, "the reference tree records no Brownian draw");
}
