//! The ControlNet network against diffusers (`sd15/controlnet/golden.safetensors`): every
//! residual it gives the UNet, and the UNet's output with them added.

use burn::tensor::Device;
use ember_tests::{Fixtures, assert_close_scaled, reference};
use inference::device::{Precision, tensor_to_vec};
use inference::weights::{LoadOptions, controlnet, load};

use crate::components::tensor;

const TOL: f64 = 1e-4;

#[test]
fn controlnet_residuals_and_the_controlled_unet_match_diffusers() {
    let golden = Fixtures::load("sd15/controlnet/golden.safetensors");
    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let model = load(&reference("sd15/pipeline"), &options).unwrap();
    // The diffusers folder and the original single file (`control_model.*` keys).
    for source in [
        "sd15/controlnet",
        "sd15/controlnet/checkpoint_ldm.safetensors",
    ] {
        let net = controlnet::load(&reference(source), &options).unwrap();
        let timesteps = golden.get("timestep").f32();
        let context = tensor(golden.get("encoder_hidden_states"));
        let residuals = net.forward(
            tensor(golden.get("sample")),
            &timesteps,
            (&context, None),
            tensor(golden.get("controlnet_cond")),
            1.0,
        );
        let expected = golden
            .tensors
            .keys()
            .filter(|k| k.starts_with("down_block_res_sample_"))
            .count();
        assert_eq!(residuals.down.len(), expected, "{source}");
        for (i, r) in residuals.down.iter().enumerate() {
            let name = format!("down_block_res_sample_{i}");
            let what = format!("{source}: {name}");
            let ours = tensor_to_vec(r.clone());
            assert_close_scaled(&what, &ours, &golden.get(&name).f64(), TOL);
        }
        assert_close_scaled(
            &format!("{source}: mid_block_res_sample"),
            &tensor_to_vec(residuals.mid.clone()),
            &golden.get("mid_block_res_sample").f64(),
            TOL,
        );
        let out = model
            .unet
            .forward_controlled(
                tensor(golden.get("sample")),
                &timesteps,
                (&context, None),
                &residuals,
                &|| false,
            )
            .unwrap();
        assert_close_scaled(
            &format!("{source}: unet_out_with_control"),
            &tensor_to_vec(out),
            &golden.get("unet_out_with_control").f64(),
            TOL,
        );
    }
    // A file that is no ControlNet says so.
    let err = controlnet::load(&reference("sd15/lora/lora_kohya.safetensors"), &options)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not a ControlNet"), "{err}");
}

/// A cancel stops a ControlNet call between its blocks, as it stops the UNet: it gives up at
/// the first ask that says stop, and a call told to go on is the plain call.
#[test]
fn a_controlnet_call_stops_between_blocks() {
    use std::cell::Cell;

    let golden = Fixtures::load("sd15/controlnet/golden.safetensors");
    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let net = controlnet::load(&reference("sd15/controlnet"), &options).unwrap();
    let timesteps = golden.get("timestep").f32();
    let context = tensor(golden.get("encoder_hidden_states"));
    let call = |interrupted: &dyn Fn() -> bool| {
        net.forward_interruptible(
            tensor(golden.get("sample")),
            &timesteps,
            (&context, None),
            tensor(golden.get("controlnet_cond")),
            1.0,
            interrupted,
        )
    };
    let asked = Cell::new(0);
    let go_on = call(&|| {
        asked.set(asked.get() + 1);
        false
    })
    .expect("nothing said stop");
    let asks = asked.get();
    assert!(asks > 1, "asked {asks} times in a whole call");
    let plain = net.forward(
        tensor(golden.get("sample")),
        &timesteps,
        (&context, None),
        tensor(golden.get("controlnet_cond")),
        1.0,
    );
    assert_eq!(go_on.down.len(), plain.down.len());
    for (asked, plain) in go_on.down.into_iter().zip(plain.down) {
        assert_eq!(tensor_to_vec(asked), tensor_to_vec(plain));
    }
    assert_eq!(tensor_to_vec(go_on.mid), tensor_to_vec(plain.mid));

    asked.set(0);
    let stopped = call(&|| {
        asked.set(asked.get() + 1);
        true
    });
    assert!(stopped.is_none(), "a stopped call gave residuals");
    assert_eq!(asked.get(), 1, "it went on after the first stop");
}

#[test]
fn the_controlnet_run_reproduces_through_the_engine() {
    use inference::api::ControlRequest;
    use inference::schedule::diffusers::SchedulerConfig;

    let dir = "sd15/controlnet";
    let run = ember_tests::json(&format!("{dir}/txt2img_controlnet.json"));
    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let mut model = load(&reference("sd15/pipeline"), &options).unwrap();
    let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
    let mut request = crate::pipelines::request_for(&model, dir, &run, config);
    let size = Some((request.width, request.height));
    let image_path = reference(&format!("{dir}/{}", run["control_image"].as_str().unwrap()));
    request.controlnets = vec![ControlRequest {
        model: reference(dir),
        image: inference::imaging::load_rgb(&image_path, size).unwrap(),
        scale: run["controlnet_conditioning_scale"].as_f64().unwrap() as f32,
        start: 0.0,
        end: 1.0,
        map: inference::control::MapSettings::new(inference::control::Module::None),
    }];
    inference::control::set_for_request(&mut model, &request).unwrap();
    crate::pipelines::check_run_request(
        dir,
        "txt2img_controlnet",
        "sd15/pipeline",
        (&model, None),
        &request,
    );

    // Guiding none of the steps is the plain run.
    let mut off = request.clone();
    off.controlnets[0].start = 1.0;
    let mut plain = request.clone();
    plain.controlnets.clear();
    let latents = |r: &inference::api::GenerateRequest| {
        inference::pipeline::generate(&model, r, &mut crate::prompt_schedules::Quiet)
            .unwrap()
            .latents
    };
    assert_eq!(latents(&off), latents(&plain));
    assert_ne!(latents(&request), latents(&plain));
}

/// A ControlNet of another family is refused by name before anything runs (the tree's SD
/// 1.x ControlNet on its SDXL model, and our SDXL ControlNet on its SD 1.x model), and the
/// model is left as it was.
#[test]
fn a_controlnet_of_another_family_is_refused() {
    use inference::api::ControlRequest;
    use inference::control::{MapSettings, Module};

    let options = LoadOptions::new(Device::flex(), Precision::F32);
    let sdxl_controlnet =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("extra/models/sdxl_controlnet");
    for (model_dir, controlnet, says) in [
        ("sdxl/pipeline", reference("sd15/controlnet"), "SDXL"),
        ("sd15/pipeline", sdxl_controlnet, "pooled text"),
    ] {
        let mut model = load(&reference(model_dir), &options).unwrap();
        let mut request = model.request("a house", 1);
        request.controlnets = vec![ControlRequest {
            model: controlnet,
            image: inference::imaging::ImageRgb8 {
                width: request.width,
                height: request.height,
                pixels: vec![0; (request.width * request.height * 3) as usize],
            },
            scale: 1.0,
            start: 0.0,
            end: 1.0,
            map: MapSettings::new(Module::None),
        }];
        let err = inference::control::set_for_request(&mut model, &request)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not fit the loaded model") && err.contains(says),
            "{err}"
        );
        assert!(model.controlnets.is_empty(), "{model_dir}: nothing loaded");
    }
}
