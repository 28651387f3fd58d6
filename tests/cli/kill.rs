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
    // How long a whole run takes here, so the kills land all over it.
    let start = Instant::now();
    let status = run(&dir.path().join("whole.png")).wait().unwrap();
    assert!(status.success());
    let whole = start.elapsed().as_millis() as usize;
    let mut rng = Rng::new(23);
    let mut written = 0;
    for kill in 0..100 {
        let out_dir = dir.path().join(format!("run{kill}"));
        std::fs::create_dir_all(&out_dir).unwrap();
        let mut child = run(&out_dir.join("image.png"));
        std::thread::sleep(Duration::from_millis(rng.below(whole + 1) as u64));
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        written += ember_tests::check_whole_pngs(&out_dir, &format!("kill {kill}"));
    }
    assert!(
        written > 0,
        "every kill came before the first image: nothing was tested"
    );
}
