"""Seamless tiling runs (A1111's "Tiling" and its Asymmetric tiling script) on the tiny
models of make_runs.py, recorded with diffusers into seamless_runs/:

* both axes: every `torch.nn.Conv2d` of the UNet and the VAE set to
  `padding_mode="circular"`, as A1111's `apply_circular` does;
* one axis: each convolution pads that axis circularly and the other with zeros, then
  convolves unpadded, as the Asymmetric tiling script's `_conv_forward` does.

txt2img on SD 2.x-shaped and SDXL-shaped models at sizes that are not square (so a swapped
axis shows), and img2img (the VAE's encoder wraps too). Each record holds `seamless`
(both, x or y) besides make_runs.py's fields.

Needs torch, diffusers 0.42.1 and transformers; CI only reads the files.

    python3 tests/extra/make_seamless_runs.py
"""
import os
import shutil

import torch
import torch.nn.functional as F

import make_runs
from make_runs import HERE


def one_axis_forward(conv, axis):
    """The Asymmetric tiling script's `_conv_forward`: X padded first, then Y."""
    left, right, top, bottom = conv._reversed_padding_repeated_twice
    mode_x = "circular" if axis == "x" else "constant"
    mode_y = "circular" if axis == "y" else "constant"

    def forward(input, weight, bias):
        working = F.pad(input, (left, right, 0, 0), mode=mode_x)
        working = F.pad(working, (0, 0, top, bottom), mode=mode_y)
        return F.conv2d(working, weight, bias, conv.stride, 0, conv.dilation, conv.groups)

    return forward


def circular(seamless):
    def prepare(pipe):
        for model in (pipe.unet, pipe.vae):
            for layer in model.modules():
                if type(layer) is not torch.nn.Conv2d:
                    continue
                if seamless == "both":
                    layer.padding_mode = "circular"
                else:
                    layer._conv_forward = one_axis_forward(layer, seamless)
    return prepare


def cases():
    common = dict(model="sd2", prompt="a mossy stone wall", negative_prompt="blurry",
                  guidance_scale=6.0, guidance_rescale=0.0, overrides={})
    euler = dict(scheduler="EulerDiscreteScheduler")
    dpm = dict(scheduler="DPMSolverMultistepScheduler", overrides={"use_karras_sigmas": True})
    return [
        dict(common, **euler, name="sd2_both_euler", pipeline="sd", seamless="both", seed=41,
             steps=8, height=32, width=48),
        dict(common, **dpm, name="sd2_x_dpmpp_2m_karras", pipeline="sd", seamless="x", seed=42,
             steps=8, height=24, width=40),
        dict(common, **euler, name="sd2_y_euler", pipeline="sd", seamless="y", seed=43,
             steps=8, height=40, width=24),
        dict(common, **euler, name="sd2_both_img2img", pipeline="sd_img2img", seamless="both",
             seed=44, steps=10, strength=0.6, init_image="inputs/init.png", height=32, width=32),
        dict(common, **euler, name="sdxl_both_euler", model="sdxl", pipeline="sdxl",
             seamless="both", prompt="a tiled floor", seed=45, steps=8, guidance_scale=5.0,
             height=32, width=48),
    ]


def main():
    torch.set_num_threads(1)
    make_runs.make_models()
    out = os.path.join(HERE, "seamless_runs")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for case in cases():
        make_runs.run(case, "seamless_runs", prepare=circular(case["seamless"]))


if __name__ == "__main__":
    main()
