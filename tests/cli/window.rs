//! The real window under a virtual X display (Xvfb: `test.sh` installs it with Mesa's
//! software Vulkan): its GPU device lost while jobs wait, Ember starts again on a new device,
//! and the new window makes every job the old one kept.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ember_app::gui::paths::Paths;
use ember_app::gui::queue_file::{Kept, KeptJob, KeptQueue};
use ember_app::gui::session::Work;
use ember_app::gui::settings::{Settings, SettingsFile};
use ember_tests::reference;
use inference::api::GenerateRequest;

/// A virtual X display on a free number, stopped when dropped (which also ends the Ember
/// windows on it).
struct Xvfb {
    server: Child,
    display: String,
}

impl Xvfb {
    fn start() -> Self {
        let mut server = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-nolisten",
                "tcp",
                "-screen",
                "0",
                "1280x860x24",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb runs (test.sh installs the xvfb package)");
        let mut line = String::new();
        let stdout = server.stdout.take().expect("piped");
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let number: u32 = line
            .trim()
            .parse()
            .expect("Xvfb printed its display number");
        Self {
            server,
            display: format!(":{number}"),
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Waits up to `limit` for `done`, failing with `what` and Ember's log.
fn wait_for(what: &str, limit: Duration, log: &Path, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        let log = std::fs::read_to_string(log).unwrap_or_default();
        assert!(
            start.elapsed() < limit,
            "timed out waiting for {what}; Ember's log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Settings that load `model` at start, and a kept queue of one image of `steps` steps per
/// seed (64², "a lighthouse"), as a start-again leaves them; the queue file's path.
fn kept_jobs(
    paths: &Paths,
    model: std::path::PathBuf,
    seeds: &[u64],
    steps: u32,
) -> std::path::PathBuf {
    let settings = Settings {
        last_model: Some(model),
        ..Settings::default()
    };
    SettingsFile::in_dir(&paths.config_dir)
        .save(&settings)
        .unwrap();
    let jobs = seeds.iter().map(|&seed| KeptJob {
        work: Work::Generate(Box::new(GenerateRequest {
            prompt: "a lighthouse".into(),
            width: 64,
            height: 64,
            steps,
            seed,
            ..Default::default()
        })),
        canvas: None,
    });
    KeptQueue::in_dir(&paths.config_dir)
        .keep(Kept::new(jobs.collect(), Vec::new()))
        .unwrap();
    paths.config_dir.join("queue.json")
}

/// Ember's window on `display` with everything under `home`, its output in `log`.
fn ember(home: &Path, display: &Xvfb, runtime: &Path, log: &Path) -> Command {
    let output = std::fs::File::create(log).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_ember"));
    command
        .env("EMBER_HOME", home)
        .env("EMBER_CACHE_DIR", home.join("cache"))
        .env("DISPLAY", &display.display)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("EMBER_DEVICE")
        .stdout(output.try_clone().unwrap())
        .stderr(output);
    command
}

#[test]
fn a_lost_window_gpu_starts_ember_again_and_the_new_window_makes_the_kept_queue() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let seeds = [11_u64, 12];
    let queue = kept_jobs(&paths, reference("sd15/checkpoint.safetensors"), &seeds, 12);
    let display = Xvfb::start();
    let lose = home.path().join("lose the window's GPU");
    let log = home.path().join("ember.log");
    let runtime = tempfile::tempdir().unwrap();
    let mut first = ember(home.path(), &display, runtime.path(), &log)
        .env("EMBER_DEBUG_DESTROY_WINDOW_GPU_WHEN", &lose)
        .spawn()
        .expect("the ember binary runs");

    // The window took the queue: lose its device while the jobs wait or run.
    let minutes = Duration::from_secs(240);
    wait_for("the window to take the queue", minutes, &log, || {
        !queue.exists()
    });
    std::fs::write(&lose, b"").unwrap();
    wait_for("the first Ember to stop", minutes, &log, || {
        first.try_wait().unwrap().is_some()
    });
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("the window's GPU device was lost; starting again"),
        "{said}"
    );

    // The new window (a process of its own) makes both kept jobs, each once.
    let images = || -> Vec<String> {
        let files = std::fs::read_dir(&paths.default_output)
            .into_iter()
            .flatten();
        let mut names: Vec<String> = files
            .flatten()
            .map(|f| f.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".png"))
            .collect();
        names.sort();
        names
    };
    wait_for("both kept jobs to be saved", minutes, &log, || {
        images().len() >= 2 && !queue.exists()
    });
    std::thread::sleep(Duration::from_secs(2));
    let made: Vec<u64> = (images().iter())
        .filter_map(|name| name.trim_end_matches(".png").split_once('-'))
        .filter_map(|(_, seed)| seed.parse().ok())
        .collect();
    assert_eq!(made, seeds, "each kept job made once: {:?}", images());
    drop(display);
}

/// A logout or Ctrl+C (SIGTERM, SIGINT) while images are being made: Ember closes as if
/// asked to keep them, so the next start makes them, where the signal alone would have
/// ended it with the queue lost.
#[cfg(unix)]
#[test]
fn sigterm_keeps_the_jobs_still_to_make_for_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    // Long enough to be under way when the signal comes.
    let queue = kept_jobs(&paths, reference("sd15/pipeline"), &[21, 22], 5000);
    let display = Xvfb::start();
    let log = home.path().join("ember.log");
    let runtime = tempfile::tempdir().unwrap();
    let mut ember = ember(home.path(), &display, runtime.path(), &log)
        .env("EMBER_DEVICE", "cpu")
        .spawn()
        .expect("the ember binary runs");
    let minutes = Duration::from_secs(240);
    wait_for("the window to take the queue", minutes, &log, || {
        !queue.exists()
    });
    let killed = Command::new("kill")
        .args(["-TERM", &ember.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut status = None;
    wait_for("Ember to close", minutes, &log, || {
        status = ember.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "a clean exit: {status:?}");
    let kept = KeptQueue::in_dir(&paths.config_dir).take().unwrap();
    let seeds: Vec<u64> = (kept.jobs.iter())
        .filter_map(|job| match &job.work {
            Work::Generate(request) => Some(request.seed),
            Work::Upscale(_) => None,
        })
        .collect();
    assert_eq!(seeds, [21, 22], "both kept, the one under way first");
    drop(display);
}
