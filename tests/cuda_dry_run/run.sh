#!/usr/bin/env bash
# The CUDA dry run: Ember's CUDA build on a stand-in for NVIDIA's driver (fake_libcuda.c),
# with NVIDIA's real NVRTC, CUDA headers and ptxas from their pip wheels, so that every
# kernel the jobs below launch is compiled and assembled for each GPU architecture named,
# on a machine without an NVIDIA GPU. Results mean nothing (kernels do nothing). What it
# finds: kernels NVRTC or ptxas refuse, launches over a block's limits, Rust panics, and
# how long NVRTC takes, which is the wait before a CUDA user's first image (cold caches).
#
#   bash tests/cuda_dry_run/run.sh [quick|full] [ARCH ...]
#
# ARCH is a compute capability: 90 H100/H200 (the lent machines; the default), 89 RTX 40,
# 86 RTX 30, 120 RTX 50, 80 A100. quick: one tiny SD 1.x generation in f16. full: also
# tiny SDXL with its refiner, f32 and bf16, and `ember bench` of the real-size networks
# (SD 1.5 512² and SDXL 1024², batch 2, f16), whose shapes pick other kernels.
# JOBS=name,name runs only those jobs (names below, e.g. JOBS=bench-unet-sd15 … full 90).
#
# Needs: the network once (pip downloads the wheels into $EMBER_DRY_RUN_CACHE, default
# ~/.cache/ember-cuda-dry-run; CUDA 13.2, the series PyTorch 2.15 pins), a C compiler,
# python3, and a CUDA build of Ember: `cargo build --locked -p ember --features cuda`
# (or EMBER=path). Not part of CI: it takes minutes a job and an architecture (the real-size
# UNet about 11 on 2 cores).
# Output under $OUT (default /tmp/ember-cuda-dry-run): a folder a job (its log, the
# stand-in's modules.txt and its cache), and summary.txt of every job there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${1:-quick}
case "$mode" in quick | full) shift || true ;; *) mode=quick ;; esac
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(90)
out=${OUT:-/tmp/ember-cuda-dry-run}
cache=${EMBER_DRY_RUN_CACHE:-$HOME/.cache/ember-cuda-dry-run}
ember=${EMBER:-$root/target/debug/ember}
reference=${EMBER_REFERENCE:-$root/../shared/reference}
version=${CUDA_WHEELS:-13.2.*}

# One toolkit folder a wheel version (CUDA 13 wheels: their files are under nvidia/cu13).
toolkit_root=$cache/toolkit-${version//[^0-9.]/}
toolkit=$toolkit_root/nvidia/cu13
if [ ! -x "$toolkit/bin/ptxas" ] || [ ! -f "$toolkit/include/crt/mma.h" ]; then
    wheels=$cache/wheels-${version//[^0-9.]/}
    mkdir -p "$wheels"
    python3 -m pip download --quiet --no-deps -d "$wheels" \
        "nvidia-cuda-nvrtc==$version" "nvidia-cuda-runtime==$version" \
        "nvidia-cuda-crt==$version" "nvidia-cuda-cccl==$version" "nvidia-cuda-nvcc==$version"
    for wheel in "$wheels"/*.whl; do
        python3 -m zipfile -e "$wheel" "$toolkit_root"
    done
    chmod +x "$toolkit"/bin/*
fi
[ -x "$ember" ] || { echo "no CUDA build of Ember at $ember: cargo build --locked -p ember --features cuda" >&2; exit 2; }

mkdir -p "$out/driver"
# Both names: cudarc tries libcuda.so first, where a real driver may also be installed.
cc -shared -fPIC -O2 -Wall -Wextra -o "$out/driver/libcuda.so" "$here/fake_libcuda.c"
ln -sf libcuda.so "$out/driver/libcuda.so.1"

jobs=("sd15-f16 generate --model $reference/sd15/pipeline --precision f16 --width 64 --height 64 --steps 2")
if [ "$mode" = full ]; then
    jobs+=(
        "sdxl-refiner-f16 generate --model $reference/sdxl/pipeline --refiner $reference/sdxl/refiner --precision f16 --width 64 --height 64 --steps 3"
        "sd2v-f32 generate --model $reference/sd2v/pipeline --precision f32 --width 64 --height 64 --steps 2"
        "sd15-bf16 generate --model $reference/sd15/pipeline --precision bf16 --width 64 --height 64 --steps 2"
        "bench-unet-sd15 bench unet --arch sd15 --size 512 --batch 2 --precision f16 --warmup 0 --runs 1"
        "bench-vae-sd15 bench vae-decode --arch sd15 --size 512 --batch 1 --precision f16 --warmup 0 --runs 1"
        "bench-text-sd15 bench text-encoder --arch sd15 --batch 2 --precision f16 --warmup 0 --runs 1"
        "bench-unet-sdxl bench unet --arch sdxl --size 1024 --batch 2 --precision f16 --warmup 0 --runs 1"
    )
fi

for arch in "${archs[@]}"; do
    for job in "${jobs[@]}"; do
        name=${job%% *}
        args=${job#* }
        [ -z "${JOBS:-}" ] || [[ ",$JOBS," == *",$name,"* ]] || continue
        dir=$out/sm_$arch/$name
        rm -rf "$dir"
        mkdir -p "$dir"
        extra=()
        [ "${args%% *}" = generate ] && extra=(--prompt "a lighthouse at dusk" --seed 1 --out "$dir/image.png")
        echo "sm_$arch $name" >&2
        start=$(date +%s)
        # A fresh cache folder a job: every kernel it needs is compiled, none read back.
        # shellcheck disable=SC2086
        env EMBER_CUDA_DRY_RUN=1 EMBER_CACHE_DIR="$dir/cache" CUBECL_ENVIRONMENT=default CUDA_PATH="$toolkit" \
            LD_LIBRARY_PATH="$out/driver:$toolkit/lib" FAKE_CUDA_ARCH="$arch" \
            FAKE_CUDA_PTXAS="$toolkit/bin/ptxas" FAKE_CUDA_LOG="$dir/modules.txt" \
            RUST_BACKTRACE=1 \
            "$ember" $args --device cuda "${extra[@]}" >"$dir/log.txt" 2>&1 &&
            status=0 || status=$?
        echo "$status $(($(date +%s) - start))" >"$dir/status"
    done
done
python3 "$here/summary.py" "$out" | tee "$out/summary.txt"
