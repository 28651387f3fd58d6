#!/usr/bin/env bash
# GPU benchmarks side by side: `ember bench` on wgpu and PyTorch/diffusers on CUDA (SDPA
# attention), the same networks, sizes and card, one after the other; then a table of ratios.
#
#   tests/bench/gpu.sh [quick|cuda]
#
# Needs a release build of ember (EMBER=path, default target/release/ember; its "adapter" field
# says whether Burn compiled SPIR-V or WGSL kernels), a Vulkan driver
# for the card, and a Python with torch (CUDA) and diffusers (PYTHON=path, default python3).
# Each ember network runs twice with a fresh cache folder: the first process compiles and tunes
# its kernels (cold), the second finds the autotune answers the first kept (warm); both
# print their first call's time, so the table shows the start-up stall cold and warm.
# Results go to $OUT (default /tmp/ember-gpu): results.jsonl and log.
# With EMBER_CUDA=path (a build with `--features cuda`; it needs NVRTC and the CUDA headers, see
# lent_gpu.sh), the networks also run on Burn's CUDA backend, labelled "[cuda]"; `cuda` runs the
# quick set on CUDA and PyTorch only (no wgpu), to fit one device call.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ember=${EMBER:-$here/../../target/release/ember}
python=${PYTHON:-python3}
out=${OUT:-/tmp/ember-gpu}
mkdir -p "$out"
EMBER_CACHE_DIR=$(mktemp -d)
export EMBER_CACHE_DIR
# EMBER_KERNELS=file: the CUDA kernels the dry run of this same binary compiled
# (tests/cuda_dry_run/kernels_only.py), so CUDA's cold runs load PTX instead of waiting for
# NVRTC (minutes; the dry run measures it): their "cold" is autotune's and the driver's
# PTX-to-machine-code, and their label says "seeded".
seeded=""
# The kept answers under cubecl's own name rather than one per driver set (Ember's default),
# where the seeded kernels are put and where kernels_only.py looks.
export CUBECL_ENVIRONMENT=default
if [ -n "${EMBER_KERNELS:-}" ]; then
    mkdir -p "$EMBER_CACHE_DIR/gpu"
    cp "$EMBER_KERNELS" "$EMBER_CACHE_DIR/gpu/default.db" || exit 1
    seeded=" seeded"
fi
results=$out/results.jsonl

# record SIDE LABEL TIMEOUT COMMAND...: runs a benchmark that prints one JSON line and
# appends it, labelled, to results.jsonl (or the exit status it failed with: 124 = timed out).
record() {
    local side=$1 label=$2 limit=$3
    shift 3
    echo "### $side $label: ${*:2}" >&2
    local line status
    if line=$(timeout "$limit" "$@" 2>>"$out/log"); then
        echo "{\"label\": \"$label\", \"side\": \"$side\", \"result\": $line}" >>"$results"
        echo "$line" >&2
    else
        status=$?
        echo "{\"label\": \"$label\", \"side\": \"$side\", \"failed\": $status}" >>"$results"
        echo "failed ($status)" >&2
    fi
}
ember_bench() { record ember "$1" "$2" "$ember" bench "${@:3}" --device wgpu --json; }
cuda_bench() { record ember "$1 [cuda]" "$2" "$EMBER_CUDA" bench "${@:3}" --device cuda --json; }
torch_bench() { record torch "$1" "$2" "$python" "$here/torch_reference.py" "${@:3}" --device cuda; }

# pair LABEL PRECISION TARGET ARCH SIZE BATCH: ember cold, ember warm, torch.
pair() {
    local label=$1 precision=$2 target=$3 arch=$4 size=$5 batch=$6
    local dtype
    case $precision in f32) dtype=fp32 ;; f16) dtype=fp16 ;; bf16) dtype=bf16 ;; esac
    local common=(--arch "$arch" --size "$size" --batch "$batch")
    if [ "$mode" != cuda ]; then
        ember_bench "$label cold" "${COLD_LIMIT:-240}" "$target" "${common[@]}" --precision "$precision" --runs 5
        ember_bench "$label" 120 "$target" "${common[@]}" --precision "$precision" --runs 5
    fi
    torch_bench "$label" 120 "$target" "${common[@]}" --dtype "$dtype" --runs 10 --warmup 3
    if [ -n "${EMBER_CUDA:-}" ]; then
        cuda_bench "$label cold$seeded" "${COLD_LIMIT:-240}" "$target" "${common[@]}" --precision "$precision" --runs 5
        cuda_bench "$label" 120 "$target" "${common[@]}" --precision "$precision" --runs 5
    fi
}

mode=${1:-full}
if [ "$mode" = cuda ] && [ -z "${EMBER_CUDA:-}" ]; then
    echo "gpu.sh cuda: set EMBER_CUDA to a build with --features cuda" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >&2 || true
pair "sd15 unet 512 b2 f16" f16 unet sd15 512 2
# Ember's im2col convolutions instead of Burn's (which the default keeps on a GPU with matrix
# units through SPIR-V), in the same binary: which of the two is faster on this card.
[ "$mode" = cuda ] ||
    EMBER_GPU_CONV=im2col ember_bench "sd15 unet 512 b2 f16 im2col convs" 120 unet --arch sd15 \
        --size 512 --batch 2 --precision f16 --runs 5
pair "sdxl unet 1024 b2 f16" f16 unet sdxl 1024 2
pair "sd15 vae-decode 512 b1 f16" f16 vae-decode sd15 512 1
pair "sd15 text-encoder b2 f16" f16 text-encoder sd15 512 2
[ "$mode" = cuda ] ||
    ember_bench "sd15 preview 512 b2 f16" 60 preview --size 512 --batch 2 --precision f16 --runs 20
if [ "$mode" = full ]; then
    pair "sd15 unet 512 b2 f32" f32 unet sd15 512 2
    pair "sd15 vae-decode 512 b1 f32" f32 vae-decode sd15 512 1
    pair "sdxl vae-decode 1024 b1 f32" f32 vae-decode sdxl 1024 1
fi

"$python" "$here/gpu_table.py" "$results"
