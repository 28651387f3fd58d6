//! Dynamic prompts in the app: Generate resolves `{a|b}` and the models folder's
//! `wildcards/` per image from its seed (the template kept for the metadata), and the
//! Advanced switch turns them off.

use std::time::Duration;

use ember_app::gui::session::Work;
use ember_tests::fake_engine::FakeEngine;
use inference::api::GenerateRequest;

use crate::{app, click, scroll_and_click};

/// The requests running and queued, in order.
fn jobs(w: &crate::Window) -> Vec<GenerateRequest> {
    let session = &app(w).session;
    let running = session.running.iter().map(|r| &r.work);
    let queued = session.queue.iter().map(|q| &q.work);
    running
        .chain(queued)
        .map(|work| match work {
            Work::Generate(r) => (**r).clone(),
            _ => panic!("a generation"),
        })
        .collect()
}

#[test]
fn each_image_gets_its_own_choice_and_the_switch_turns_them_off() {
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("wildcards")).unwrap();
    std::fs::write(models.join("wildcards/animal.txt"), "fox\nowl\nhare\n").unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(50)));
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.models_dir = Some(models);
        s.prompt = "a {red|blue|green|gold} __animal__".into();
        s.negative_prompt = "{ugly|blurry}".into();
        (s.seed, s.seed_locked, s.batch_count, s.steps) = (10, true, 6, 20);
    }
    click(&mut w, "Generate");
    let made = jobs(&w);
    assert_eq!(made.len(), 6);
    let colours = ["red", "blue", "green", "gold"];
    let animals = ["fox", "owl", "hare"];
    for job in &made {
        let words: Vec<&str> = job.prompt.split(' ').collect();
        assert!(
            words.len() == 3 && colours.contains(&words[1]) && animals.contains(&words[2]),
            "{}",
            job.prompt
        );
        assert!(["ugly", "blurry"].contains(&job.negative_prompt.as_str()));
        let fields = &job.metadata_fields;
        assert!(fields.contains(&(
            "Template".into(),
            "a {red|blue|green|gold} __animal__".into()
        )));
        assert!(fields.contains(&("Negative Template".into(), "{ugly|blurry}".into())));
    }
    let prompts: std::collections::BTreeSet<&str> =
        made.iter().map(|j| j.prompt.as_str()).collect();
    assert!(prompts.len() > 1, "each seed chooses: {prompts:?}");
    click(&mut w, "Cancel all");
    crate::step_until(&mut w, "the queue to empty", |a| {
        a.session.running.is_none() && a.session.queue.is_empty()
    });

    scroll_and_click(&mut w, "Advanced");
    scroll_and_click(&mut w, "Dynamic prompts: {a|b}, __wildcards__");
    assert!(!app(&w).settings.dynamic_prompts);
    w.state_mut().as_mut().unwrap().settings.batch_count = 1;
    click(&mut w, "Generate");
    let literal = jobs(&w);
    assert_eq!(literal[0].prompt, "a {red|blue|green|gold} __animal__");
    assert!(literal[0].metadata_fields.is_empty());
}
