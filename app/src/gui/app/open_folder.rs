//! Opening the output folder in the platform's file manager (the "Open folder" button).

use std::path::Path;

/// Opens a folder in the platform's file manager (without waiting for it).
pub(super) fn open_folder(dir: &Path) -> Result<(), String> {
    let program = if cfg!(windows) {
        "explorer"
    } else if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    open_folder_with(program, dir)
}

fn open_folder_with(program: &str, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::process::Command::new(program)
        .arg(dir)
        .spawn()
        .map(drop)
        .map_err(|e| match e.kind() {
            // The launcher is missing, not the folder.
            std::io::ErrorKind::NotFound => format!(
                "no file manager launcher ({program}) was found; your images are in {}",
                dir.display()
            ),
            _ => format!("could not open {} with {program}: {e}", dir.display()),
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_launcher_is_named_not_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let error = super::open_folder_with("no-such-launcher-ember", dir.path()).unwrap_err();
        assert!(
            error.contains("no-such-launcher-ember") && error.contains("your images are in"),
            "{error}"
        );
    }
}
