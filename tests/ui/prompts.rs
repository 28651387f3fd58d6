//! The prompt box as A1111's: the token counter, Ctrl+Up / Ctrl+Down on the word under the
//! cursor, the embeddings list adding a name to the prompt, missing embeddings pointed out;
//! the request carries the models folder's `embeddings/`.

use std::time::Duration;

use egui::Modifiers;
use egui_kittest::kittest::Queryable;
use ember_app::gui::action::Action;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{app, click, open, step_until};

#[test]
fn the_prompt_counts_tokens_and_ctrl_arrows_weigh_the_word() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    assert_eq!(w.get_all_by_label("0/75").count(), 2, "prompt and negative");
    let prompt = w.get_by_label("Prompt");
    prompt.focus();
    w.step();
    w.get_by_label("Prompt").type_text("a red fox");
    w.step();
    w.step();
    w.get_by_label("3/75");
    // The cursor is after "fox": Ctrl+Up weighs it, twice; Ctrl+Down back to plain.
    w.key_press_modifiers(Modifiers::COMMAND, egui::Key::ArrowUp);
    w.step();
    assert_eq!(app(&w).settings.prompt, "a red (fox:1.1)");
    w.key_press_modifiers(Modifiers::COMMAND, egui::Key::ArrowUp);
    w.step();
    assert_eq!(app(&w).settings.prompt, "a red (fox:1.2)");
    w.key_press_modifiers(Modifiers::COMMAND, egui::Key::ArrowDown);
    w.step();
    w.key_press_modifiers(Modifiers::COMMAND, egui::Key::ArrowDown);
    w.step();
    assert_eq!(app(&w).settings.prompt, "a red fox");
    // Every press of a frame counts (a busy frame, a held key).
    let up = [egui::Key::ArrowUp; 3];
    crate::press_in_one_frame(&mut w, Modifiers::COMMAND, &up);
    assert_eq!(app(&w).settings.prompt, "a red (fox:1.3)");
    let down = [egui::Key::ArrowDown; 3];
    crate::press_in_one_frame(&mut w, Modifiers::COMMAND, &down);
    assert_eq!(app(&w).settings.prompt, "a red fox");
    // A long prompt shows the chunks it fills.
    w.state_mut().as_mut().unwrap().settings.prompt = "cat ".repeat(80);
    w.step();
    w.step();
    w.get_by_label("80/150");
}

#[test]
fn embeddings_and_loras_in_the_models_list_add_themselves_to_the_prompt() {
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("embeddings")).unwrap();
    std::fs::write(models.join("embeddings/badhands.pt"), b"ti").unwrap();
    std::fs::create_dir_all(models.join("Lora")).unwrap();
    std::fs::write(models.join("Lora/inkstyle.safetensors"), b"lora").unwrap();
    // The card picture A1111 / Civitai keep beside a LoRA.
    let preview = models.join("Lora/inkstyle.preview.png");
    let picture = inference::imaging::ImageRgb8 {
        width: 16,
        height: 16,
        pixels: vec![200; 16 * 16 * 3],
    };
    std::fs::write(
        &preview,
        inference::imaging::encode_png(&picture, &[]).unwrap(),
    )
    .unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    w.state_mut().as_mut().unwrap().settings.prompt = "a cat".into();
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::SetModelsFolder(models.clone()));
    step_until(&mut w, "the scan", |a| a.models.len() == 2);
    let lora = app(&w)
        .models
        .iter()
        .find(|e| e.name == "inkstyle.safetensors")
        .expect("the LoRA is listed, its picture is not");
    assert_eq!(lora.preview.as_ref(), Some(&preview));
    click(&mut w, "Embeddings (1)");
    click(&mut w, "badhands");
    assert_eq!(app(&w).settings.prompt, "a cat, badhands");
    // A word that looks like an embedding but names none is pointed out; a known one is not.
    w.state_mut().as_mut().unwrap().settings.prompt = "a cat, badhands, EasyNegative".into();
    w.step();
    w.step();
    w.get_by_label("No embedding named \"EasyNegative\": read as text");
    w.state_mut().as_mut().unwrap().settings.prompt = "a cat, badhands".into();
    w.step();
    w.step();
    assert!(w.query_by_label_contains("No embedding named").is_none());
    let dirs = app(&w).embedding_dirs();
    assert_eq!(dirs.first(), Some(&models.join("embeddings")));
    // A LoRA adds A1111's tag; the request looks tags up in the models folder's Lora/.
    click(&mut w, "LoRA (1)");
    // The open list asks for the card's picture and shows it once made.
    step_until(&mut w, "the LoRA's picture", |a| {
        a.gallery.thumbnail_ready(&preview)
    });
    click(&mut w, "inkstyle");
    assert_eq!(
        app(&w).settings.prompt,
        "a cat, badhands, <lora:inkstyle:1>"
    );
    let request = app(&w).request().unwrap();
    assert_eq!(request.lora_dirs, vec![models.join("Lora")]);
}

#[test]
fn restoring_an_image_names_the_loras_it_used_that_are_missing() {
    use crate::{drop_files, has_notice};

    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("Lora")).unwrap();
    // Safetensors-shaped files: A1111's short hash covers what follows the header.
    let lora = |name: &str, data: &[u8]| {
        let mut bytes = 2u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        bytes.extend_from_slice(data);
        std::fs::write(models.join(format!("Lora/{name}.safetensors")), bytes).unwrap();
        inference::hashing::sha256_bytes(data)[..12].to_string()
    };
    let ink = lora("inkstyle", b"ink weights");
    let pencil = lora("pencil", b"pencil weights");
    assert_ne!(ink, "0123456789ab");
    let parameters = format!(
        "a cat <lora:pencil:1> <lora:inkstyle:0.8> <lora:watercolor:0.5>\nSteps: 20, Sampler: \
         Euler, CFG scale: 7, Seed: 5, Size: 512x512, Lora hashes: \"inkstyle: 0123456789ab, \
         watercolor: ba9876543210, pencil: {pencil}\""
    );
    let png = crate::a1111_png(home.path(), "a1111.png", &parameters);
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::SetModelsFolder(models));
    step_until(&mut w, "the scan", |a| a.models.len() == 2);
    drop_files(&mut w, &[&png]);
    step_until(&mut w, "the restore", |a| {
        a.settings.prompt.contains("watercolor")
    });
    assert!(
        has_notice(app(&w), "watercolor [ba9876543210]"),
        "{:?}",
        app(&w).session.notices
    );
    assert!(!has_notice(app(&w), "inkstyle ["), "inkstyle is in Lora/");
    // inkstyle is there, but not the file the image used; pencil (checked first, on the
    // same thread) is.
    step_until(&mut w, "the LoRA hashes to be compared", |a| {
        has_notice(a, &format!("inkstyle in your folders (hash {ink})"))
    });
    assert!(has_notice(app(&w), "used (0123456789ab)"));
    assert!(!has_notice(app(&w), "LoRA pencil"), "pencil's hash matches");
}
