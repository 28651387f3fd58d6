//! A machine with several GPUs: `ember devices` numbers them, and `--device cuda:N` /
//! `wgpu:N` picks one. The stand-in CUDA driver of `tests/cuda_dry_run` plays two NVIDIA
//! GPUs; wgpu sees the machine's Vulkan adapters (lavapipe in CI).

use std::process::Command;

use ember_tests::cuda_stand_in::StandIn;

/// `ember` with `args` on the stand-in driver playing two GPUs: whether it succeeded, its
/// stdout and its stderr.
fn on_two_gpus(stand_in: &StandIn, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ember"));
    command.args(args);
    stand_in
        .apply(&mut command)
        .env("FAKE_CUDA_DEVICES", "2")
        .env_remove("EMBER_DEVICE");
    let output = command.output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (
        output.status.success(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

#[test]
fn devices_lists_every_gpu_by_the_name_device_takes() {
    let stand_in = StandIn::build();
    let (ok, stdout, stderr) = on_two_gpus(&stand_in, &["devices"]);
    assert!(ok, "{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.first(), Some(&"cpu"), "{stdout}");
    // The GPU tests need a Vulkan driver on this machine too (`./test.sh` installs lavapipe).
    assert!(names.contains(&"wgpu:0"), "{stdout}");
    let cuda: Vec<&str> = stdout.lines().filter(|l| l.starts_with("cuda")).collect();
    assert_eq!(cuda.len(), 2, "{stdout}");
    assert!(cuda[0].starts_with("cuda:0 ") && cuda[1].starts_with("cuda:1 "));
    assert!(cuda[1].contains("Fake CUDA device 1 "), "{stdout}");
}

/// `cuda:1` of two makes the image on the second GPU; `cuda:2` and `wgpu:9` name no GPU
/// here and say so in one line, listing what there is.
#[test]
fn a_numbered_gpu_runs_the_job_and_a_number_past_the_last_is_one_line() {
    let stand_in = StandIn::build();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("second.png");
    let model = ember_tests::reference("sd15/pipeline");
    let generate = |device: &str, out: &std::path::Path| {
        on_two_gpus(
            &stand_in,
            &[
                "generate",
                "--model",
                model.to_str().unwrap(),
                "--prompt",
                "a lighthouse",
                "--steps",
                "1",
                "--verbose",
                "--device",
                device,
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    let (ok, _, stderr) = generate("cuda:1", &out);
    assert!(ok && out.exists(), "{stderr}");
    assert!(
        stderr.contains("device: Fake CUDA device 1 sm_"),
        "ran on the second GPU: {stderr}"
    );

    let none = dir.path().join("none.png");
    for (device, expected) in [
        (
            "cuda:2",
            "error: device: there is no cuda:2: NVIDIA's driver sees 2 GPU(s), cuda:0 to cuda:1",
        ),
        (
            "wgpu:9",
            "error: device: there is no wgpu:9: wgpu sees wgpu:0 ",
        ),
    ] {
        let (ok, _, stderr) = generate(device, &none);
        assert!(!ok && !none.exists(), "{device}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(expected), "{stderr}");
    }
}
