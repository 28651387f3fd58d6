#!/usr/bin/env bash
# Tries the Linux packages as a person would, on this machine (needs root for dpkg, and
# installs Xvfb and friends with apt when missing):
#  1. .deb: dpkg -i; the binary, menu entry, icon and file types are where desktops look;
#     `desktop-file-validate` accepts the entry; the shared MIME database types a
#     .safetensors file as Ember's and Ember is registered to open it.
#  2. Ember started the way the menu starts it (the entry's Exec line, `%F` = a checkpoint)
#     under Xvfb: a screenshot, and the checkpoint loaded (the settings it saves name it).
#  3. `ember image.png` restores the image's prompt.
#  4. dpkg -r: nothing of Ember left on the system but the user's settings and images.
#  5. The portable .tar.gz: install.sh into a prefix, the same files, uninstall.sh removes them.
# Usage: packaging/test-packages.sh OUT_DIR (screenshots and logs go there).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?usage: packaging/test-packages.sh OUT_DIR}")
mkdir -p "$out"
reference=${EMBER_REFERENCE:-$(realpath ../shared/reference)}
checkpoint=$reference/sd15/checkpoint.safetensors
[ -f "$checkpoint" ] || { echo "no reference checkpoint at $checkpoint"; exit 1; }

need=()
for tool in Xvfb:xvfb xdotool:xdotool import:imagemagick desktop-file-validate:desktop-file-utils mimetype:libfile-mimeinfo-perl; do
    command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || need+=(mesa-vulkan-drivers)
ldconfig -p | grep -q libxkbcommon-x11 || need+=(libxkbcommon-x11-0)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

packaging/build-packages.sh | tee "$out/packages.txt"
deb=$(grep '\.deb$' "$out/packages.txt")
tarball=$(grep '\.tar\.gz$' "$out/packages.txt")
pass() { echo "ok: $*"; }
fail() { echo "FAILED: $*"; exit 1; }

# 1. Install the .deb.
dpkg -i "$deb" >"$out/dpkg-install.log" 2>&1 || { apt-get install -f -y -qq >>"$out/dpkg-install.log" 2>&1; dpkg -i "$deb" >>"$out/dpkg-install.log" 2>&1; }
installed=(/usr/bin/ember /usr/share/applications/ember.desktop /usr/share/mime/packages/ember.xml
    /usr/share/icons/hicolor/256x256/apps/ember.png /usr/share/icons/hicolor/scalable/apps/ember.svg)
for f in "${installed[@]}"; do [ -e "$f" ] || fail "$f missing after dpkg -i"; done
pass "dpkg -i installed ${#installed[@]} files"
desktop-file-validate /usr/share/applications/ember.desktop || fail "desktop-file-validate"
pass "desktop entry valid"
# The reference checkpoint is a tiny non-standard model: its config folder goes beside it.
probe=$(mktemp -d)/probe.safetensors
cp "$checkpoint" "$probe"
cp -r "$reference/sd15/pipeline" "$(dirname "$probe")/pipeline"
# What file managers ask the shared MIME database (mimetype reads the same files).
[ "$(mimetype --brief "$probe")" = application/x-safetensors ] || fail "MIME type of .safetensors: $(mimetype --brief "$probe")"
pass ".safetensors files are application/x-safetensors"
grep -q 'application/x-safetensors' /usr/share/applications/mimeinfo.cache || fail "not in mimeinfo.cache"
pass "Ember is registered for application/x-safetensors"

# 2. Start it as the menu does, with the checkpoint as %F.
export DISPLAY=:94 XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
Xvfb "$DISPLAY" -screen 0 1400x900x24 >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null; wait 2>/dev/null' EXIT
sleep 1
home=$(mktemp -d)
exec_line=$(sed -n 's/^Exec=//p' /usr/share/applications/ember.desktop)
command=${exec_line//%F/$probe}
EMBER_HOME=$home bash -c "$command" >"$out/ember-desktop.log" 2>&1 &
app=$!
sleep 12
import -window root "$out/desktop-entry-with-checkpoint.png"
# eframe saves the settings every 30 s, at the next frame: a pointer move makes one.
sleep 20
xdotool mousemove 700 450 && sleep 1 && xdotool mousemove 710 460 && sleep 2
kill "$app" 2>/dev/null || true
wait "$app" 2>/dev/null || true
grep -q "probe.safetensors" "$home/config/settings.json" || fail "the checkpoint given on the command line was not loaded"
pass "started from the desktop entry, the checkpoint loaded ($out/desktop-entry-with-checkpoint.png)"

# 3. An image restores its settings.
png=$(mktemp -d)/keeper.png
ember generate --model "$checkpoint" --prompt "a lighthouse in the fog" --steps 2 \
    --width 64 --height 64 --seed 4 --out "$png" >/dev/null
home2=$(mktemp -d)
EMBER_HOME=$home2 ember "$png" >"$out/ember-image.log" 2>&1 &
app=$!
sleep 12
import -window root "$out/image-restored.png"
sleep 20
xdotool mousemove 700 450 && sleep 1 && xdotool mousemove 710 460 && sleep 2
kill "$app" 2>/dev/null || true
wait "$app" 2>/dev/null || true
grep -q "a lighthouse in the fog" "$home2/config/settings.json" || fail "the image's prompt was not restored"
pass "ember image.png restored its prompt ($out/image-restored.png)"

# 4. Remove it: only the user's settings and images remain.
dpkg -r ember >"$out/dpkg-remove.log" 2>&1
for f in "${installed[@]}"; do [ ! -e "$f" ] || fail "$f left after dpkg -r"; done
! grep -q 'x-safetensors' /usr/share/applications/mimeinfo.cache 2>/dev/null || fail "still registered for .safetensors"
[ -f "$home/config/settings.json" ] || fail "the user's settings were removed"
pass "dpkg -r removed every file; the user's settings stay"

# 5. The portable archive.
unpack=$(mktemp -d)
tar -C "$unpack" -xzf "$tarball"
prefix=$(mktemp -d)/local
PREFIX=$prefix "$unpack"/ember-*/install.sh >"$out/portable-install.log"
for f in bin/ember share/applications/ember.desktop share/mime/packages/ember.xml share/icons/hicolor/256x256/apps/ember.png; do
    [ -e "$prefix/$f" ] || fail "$f missing after install.sh"
done
grep -q "^Exec=$prefix/bin/ember %F" "$prefix/share/applications/ember.desktop" || fail "portable Exec line"
"$prefix/bin/ember" --version >/dev/null || fail "the portable binary does not run"
PREFIX=$prefix "$unpack"/ember-*/uninstall.sh >>"$out/portable-install.log"
[ -z "$(find "$prefix" -type f -path '*ember*')" ] || fail "files left after uninstall.sh: $(find "$prefix" -type f -path '*ember*')"
pass "portable install.sh / uninstall.sh"
echo "all package checks passed; screenshots in $out"
