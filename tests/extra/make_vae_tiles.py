"""Writes tests/extra/vae_tiles/sd2.safetensors: diffusers' tiled VAE decode and encode
(`AutoencoderKL.enable_tiling()`: tiles of the config's `sample_size`, a quarter overlap,
linear blends) on the tiny seeded VAE of tests/extra/models/sd2, for sizes that leave
partial tiles at the right and bottom edges. CI does not run this; the file is committed.

    python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch safetensors diffusers transformers
    /tmp/tvenv/bin/python tests/extra/make_vae_tiles.py
"""
import os

import torch
from diffusers import AutoencoderKL
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    vae = AutoencoderKL.from_pretrained(os.path.join(HERE, "models", "sd2", "vae")).float().eval()
    vae.enable_tiling()
    g = torch.Generator().manual_seed(2024)
    out = {}
    # Latent tiles are 16 (32 px / factor 2), stepping by 12: 37 x 45 leaves partial tiles.
    z = torch.randn((1, 4, 37, 45), generator=g)
    # Pixel tiles are 32, stepping by 24: 74 x 90 leaves partial tiles.
    image = torch.rand((1, 3, 74, 90), generator=g) * 2 - 1
    with torch.no_grad():
        out["decode_in"] = z
        out["decode_tiled"] = vae.decode(z).sample
        posterior = vae.encode(image).latent_dist
        out["encode_in"] = image
        out["encode_tiled_mean"] = posterior.mean
        out["encode_tiled_logvar"] = posterior.logvar
        vae.disable_tiling()
        out["decode_whole"] = vae.decode(z).sample
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(HERE, "vae_tiles", "sd2.safetensors"))
    diff = (out["decode_tiled"] - out["decode_whole"]).abs().max().item()
    print("tiled vs whole decode, max difference:", diff)


if __name__ == "__main__":
    main()
