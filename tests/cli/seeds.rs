//! `ember generate`'s noise source and A1111's seed extras end to end: a batch of variations
//! keeps its seed and counts the variation seed up, every PNG says how its noise was made,
//! and A1111's `-1` asks for a random seed.

use crate::hires::{generate, ok, parameters};

#[test]
fn a_batch_of_variations_records_its_noise_in_every_png() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flags = [
        "--width",
        "32",
        "--height",
        "32",
        "--batch",
        "2",
        "--rng",
        "nv",
        "--variation-strength",
        "0.3",
        "--seed-resize-from",
        "48x40",
        "--ensd",
        "31337",
    ];
    let output = generate(d, "variation.png", "3", &flags);
    ok(&output, "variations");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let variation_seed: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("variation seed: "))
        .unwrap_or_else(|| panic!("the random variation seed is printed: {stderr}"))
        .trim()
        .parse()
        .unwrap();
    for i in 0..2u64 {
        let p = parameters(&d.join(format!("variation-{i}.png")));
        assert_eq!(p.get("Seed"), Some("77"), "a variation keeps the seed");
        let expected = (variation_seed + i).to_string();
        assert_eq!(p.get("Variation seed"), Some(expected.as_str()));
        assert_eq!(p.get("Variation seed strength"), Some("0.3"));
        assert_eq!(p.get("Seed resize from"), Some("48x40"));
        assert_eq!(p.get("ENSD"), Some("31337"));
        assert_eq!(p.get("RNG"), Some("NV"));
    }
    let (_, _, a) = ember_tests::read_png_rgb(&d.join("variation-0.png"));
    let (_, _, b) = ember_tests::read_png_rgb(&d.join("variation-1.png"));
    assert_ne!(a, b, "each image has its own variation seed");
    // The default: CPU noise, said so, and no extras.
    ok(
        &generate(d, "plain.png", "3", &["--width", "32", "--height", "32"]),
        "plain",
    );
    let p = parameters(&d.join("plain.png"));
    assert_eq!(p.get("RNG"), Some("CPU"));
    assert_eq!(p.get("Variation seed"), None);
}

/// A1111's `-1`: a random seed (and variation seed), printed and recorded in the PNG.
#[test]
fn seed_minus_one_is_a_random_seed_printed_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let model = crate::arg(&ember_tests::reference("sd15/pipeline"));
    let out = crate::arg(&dir.path().join("random.png"));
    let output = crate::ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &model,
            "--prompt",
            "a fox",
            "--steps",
            "1",
            "--seed",
            "-1",
            "--variation-seed",
            "-1",
            "--variation-strength",
            "0.2",
            "--out",
            &out,
        ],
    );
    ok(&output, "seed -1");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let printed = |prefix: &str| -> String {
        let line = stderr.lines().find_map(|l| l.strip_prefix(prefix));
        let value = line.unwrap_or_else(|| panic!("{prefix} is printed: {stderr}"));
        value.trim().parse::<u64>().unwrap().to_string()
    };
    let p = parameters(&dir.path().join("random.png"));
    assert_eq!(p.get("Seed"), Some(printed("seed: ").as_str()));
    assert_eq!(
        p.get("Variation seed"),
        Some(printed("variation seed: ").as_str())
    );
    // Any other negative seed is a usage error saying what a seed is.
    let bad = crate::ember(
        dir.path(),
        &[
            "generate", "--model", &model, "--prompt", "x", "--seed", "-2", "--out", &out,
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("or -1 for a random one"), "{stderr}");
}
