"""Extra diffusers runs beyond ../shared/reference, for what its runs do not cover:
v-prediction with a zero-terminal-SNR schedule (`rescale_betas_zero_snr`), trailing spacing
and CFG rescale (`guidance_rescale`), on the tree's SD 2.x and SDXL models, SDXL's second
prompt, and 9-channel SDXL inpainting (a random 9-channel UNet of the tiny SDXL's shape,
written to models/sdxl_inpaint_unet). Writes runs/<name>.json and runs/<name>.safetensors
beside this file (final latents and the 8-bit image).

Needs torch and diffusers 0.42.1; CI only reads the files. Regenerate with

    EMBER_REFERENCE=../shared/reference python3 tests/extra/make_runs.py
"""
import json
import os

import numpy as np
import torch
from diffusers import (DPMSolverMultistepScheduler, EulerDiscreteScheduler, StableDiffusionPipeline,
                       StableDiffusionXLInpaintPipeline, StableDiffusionXLPipeline, UNet2DConditionModel)
from PIL import Image
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.environ.get("EMBER_REFERENCE", os.path.join(HERE, "..", "..", "..", "shared", "reference"))

CASES = [
    {
        "name": "sd2v_euler_zsnr_trailing_rescale",
        "model": "sd2v/pipeline", "pipeline": "sd", "scheduler": "EulerDiscreteScheduler",
        "overrides": {"prediction_type": "v_prediction", "rescale_betas_zero_snr": True,
                      "timestep_spacing": "trailing"},
        "prompt": "a watercolor of a harbor", "negative_prompt": "blurry", "seed": 31,
        "steps": 8, "guidance_scale": 6.0, "guidance_rescale": 0.7, "height": 40, "width": 24,
    },
    {
        "name": "sdxl_vpred_zsnr_rescale_prompt2",
        "model": "sdxl/pipeline", "pipeline": "sdxl", "scheduler": "EulerDiscreteScheduler",
        "overrides": {"prediction_type": "v_prediction", "rescale_betas_zero_snr": True,
                      "timestep_spacing": "trailing"},
        "prompt": "a red barn", "prompt_2": "an oil painting, thick brush strokes",
        "negative_prompt": "blurry", "seed": 32, "steps": 8, "guidance_scale": 5.0,
        "guidance_rescale": 0.7, "height": 40, "width": 24,
    },
    {
        "name": "sdxl_dpmpp_2m_karras_rescale",
        "model": "sdxl/pipeline", "pipeline": "sdxl", "scheduler": "DPMSolverMultistepScheduler",
        "overrides": {"use_karras_sigmas": True},
        "prompt": "a bowl of lemons", "negative_prompt": "low quality", "seed": 33, "steps": 9,
        "guidance_scale": 6.5, "guidance_rescale": 0.5, "height": 32, "width": 48,
    },
    {
        "name": "sdxl_inpaint_9ch_euler",
        "model": "sdxl/pipeline", "unet": "models/sdxl_inpaint_unet", "pipeline": "sdxl_inpaint",
        "scheduler": "EulerDiscreteScheduler", "overrides": {},
        "init_image": "sdxl/runs/input_init_image.png", "mask_image": "sdxl/runs/input_mask.png",
        "strength": 1.0, "prompt": "a bowl of lemons on a wooden table", "negative_prompt": "blurry",
        "seed": 34, "steps": 8, "guidance_scale": 6.0, "guidance_rescale": 0.0, "height": 48,
        "width": 32,
    },
]


def inpaint_unet(folder):
    """A random 9-channel UNet of the tiny SDXL UNet's shape, saved once (seeded)."""
    out = os.path.join(HERE, "models", "sdxl_inpaint_unet")
    if not os.path.exists(os.path.join(out, "config.json")):
        config = dict(UNet2DConditionModel.load_config(os.path.join(folder, "unet")))
        config["in_channels"] = 9
        torch.manual_seed(7)
        unet = UNet2DConditionModel.from_config(config)
        with torch.no_grad():
            for p in unet.parameters():  # non-trivial weights, as the tree's models have
                p.add_(torch.randn_like(p) * 0.05)
        unet.save_pretrained(out, safe_serialization=True)
    return UNet2DConditionModel.from_pretrained(out, torch_dtype=torch.float32)


def finite(value):
    """JSON has no infinities: diffusers configs hold some (`lambda_min_clipped: -inf`)."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def main():
    torch.set_num_threads(1)
    os.makedirs(os.path.join(HERE, "runs"), exist_ok=True)
    for case in CASES:
        folder = os.path.join(REFERENCE, case["model"])
        cls = {"sdxl": StableDiffusionXLPipeline, "sd": StableDiffusionPipeline,
               "sdxl_inpaint": StableDiffusionXLInpaintPipeline}[case["pipeline"]]
        extra = {"unet": inpaint_unet(folder)} if "unet" in case else {}
        pipe = cls.from_pretrained(folder, torch_dtype=torch.float32, **extra)
        scheduler_cls = {"EulerDiscreteScheduler": EulerDiscreteScheduler,
                         "DPMSolverMultistepScheduler": DPMSolverMultistepScheduler}[case["scheduler"]]
        pipe.scheduler = scheduler_cls.from_config(pipe.scheduler.config, **case["overrides"])
        kwargs = dict(prompt=case["prompt"], negative_prompt=case["negative_prompt"],
                      num_inference_steps=case["steps"], guidance_scale=case["guidance_scale"],
                      guidance_rescale=case["guidance_rescale"], height=case["height"],
                      width=case["width"], output_type="latent",
                      generator=torch.Generator("cpu").manual_seed(case["seed"]))
        if "prompt_2" in case:
            kwargs["prompt_2"] = case["prompt_2"]
        if "init_image" in case:
            kwargs["image"] = Image.open(os.path.join(REFERENCE, case["init_image"])).convert("RGB")
            kwargs["mask_image"] = Image.open(os.path.join(REFERENCE, case["mask_image"])).convert("L")
            kwargs["strength"] = case["strength"]
        with torch.no_grad():
            latents = pipe(**kwargs).images
            decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample
        image = (decoded / 2 + 0.5).clamp(0, 1)[0].permute(1, 2, 0).mul(255).round().to(torch.uint8)
        record = {k: v for k, v in case.items() if k not in ("overrides",)}
        record["scheduler_config"] = finite(dict(pipe.scheduler.config))
        record["tensors"] = {"final_latents": list(latents.shape), "image_u8": list(image.shape)}
        record["diffusers"] = __import__("diffusers").__version__
        base = os.path.join(HERE, "runs", case["name"])
        with open(base + ".json", "w") as f:
            json.dump(record, f, indent=1, allow_nan=False, default=lambda o: None)
        save_file({"final_latents": latents.contiguous(), "image_u8": image.contiguous()},
                  base + ".safetensors")
        print(case["name"], tuple(latents.shape), float(latents.abs().max()))


if __name__ == "__main__":
    main()
