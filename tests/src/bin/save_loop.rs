//! The app's save path in a loop, for the kill -9 test (`tests/reference/kill.rs`): saves
//! numbered PNGs with metadata into `DIR/outputs` and rewrites `DIR/config/settings.json`,
//! as the gallery thread and the settings file do, until it is killed.

use std::path::PathBuf;

use ember_app::gui::gallery::store::{Reply, Request, ToSave, serve};
use ember_app::gui::settings::{Settings, SettingsFile};
use inference::imaging::ImageRgb8;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: save_loop DIR"));
    let settings_file = SettingsFile::in_dir(&dir.join("config"));
    for i in 0u64.. {
        // Large enough that a write takes a while: 256x256 of noise does not compress.
        let pixels = (0..256 * 256 * 3)
            .map(|p: u64| ((p.wrapping_mul(2_654_435_761) ^ i.wrapping_mul(40_503)) >> 7) as u8)
            .collect();
        let image = ImageRgb8 {
            width: 256,
            height: 256,
            pixels,
        };
        serve(
            Request::Save {
                dir: dir.join("outputs"),
                fallback_dir: dir.join("fallback"),
                format: inference::imaging::SaveFormat::Png,
                item: Box::new(ToSave {
                    job: inference::worker::JobId(i),
                    index: 0,
                    image,
                    parameters: format!("image {i}\nSteps: 20, Seed: {i}"),
                    extras: None,
                    seed: i,
                    grid: false,
                }),
            },
            &|reply| {
                if let Reply::SaveFailed { error, .. } = reply {
                    panic!("{error}");
                }
            },
        );
        let settings = Settings {
            prompt: format!("prompt {i} ").repeat(2000),
            seed: i,
            ..Settings::default()
        };
        settings_file.save(&settings).expect("settings saved");
    }
}
