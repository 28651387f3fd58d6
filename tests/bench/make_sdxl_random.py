"""A full-size SDXL base model with random weights, as a diffusers folder in bf16 (~7 GB), for
measuring what loading and generating with a real-size SDXL checkpoint costs
(`ember generate --precision bf16 --verbose` prints the peak resident memory).

Usage: python3 tests/bench/make_sdxl_random.py OUT_DIR
Needs torch, diffusers and transformers; the tokenizers are copied from the reference tree
($EMBER_REFERENCE or ../shared/reference). Nothing is downloaded.
"""
import os
import shutil
import sys

import torch
from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.environ.get("EMBER_REFERENCE", os.path.join(HERE, "..", "..", "..", "shared", "reference"))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    dtype = torch.bfloat16
    unet = UNet2DConditionModel(
        sample_size=128, in_channels=4, out_channels=4, block_out_channels=(320, 640, 1280),
        layers_per_block=2, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 2, 10), attention_head_dim=(5, 10, 20), cross_attention_dim=2048,
        use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=2816,
    ).to(dtype)
    te1 = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                       num_attention_heads=12, max_position_embeddings=77,
                                       hidden_act="quick_gelu", eos_token_id=49407)).to(dtype)
    te2 = CLIPTextModelWithProjection(CLIPTextConfig(hidden_size=1280, intermediate_size=5120,
                                                     num_hidden_layers=32, num_attention_heads=20,
                                                     max_position_embeddings=77, hidden_act="gelu",
                                                     projection_dim=1280, eos_token_id=49407)).to(dtype)
    vae = AutoencoderKL(block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, layers_per_block=2, latent_channels=4,
                        scaling_factor=0.13025).to(dtype)
    tiny = os.path.join(REFERENCE, "sdxl", "pipeline")
    pipe = StableDiffusionXLPipeline(
        vae=vae, text_encoder=te1, text_encoder_2=te2, unet=unet,
        tokenizer=CLIPTokenizer.from_pretrained(os.path.join(tiny, "tokenizer")),
        tokenizer_2=CLIPTokenizer.from_pretrained(os.path.join(tiny, "tokenizer_2")),
        scheduler=EulerDiscreteScheduler.from_pretrained(os.path.join(tiny, "scheduler")),
    )
    pipe.save_pretrained(out, safe_serialization=True)
    print(out, sum(p.numel() for m in (unet, te1, te2, vae) for p in m.parameters()), "parameters")


if __name__ == "__main__":
    main()
