"""A full-size Stable Diffusion 1.5 model with random weights, as a diffusers folder in fp16
(~2 GB, the precision of the checkpoints artists download), for measuring what a real load
costs around it: `ember bench lora --model OUT_DIR` merges a LoRA into the loaded model.

Usage: python3 tests/bench/make_sd15_random.py OUT_DIR
Needs torch, diffusers and transformers; the tokenizer and scheduler are copied from the
reference tree ($EMBER_REFERENCE or ../shared/reference). Nothing is downloaded.
"""
import os
import sys

import torch
from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.environ.get("EMBER_REFERENCE", os.path.join(HERE, "..", "..", "..", "shared", "reference"))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    dtype = torch.float16
    unet = UNet2DConditionModel(
        sample_size=64, in_channels=4, out_channels=4, block_out_channels=(320, 640, 1280, 1280),
        layers_per_block=2, cross_attention_dim=768, attention_head_dim=8,
    ).to(dtype)
    text_encoder = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                                num_attention_heads=12, max_position_embeddings=77,
                                                hidden_act="quick_gelu", eos_token_id=49407)).to(dtype)
    vae = AutoencoderKL(block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, layers_per_block=2, latent_channels=4,
                        scaling_factor=0.18215).to(dtype)
    tiny = os.path.join(REFERENCE, "sd15", "pipeline")
    pipe = StableDiffusionPipeline(
        vae=vae, text_encoder=text_encoder, unet=unet,
        tokenizer=CLIPTokenizer.from_pretrained(os.path.join(tiny, "tokenizer")),
        scheduler=PNDMScheduler.from_pretrained(os.path.join(tiny, "scheduler")),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )
    pipe.save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    main()
