//! Prompt editing, alternation and `AND` through the pipeline: which conditioning each model
//! call receives (A1111 counts calls, over a schedule doubled for second-order samplers), and
//! whole generations that must equal the plain prompt they reduce to.

use std::ops::ControlFlow;

use burn::tensor::Device;
use inference::api::{GenerateRequest, Progress, SamplerChoice};
use inference::device::{Precision, tensor_to_vec};
use inference::model::Model;
use inference::pipeline::prompt::encode;
use inference::pipeline::scheduled::{encode_scheduled, schedule_steps};
use inference::pipeline::{Observer, StepLatents};
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;
use inference::weights::{LoadOptions, load};

use ember_tests::reference;

fn sd15() -> Model {
    load(
        &reference("sd15/pipeline"),
        &LoadOptions::new(Device::flex(), Precision::F32),
    )
    .unwrap()
}

fn request(model: &Model, prompt: &str, sampler: SamplerName, steps: u32) -> GenerateRequest {
    let mut r = model.request(prompt, 42);
    r.negative_prompt = "blurry".into();
    r.width = 24;
    r.height = 40;
    r.steps = steps;
    r.cfg_scale = 7.0;
    r.sampler = SamplerChoice::Named {
        sampler,
        schedule: ScheduleName::Karras,
    };
    r
}

/// The context a plain (negative, prompt) pair encodes to.
fn context_of(model: &Model, base: &GenerateRequest, prompt: &str) -> Vec<f32> {
    let mut r = base.clone();
    r.prompt = prompt.into();
    tensor_to_vec(encode(model, &r, true).unwrap().context)
}

/// An observer that watches nothing.
pub struct Quiet;

impl Observer for Quiet {
    fn progress(&mut self, _: Progress) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// Records the latents after every step.
struct Steps(Vec<Vec<f32>>);

impl Observer for Steps {
    fn progress(&mut self, _: Progress) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
    fn step(&mut self, s: &StepLatents<'_>) {
        self.0.push(tensor_to_vec(s.x.clone()));
    }
}

fn run(model: &Model, r: &GenerateRequest) -> Vec<Vec<f32>> {
    let mut steps = Steps(Vec::new());
    inference::pipeline::generate(model, r, &mut steps).unwrap();
    steps.0
}

#[test]
fn each_model_call_gets_the_conditioning_a1111_gives_it() {
    let model = sd15();
    // (sampler, steps, prompt, A1111's prompt for calls 0, 1, 2, ...): the schedule is built
    // over steps x 2 for second-order samplers, and call k takes the first stretch whose
    // end is >= k, so a stretch ending at step n covers calls 0..=n.
    let cases: [(SamplerName, u32, &str, &[&str]); 4] = [
        (
            SamplerName::Euler,
            4,
            "[cat:dog:2]",
            &["cat", "cat", "cat", "dog", "dog"],
        ),
        (
            SamplerName::Euler,
            4,
            "[cat:dog:0.5]",
            &["cat", "cat", "cat", "dog"],
        ),
        (
            SamplerName::Heun,
            3,
            "[cat:dog:0.5]",
            &["cat", "cat", "cat", "cat", "dog", "dog"],
        ),
        (
            SamplerName::Euler,
            4,
            "[cat|dog] house",
            &[
                "cat house",
                "cat house",
                "dog house",
                "cat house",
                "dog house",
            ],
        ),
    ];
    for (sampler, steps, prompt, expected) in cases {
        let r = request(&model, prompt, sampler, steps);
        let multiplier = if sampler == SamplerName::Heun { 2 } else { 1 };
        let total = schedule_steps(&r, multiplier);
        let scheduled = encode_scheduled(&model, &r, true, total).unwrap();
        for (call, text) in expected.iter().enumerate() {
            let ours = tensor_to_vec(scheduled.at(call).context.clone());
            assert_eq!(
                ours,
                context_of(&model, &r, text),
                "{prompt} ({sampler:?}, {steps} steps): call {call} should see {text:?}"
            );
        }
    }
}

#[test]
fn edits_that_never_switch_generate_the_plain_prompt_bit_for_bit() {
    let model = sd15();
    for sampler in [SamplerName::Euler, SamplerName::Heun, SamplerName::DpmPp2M] {
        let plain = run(&model, &request(&model, "a red house", sampler, 4));
        let dog = run(&model, &request(&model, "a blue house", sampler, 4));
        // Never reached: the first text throughout; reached at once: the second.
        let late = run(
            &model,
            &request(&model, "a [red:blue:99] house", sampler, 4),
        );
        let early = run(
            &model,
            &request(&model, "a [red:blue:-1] house", sampler, 4),
        );
        let same = run(&model, &request(&model, "a [red|red] house", sampler, 4));
        assert_eq!(late, plain, "{sampler:?}");
        assert_eq!(same, plain, "{sampler:?}");
        assert_eq!(early, dog, "{sampler:?}");
        // A switch half-way starts as the first prompt and ends elsewhere than either.
        let mid = run(
            &model,
            &request(&model, "a [red:blue:0.5] house", sampler, 4),
        );
        assert_eq!(mid[0], plain[0], "{sampler:?}: the first step is still red");
        assert_ne!(mid.last(), plain.last(), "{sampler:?}");
        assert_ne!(mid.last(), dog.last(), "{sampler:?}");
    }
}

#[test]
fn img2img_counts_its_calls_from_its_first_step_over_the_full_step_count() {
    // A1111: 10 steps at strength 0.5 run 5; `[red:blue:0.5]` switches after step 5 of the
    // full 10, which those 5 calls never pass, so the image is the plain `red` one. With
    // `:0.2` (step 2) the switch happens inside them.
    let model = sd15();
    let init =
        inference::imaging::load_rgb(&reference("sd15/runs/input_init_image.png"), Some((24, 40)))
            .unwrap();
    let with = |prompt: &str| {
        let mut r = request(&model, prompt, SamplerName::Euler, 10);
        r.init_image = Some(init.clone());
        r.strength = 0.5;
        run(&model, &r)
    };
    let plain = with("a red house");
    assert_eq!(plain.len(), 5);
    assert_eq!(with("a [red:blue:0.5] house"), plain);
    let early = with("a [red:blue:0.2] house");
    assert_eq!(early[..3], plain[..3], "calls 0..=2 still see red");
    assert_ne!(early[3], plain[3]);
}

#[test]
fn absurd_prompts_are_read_or_refused_with_a_message() {
    let model = sd15();
    let nul = "a cat\0 with \u{202e}rtl text 🎨🦊 and emoji".to_string();
    let prompts = [
        "((((((".to_string(),
        "(x:abc)".to_string(),
        "(x:1e9)".to_string(),
        "[a:b:c:d] [|||] [::] ]]]] )))".to_string(),
        "word ".repeat(2_000),
        nul,
        "\\".to_string(),
        "a AND".to_string(),
    ];
    for prompt in prompts {
        let r = request(&model, &prompt, SamplerName::Euler, 2);
        match encode_scheduled(&model, &r, true, 2) {
            Ok(s) => assert!(!s.all().is_empty()),
            Err(e) => {
                let message = e.to_string();
                assert!(
                    message.contains("weight") || message.contains("chunks"),
                    "{prompt:.40}: {message}"
                );
            }
        }
    }
}

#[test]
fn and_composes_subprompts_as_a1111_does() {
    let model = sd15();
    let sampler = SamplerName::Euler;
    // One subprompt of weight 1 is the plain prompt.
    let plain = run(&model, &request(&model, "a red house", sampler, 3));
    let weighted_one = run(&model, &request(&model, "a red house :1", sampler, 3));
    assert_eq!(weighted_one, plain);
    // `a AND a` with weights summing to 1 is the plain prompt, up to rounding.
    let split = run(
        &model,
        &request(&model, "a red house :0.5 AND a red house :0.5", sampler, 3),
    );
    for (s, p) in split.last().unwrap().iter().zip(plain.last().unwrap()) {
        assert!((s - p).abs() <= 1e-4 * p.abs().max(1.0), "{s} vs {p}");
    }
    // Two different subprompts differ from each alone, and the scheduled conditioning has
    // both rows.
    let r = request(&model, "a red house AND a blue car:0.7", sampler, 3);
    let scheduled = encode_scheduled(&model, &r, true, 3).unwrap();
    assert_eq!(scheduled.subprompts(), 2);
    assert_eq!(scheduled.at(0).weights, vec![1.0, 0.7]);
    let both = run(&model, &r);
    assert_ne!(both.last(), plain.last());
    // Too many subprompts are refused with the count.
    let many = ["x"; 9].join(" AND ");
    let err = encode_scheduled(&model, &request(&model, &many, sampler, 3), true, 3)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("9 AND subprompts"), "{err}");
}

/// The `[rows, tokens, width]` context of a conditioning as rows of token vectors.
fn token_rows(c: &inference::pipeline::prompt::Conditioning) -> (Vec<f32>, [usize; 3]) {
    (tensor_to_vec(c.context.clone()), c.context.dims())
}

#[test]
fn a_prompts_scheduled_texts_share_its_chunk_count_and_emphasis_mean() {
    let model = sd15();
    let long = "tree ".repeat(85);
    // The short stretch is padded to the long one's two chunks with the empty chunk, as
    // A1111 pads the texts of one prompt; so is the one-chunk negative, beside it.
    let r = request(&model, &format!("[cat:{long}:0.5]"), SamplerName::Euler, 4);
    let s = encode_scheduled(&model, &r, true, 4).unwrap();
    let (values, [rows, tokens, width]) = token_rows(s.at(0));
    assert_eq!((rows, tokens), (2, 154));
    assert!(
        s.at(0).padded,
        "the negative was padded to the prompt's length"
    );
    let empty = tensor_to_vec(
        inference::pipeline::prompt::encode(
            &model,
            &request(&model, "", SamplerName::Euler, 4),
            false,
        )
        .unwrap()
        .context,
    );
    let second_chunk = &values[(154 + 77) * width..2 * 154 * width];
    assert_eq!(
        second_chunk,
        &empty[..],
        "cat's second chunk is the empty chunk"
    );

    // Original emphasis restores the mean of the whole group: the unweighted stretch is
    // scaled by the group's ratio (all values by one factor); No norm leaves it alone.
    let edited = "[a red house:(a blue car:1.3):0.5]";
    let plain = |emphasis| {
        let mut r = request(&model, "a red house", SamplerName::Euler, 4);
        r.emphasis = emphasis;
        tensor_to_vec(encode(&model, &r, false).unwrap().context)
    };
    for emphasis in [Emphasis::Original, Emphasis::NoNorm] {
        let mut r = request(&model, edited, SamplerName::Euler, 4);
        r.emphasis = emphasis;
        let s = encode_scheduled(&model, &r, false, 4).unwrap();
        let ours = tensor_to_vec(s.at(0).context.clone());
        let reference = plain(emphasis);
        if emphasis == Emphasis::NoNorm {
            assert_eq!(ours, reference);
        } else {
            let ratio = ours[0] / reference[0];
            assert_ne!(
                ratio, 1.0,
                "the group's mean changes the unweighted text too"
            );
            for (a, b) in ours.iter().zip(&reference) {
                assert!(
                    (a - b * ratio).abs() <= 1e-5 * b.abs().max(1.0),
                    "{a} vs {b} x {ratio}"
                );
            }
        }
    }
}

#[test]
fn and_subprompts_pad_by_repeating_their_last_token() {
    let model = sd15();
    let long = "tree ".repeat(90);
    let r = request(&model, &format!("a cat AND {long}"), SamplerName::Euler, 2);
    let s = encode_scheduled(&model, &r, true, 2).unwrap();
    let (values, [rows, tokens, width]) = token_rows(s.at(0));
    assert_eq!((rows, tokens), (3, 154), "[negative, a cat, trees]");
    let row = |r: usize, t: usize| &values[(r * tokens + t) * width..(r * tokens + t + 1) * width];
    for t in 77..154 {
        assert_eq!(
            row(1, t),
            row(1, 76),
            "token {t} of `a cat` repeats its last"
        );
    }
    assert!(
        s.at(0).padded,
        "the negative is padded with the empty chunk"
    );
    // Subprompts of one chunk each: nothing is padded and nothing says so.
    let r = request(&model, "a cat AND a dog", SamplerName::Euler, 2);
    assert!(!encode_scheduled(&model, &r, true, 2).unwrap().at(0).padded);
}
