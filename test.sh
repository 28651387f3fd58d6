#!/usr/bin/env bash
# Runs every test: unit tests, the reference (golden) tests, the GPU tests and the CLI
# end-to-end tests. The reference tree is ../shared/reference, or $EMBER_REFERENCE; tests
# fail without it. The GPU tests run on the machine's Vulkan driver; on a machine without
# one this installs Mesa's software Vulkan (lavapipe) first, on Debian or Ubuntu.
set -euo pipefail
cd "$(dirname "$0")"
if ! compgen -G "/usr/share/vulkan/icd.d/*.json" >/dev/null; then
    install=(apt-get install -y -q --no-install-recommends mesa-vulkan-drivers)
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive "${install[@]}"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n apt-get update -q && sudo -n env DEBIAN_FRONTEND=noninteractive "${install[@]}"
    else
        echo "test.sh: no Vulkan driver, and mesa-vulkan-drivers cannot be installed here" \
            "(not root); the GPU tests will fail" >&2
    fi
fi
exec cargo test --workspace --locked "$@"
