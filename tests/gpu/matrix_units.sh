#!/usr/bin/env bash
# The GPU tests once more on a Vulkan driver with matrix units (cooperative matrices), as a
# real GPU has them: Mesa's lavapipe from Debian 13's backports (fetch_mesa.py, unpacked
# under the target folder, nothing installed), run by the `with_matrix_units` runner. There
# Burn's matrix products and flash attention take their cooperative-matrix kernels, and
# convolutions go through the implicit-GEMM check (`kernels::gpu::implicit_gemm`), none of
# which the system's lavapipe reaches. test.sh runs it after the whole suite with no
# arguments: the kernel tests of those paths (about a minute and a half on a slow 2-core
# machine). `--all` runs every test the matrix units change, the f16 reference runs among
# them (19 minutes and more on the same machine: too long for CI's budget); other arguments
# go to the test binaries as a name filter.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${CARGO_TARGET_DIR:-$PWD/target}
export EMBER_MESA_DIR=${EMBER_MESA_DIR:-$target/mesa-matrix-units}
[ -f "$EMBER_MESA_DIR/lvp_icd.json" ] || python3 tests/gpu/fetch_mesa.py "$EMBER_MESA_DIR"
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$PWD/tests/gpu/with_matrix_units
export EMBER_EXPECT_MATRIX_UNITS=1
# Burn's autotune answers apart from the first pass's (same adapter name, other kernels):
# answers tuned where the matrix units are absent would keep them unused here, and answers
# naming a matrix-unit kernel cannot launch where they are absent.
export CUBECL_ENVIRONMENT=mesa-matrix-units
# Burn's quickest tuning: on a software driver the timing of every candidate costs more than
# the tests themselves, and the kernels run are what matters here, not their speed.
export CUBECL_AUTOTUNE_LEVEL=minimal
if [ $# -gt 0 ] && [ "$1" != --all ]; then
    exec cargo test --workspace --locked --lib --test reference -- "$@"
fi
if [ $# -eq 0 ]; then
    # What only the matrix units run, one kernel test each: they are found for f16 only; a
    # matrix product with shared memory compiles to SPIR-V; Burn's tensor-core flash attention
    # under the padded and the sliced (wide) attention in f16; the f16 convolution through
    # Burn's implicit GEMM or, where it refuses, Ember's im2col product (never Burn's direct
    # kernel summing in f16).
    exec cargo test --workspace --locked --lib -- gpu::tests::matrix_units \
        gpu::tests::kernels_are_compiled gpu::tests::padded_attention \
        gpu::tests::wide_attention conv_gemm::tests::no_convolution_is_left_to_burns_direct_kernel
fi
# --all: every convolution test (the implicit-GEMM check), the kernels whose Burn parts run
# on the matrix units in f16 (attention, padded and wide; the upsampler's convolution), and
# the f16 reference runs against f32 ones (f32 has no matrix units on Vulkan, so the f32 runs
# are the first pass's). One after the other: side by side on CI's 2 cores the reference
# test took 597 s, against 186 s alone on the same machine.
cargo test --workspace --locked --lib -- conv_gemm::tests:: gpu::tests::padded_attention \
    gpu::tests::wide_attention gpu::tests::upsample_conv gpu::tests::matrix_units \
    gpu::tests::kernels_are_compiled
cargo test --workspace --locked --test reference -- gpu::f16_on_wgpu
