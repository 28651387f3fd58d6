//! `settings.json`: reading it (a damaged file kept aside, an unreadable one never written
//! over) and writing it atomically, with only the paths JSON can hold.

use std::path::{Path, PathBuf};

use inference::imaging::write_atomic;

use super::Settings;

/// Reads and writes `settings.json` in one folder.
#[derive(Clone, Debug)]
pub struct SettingsFile {
    path: PathBuf,
    /// Why the file is not written this session: it exists but could not be read, nor
    /// moved aside, so the defaults in use must not replace it.
    kept_from: Option<String>,
}

/// What loading the settings found.
#[derive(Debug)]
pub struct Loaded {
    pub settings: Settings,
    /// Set when the file was unreadable: what happened and where the old file was kept.
    pub problem: Option<String>,
}

impl SettingsFile {
    /// The settings file in `dir` (created on first save).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join("settings.json"),
            kept_from: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved settings, or the defaults (no file yet, or an unreadable one, which is
    /// kept beside it as `settings.json.bad`; one that cannot be read or moved aside is not
    /// written over this session).
    pub fn load(&mut self) -> Loaded {
        let text = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Loaded {
                    settings: Settings::default(),
                    problem: None,
                };
            }
            Err(e) => {
                let problem = format!(
                    "could not read {}: {e}; using default settings, and the file is not \
                     written over this session",
                    self.path.display()
                );
                self.kept_from = Some(problem.clone());
                return Loaded {
                    settings: Settings::default(),
                    problem: Some(problem),
                };
            }
        };
        match serde_json::from_slice::<Settings>(&text) {
            Ok(settings) => Loaded {
                settings,
                problem: None,
            },
            Err(e) => {
                let backup = crate::gui::paths::set_aside_name(&self.path);
                let kept = match std::fs::rename(&self.path, &backup) {
                    Ok(()) => format!("the old file is kept as {}", backup.display()),
                    Err(err) => format!(
                        "it could not be moved aside ({err}), so it is not written over this \
                         session"
                    ),
                };
                let problem = format!(
                    "the settings file {} is damaged ({e}); {kept}; using default settings",
                    self.path.display()
                );
                if self.path.exists() {
                    self.kept_from = Some(problem.clone());
                }
                Loaded {
                    settings: Settings::default(),
                    problem: Some(problem),
                }
            }
        }
    }

    /// The saved device choice ([`Settings::device`]), read before the window opens (its GPU
    /// device depends on it); empty where there is none. A damaged file is left for
    /// [`SettingsFile::load`] to report and keep.
    pub fn peek_device(&self) -> String {
        let text = std::fs::read(&self.path).unwrap_or_default();
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap_or_default();
        value["device"].as_str().unwrap_or_default().to_string()
    }

    /// Writes the settings atomically, creating the folder if needed.
    pub fn save(&self, settings: &Settings) -> Result<(), String> {
        if let Some(why) = &self.kept_from {
            return Err(format!("settings are not saved: {why}"));
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        }
        let (settings, dropped) = settings.with_storable_paths();
        for path in dropped {
            eprintln!(
                "settings: {} is left out of settings.json, which holds only UTF-8 paths",
                path.display()
            );
        }
        let json = serde_json::to_vec_pretty(&settings).map_err(|e| e.to_string())?;
        write_atomic(&self.path, &json).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = SettingsFile::in_dir(&dir.path().join("nested"));
        let mut settings = Settings {
            prompt: "a red fox, \"quoted\"\nsecond line".into(),
            seed: u64::MAX,
            ..Settings::default()
        };
        settings.remember_model(Path::new("/models/a.safetensors"));
        file.save(&settings).unwrap();
        let loaded = file.load();
        assert_eq!(loaded.settings, settings);
        assert!(loaded.problem.is_none());
    }

    #[test]
    fn the_device_choice_is_read_before_the_window_without_touching_a_damaged_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = SettingsFile::in_dir(dir.path());
        assert_eq!(file.peek_device(), "");
        let settings = Settings {
            device: "wgpu:1".into(),
            ..Settings::default()
        };
        file.save(&settings).unwrap();
        assert_eq!(file.peek_device(), "wgpu:1");
        std::fs::write(file.path(), b"{\"device\": \"cpu\", trunc").unwrap();
        assert_eq!(file.peek_device(), "");
        assert!(file.path().exists(), "load() reports and keeps it");
    }

    #[test]
    fn a_missing_file_gives_defaults_quietly() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = SettingsFile::in_dir(dir.path()).clone().load();
        assert_eq!(loaded.settings, Settings::default());
        assert!(loaded.problem.is_none());
    }

    #[test]
    fn a_corrupt_file_gives_defaults_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = SettingsFile::in_dir(dir.path());
        std::fs::write(file.path(), b"{\"steps\": 12, \"prompt\": trunc").unwrap();
        let loaded = file.load();
        assert_eq!(loaded.settings, Settings::default());
        let problem = loaded.problem.expect("a corrupt file is reported");
        assert!(problem.contains("damaged"), "{problem}");
        let backup = dir.path().join("settings.json.bad");
        assert_eq!(
            std::fs::read(backup).unwrap(),
            b"{\"steps\": 12, \"prompt\": trunc"
        );
        assert!(!file.path().exists());
    }

    /// A file that exists but cannot be read (here a folder in its place; permissions or a
    /// failing disk alike) is not replaced by the defaults in use.
    #[test]
    fn an_unreadable_file_is_not_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = SettingsFile::in_dir(dir.path());
        std::fs::create_dir(file.path()).unwrap();
        let loaded = file.load();
        assert_eq!(loaded.settings, Settings::default());
        let problem = loaded.problem.expect("an unreadable file is reported");
        assert!(problem.contains("not written over"), "{problem}");
        let refused = file.save(&loaded.settings).unwrap_err();
        assert!(refused.contains("not saved"), "{refused}");
        assert!(file.path().is_dir(), "left as it was");
    }

    /// A path that is not UTF-8 (a folder named in Latin-1) is left out, and every other
    /// setting is still saved.
    #[cfg(unix)]
    #[test]
    fn a_path_json_cannot_hold_does_not_stop_the_others_saving() {
        use std::os::unix::ffi::OsStrExt;
        let latin1 = PathBuf::from(std::ffi::OsStr::from_bytes(b"/m/caf\xe9.safetensors"));
        let dir = tempfile::tempdir().unwrap();
        let mut file = SettingsFile::in_dir(dir.path());
        let mut settings = Settings {
            steps: 33,
            last_model: Some(latin1.clone()),
            ..Settings::default()
        };
        settings.remember_model(Path::new("/m/plain.safetensors"));
        settings.remember_model(&latin1);
        settings.config_dirs.insert(latin1.clone(), "/c".into());
        file.save(&settings).unwrap();
        let loaded = file.load().settings;
        assert_eq!(loaded.steps, 33);
        assert_eq!(loaded.last_model, None);
        assert_eq!(
            loaded.recent_models,
            [PathBuf::from("/m/plain.safetensors")]
        );
        assert!(loaded.config_dirs.is_empty());
    }

    #[test]
    fn partial_files_keep_the_fields_they_have() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = SettingsFile::in_dir(dir.path());
        std::fs::write(file.path(), br#"{"steps": 31, "unknown_future_field": 1}"#).unwrap();
        let loaded = file.load();
        assert_eq!(loaded.settings.steps, 31);
        assert_eq!(loaded.settings.cfg_scale, 7.0);
    }
}
