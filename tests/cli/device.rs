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

/// `ember bench --device wgpu` on the machine's Vulkan driver (lavapipe in CI): the first run
/// tunes and compiles Burn's kernels and keeps the answers and the compiled kernels (SPIR-V)
/// in Ember's cache folder, so a second process tunes and compiles nothing; `--retune` tunes
/// again. Each tuning names the attention kernel it chose. The reference SD 1.x text encoder
/// (`--model`) rather than CLIP ViT-L's random weights: on lavapipe one ViT-L call took 24 s,
/// and the three processes 560 s; the caching is the same for any size.
#[test]
fn gpu_autotune_answers_and_kernels_are_kept_across_runs_and_bench_names_the_attention_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let model = reference("sd15/pipeline");
    let clip: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("text_encoder/config.json")).unwrap())
            .unwrap();
    let head =
        clip["hidden_size"].as_u64().unwrap() / clip["num_attention_heads"].as_u64().unwrap();
    let bench = |extra: &[&str]| -> serde_json::Value {
        let output = Command::new(env!("CARGO_BIN_EXE_ember"))
            .env("EMBER_CACHE_DIR", &cache)
            // Burn's tuning as the app has it: test.sh asks the other tests for the least
            // (at that level Burn times no flash kernel for CLIP's attention).
            .env_remove("CUBECL_AUTOTUNE_LEVEL")
            // f16: the precision the app picks on a GPU.
            .args([
                "bench",
                "text-encoder",
                "--device",
                "wgpu",
                "--precision",
                "f16",
            ])
            .args(["--model", &arg(&model), "--batch", "1"])
            .args(["--warmup", "1", "--runs", "1", "--json"])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        serde_json::from_slice(&output.stdout).expect("one JSON line")
    };
    let attention = |run: &serde_json::Value| -> Vec<String> {
        run["attention"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().into())
            .collect()
    };
    let cold = bench(&[]);
    let tuned = attention(&cold);
    assert!(!tuned.is_empty(), "{cold}");
    let head = format!("head {head},");
    assert!(tuned.iter().all(|a| a.contains(&head)), "{head}: {tuned:?}");
    assert!(cold["peak_device_bytes"].as_u64().unwrap() > 0, "{cold}");
    assert!(cold["first_call_s"].as_f64().unwrap() > 0.0, "{cold}");
    let kept: Vec<String> = std::fs::read_dir(cache.join("gpu"))
        .expect("a GPU cache folder")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    // Named after the drivers, so that another driver starts afresh.
    assert!(
        kept.iter()
            .any(|name| name.starts_with("drivers-") && name.ends_with(".db")),
        "the autotune answers are kept in {} under the drivers' name: {kept:?}",
        cache.display()
    );

    let compiled = |run: &serde_json::Value| run["kernels_compiled"].as_u64().unwrap();
    assert!(compiled(&cold) > 0, "{cold}");

    let warm = bench(&[]);
    assert!(
        attention(&warm).is_empty(),
        "the kept answers are used: {warm}"
    );
    // WGSL (Metal, DirectX 12) is compiled by the driver on each run; SPIR-V is kept.
    if warm["adapter"].as_str().unwrap().contains("SPIR-V") {
        assert_eq!(compiled(&warm), 0, "the kept kernels are used: {warm}");
    }
    let retuned = bench(&["--retune"]);
    assert_eq!(attention(&retuned).len(), tuned.len(), "{retuned}");
}

/// `ember bench vae-decode` names the attention path Ember chose for the VAE's one 512-wide
/// head (Burn's autotune log has only the paths Burn chose).
#[test]
fn bench_names_the_vae_attention_path() {
    let tmp = tempfile::tempdir().unwrap();
    let output = crate::ember(
        tmp.path(),
        &[
            "bench",
            "vae-decode",
            "--size",
            "64",
            "--batch",
            "1",
            "--warmup",
            "1",
            "--runs",
            "1",
            "--json",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let run: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    let attention = run["attention"].as_array().expect("an attention list");
    assert_eq!(attention.len(), 1, "{run}");
    let path = attention[0].as_str().unwrap();
    assert!(
        path.contains("head 512") && path.contains("CPU kernel"),
        "{path}"
    );
}

/// On a GPU the check before loading is against the GPU's memory (`EMBER_GPU_MEMORY` here,
/// standing for a small card): one error line with the GPU's hints, nothing written, and
/// `--verbose` says how much memory the driver reports.
#[test]
fn a_generation_too_large_for_the_gpus_memory_is_refused_before_it_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("big.png");
    let generate = |verbose: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ember"));
        command
            .env("EMBER_CACHE_DIR", tmp.path().join("cache"))
            .env("EMBER_GPU_MEMORY", "64M")
            .env_remove("EMBER_MEMORY_LIMIT")
            .args(["generate", "--model", &arg(&reference("sd15/pipeline"))])
            .args([
                "--device",
                "wgpu",
                "--prompt",
                "a lighthouse",
                "--steps",
                "1",
            ])
            .args(["--width", "1024", "--height", "1024", "--out", &arg(&out)]);
        if verbose {
            command.arg("--verbose");
        }
        command.output().unwrap()
    };
    let output = generate(false);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: this generation needs about")
            && lines[0].contains("of GPU memory is free")
            && lines[0].contains("--device cpu"),
        "{stderr}"
    );
    assert!(!out.exists());
    let output = generate(true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let device = stderr
        .lines()
        .find(|l| l.starts_with("device: "))
        .unwrap_or_else(|| panic!("no device line in:\n{stderr}"));
    assert!(
        [" GiB,", " MiB,"].iter().any(|unit| device.contains(unit)),
        "the driver's memory is named: {device}"
    );
    // On Linux the GPU is reached through Vulkan, where Burn compiles SPIR-V.
    let language = if cfg!(target_os = "linux") {
        "SPIR-V"
    } else {
        "WGSL"
    };
    assert!(
        device.contains(&format!(", {language} kernels)")),
        "the kernels' language is named: {device}"
    );
}

/// `--device cuda` where it cannot run (a build without the CUDA backend, or a machine without
/// NVIDIA's driver, NVRTC or the CUDA headers) is one line saying what is missing and what to
/// use instead, never a panic on the engine thread; where CUDA is there, it makes the image.
#[test]
fn the_cuda_device_says_in_one_line_what_it_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cuda.png");
    let output = generate_on_cuda(tmp.path(), &out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        assert!(out.exists(), "the image is written");
        return;
    }
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    assert!(
        line.starts_with("error: ") && !line.contains("panicked"),
        "{line}"
    );
    if line.contains("this build has no CUDA backend") {
        assert!(line.contains("or use --device cpu"), "{line}");
    } else {
        // Ember's own check answered, not a panic inside Burn.
        assert!(line.contains("; or use --device wgpu or cpu"), "{line}");
        let no_driver = ["/proc/driver/nvidia", "/usr/lib/wsl/lib"]
            .iter()
            .all(|path| !std::path::Path::new(path).exists());
        if no_driver {
            assert!(
                line.contains("no NVIDIA driver was found (libcuda could not be loaded)"),
                "{line}"
            );
        }
    }
    assert!(!out.exists());
}

/// `ember generate --device cuda`: one step of the SD 1.x reference to `out`, with its cache
/// folder in `dir`.
pub(crate) fn generate_on_cuda(dir: &std::path::Path, out: &std::path::Path) -> Command {
    generate_steps_on_cuda(dir, out, 1)
}

/// [`generate_on_cuda`] with `steps` steps.
pub(crate) fn generate_steps_on_cuda(
    dir: &std::path::Path,
    out: &std::path::Path,
    steps: usize,
) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ember"));
    command
        .env("EMBER_CACHE_DIR", dir.join("cache"))
        .args(["generate", "--model", &arg(&reference("sd15/pipeline"))])
        .args([
            "--device",
            "cuda",
            "--prompt",
            "a lighthouse",
            "--steps",
            &steps.to_string(),
        ])
        .args(["--out", &arg(out)]);
    command
}
