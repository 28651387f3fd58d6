"""A1111's noise, recorded with A1111's own code, for the tests of Ember's seed extras:

* a1111_noise/cases.{json,safetensors}: `modules/rng.py`'s `ImageRNG` (first noise, then
  two step-noise draws) for both host sources (CPU and NV) with batches, variation seeds at
  several strengths, "resize seed from" larger, smaller and mixed, and an eta noise seed
  delta; and `rng_philox.Generator` draws of several seeds, sizes and offsets;
* noise_runs/*.{json,safetensors}: whole diffusers runs on the tiny SD model of
  tests/extra/models (see make_runs.py) started from that first noise, the ancestral ones
  taking their step noise from the same `ImageRNG`, as A1111's k-diffusion samplers do,
  and the SDE one its Brownian tree's draws from A1111's `randn_local` (A1111 replaces
  torchsde's `_randn` with it, so the tree follows the noise source).

A1111's `modules/rng.py` and `modules/rng_philox.py` are loaded from a webui checkout
(`--webui DIR`, or $A1111_WEBUI), with stand-ins for its `devices` and `shared` modules
(the CPU, and the two options rng.py reads). Needs torch, numpy, diffusers 0.42.1,
transformers and torchsde; CI only reads the files.

    python3 tests/extra/make_a1111_noise.py --webui ~/stable-diffusion-webui
"""
import argparse
import importlib.util
import json
import os
import shutil
import sys
import types

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def load_a1111(webui):
    """A1111's rng modules, with the options they read set through `opts`."""
    package = types.ModuleType("modules")
    package.__path__ = []
    devices = types.ModuleType("modules.devices")
    devices.device = devices.cpu = torch.device("cpu")
    shared = types.ModuleType("modules.shared")
    shared.opts = types.SimpleNamespace(randn_source="CPU", eta_noise_seed_delta=0)
    shared.device = devices.device
    sys.modules.update({"modules": package, "modules.devices": devices, "modules.shared": shared})
    package.devices, package.shared = devices, shared
    loaded = {}
    for name in ("rng_philox", "rng"):
        path = os.path.join(webui, "modules", f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"modules.{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"modules.{name}"] = module
        setattr(package, name, module)
        spec.loader.exec_module(module)
        loaded[name] = module
    return loaded["rng"], loaded["rng_philox"], shared.opts


def seeds_of(case):
    """A1111's `all_seeds` / `all_subseeds` (processing.py): with a variation the seed stays
    and the variation seed counts up."""
    n = case["batch"]
    strength = case.get("variation_strength", 0.0)
    seeds = [case["seed"] + (i if strength == 0 else 0) for i in range(n)]
    subseeds = [case.get("variation_seed", 0) + i for i in range(n)]
    return seeds, subseeds


def image_rng(rng, case, shape, factor):
    """`ImageRNG` of a case; its seed resize, in pixels, is given as A1111 reads it (it divides
    by 8; the tiny models' VAE has `factor` pixels a latent)."""
    seeds, subseeds = seeds_of(case)
    w, h = case.get("resize_from", (0, 0))
    return rng.ImageRNG(shape, seeds, subseeds=subseeds,
                        subseed_strength=case.get("variation_strength", 0.0),
                        seed_resize_from_h=h * 8 // factor, seed_resize_from_w=w * 8 // factor)


NOISE_CASES = [
    dict(name="cpu_plain", rng="CPU", seed=11, batch=1),
    dict(name="nv_plain_batch", rng="NV", seed=12, batch=3),
    dict(name="cpu_variation", rng="CPU", seed=13, batch=2, variation_seed=900, variation_strength=0.3),
    dict(name="nv_variation", rng="NV", seed=14, batch=2, variation_seed=901, variation_strength=0.75),
    dict(name="nv_variation_full", rng="NV", seed=15, batch=1, variation_seed=902, variation_strength=1.0),
    dict(name="cpu_variation_same_seed", rng="CPU", seed=16, batch=1, variation_seed=16, variation_strength=0.25),
    dict(name="cpu_resize_larger", rng="CPU", seed=17, batch=1, resize_from=(160, 96)),
    dict(name="nv_resize_smaller", rng="NV", seed=18, batch=2, resize_from=(48, 40)),
    dict(name="nv_resize_mixed_odd", rng="NV", seed=19, batch=1, resize_from=(136, 24)),
    dict(name="cpu_variation_resize", rng="CPU", seed=20, batch=2, variation_seed=903,
         variation_strength=0.5, resize_from=(72, 80)),
    dict(name="cpu_ensd", rng="CPU", seed=21, batch=2, ensd=31337),
    dict(name="nv_ensd_variation", rng="NV", seed=22, batch=1, ensd=31337, variation_seed=904,
         variation_strength=0.2),
    dict(name="nv_large_seed", rng="NV", seed=3_000_000_000, batch=1),
]
# A latent of 64x96 pixels at A1111's 8 pixels a latent.
NOISE_SHAPE = (4, 8, 12)

PHILOX_CASES = [(0, 12), (1, 5), (12345, 16384), (2**32 - 1, 7), (2**40 + 5, 33)]


def record_noise(rng, philox, opts):
    out = os.path.join(HERE, "a1111_noise")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    tensors, cases = {}, []
    for case in NOISE_CASES:
        opts.randn_source = case["rng"]
        opts.eta_noise_seed_delta = case.get("ensd", 0)
        generator = image_rng(rng, case, NOISE_SHAPE, 8)
        draws = [generator.next() for _ in range(3)]
        for k, draw in enumerate(draws):
            tensors[f"{case['name']}/draw{k}"] = draw.float().contiguous()
        seeds, subseeds = seeds_of(case)
        cases.append(dict(case, shape=list(NOISE_SHAPE), factor=8, seeds=seeds, subseeds=subseeds,
                          draws=len(draws)))
    for seed, n in PHILOX_CASES:
        g = philox.Generator(seed)
        for k in range(3):
            tensors[f"philox/{seed}/{n}/{k}"] = torch.from_numpy(g.randn((n,))).contiguous()
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"noise": cases, "philox": [dict(seed=s, numel=n, draws=3) for s, n in PHILOX_CASES],
                   "torch": torch.__version__}, f, indent=1)
    save_file(tensors, os.path.join(out, "cases.safetensors"))
    print("noise cases:", len(cases), "philox cases:", len(PHILOX_CASES))


RUN_COMMON = dict(model="sd2", prompt="a lighthouse at dusk", negative_prompt="blurry",
                  guidance_scale=6.0, guidance_rescale=0.0, height=32, width=32, pipeline="sd",
                  overrides={"timestep_spacing": "leading"}, steps=6)
RUN_CASES = [
    dict(RUN_COMMON, name="nv_euler", scheduler="EulerDiscreteScheduler", rng="NV", seed=40, batch=1),
    dict(RUN_COMMON, name="nv_euler_a_ensd", scheduler="EulerAncestralDiscreteScheduler", rng="NV",
         seed=41, batch=1, ensd=31337),
    dict(RUN_COMMON, name="cpu_variation_batch_euler", scheduler="EulerDiscreteScheduler",
         rng="CPU", seed=42, batch=2, variation_seed=77, variation_strength=0.35),
    dict(RUN_COMMON, name="nv_variation_resize_euler_a", scheduler="EulerAncestralDiscreteScheduler",
         rng="NV", seed=43, batch=1, variation_seed=78, variation_strength=0.6, resize_from=(48, 24)),
    dict(RUN_COMMON, name="cpu_resize_euler_a", scheduler="EulerAncestralDiscreteScheduler",
         rng="CPU", seed=44, batch=1, resize_from=(24, 24)),
    dict(RUN_COMMON, name="nv_dpmpp_sde_tree", scheduler="DPMSolverSDEScheduler", rng="NV",
         seed=45, batch=1),
]


def record_runs(rng, opts):
    import diffusers
    import make_runs
    import torchsde._brownian.brownian_interval as brownian_interval
    from diffusers.schedulers import scheduling_euler_ancestral_discrete as ancestral

    # A1111's `torchsde_randn` (sd_samplers_common.py): the tree's nodes from its noise source.
    brownian_interval._randn = lambda size, dtype, device, seed: rng.randn_local(seed, size).to(
        device=device, dtype=dtype)

    out = os.path.join(HERE, "noise_runs")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for case in RUN_CASES:
        opts.randn_source = case["rng"]
        opts.eta_noise_seed_delta = case.get("ensd", 0)
        folder = make_runs.assembled(case["model"])
        pipe = diffusers.StableDiffusionPipeline.from_pretrained(
            folder, torch_dtype=torch.float32, safety_checker=None)
        shutil.rmtree(os.path.dirname(folder))
        config = dict(make_runs.SCHEDULER, **case["overrides"])
        if case["scheduler"] == "DPMSolverSDEScheduler":
            config["noise_sampler_seed"] = case["seed"]
        pipe.scheduler = getattr(diffusers, case["scheduler"]).from_config(config)
        factor = 2 ** (len(pipe.vae.config.block_out_channels) - 1)
        shape = (4, case["height"] // factor, case["width"] // factor)
        generator = image_rng(rng, case, shape, factor)
        first = generator.next()
        # The ancestral step noise as A1111's k-diffusion samplers draw it: `p.rng.next()`.
        ancestral.randn_tensor = lambda *args, **kwargs: generator.next()
        with torch.no_grad():
            latents = pipe(prompt=[case["prompt"]] * case["batch"],
                           negative_prompt=[case["negative_prompt"]] * case["batch"],
                           num_inference_steps=case["steps"], guidance_scale=case["guidance_scale"],
                           height=case["height"], width=case["width"], latents=first.clone(),
                           output_type="latent").images
            decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample
        images = (decoded / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).mul(255).round().to(torch.uint8)
        record = {k: v for k, v in case.items() if k != "overrides"}
        record["scheduler_config"] = make_runs.finite(dict(pipe.scheduler.config,
                                                          _class_name=case["scheduler"]))
        record["tensors"] = {"final_latents": list(latents.shape), "images_u8": list(images.shape)}
        record["diffusers"] = diffusers.__version__
        base = os.path.join(out, case["name"])
        with open(base + ".json", "w") as f:
            json.dump(record, f, indent=1, allow_nan=False, default=lambda o: None)
        save_file({"final_latents": latents.contiguous(), "images_u8": images.contiguous()},
                  base + ".safetensors")
        print(case["name"], tuple(latents.shape), float(latents.abs().max()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--webui", default=os.environ.get("A1111_WEBUI"),
                        help="an A1111 stable-diffusion-webui checkout")
    args = parser.parse_args()
    if not args.webui:
        parser.error("--webui (or A1111_WEBUI) must name an A1111 webui checkout")
    torch.set_num_threads(1)
    rng, philox, opts = load_a1111(args.webui)
    record_noise(rng, philox, opts)
    record_runs(rng, opts)


if __name__ == "__main__":
    main()
