"""PyTorch/diffusers side of `ember bench`: the same networks, sizes and batch on this machine.

Usage: python3 torch_reference.py unet|vae-decode|text-encoder|preview-taesd [--arch sd15|sdxl] --size 512 --batch 2
       [--runs 3] [--dtype fp32|bf16|fp16] [--device cpu|cuda]
Prints one JSON line like `ember bench --json`. Needs torch and diffusers (and transformers
for text-encoder); tests/bench/compare.sh runs both and prints the ratio.
Random weights: timing does not depend on their values. On CUDA, attention is diffusers'
default (torch's scaled_dot_product_attention, i.e. its flash / memory-efficient kernels),
the clock is read after torch.cuda.synchronize(), and the peak of torch's allocator is
reported beside the process's resident memory.
"""
import argparse
import json
import statistics
import time

import torch


def sd15_unet():
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=64,
        in_channels=4,
        out_channels=4,
        block_out_channels=(320, 640, 1280, 1280),
        layers_per_block=2,
        down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
        up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
        cross_attention_dim=768,
        attention_head_dim=8,
    )


def sdxl_unet():
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=128,
        in_channels=4,
        out_channels=4,
        block_out_channels=(320, 640, 1280),
        layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 2, 10),
        attention_head_dim=(5, 10, 20),
        cross_attention_dim=2048,
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=2816,
    )


def sd_vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        block_out_channels=(128, 256, 512, 512),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        layers_per_block=2,
        latent_channels=4,
    )


def peak_rss():
    """The process's peak resident set in bytes (Linux), as `ember bench` reports it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("target", choices=["unet", "vae-decode", "text-encoder", "preview-taesd"])
    p.add_argument("--arch", choices=["sd15", "sdxl"], default="sd15")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="0 = torch's default")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = p.parse_args()
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    latent = a.size // 8
    with torch.inference_mode():
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
        if a.target == "unet" and a.arch == "sdxl":
            model = sdxl_unet().eval().to(dev, dtype)
            x = torch.randn(a.batch, 4, latent, latent, dtype=dtype, device=dev)
            ctx = torch.randn(a.batch, 77, 2048, dtype=dtype, device=dev)
            t = torch.tensor([500.0] * a.batch, device=dev)
            added = {
                "text_embeds": torch.randn(a.batch, 1280, dtype=dtype, device=dev),
                "time_ids": torch.tensor([[1024.0, 1024.0, 0.0, 0.0, 1024.0, 1024.0]] * a.batch, dtype=dtype, device=dev),
            }
            call = lambda: model(x, t, ctx, added_cond_kwargs=added).sample
        elif a.target == "unet":
            model = sd15_unet().eval().to(dev, dtype)
            x = torch.randn(a.batch, 4, latent, latent, dtype=dtype, device=dev)
            ctx = torch.randn(a.batch, 77, 768, dtype=dtype, device=dev)
            t = torch.tensor([500.0] * a.batch, device=dev)
            call = lambda: model(x, t, ctx).sample
        elif a.target == "vae-decode":
            model = sd_vae().eval().to(dev, dtype)
            z = torch.randn(a.batch, 4, latent, latent, dtype=dtype, device=dev)
            call = lambda: model.decode(z).sample
        elif a.target == "preview-taesd":
            # The released TAESD decoder's shape on the first image, read back as 8-bit
            # levels, as ember's preview does.
            from diffusers import AutoencoderTiny

            model = AutoencoderTiny().eval().to(dev, dtype)
            z = torch.randn(a.batch, 4, latent, latent, dtype=dtype, device=dev)
            call = lambda: ((model.decode(z[:1]).sample + 1) / 2).clamp(0, 1).mul(255).round().to(torch.uint8).cpu()
        else:
            from transformers import CLIPTextConfig, CLIPTextModel

            model = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                                 num_attention_heads=12, max_position_embeddings=77)).eval().to(dev, dtype)
            ids = torch.full((a.batch, 77), 320, dtype=torch.long, device=dev)
            call = lambda: model(ids).last_hidden_state
        first = time.perf_counter()
        call()
        sync()
        first_s = time.perf_counter() - first
        for _ in range(a.warmup - 1):
            call()
            sync()
        times = []
        for _ in range(a.runs):
            start = time.perf_counter()
            call()
            sync()
            times.append(time.perf_counter() - start)
    print(json.dumps({
        "implementation": f"torch {torch.__version__}", "target": a.target, "arch": a.arch, "dtype": a.dtype,
        "size": a.size, "batch": a.batch, "device": a.device, "peak_rss_bytes": peak_rss(),
        "peak_device_bytes": torch.cuda.max_memory_allocated() if a.device == "cuda" else None,
        "first_call_s": first_s,
        "threads": torch.get_num_threads(), "median_s": statistics.median(times), "min_s": min(times), "runs": a.runs,
    }))


if __name__ == "__main__":
    main()
