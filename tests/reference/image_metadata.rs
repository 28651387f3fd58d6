//! Settings read from JPEG, WebP and PNG files written the way A1111, Fooocus and ComfyUI
//! write them (`tests/extra/make_exif_images.py`, with Pillow and piexif), and the EXIF
//! Ember writes compared byte for byte with piexif's.

use std::path::PathBuf;

use ember_tests::Json;
use inference::imaging::{self, exif};
use inference::metadata::{self, ImageMetadata};

fn exif_dir() -> PathBuf {
    ember_tests::extra("exif")
}

fn expected() -> Json {
    let text = std::fs::read_to_string(exif_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn sorted(mut entries: Vec<(String, String)>) -> Vec<(String, String)> {
    entries.sort();
    entries
}

#[test]
fn every_image_gives_the_entries_its_writer_put_in() {
    let expected = expected();
    let files = expected["files"].as_object().unwrap();
    assert!(files.len() >= 6, "the fixture lists its files");
    for (name, entries) in files {
        let want: Vec<(String, String)> = entries
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                let text = |i: usize| pair[i].as_str().unwrap().to_string();
                (text(0), text(1))
            })
            .collect();
        let got = imaging::read_image_text(&exif_dir().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(sorted(got), sorted(want), "{name}");
    }
}

#[test]
fn each_tool_s_settings_are_understood_as_that_tool_s() {
    let expected = expected();
    let a1111 = expected["a1111_text"].as_str().unwrap();
    let first_line = a1111.lines().next().unwrap();
    let read = |name: &str| {
        let entries = imaging::read_image_text(&exif_dir().join(name)).unwrap();
        metadata::from_text_chunks(&entries)
    };
    for name in ["a1111.jpg", "a1111.webp", "utf16le.jpg", "exif.png"] {
        match read(name) {
            Some(ImageMetadata::A1111(p)) => {
                assert_eq!(p.prompt, first_line, "{name}");
                assert!(p.get("Seed").is_some(), "{name}: {p:?}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    for name in ["fooocus.jpg", "fooocus_bytes.jpg"] {
        match read(name) {
            Some(ImageMetadata::Fooocus(fields)) => assert!(fields.contains_key("prompt")),
            other => panic!("{name}: {other:?}"),
        }
    }
    match read("comfyui.webp") {
        Some(ImageMetadata::ComfyUi { samplers, texts }) => {
            assert_eq!(samplers.len(), 1, "{samplers:?}");
            assert!(samplers[0].contains_key("positive"), "{samplers:?}");
            assert!(!texts.is_empty());
        }
        other => panic!("comfyui.webp: {other:?}"),
    }
    assert_eq!(read("plain.jpg"), None);
    assert_eq!(
        read("camera.jpg"),
        None,
        "a camera's comment is not settings"
    );
}

#[test]
fn ember_writes_the_user_comment_piexif_writes() {
    let expected = expected();
    let text = expected["a1111_text"].as_str().unwrap();
    let want = expected["a1111_user_comment_hex"].as_str().unwrap();
    let got: String = exif::a1111_user_comment(text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(got, want);
}
