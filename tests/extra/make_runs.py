"""Extra diffusers runs beyond ../shared/reference, on tiny seeded random models of our own
(tests/extra/models; the tokenizers' vocabulary comes from assets/clip), so they hold on any
reference tree:

* a sweep of every diffusers scheduler class Ember reproduces x every `timestep_spacing`, at a
  step count that does not divide 1000;
* strength < 1 for img2img, 4-channel and 9-channel inpainting over several schedulers;
* v-prediction with a zero-terminal-SNR schedule (`rescale_betas_zero_snr`), CFG rescale
  (`guidance_rescale`), SDXL's second prompt and 9-channel SDXL inpainting.

Writes models/<name>/ (once; delete a folder to remake it), inputs/*.png and
runs/<name>.json + runs/<name>.safetensors (final latents and the 8-bit image).

Needs torch, diffusers 0.42.1, transformers and torchsde; CI only reads the files.

    python3 tests/extra/make_runs.py
"""
import json
import os
import shutil
import tempfile

import diffusers
import numpy as np
import torch
from diffusers import (AutoencoderKL, StableDiffusionImg2ImgPipeline, StableDiffusionInpaintPipeline,
                       StableDiffusionPipeline, StableDiffusionXLInpaintPipeline,
                       StableDiffusionXLPipeline, UNet2DConditionModel)
from PIL import Image
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")
ASSETS = os.path.join(HERE, "..", "..", "assets", "clip")

SCHEDULER = {
    "num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012,
    "beta_schedule": "scaled_linear", "steps_offset": 1, "set_alpha_to_one": False,
    "skip_prk_steps": True, "clip_sample": False, "prediction_type": "epsilon",
}
TOKENIZER_CONFIG = {
    "add_prefix_space": False, "bos_token": "<|startoftext|>", "do_lower_case": True,
    "eos_token": "<|endoftext|>", "errors": "replace", "model_max_length": 77,
    "tokenizer_class": "CLIPTokenizer", "unk_token": "<|endoftext|>",
}


def perturb(module, seed):
    """Seeded random weights with some spread, so every layer matters."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return module


def text_encoder(hidden, layers, act, projection, seed):
    config = CLIPTextConfig(vocab_size=49408, hidden_size=hidden, intermediate_size=2 * hidden,
                            num_hidden_layers=layers, num_attention_heads=2,
                            max_position_embeddings=77, hidden_act=act, projection_dim=hidden,
                            bos_token_id=49406, eos_token_id=49407, pad_token_id=1)
    torch.manual_seed(seed)
    cls = CLIPTextModelWithProjection if projection else CLIPTextModel
    return perturb(cls(config), seed)


def unet(in_channels, cross, xl, seed):
    config = dict(sample_size=16, in_channels=in_channels, out_channels=4, layers_per_block=1,
                  block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=cross,
                  attention_head_dim=(2, 4),
                  down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                  up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    if xl:
        config.update(down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                      up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                      transformer_layers_per_block=(1, 2), use_linear_projection=True,
                      addition_embed_type="text_time", addition_time_embed_dim=8,
                      projection_class_embeddings_input_dim=6 * 8 + 12)
    torch.manual_seed(seed)
    return perturb(UNet2DConditionModel(**config), seed)


def vae(seed):
    torch.manual_seed(seed)
    return perturb(AutoencoderKL(block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=4,
                                 latent_channels=4, sample_size=32,
                                 down_block_types=("DownEncoderBlock2D",) * 2,
                                 up_block_types=("UpDecoderBlock2D",) * 2), seed)


def save_tokenizer(folder, pad):
    """Config files only: the vocabulary is assets/clip (copied in when a run loads it)."""
    os.makedirs(folder, exist_ok=True)
    config = dict(TOKENIZER_CONFIG, pad_token=pad)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    special = {k: config[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    with open(os.path.join(folder, "special_tokens_map.json"), "w") as f:
        json.dump(special, f, indent=1)


def make_models():
    """sd2: an SD 2.x-shaped model (OpenCLIP-style encoder); sd2_inpaint_unet: its 9-channel
    UNet; sdxl: an SDXL-shaped model; sdxl_inpaint_unet: its 9-channel UNet. Stored in
    float16 to keep the repository small; both sides run them in float32."""
    def ready(name):
        return os.path.exists(os.path.join(MODELS, name, "unet" if "unet" not in name else "", "config.json"))

    if not ready("sd2"):
        out = os.path.join(MODELS, "sd2")
        text_encoder(8, 3, "gelu", False, 1).half().save_pretrained(os.path.join(out, "text_encoder"))
        unet(4, 8, False, 2).half().save_pretrained(os.path.join(out, "unet"))
        vae(3).half().save_pretrained(os.path.join(out, "vae"))
        save_tokenizer(os.path.join(out, "tokenizer"), "!")
        write_pipeline_files(out, "StableDiffusionPipeline", ["text_encoder", "tokenizer"])
    if not ready("sd2_inpaint_unet"):
        unet(9, 8, False, 4).half().save_pretrained(os.path.join(MODELS, "sd2_inpaint_unet"))
    if not ready("sdxl"):
        out = os.path.join(MODELS, "sdxl")
        text_encoder(8, 2, "quick_gelu", False, 5).half().save_pretrained(os.path.join(out, "text_encoder"))
        text_encoder(12, 3, "gelu", True, 6).half().save_pretrained(os.path.join(out, "text_encoder_2"))
        unet(4, 20, True, 7).half().save_pretrained(os.path.join(out, "unet"))
        vae(8).half().save_pretrained(os.path.join(out, "vae"))
        save_tokenizer(os.path.join(out, "tokenizer"), "<|endoftext|>")
        save_tokenizer(os.path.join(out, "tokenizer_2"), "!")
        write_pipeline_files(out, "StableDiffusionXLPipeline",
                             ["text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2"])
    if not ready("sdxl_inpaint_unet"):
        unet(9, 20, True, 9).half().save_pretrained(os.path.join(MODELS, "sdxl_inpaint_unet"))


def write_pipeline_files(out, pipeline, text_parts):
    index = {"_class_name": pipeline, "_diffusers_version": diffusers.__version__,
             "scheduler": ["diffusers", "EulerDiscreteScheduler"],
             "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"]}
    for part in text_parts:
        index[part] = (["transformers", "CLIPTokenizer"] if part.startswith("tokenizer") else
                       ["transformers", "CLIPTextModelWithProjection" if part == "text_encoder_2"
                        else "CLIPTextModel"])
    if pipeline == "StableDiffusionPipeline":
        index.update(safety_checker=[None, None], feature_extractor=[None, None],
                     requires_safety_checker=False)
    with open(os.path.join(out, "model_index.json"), "w") as f:
        json.dump(index, f, indent=1)
    os.makedirs(os.path.join(out, "scheduler"), exist_ok=True)
    with open(os.path.join(out, "scheduler", "scheduler_config.json"), "w") as f:
        json.dump(dict(SCHEDULER, _class_name="EulerDiscreteScheduler"), f, indent=1)


def assembled(name, unet_name=None):
    """A loadable copy of models/<name>: the vocabulary added, optionally another UNet."""
    tmp = tempfile.mkdtemp()
    out = os.path.join(tmp, name)
    shutil.copytree(os.path.join(MODELS, name), out)
    for tok in ("tokenizer", "tokenizer_2"):
        if os.path.isdir(os.path.join(out, tok)):
            for f in ("vocab.json", "merges.txt"):
                shutil.copy(os.path.join(ASSETS, f), os.path.join(out, tok, f))
    if unet_name:
        shutil.rmtree(os.path.join(out, "unet"))
        shutil.copytree(os.path.join(MODELS, unet_name), os.path.join(out, "unet"))
    return out


def make_inputs():
    """A smooth seeded init image and a mask with a soft-edged rectangle, 32x32."""
    os.makedirs(os.path.join(HERE, "inputs"), exist_ok=True)
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:32, 0:32] / 31.0
    image = np.stack([0.5 + 0.4 * np.sin(3 * x + rng.uniform(0, 6)) * np.cos(2 * y + c)
                      for c in range(3)], -1)
    Image.fromarray((image * 255).round().astype(np.uint8)).save(os.path.join(HERE, "inputs", "init.png"))
    mask = np.zeros((32, 32), np.uint8)
    mask[8:24, 6:20] = 255
    Image.fromarray(mask).save(os.path.join(HERE, "inputs", "mask.png"))


SWEEP_CLASSES = [
    "DDIMScheduler", "PNDMScheduler", "EulerDiscreteScheduler", "EulerAncestralDiscreteScheduler",
    "HeunDiscreteScheduler", "LMSDiscreteScheduler", "DPMSolverMultistepScheduler",
    "KDPM2DiscreteScheduler", "KDPM2AncestralDiscreteScheduler", "DPMSolverSDEScheduler",
    "DDPMScheduler", "UniPCMultistepScheduler", "DEISMultistepScheduler", "LCMScheduler",
]
SHORT = {"DDIMScheduler": "ddim", "PNDMScheduler": "pndm", "EulerDiscreteScheduler": "euler",
         "EulerAncestralDiscreteScheduler": "euler_a", "HeunDiscreteScheduler": "heun",
         "LMSDiscreteScheduler": "lms", "DPMSolverMultistepScheduler": "dpmpp_2m",
         "KDPM2DiscreteScheduler": "kdpm2", "KDPM2AncestralDiscreteScheduler": "kdpm2_a",
         "DPMSolverSDEScheduler": "dpmpp_sde", "DDPMScheduler": "ddpm",
         "UniPCMultistepScheduler": "unipc", "DEISMultistepScheduler": "deis",
         "LCMScheduler": "lcm"}


def cases():
    common = dict(model="sd2", prompt="a lighthouse at dusk", negative_prompt="blurry",
                  guidance_scale=6.0, guidance_rescale=0.0, height=32, width=32)
    out = []
    for i, cls in enumerate(SWEEP_CLASSES):
        for j, spacing in enumerate(["leading", "linspace", "trailing"]):
            out.append(dict(common, name=f"sweep_{SHORT[cls]}_{spacing}", pipeline="sd",
                            scheduler=cls, overrides={"timestep_spacing": spacing},
                            seed=100 + 3 * i + j, steps=7))
    # v-prediction through the alpha-transfer schedulers, whose v conversion is their own.
    for cls in ["DDIMScheduler", "PNDMScheduler"]:
        for spacing in ["leading", "trailing"]:
            out.append(dict(common, name=f"vpred_{SHORT[cls]}_{spacing}", pipeline="sd",
                            scheduler=cls, seed=150,
                            overrides={"timestep_spacing": spacing, "prediction_type": "v_prediction"},
                            steps=7))
    image = dict(init_image="inputs/init.png")
    masked = dict(image, mask_image="inputs/mask.png")
    partial = [("EulerDiscreteScheduler", "leading"), ("DDIMScheduler", "trailing"),
               ("DPMSolverMultistepScheduler", "linspace"), ("PNDMScheduler", "leading"),
               ("UniPCMultistepScheduler", "trailing"), ("HeunDiscreteScheduler", "linspace"),
               ("KDPM2DiscreteScheduler", "leading"), ("KDPM2AncestralDiscreteScheduler", "trailing"),
               ("DPMSolverSDEScheduler", "linspace")]
    for k, (cls, spacing) in enumerate(partial):
        base = dict(common, scheduler=cls, overrides={"timestep_spacing": spacing}, steps=10)
        out.append(dict(base, **image, name=f"img2img_{SHORT[cls]}_{spacing}",
                        pipeline="sd_img2img", strength=0.6, seed=200 + k))
        out.append(dict(base, **masked, name=f"inpaint4_{SHORT[cls]}_{spacing}",
                        pipeline="sd_inpaint", strength=0.75, seed=210 + k))
        out.append(dict(base, **masked, name=f"inpaint9_{SHORT[cls]}_{spacing}",
                        pipeline="sd_inpaint", unet="sd2_inpaint_unet", strength=0.9,
                        seed=220 + k))
    xl = dict(model="sdxl", negative_prompt="blurry", height=32, width=32)
    out += [
        dict(common, name="sd2v_euler_zsnr_trailing_rescale", pipeline="sd",
             scheduler="EulerDiscreteScheduler",
             overrides={"prediction_type": "v_prediction", "rescale_betas_zero_snr": True,
                        "timestep_spacing": "trailing"},
             seed=31, steps=8, guidance_rescale=0.7, height=40, width=24),
        dict(xl, name="sdxl_vpred_zsnr_rescale_prompt2", pipeline="sdxl",
             scheduler="EulerDiscreteScheduler",
             overrides={"prediction_type": "v_prediction", "rescale_betas_zero_snr": True,
                        "timestep_spacing": "trailing"},
             prompt="a red barn", prompt_2="an oil painting, thick brush strokes", seed=32,
             steps=8, guidance_scale=5.0, guidance_rescale=0.7, height=40, width=24),
        dict(xl, name="sdxl_dpmpp_2m_karras_rescale", pipeline="sdxl",
             scheduler="DPMSolverMultistepScheduler", overrides={"use_karras_sigmas": True},
             prompt="a bowl of lemons", seed=33, steps=9, guidance_scale=6.5, guidance_rescale=0.5,
             height=32, width=48),
        dict(xl, **masked, name="sdxl_inpaint_9ch_euler", unet="sdxl_inpaint_unet",
             pipeline="sdxl_inpaint", scheduler="EulerDiscreteScheduler", overrides={},
             strength=1.0, prompt="a bowl of lemons on a wooden table", seed=34, steps=8,
             guidance_scale=6.0, guidance_rescale=0.0),
        dict(xl, **masked, name="sdxl_inpaint_9ch_dpmpp_partial", unet="sdxl_inpaint_unet",
             pipeline="sdxl_inpaint", scheduler="DPMSolverMultistepScheduler",
             overrides={"timestep_spacing": "linspace"}, strength=0.9,
             prompt="a bowl of lemons on a wooden table", seed=35, steps=10,
             guidance_scale=6.0, guidance_rescale=0.0),
    ]
    return out


def finite(value):
    """JSON has no infinities: diffusers configs hold some (`lambda_min_clipped: -inf`)."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


PIPELINES = {"sd": StableDiffusionPipeline, "sd_img2img": StableDiffusionImg2ImgPipeline,
             "sd_inpaint": StableDiffusionInpaintPipeline, "sdxl": StableDiffusionXLPipeline,
             "sdxl_inpaint": StableDiffusionXLInpaintPipeline}


def run(case, out="runs", prepare=None):
    """Records `case` into `out/`; `prepare(pipe)`, when given, changes the loaded pipeline
    first (make_seamless_runs.py makes its convolutions circular)."""
    folder = assembled(case["model"], case.get("unet"))
    extra = {"safety_checker": None} if case["pipeline"].startswith("sd_") or case["pipeline"] == "sd" else {}
    pipe = PIPELINES[case["pipeline"]].from_pretrained(folder, torch_dtype=torch.float32, **extra)
    shutil.rmtree(os.path.dirname(folder))
    config = dict(SCHEDULER, **case["overrides"])
    if case["scheduler"] == "DPMSolverSDEScheduler":
        # Its Brownian tree is otherwise seeded from torch's global generator.
        config["noise_sampler_seed"] = case["seed"]
    pipe.scheduler = getattr(diffusers, case["scheduler"]).from_config(config)
    if prepare:
        prepare(pipe)
    kwargs = dict(prompt=case["prompt"], negative_prompt=case["negative_prompt"],
                  num_inference_steps=case["steps"], guidance_scale=case["guidance_scale"],
                  output_type="latent", generator=torch.Generator("cpu").manual_seed(case["seed"]))
    if case["guidance_rescale"]:
        kwargs["guidance_rescale"] = case["guidance_rescale"]
    if "prompt_2" in case:
        kwargs["prompt_2"] = case["prompt_2"]
    if case["pipeline"] != "sd_img2img":
        kwargs.update(height=case["height"], width=case["width"])
    if "init_image" in case:
        size = (case["width"], case["height"])
        kwargs["image"] = Image.open(os.path.join(HERE, case["init_image"])).convert("RGB").resize(size)
        kwargs["strength"] = case["strength"]
    if "mask_image" in case:
        size = (case["width"], case["height"])
        kwargs["mask_image"] = Image.open(os.path.join(HERE, case["mask_image"])).convert("L").resize(size)
    with torch.no_grad():
        latents = pipe(**kwargs).images
        decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample
    image = (decoded / 2 + 0.5).clamp(0, 1)[0].permute(1, 2, 0).mul(255).round().to(torch.uint8)
    record = {k: v for k, v in case.items() if k != "overrides"}
    record["scheduler_config"] = finite(dict(pipe.scheduler.config, _class_name=case["scheduler"]))
    record["tensors"] = {"final_latents": list(latents.shape), "image_u8": list(image.shape)}
    record["diffusers"] = diffusers.__version__
    base = os.path.join(HERE, out, case["name"])
    with open(base + ".json", "w") as f:
        json.dump(record, f, indent=1, allow_nan=False, default=lambda o: None)
    save_file({"final_latents": latents.contiguous(), "image_u8": image.contiguous()},
              base + ".safetensors")
    print(case["name"], tuple(latents.shape), float(latents.abs().max()))


def main():
    torch.set_num_threads(1)
    make_models()
    make_inputs()
    runs = os.path.join(HERE, "runs")
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    for case in cases():
        run(case)


if __name__ == "__main__":
    main()
