#!/usr/bin/env bash
# Side-by-side benchmark: `ember bench` and PyTorch/diffusers on the same networks, sizes
# and machine, one after the other, with the ratio.
#
#   tests/bench/compare.sh [unet|vae-decode|text-encoder|preview-taesd] [size] [batch] [runs] [arch] [precision]
#   (arch sd15 or sdxl; precision f32, bf16 or f16)
#
# GPU=1 runs ember on wgpu and PyTorch on CUDA (tests/bench/gpu.sh runs the whole GPU set).
# Needs a release build of ember (cargo build --release -p ember) and a Python with torch and
# diffusers: set PYTHON=/path/to/python (default python3).
set -euo pipefail
target=${1:-unet}; size=${2:-512}; batch=${3:-2}; runs=${4:-3}; arch=${5:-sd15}; precision=${6:-f32}
case $precision in f32) dtype=fp32 ;; bf16) dtype=bf16 ;; f16) dtype=fp16 ;; *) echo "precision f32, bf16 or f16" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
ember=${EMBER:-$here/../../target/release/ember}
python=${PYTHON:-python3}
if [ -n "${GPU:-}" ]; then ember_device=wgpu; torch_device=cuda; else ember_device=cpu; torch_device=cpu; fi
ours=$("$ember" bench "$target" --arch "$arch" --precision "$precision" --size "$size" --batch "$batch" --runs "$runs" --device "$ember_device" --json)
theirs=$("$python" "$here/torch_reference.py" "$target" --arch "$arch" --dtype "$dtype" --size "$size" --batch "$batch" --runs "$runs" --device "$torch_device")
"$python" - "$ours" "$theirs" <<'PY'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = ours["median_s"] / theirs["median_s"]
print(f'{ours["target"]} {ours["arch"]} {ours["precision"]} {ours["size"]}x{ours["size"]} batch {ours["batch"]}: '
      f'ember {ours["median_s"]:.3f} s ({ours["gflops_per_s"]:.0f} GFLOP/s), '
      f'{theirs["implementation"]} {theirs["median_s"]:.3f} s ({ours["gflop"] / theirs["median_s"]:.0f} GFLOP/s) '
      f'-> ember/torch time ratio {ratio:.2f}')
PY
