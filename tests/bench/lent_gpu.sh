#!/usr/bin/env bash
# The whole GPU benchmark on a lent machine (the `device` tool), in one call from the
# repository root, with what this machine prepared beforehand in git-excluded folders:
#
#   .gl/      the Vulkan/GL loader .debs (the device README's recipe)
#   .whl/     diffusers and importlib_metadata wheels (the machine has torch, not diffusers)
#   .devrun/  ember.xz: `cargo build --release --locked --bin ember`, stripped, `xz -9`
#             (the binary itself is over the 64 MiB that travels)
#
# Carry the three (`carry: [".gl", ".whl", ".devrun"]`) and run
#   bash tests/bench/lent_gpu.sh [quick]
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
    python3 -m pip install -q --no-index --no-deps .whl/*.whl
python3 - <<'EOF'
import lzma, shutil
with lzma.open(".devrun/ember.xz") as packed, open("/tmp/ember", "wb") as out:
    shutil.copyfileobj(packed, out)
EOF
chmod +x /tmp/ember
EMBER=/tmp/ember OUT=${OUT:-/tmp/ember-gpu} COLD_LIMIT=${COLD_LIMIT:-150} \
    RUST_LOG=${RUST_LOG:-warn} bash tests/bench/gpu.sh "$@"
