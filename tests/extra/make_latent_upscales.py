"""Writes tests/extra/upscale/latent_interpolate.safetensors: torch.nn.functional.interpolate
on a random latent in every mode A1111's latent hires-fix upscalers use, at hires-fix sizes
(1.5x, 2x, 1.25x) and one shrink. CI does not run this; the file is committed.

    python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch safetensors
    /tmp/tvenv/bin/python tests/extra/make_latent_upscales.py
"""
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "upscale")

# A1111 modules/shared_items / shared.latent_upscale_modes.
MODES = {
    "nearest": ("nearest", False),
    "nearest_exact": ("nearest-exact", False),
    "bilinear": ("bilinear", False),
    "bilinear_aa": ("bilinear", True),
    "bicubic": ("bicubic", False),
    "bicubic_aa": ("bicubic", True),
}
SIZES = [(12, 18), (16, 24), (10, 15), (5, 7)]
# A wide input where float rounding decides nearest-exact's source (64 -> 100: 512 px to 800).
WIDE_SIZES = [(5, 100), (2, 41)]


def main():
    torch.manual_seed(7)
    x = torch.randn(1, 4, 8, 12, dtype=torch.float32) * 3.0
    wide = torch.randn(1, 2, 3, 64, dtype=torch.float32) * 3.0
    tensors = {"input": x.contiguous(), "input_wide": wide.contiguous()}
    cases = []
    for name, (mode, antialias) in MODES.items():
        for source, sizes in (("input", SIZES), ("input_wide", WIDE_SIZES)):
            for h, w in sizes:
                y = F.interpolate(tensors[source], size=(h, w), mode=mode, antialias=antialias)
                key = f"{name}_{source}_{h}x{w}"
                tensors[key] = y.contiguous()
                cases.append(
                    {"tensor": key, "input": source, "mode": mode, "antialias": antialias, "size": [h, w]}
                )
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "latent_interpolate.safetensors"))
    with open(os.path.join(OUT, "latent_interpolate.json"), "w") as f:
        json.dump({"torch": torch.__version__, "input_shape": list(x.shape), "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
