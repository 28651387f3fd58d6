#!/usr/bin/env bash
# Runs every test: unit tests, the reference (golden) tests, the GPU tests, the CLI
# end-to-end tests and the real window under Xvfb. The reference tree is ../shared/reference,
# or $EMBER_REFERENCE; tests fail without it. The GPU tests run on the machine's Vulkan
# driver; on a machine without one this installs Mesa's software Vulkan (lavapipe) first, and
# Xvfb where it is missing, on Debian or Ubuntu. Then, with EMBER_GPU_TESTS=all, the
# kernel tests of the paths only matrix units take run again on a lavapipe that has them, as
# a real GPU does (tests/gpu/matrix_units.sh: it downloads that Mesa from Debian's archive
# into target/; `tests/gpu/matrix_units.sh --all` runs every GPU test it changes).
set -euo pipefail
cd "$(dirname "$0")"
# Debian packages the tests need: a Vulkan driver (Mesa's software one where the machine has
# none) for the GPU tests, and a virtual X display with the X client libraries winit loads for
# the real-window test (`tests/cli/window.rs`).
need=()
compgen -G "/usr/share/vulkan/icd.d/*.json" >/dev/null || need+=(mesa-vulkan-drivers)
command -v Xvfb >/dev/null || need+=(xvfb)
# For tests/gpu/matrix_units.sh: it runs the test binaries with a newer C library's loader.
command -v patchelf >/dev/null || need+=(patchelf)
command -v python3 >/dev/null || need+=(python3)
# A CJK font for the grid-label test (`plot::text`): labels take the system's font for what the
# bundled one lacks.
fc-list 2>/dev/null | grep -qiE "cjk|droid sans fallback" || need+=(fonts-droid-fallback)
# Read once (grep -q stopping early would break ldconfig's pipe); /sbin is not on every PATH.
libs=$( (/sbin/ldconfig -p || ldconfig -p) 2>/dev/null || true)
for lib in libX11.so.6:libx11-6 libX11-xcb.so.1:libx11-xcb1 libXcursor.so.1:libxcursor1 \
    libXrandr.so.2:libxrandr2 libXi.so.6:libxi6 libxkbcommon-x11.so.0:libxkbcommon-x11-0; do
    grep -qF "${lib%%:*}" <<<"$libs" || need+=("${lib#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    install=(apt-get install -y -q --no-install-recommends "${need[@]}")
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive "${install[@]}"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n apt-get update -q && sudo -n env DEBIAN_FRONTEND=noninteractive "${install[@]}"
    else
        echo "test.sh: ${need[*]} missing and cannot be installed here (not root);" \
            "the GPU and window tests will fail" >&2
    fi
fi
# Burn's least autotuning (the fewest candidate kernels compiled and timed): on a software
# driver (lavapipe) compiling every candidate costs more than the tests themselves, and the
# tests check the values the kernels give, not their speed. Set it to tune as the app does.
export CUBECL_AUTOTUNE_LEVEL=${CUBECL_AUTOTUNE_LEVEL:-minimal}
# The GPU tests that a software renderer alone makes slow: lavapipe compiles each kernel
# with LLVM in every process, and runs it on the CPU, so that each of these costs minutes of
# a 2-core machine (CI's 90 minutes ran out). Where `ember devices` lists a real GPU they
# run with the rest (EMBER_GPU_TESTS=all runs them anyway, =short leaves them out anyway);
# without one, the run says which it leaves out. Every kernel is still checked on lavapipe
# against its plain-Burn reference, in f32 and f16, and the end-to-end runs on wgpu still
# reproduce diffusers' (tests/reference/gpu.rs).
gpu_heavy=(
    gpu_memory::a_small_gpu_parks_its_text_encoders_and_refuses_a_job_too_large
    gpu::f16_on_wgpu_stays_close_to_f32
    gpu::tests::attention_too_large_to_materialise_runs_on_wgpu
    wgpu_lost::a_wgpu_device_lost_mid_job_moves_the_worker_to_the_cpu_and_the_next_job_runs_there
)
skip=()
if [ $# -eq 0 ] && [ "${EMBER_GPU_TESTS:-}" != all ]; then
    cargo test --workspace --locked --no-run
    devices=$("${CARGO_TARGET_DIR:-target}/debug/ember" devices 2>/dev/null || true)
    if [ "${EMBER_GPU_TESTS:-}" = short ] ||
        ! awk '/^wgpu:/ && !/software renderer/ { gpu = 1 } END { exit !gpu }' <<<"$devices"; then
        echo "test.sh: a software renderer only (or EMBER_GPU_TESTS=short): leaving out ${gpu_heavy[*]}" \
            "(EMBER_GPU_TESTS=all runs them)" >&2
        for test in "${gpu_heavy[@]}"; do skip+=(--skip "$test"); done
    fi
fi
if [ ${#skip[@]} -gt 0 ]; then
    cargo test --workspace --locked -- "${skip[@]}"
else
    cargo test --workspace --locked "$@"
fi
# The matrix-unit pass (a newer lavapipe, downloaded): 694 s of CI's 5694 s on a slow 2-core
# machine, so only with EMBER_GPU_TESTS=all; run it before changing a GPU kernel.
if [ $# -eq 0 ] && [ "${EMBER_GPU_TESTS:-}" = all ]; then
    tests/gpu/matrix_units.sh
fi
