//! kill -9 at random moments of the app's save path (`save_loop`, the gallery's save and
//! the settings file): no half-written PNG or settings file ever exists under its final
//! name, and the gallery lists every image.

use std::process::Command;
use std::time::Duration;

use ember_app::gui::gallery::store::scan;
use ember_app::gui::settings::SettingsFile;
use ember_tests::fuzz::Rng;

/// Kills per test run.
const KILLS: usize = 100;

#[test]
fn killing_the_save_path_never_leaves_a_half_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(17);
    let mut saved = 0;
    for kill in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_save_loop"))
            .arg(dir.path())
            .spawn()
            .expect("save_loop runs");
        std::thread::sleep(Duration::from_millis(5 + rng.below(120) as u64));
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        let what = format!("kill {kill}");
        let outputs = dir.path().join("outputs");
        let pngs = ember_tests::check_whole_pngs(&outputs, &what);
        assert!(pngs >= saved, "{what}: images disappeared");
        saved = pngs;
        assert_eq!(
            scan(&outputs).len(),
            pngs,
            "{what}: the gallery misses images"
        );
        let loaded = SettingsFile::in_dir(&dir.path().join("config")).load();
        assert!(loaded.problem.is_none(), "{what}: {:?}", loaded.problem);
    }
    assert!(
        saved > 0,
        "no image was ever saved: the kills came too early to test anything"
    );
}
