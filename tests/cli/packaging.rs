//! What the packages rely on: the desktop entry passes files (`%F`) to a binary that opens
//! them, every file type it claims is one the MIME package defines (or a standard one), and
//! a mistyped command is an error rather than a window.

use std::path::Path;

use crate::ember;

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

#[test]
fn the_desktop_entry_opens_files_of_the_types_the_mime_package_defines() {
    let entry = std::fs::read_to_string(repo("packaging/ember.desktop")).unwrap();
    let field = |key: &str| {
        entry
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in ember.desktop"))
            .to_string()
    };
    assert_eq!(field("Exec"), "ember %F");
    assert_eq!(field("Icon"), "ember");
    let mime = std::fs::read_to_string(repo("packaging/linux/ember-mime.xml")).unwrap();
    let claimed: Vec<String> = field("MimeType")
        .split(';')
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect();
    assert!(claimed.contains(&"application/x-safetensors".to_string()));
    for t in &claimed {
        let defined = mime.contains(&format!("<mime-type type=\"{t}\">"));
        assert!(
            defined || t.starts_with("image/"),
            "{t} is claimed but not defined"
        );
    }
    for glob in ["*.safetensors", "*.ckpt"] {
        assert!(
            mime.contains(&format!("<glob pattern=\"{glob}\"/>")),
            "{glob}"
        );
    }
}

#[test]
fn a_mistyped_command_is_an_error_not_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let out = ember(dir.path(), &["generat", "--prompt", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("neither a file nor a command") || stderr.contains("unexpected argument"),
        "{stderr}"
    );
    let out = ember(dir.path(), &["no-such-model.safetensors"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither a file nor a command"));
}

#[test]
fn the_mac_bundle_declares_its_binary_and_the_checkpoint_types() {
    let plist = std::fs::read_to_string(repo("packaging/macos/Info.plist")).unwrap();
    let value_after = |key: &str| {
        let at = plist
            .find(&format!("<key>{key}</key>"))
            .unwrap_or_else(|| panic!("no {key}"));
        let rest = &plist[at..];
        let start = rest.find("<string>").unwrap() + "<string>".len();
        rest[start..start + rest[start..].find("</string>").unwrap()].to_string()
    };
    assert_eq!(value_after("CFBundleExecutable"), "ember");
    assert_eq!(value_after("CFBundlePackageType"), "APPL");
    assert_eq!(value_after("CFBundleShortVersionString"), "@VERSION@");
    for ext in ["safetensors", "ckpt"] {
        assert!(plist.contains(&format!("<string>{ext}</string>")), "{ext}");
    }
    // Balanced and well-formed enough for plutil: every dict/array closes.
    for tag in ["dict", "array", "plist"] {
        assert_eq!(
            plist.matches(&format!("<{tag}")).count(),
            plist.matches(&format!("</{tag}>")).count(),
            "{tag}"
        );
    }
    assert!(repo("packaging/windows/ember.ico").is_file());
    let rc = std::fs::read_to_string(repo("packaging/windows/ember.rc")).unwrap();
    assert!(rc.contains("ICON \"ember.ico\""));
}
