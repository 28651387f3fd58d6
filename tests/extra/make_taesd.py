"""Writes tests/extra/taesd/: tiny seeded TAESD decoders (diffusers' `AutoencoderTiny`, 8
channels where the released ones have 64) in the three layouts artists have them in, and
what diffusers decodes with them. CI does not run this; the files are committed.

- `taesd/` — a diffusers folder (`config.json`, `diffusion_pytorch_model.safetensors`, the
  encoder's tensors too), as `madebyollin/taesd` on Hugging Face;
- `taesd_decoder.pth` — the same decoder in the original repository's layout (`1.weight`,
  `3.conv.0.weight`, …: the `nn.Sequential` with `Clamp` at index 0), a zip pickle as
  A1111 and ComfyUI download it;
- `taesdxl_decoder.safetensors` — another seed, original layout, as safetensors;
- `taesd3_decoder.safetensors` — a decoder for 16-channel latents (SD3's), which Ember's
  models cannot use;
- `golden.safetensors` — `latents` and the decoders' outputs (`taesd`, `taesdxl`), images
  in [-1, 1] as `AutoencoderTiny.decode` returns them.

    python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch safetensors diffusers transformers
    /tmp/tvenv/bin/python tests/extra/make_taesd.py
"""
import os

import torch
from diffusers import AutoencoderTiny
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "taesd")
CHANNELS = (8, 8, 8, 8)


def tiny(seed, latent_channels=4):
    torch.manual_seed(seed)
    model = AutoencoderTiny(
        encoder_block_out_channels=CHANNELS,
        decoder_block_out_channels=CHANNELS,
        latent_channels=latent_channels,
    ).eval()
    # Weights at 0.6 of He scale and nonzero biases, so the signal survives eighteen layers and
    # every tensor matters to the output.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight"):
                fan_in = p[0].numel()
                p.normal_(0.0, 0.6 * (2.0 / fan_in) ** 0.5)
            else:
                p.uniform_(-0.1, 0.1)
        # Images centred in [0, 1], as the released decoders make them.
        model.decoder.layers[-1].bias.add_(0.5)
    return model


def original_layout(model):
    """The decoder's tensors under the original repository's names (index + 1: `Clamp`)."""
    out = {}
    for key, value in model.decoder.state_dict().items():
        index, rest = key.removeprefix("layers.").split(".", 1)
        out[f"{int(index) + 1}.{rest}"] = value.contiguous().clone()
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    sd = tiny(1)
    sd.save_pretrained(os.path.join(OUT, "taesd"), safe_serialization=True)
    torch.save(original_layout(sd), os.path.join(OUT, "taesd_decoder.pth"))
    xl = tiny(2)
    save_file(original_layout(xl), os.path.join(OUT, "taesdxl_decoder.safetensors"))
    save_file(original_layout(tiny(3, latent_channels=16)), os.path.join(OUT, "taesd3_decoder.safetensors"))

    g = torch.Generator().manual_seed(2024)
    # Sampler-space latents (TAESD's scale is 1), beyond tanh's knee at the edges; an odd
    # size so no side is a power of two.
    latents = torch.randn((2, 4, 5, 7), generator=g) * 2.5
    with torch.no_grad():
        out = {
            "latents": latents,
            "taesd": sd.decode(latents).sample,
            "taesdxl": xl.decode(latents).sample,
        }
    for k in ("taesd", "taesdxl"):
        v = out[k]
        print(k, tuple(v.shape), "mean", float(v.mean()), "std", float(v.std()), "in [-1,1]:", float(((v > -1) & (v < 1)).float().mean()))
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(OUT, "golden.safetensors"))


if __name__ == "__main__":
    main()
