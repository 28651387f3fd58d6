"""ControlNet runs beyond ../shared/reference (which has an SD 1.x ControlNet only): an SDXL
ControlNet made from this folder's tiny SDXL UNet (`ControlNetModel.from_unet`, then
seeded random weights so every layer, the zero convolutions too, matters), saved as a
diffusers folder in models/sdxl_controlnet, and StableDiffusionXLControlNetPipeline runs
with it: full guidance, and a scale below 1 with start / end fractions.

Needs torch, diffusers 0.42.1 and transformers (as make_runs.py); CI only reads the files:
    /tmp/tvenv/bin/python tests/extra/make_controlnet_runs.py
Writes models/sdxl_controlnet, inputs/control.png and control_runs/.
"""

import json
import os
import shutil

import diffusers
import numpy as np
import torch
from diffusers import ControlNetModel, StableDiffusionXLControlNetPipeline
from PIL import Image
from safetensors.torch import save_file

from make_runs import HERE, MODELS, SCHEDULER, assembled, finite, perturb

CASES = [
    dict(name="sdxl_controlnet_euler", controlnet_conditioning_scale=1.0,
         control_guidance_start=0.0, control_guidance_end=1.0, steps=6, seed=21),
    dict(name="sdxl_controlnet_partial", controlnet_conditioning_scale=0.7,
         control_guidance_start=0.2, control_guidance_end=0.7, steps=7, seed=22),
]
WIDTH, HEIGHT = 48, 32


def make_controlnet():
    unet = diffusers.UNet2DConditionModel.from_pretrained(os.path.join(MODELS, "sdxl", "unet"))
    net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(8, 16))
    perturb(net, 41)
    out = os.path.join(MODELS, "sdxl_controlnet")
    shutil.rmtree(out, ignore_errors=True)
    net.save_pretrained(out, safe_serialization=True)


def make_control_image():
    """White strokes on black (a scribble-like map) at the generation size."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    lines = (np.abs(y - x * 0.6) < 1.5) | (np.abs((x - 30) ** 2 + (y - 14) ** 2 - 64) < 10)
    image = np.where(lines[..., None], 255, 0).astype(np.uint8).repeat(3, axis=2)
    os.makedirs(os.path.join(HERE, "inputs"), exist_ok=True)
    Image.fromarray(image).save(os.path.join(HERE, "inputs", "control.png"))


def run(case):
    folder = assembled("sdxl")
    controlnet = ControlNetModel.from_pretrained(os.path.join(MODELS, "sdxl_controlnet"))
    pipe = StableDiffusionXLControlNetPipeline.from_pretrained(
        folder, controlnet=controlnet, torch_dtype=torch.float32)
    shutil.rmtree(os.path.dirname(folder))
    pipe.scheduler = diffusers.EulerDiscreteScheduler.from_config(SCHEDULER)
    control = Image.open(os.path.join(HERE, "inputs", "control.png")).convert("RGB")
    with torch.no_grad():
        latents = pipe(
            prompt="a lighthouse on a cliff", negative_prompt="blurry", image=control,
            num_inference_steps=case["steps"], guidance_scale=6.0, height=HEIGHT, width=WIDTH,
            controlnet_conditioning_scale=case["controlnet_conditioning_scale"],
            control_guidance_start=case["control_guidance_start"],
            control_guidance_end=case["control_guidance_end"], output_type="latent",
            generator=torch.Generator("cpu").manual_seed(case["seed"])).images
        decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample
    image = (decoded / 2 + 0.5).clamp(0, 1)[0].permute(1, 2, 0).mul(255).round().to(torch.uint8)
    record = dict(case, model="sdxl", controlnet="sdxl_controlnet",
                  control_image="inputs/control.png", prompt="a lighthouse on a cliff",
                  negative_prompt="blurry", guidance_scale=6.0, guidance_rescale=0.0,
                  width=WIDTH, height=HEIGHT, pipeline="sdxl_controlnet",
                  scheduler="EulerDiscreteScheduler", diffusers=diffusers.__version__)
    record["scheduler_config"] = finite(dict(pipe.scheduler.config,
                                             _class_name="EulerDiscreteScheduler"))
    record["tensors"] = {"final_latents": list(latents.shape), "image_u8": list(image.shape)}
    base = os.path.join(HERE, "control_runs", case["name"])
    with open(base + ".json", "w") as f:
        json.dump(record, f, indent=1, allow_nan=False, default=lambda o: None)
    save_file({"final_latents": latents.contiguous(), "image_u8": image.contiguous()},
              base + ".safetensors")
    print(case["name"], tuple(latents.shape), float(latents.abs().max()))


def main():
    torch.set_num_threads(1)
    make_controlnet()
    make_control_image()
    runs = os.path.join(HERE, "control_runs")
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    for case in CASES:
        run(case)


if __name__ == "__main__":
    main()
