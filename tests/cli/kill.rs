//! kill -9 at random moments of `ember generate` writing a batch: every PNG under a final
//! name is whole, with its metadata.

use std::process::Command;
use std::time::{Duration, Instant};

use ember_tests::fuzz::Rng;
use ember_tests::reference;

use crate::arg;

#[test]
fn killing_ember_generate_never_leaves_a_half_written_png() {
    let dir = tempfile::tempdir().unwrap();
    let model = reference("sd2v/pipeline");
    let run = |out: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_ember"))
            .env("EMBER_DEVICE", "cpu")
            .args([
                "generate",
                "--model",
                &arg(&model),
                "--prompt",
                "a lighthouse",
            ])
            .args([
                "--steps", "1", "--width", "32", "--height", "32", "--batch", "6",
            ])
            .args(["--out", &arg(out)])
            .env("EMBER_CACHE_DIR", dir.path().join("cache"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the ember binary runs")
    };
    // When a whole run starts writing and when it ends here, so the kills land around the
    // writing (loading takes most of a run; a kill there tests nothing).
    let whole_dir = dir.path().join("whole");
    std::fs::create_dir_all(&whole_dir).unwrap();
    let start = Instant::now();
    let mut child = run(&whole_dir.join("whole.png"));
    let mut first_write = None;
    let status = loop {
        if first_write.is_none() && std::fs::read_dir(&whole_dir).unwrap().next().is_some() {
            first_write = Some(start.elapsed());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(status.success());
    let end = start.elapsed().as_millis() as usize;
    let writing = first_write.map_or(end, |t| t.as_millis() as usize);
    // From a little before the first write to a little after the end (machines vary
    // between runs: some kills come early, some after the run, most during the writing).
    let (from, to) = (writing * 4 / 5, end + end / 5);
    let mut rng = Rng::new(23);
    let mut written = 0;
    // 50 kills (100 took 119 s of CI's slow 2-core machine), nearly all during the writing.
    for kill in 0..50 {
        let out_dir = dir.path().join(format!("run{kill}"));
        std::fs::create_dir_all(&out_dir).unwrap();
        let mut child = run(&out_dir.join("image.png"));
        let at = from + rng.below(to - from + 1);
        std::thread::sleep(Duration::from_millis(at as u64));
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        written += ember_tests::check_whole_pngs(&out_dir, &format!("kill {kill}"));
    }
    assert!(
        written > 0,
        "every kill came before the first image: nothing was tested"
    );
}
