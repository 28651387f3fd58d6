#!/usr/bin/env bash
# The whole GPU benchmark on a lent machine (the `device` tool), in one call from the
# repository root, with what this machine prepared beforehand in git-excluded folders:
#
#   .gl/      the Vulkan/GL loader .debs (the device README's recipe)
#   .whl/     diffusers and importlib_metadata wheels (the machine has torch, not diffusers),
#             and nvidia-cuda-crt and nvidia-cuda-cccl (13.2.*, the series torch 2.15 pins)
#   .devrun/  ember.xz: `cargo build --release --locked -p ember`, stripped, `xz -9`
#             (the binary itself is over the 64 MiB that travels); optionally ember-cuda.xz,
#             the same with `--features cuda`, which also runs the networks on Burn's CUDA
#             backend. Its kernels are compiled by NVRTC against the CUDA headers: both come
#             from the NVIDIA wheels torch installed (site-packages/nvidia/cu13 or cu12).
#             Optionally kernels.db.xz: those kernels compiled beforehand by the CUDA dry run
#             of that very binary for sm_90 (tests/cuda_dry_run: run.sh with EMBER=it, then
#             kernels_only.py), which spares the device NVRTC's minutes.
#
# Carry the three (`carry: [".gl", ".whl", ".devrun"]`) and run
#   bash tests/bench/lent_gpu.sh [quick|cuda|values]
# with a timeout that leaves time to rerun. Results land in $OUT (the device tool's folder).
set -uo pipefail
cd "$(dirname "$0")/../.."
for deb in .gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$nvidia_icd" ]; then
    export VK_DRIVER_FILES=$nvidia_icd
fi
python3 -c 'import diffusers' 2>/dev/null ||
    python3 -m pip install -q --no-index --no-deps $(ls .whl/*.whl | grep -v nvidia_cuda_)
python3 - <<'EOF'
import lzma, os, shutil
for name in ["ember", "ember-cuda", "kernels.db"]:
    if os.path.exists(f".devrun/{name}.xz"):
        with lzma.open(f".devrun/{name}.xz") as packed, open(f"/tmp/{name}", "wb") as out:
            shutil.copyfileobj(packed, out)
        os.chmod(f"/tmp/{name}", 0o755)
EOF
# The dry run's kernels for this ember-cuda (tests/cuda_dry_run/kernels_only.py, xz).
if [ -f /tmp/kernels.db ]; then export EMBER_KERNELS=/tmp/kernels.db; fi
if [ -x /tmp/ember-cuda ]; then
    export EMBER_CUDA=/tmp/ember-cuda
    # CUDA_PATH: a folder whose include/ has cuda_fp16.h; NVRTC's library on the loader path.
    nvidia=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null)
    # PyTorch's CUDA 13 wheels lack crt/mma.h and CCCL, which the tensor-core and Hopper
    # kernels include (tests/cuda_dry_run found it): .whl/ carries nvidia-cuda-crt and
    # nvidia-cuda-cccl of the NVRTC series PyTorch pins, installed where torch's headers are.
    if [ -n "$nvidia" ] && [ ! -f "$nvidia/cu13/include/crt/mma.h" ] &&
        ls .whl/nvidia_cuda_crt-*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps .whl/nvidia_cuda_crt-*.whl \
            .whl/nvidia_cuda_cccl-*.whl
    fi
    header=$(find "$nvidia" /usr/local/cuda/include -name cuda_fp16.h 2>/dev/null | head -1)
    # The trailing slash: /usr/local/cuda is usually a link, which find would not enter.
    nvrtc=$(find "$nvidia" /usr/local/cuda/ -name 'libnvrtc.so*' 2>/dev/null | head -1)
    if [ -z "${CUDA_PATH:-}" ] && [ -n "$header" ]; then
        CUDA_PATH=$(dirname "$(dirname "$header")")
        export CUDA_PATH
    fi
    if [ -n "$nvrtc" ]; then
        export LD_LIBRARY_PATH=$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    echo "CUDA: CUDA_PATH=${CUDA_PATH:-none}, NVRTC ${nvrtc:-not found}" >&2
fi
# `values`: only the GPU paths' values against the CPU's (gpu_values.sh: minutes on wgpu; on
# CUDA, NVRTC compiles the tiny models' kernels first, which the kernels.db does not hold).
if [ "${1:-}" = values ]; then
    EMBER=/tmp/ember OUT=${OUT:-/tmp/ember-gpu} bash tests/bench/gpu_values.sh
    exit
fi
EMBER=/tmp/ember OUT=${OUT:-/tmp/ember-gpu} COLD_LIMIT=${COLD_LIMIT:-150} \
    RUST_LOG=${RUST_LOG:-warn} bash tests/bench/gpu.sh "$@"
