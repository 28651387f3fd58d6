//! A1111's prompt styles in the window: the Styles menu's choice reaches the job and is
//! remembered, Apply writes the styles into the prompts, the editor saves and deletes
//! styles in styles.csv (never over a file it could not read), and a dropped image's
//! prompts give their styles back.

use std::path::Path;
use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_app::styles::StyleBook;
use ember_tests::fake_engine::FakeEngine;

use crate::{app, click, drop_files, has_notice, open, step_until};

const STYLES: &str = "\u{feff}name,prompt,negative_prompt\r\n\
    Masterpiece,\"masterpiece, best quality\",\"worst quality\"\r\n\
    Watercolor,\"a watercolor painting of {prompt}, paper texture\",photo\r\n";

fn write_styles(home: &Path, text: &[u8]) -> std::path::PathBuf {
    let path = home.join("config").join("styles.csv");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// The app in `home` with the fake engine, its first frame drawn.
fn open_in(home: &Path) -> crate::Window {
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home),
    );
    w.step();
    w
}

/// Opens the style editor and types a new style's name.
fn edit_new_style(w: &mut crate::Window, name: &str) {
    click(w, "Edit…");
    w.step(); // a new window sizes itself on its first frame
    w.get_by_label("Name").focus();
    w.step();
    w.get_by_label("Name").type_text(name);
    w.step();
}

fn set_prompts(w: &mut crate::Window, prompt: &str, negative: &str) {
    let s = &mut w.state_mut().as_mut().unwrap().settings;
    (s.prompt, s.negative_prompt) = (prompt.into(), negative.into());
    w.step();
}

#[test]
fn styles_ticked_reach_the_job_in_their_order_and_apply_writes_them_into_the_prompts() {
    let home = tempfile::tempdir().unwrap();
    write_styles(home.path(), STYLES.as_bytes());
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    set_prompts(&mut w, "a fox", "ugly");
    click(&mut w, "Styles");
    click(&mut w, "Watercolor");
    click(&mut w, "Masterpiece");
    w.key_press(egui::Key::Escape);
    w.step();
    assert_eq!(app(&w).settings.styles, ["Watercolor", "Masterpiece"]);
    let request = app(&w).request().unwrap();
    assert_eq!(
        request.prompt,
        "a watercolor painting of a fox, paper texture, masterpiece, best quality"
    );
    assert_eq!(request.negative_prompt, "ugly, photo, worst quality");
    assert_eq!(
        app(&w).settings.prompt,
        "a fox",
        "the box keeps what was typed"
    );

    // Kept across a start.
    w.state_mut().as_mut().unwrap().save_settings();
    drop(w);
    let mut w = open_in(home.path());
    assert_eq!(app(&w).settings.styles, ["Watercolor", "Masterpiece"]);
    // The last model loads again meanwhile, which moves the form: click once it is there.
    step_until(&mut w, "the model to load again", |a| {
        a.session.model().is_some()
    });

    click(&mut w, "Apply");
    let s = &app(&w).settings;
    assert_eq!(s.prompt, request.prompt);
    assert_eq!(s.negative_prompt, request.negative_prompt);
    assert!(s.styles.is_empty());
}

#[test]
fn the_editor_saves_the_prompts_as_a_style_and_deletes_it() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open_in(home.path());
    set_prompts(&mut w, "{prompt}, ink sketch", "colour");
    edit_new_style(&mut w, "Ink");
    click(&mut w, "Copy the prompts here");
    click(&mut w, "Save style");
    let file = home.path().join("config/styles.csv");
    let book = StyleBook::read(&file).unwrap();
    let style = book.get("Ink").expect("saved in styles.csv");
    assert_eq!(
        (style.prompt.as_str(), style.negative_prompt.as_str()),
        ("{prompt}, ink sketch", "colour")
    );
    assert!(has_notice(app(&w), "style \"Ink\" added"));

    // Now it is there to choose, and to delete (the file before is kept as .bak).
    click(&mut w, "Close");
    set_prompts(&mut w, "a heron", "");
    click(&mut w, "Styles");
    click(&mut w, "Ink");
    w.key_press(egui::Key::Escape);
    w.step();
    assert_eq!(app(&w).request().unwrap().prompt, "a heron, ink sketch");
    click(&mut w, "Edit…");
    w.get_by_label("Name");
    click(&mut w, "Delete style");
    assert!(StyleBook::read(&file).unwrap().is_empty());
    assert!(home.path().join("config/styles.csv.bak").exists());
    assert!(
        app(&w).settings.styles.is_empty(),
        "a deleted style is no longer chosen"
    );
}

#[test]
fn a_styles_file_that_cannot_be_read_is_reported_and_never_written_over() {
    let home = tempfile::tempdir().unwrap();
    let damaged = b"name,prompt\nGood,fine\n\xff\xfe broken,x\n";
    let file = write_styles(home.path(), damaged);
    let mut w = open_in(home.path());
    assert!(has_notice(app(&w), "styles.csv could not be read"));
    edit_new_style(&mut w, "New");
    click(&mut w, "Save style");
    assert!(has_notice(app(&w), "styles are not saved"));
    assert_eq!(std::fs::read(&file).unwrap(), damaged);

    // A style chosen that the file no longer has stops Generate with what to do.
    std::fs::write(&file, STYLES).unwrap();
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.styles.reload().unwrap();
    app_mut.settings.styles = vec!["Gone".into()];
    let err = app(&w).request().unwrap_err();
    assert!(
        err.contains("\"Gone\"") && err.contains("untick it under Styles"),
        "{err}"
    );
}

#[test]
fn a_dropped_image_gives_back_the_styles_its_prompts_were_made_with() {
    let home = tempfile::tempdir().unwrap();
    write_styles(home.path(), STYLES.as_bytes());
    let mut w = open_in(home.path());
    let write = |name: &str, prompt: &str, negative: &str| {
        let text =
            format!("{prompt}\nNegative prompt: {negative}\nSteps: 20, Sampler: Euler a, Seed: 7");
        crate::a1111_png(home.path(), name, &text)
    };
    let styled = write(
        "styled.png",
        "a watercolor painting of a fox, paper texture, masterpiece, best quality",
        "ugly, photo, worst quality",
    );
    drop_files(&mut w, &[&styled]);
    step_until(&mut w, "the settings to be restored", |a| {
        a.settings.prompt == "a fox"
    });
    let s = &app(&w).settings;
    assert_eq!(s.styles, ["Watercolor", "Masterpiece"]);
    assert_eq!(s.negative_prompt, "ugly");
    assert!(has_notice(app(&w), "styles"));

    let plain = write("plain.png", "a fox, masterpiece", "ugly");
    drop_files(&mut w, &[&plain]);
    step_until(&mut w, "the second image's settings", |a| {
        a.settings.prompt == "a fox, masterpiece"
    });
    assert!(
        app(&w).settings.styles.is_empty(),
        "its prompt was made without styles"
    );
}
