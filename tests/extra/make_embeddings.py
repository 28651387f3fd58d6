"""Writes tests/extra/embeddings/: textual-inversion files in the formats the reference tree
does not hold (A1111 .pt with a plain dict and with a ParameterDict, diffusers' one-tensor
learned_embeds), a hostile pickle, and expected.safetensors with the vectors each must give.

Run with torch installed (CI does not need it): python tests/extra/make_embeddings.py
"""
import os
import pathlib

import torch
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).parent / "embeddings"
OUT.mkdir(exist_ok=True)
torch.manual_seed(7)
vectors = torch.randn(3, 32)

# A1111 (modules/textual_inversion/textual_inversion.py, Embedding.save).
torch.save(
    {
        "string_to_token": {"*": 265},
        "string_to_param": {"*": vectors.clone()},
        "name": "a1111-dict",
        "step": 1000,
        "sd_checkpoint": "0123456789",
        "sd_checkpoint_name": "tiny",
    },
    OUT / "a1111-dict.pt",
)
# The original textual_inversion repository's layout: a ParameterDict.
params = torch.nn.ParameterDict({"*": torch.nn.Parameter(vectors.clone())})
torch.save(
    {"string_to_token": {"*": 265}, "string_to_param": params, "name": "a1111-params"},
    OUT / "a1111-params.pt",
)
# diffusers' learned_embeds.bin: {token: vector} with one 1-D vector.
torch.save({"<concept>": vectors[0].clone()}, OUT / "diffusers-concept.bin")


class Attack:
    def __reduce__(self):
        return (os.system, ("echo this pickle ran code",))


torch.save({"string_to_param": {"*": vectors.clone()}, "payload": Attack()}, OUT / "hostile.pt")
save_file(
    {"vectors": vectors.contiguous(), "concept": vectors[:1].clone().contiguous()},
    OUT / "expected.safetensors",
)
print("wrote", sorted(p.name for p in OUT.iterdir()))
