#!/usr/bin/env bash
# The GPU paths' values on this machine's card (minutes; more on CUDA while NVRTC compiles): one image of each of the
# repository's tiny seeded models (tests/extra/models: SD 2.x v-prediction and SDXL), in f32
# on the CPU, on wgpu and, with EMBER_CUDA=path (a build with `--features cuda`), on CUDA; the
# same seed must give the same image (noise is made on the host), so each GPU image is
# compared with the CPU's and the largest difference in 8-bit levels is printed. Then the
# same in f16 against the CPU's f32 image (README: a few levels). Needs only Python 3.
#
#   EMBER=path [EMBER_CUDA=path] bash tests/bench/gpu_values.sh
#
# Images and a values.txt land in $OUT (default /tmp/ember-gpu). Run from anywhere.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ember=${EMBER:-$here/../../target/release/ember}
out=${OUT:-/tmp/ember-gpu}
mkdir -p "$out"
cache=$(mktemp -d)
# The tiny models' tokenizers take the vocabulary of assets/clip (as tests/reference/extra_runs.rs
# assembles them): a loadable copy of each.
models=$cache/models
mkdir -p "$models"
for model in sd2 sdxl; do
    cp -r "$here/../extra/models/$model" "$models/"
    for tokenizer in "$models/$model"/tokenizer*/; do
        cp "$here/../../assets/clip/vocab.json" "$here/../../assets/clip/merges.txt" "$tokenizer"
    done
done

# image MODEL DEVICE PRECISION: generates, prints the PNG's path (empty when it failed).
image() {
    local model=$1 device=$2 precision=$3 bin=$ember
    [ "$device" = cuda ] && bin=$EMBER_CUDA
    local png=$out/values-$model-$device-$precision.png
    rm -f "$png"
    if EMBER_CACHE_DIR=$cache timeout 300 "$bin" generate --model "$models/$model" \
        --prompt "a lighthouse on a cliff" --steps 4 --seed 7 --device "$device" \
        --precision "$precision" --out "$png" >>"$out/values.log" 2>&1; then
        echo "$png"
    fi
}

devices=(wgpu)
[ -n "${EMBER_CUDA:-}" ] && devices+=(cuda)
for model in sd2 sdxl; do
    cpu=$(image "$model" cpu f32)
    for device in "${devices[@]}"; do
        for precision in f32 f16; do
            gpu=$(image "$model" "$device" "$precision")
            python3 "$here/png_diff.py" "$model $device $precision vs cpu f32" "$cpu" "$gpu"
        done
    done
done | tee "$out/values.txt"
rm -rf "$cache"
