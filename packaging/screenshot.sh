#!/usr/bin/env bash
# Opens Ember under a virtual X display (Xvfb, software Vulkan) and saves screenshots of the
# real window: `packaging/screenshot.sh OUT_DIR [extra ember args]`. Installs what it needs
# (Debian packages) on first use. EMBER_SHOT_SCRIPT may name a file of `xdotool` lines to run
# between shots (each line: `<seconds to wait> <xdotool args…>` or `<seconds> shot <name>`).
# EMBER_PROFILE=dev uses the debug build (the tests' one) instead of a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: packaging/screenshot.sh OUT_DIR}
shift
mkdir -p "$out"

need=()
for tool in Xvfb:xvfb xdotool:xdotool import:imagemagick xauth:xauth; do
    command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || need+=(mesa-vulkan-drivers)
ldconfig -p | grep -q libvulkan.so.1 || need+=(libvulkan1)
ldconfig -p | grep -q libxkbcommon-x11 || need+=(libxkbcommon-x11-0)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

profile=${EMBER_PROFILE:-release}
cargo build --profile "$profile" -p ember ${EMBER_FEATURES:+--features "$EMBER_FEATURES"}
bin=target/$([ "$profile" = dev ] && echo debug || echo "$profile")/ember
# A fresh settings and output folder unless the caller names one.
export EMBER_HOME=${EMBER_HOME:-$(mktemp -d)}
export DISPLAY=:93
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
Xvfb "$DISPLAY" -screen 0 1400x900x24 >/dev/null 2>&1 &
xvfb=$!
trap 'kill $ember $xvfb 2>/dev/null; wait 2>/dev/null' EXIT
sleep 1
ember=0
"$bin" "$@" >"$out/ember.log" 2>&1 &
ember=$!
sleep "${EMBER_SHOT_DELAY:-4}"
import -window root "$out/start.png"
if [ -n "${EMBER_SHOT_SCRIPT:-}" ]; then
    while read -r wait action rest; do
        [ -z "$wait" ] || [ "${wait:0:1}" = "#" ] && continue
        sleep "$wait"
        if [ "$action" = shot ]; then
            import -window root "$out/$rest.png"
        else
            # shellcheck disable=SC2086
            xdotool $action $rest
        fi
    done <"$EMBER_SHOT_SCRIPT"
fi
kill -0 "$ember" 2>/dev/null || { echo "ember exited early:"; cat "$out/ember.log"; exit 1; }
echo "screenshots in $out"
