#!/usr/bin/env bash
# Side-by-side benchmark: `ember bench` and PyTorch/diffusers on the same networks, sizes
# and machine, one after the other, with the ratio.
#
#   tests/bench/compare.sh [unet|vae-decode|text-encoder] [size] [batch] [runs]
#
# Needs a release build of ember (cargo build --release) and a Python with torch and
# diffusers: set PYTHON=/path/to/python (default python3).
set -euo pipefail
target=${1:-unet}; size=${2:-512}; batch=${3:-2}; runs=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
ember=${EMBER:-$here/../../target/release/ember}
python=${PYTHON:-python3}
ours=$("$ember" bench "$target" --size "$size" --batch "$batch" --runs "$runs" --json)
theirs=$("$python" "$here/torch_reference.py" "$target" --size "$size" --batch "$batch" --runs "$runs")
"$python" - "$ours" "$theirs" <<'PY'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = ours["median_s"] / theirs["median_s"]
print(f'{ours["target"]} {ours["size"]}x{ours["size"]} batch {ours["batch"]}: '
      f'ember {ours["median_s"]:.3f} s ({ours["gflops_per_s"]:.0f} GFLOP/s), '
      f'{theirs["implementation"]} {theirs["median_s"]:.3f} s ({ours["gflop"] / theirs["median_s"]:.0f} GFLOP/s) '
      f'-> ember/torch time ratio {ratio:.2f}')
PY
