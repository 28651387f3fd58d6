"""Extra diffusers scheduler tables beyond ../shared/reference: every scheduler class Ember
reproduces x every timestep_spacing x Karras sigmas where the class has them, at step counts
the public tree does not use. Writes scheduler_tables.json beside this file.

Needs torch and diffusers 0.42.1 (`pip install torch diffusers==0.42.1`); CI does not run
this script, it reads the JSON it wrote. Regenerate with:

    python3 tests/extra/make_scheduler_tables.py
"""
import inspect
import json
import os

import diffusers
import numpy as np

BASE = {
    "num_train_timesteps": 1000,
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "trained_betas": None,
    "steps_offset": 1,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "clip_sample": False,
}
CLASSES = [
    "DDIMScheduler", "PNDMScheduler", "EulerDiscreteScheduler", "EulerAncestralDiscreteScheduler",
    "HeunDiscreteScheduler", "LMSDiscreteScheduler", "DPMSolverMultistepScheduler",
    "KDPM2DiscreteScheduler", "KDPM2AncestralDiscreteScheduler", "DPMSolverSDEScheduler",
    "DDPMScheduler", "UniPCMultistepScheduler", "DEISMultistepScheduler", "LCMScheduler",
]
STEPS = [7, 13, 30]


def values(t):
    return [float(v) for v in np.asarray(t, dtype=np.float64).reshape(-1)]


def main():
    cases = []
    for name in CLASSES:
        cls = getattr(diffusers, name)
        params = inspect.signature(cls.__init__).parameters
        karras_options = [False, True] if "use_karras_sigmas" in params else [False]
        for spacing in ["linspace", "leading", "trailing"]:
            for karras in karras_options:
                config = {"_class_name": name, **BASE, "timestep_spacing": spacing}
                if karras:
                    config["use_karras_sigmas"] = True
                for steps in STEPS:
                    scheduler = cls.from_config(config)
                    try:
                        scheduler.set_timesteps(steps)
                    except Exception as e:  # noqa: BLE001 - record what diffusers refuses
                        cases.append({"config": config, "steps": steps, "error": str(e)})
                        continue
                    case = {
                        "config": config,
                        "steps": steps,
                        "timesteps": values(scheduler.timesteps),
                        "timesteps_dtype": str(scheduler.timesteps.dtype),
                    }
                    if getattr(scheduler, "sigmas", None) is not None:
                        case["sigmas"] = values(scheduler.sigmas)
                    cases.append(case)
    out = {
        "what": "diffusers set_timesteps tables: class x timestep_spacing x Karras x steps",
        "diffusers": diffusers.__version__,
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scheduler_tables.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{len(cases)} cases -> {path}")


if __name__ == "__main__":
    main()
