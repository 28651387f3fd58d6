//! Where the app keeps things: settings, the default output and models folders, and the
//! fallback folder used when the output folder cannot be written.

use std::path::PathBuf;

/// The app's folders.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `settings.json` lives here.
    pub config_dir: PathBuf,
    /// Results go here unless the user chose another folder.
    pub default_output: PathBuf,
    /// Results go here when the output folder cannot be written, so none is lost.
    pub fallback_output: PathBuf,
    /// Downloaded models go here until the user chooses a models folder.
    pub default_models: PathBuf,
}

impl Paths {
    /// Everything under `$EMBER_HOME` when set (portable installs, screenshots); else
    /// `$EMBER_CONFIG_DIR` (else the platform's config dir) for settings and the pictures
    /// folder's `Ember` (else the data dir's `outputs`) for results.
    pub fn from_env() -> Self {
        if let Some(home) = std::env::var_os("EMBER_HOME") {
            return Self::under(std::path::Path::new(&home));
        }
        let project = directories::ProjectDirs::from("org", "Ember", "Ember");
        let config_dir = std::env::var_os("EMBER_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| project.as_ref().map(|p| p.config_dir().to_path_buf()))
            .unwrap_or_else(|| PathBuf::from(".ember"));
        let data_dir = project
            .as_ref()
            .map(|p| p.data_dir().to_path_buf())
            .unwrap_or_else(|| config_dir.clone());
        let default_output = directories::UserDirs::new()
            .and_then(|u| u.picture_dir().map(|p| p.join("Ember")))
            .unwrap_or_else(|| data_dir.join("outputs"));
        Self {
            config_dir,
            default_output,
            fallback_output: data_dir.join("unsaved"),
            default_models: data_dir.join("models"),
        }
    }

    /// Everything under one folder (tests, portable installs).
    pub fn under(root: &std::path::Path) -> Self {
        Self {
            config_dir: root.join("config"),
            default_output: root.join("outputs"),
            fallback_output: root.join("unsaved"),
            default_models: root.join("models"),
        }
    }
}

/// Where a damaged `file` is moved aside: `NAME.bad`, or `NAME.bad.2`, `.3`, ... where
/// earlier copies are there, so that a second damaged file never writes over the first's.
pub fn set_aside_name(file: &std::path::Path) -> PathBuf {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let numbered = |n: u32| file.with_file_name(format!("{name}.bad.{n}"));
    std::iter::once(file.with_file_name(format!("{name}.bad")))
        .chain((2..1000).map(numbered))
        .find(|candidate| !candidate.exists())
        .unwrap_or_else(|| numbered(1000))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_set_aside_never_writes_over_an_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        assert_eq!(
            super::set_aside_name(&file),
            dir.path().join("settings.json.bad")
        );
        std::fs::write(dir.path().join("settings.json.bad"), "first").unwrap();
        assert_eq!(
            super::set_aside_name(&file),
            dir.path().join("settings.json.bad.2")
        );
        std::fs::write(dir.path().join("settings.json.bad.2"), "second").unwrap();
        assert_eq!(
            super::set_aside_name(&file),
            dir.path().join("settings.json.bad.3")
        );
    }
}
