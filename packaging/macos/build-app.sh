#!/usr/bin/env bash
# Builds Ember.app and a .zip of it, on macOS (needs Xcode's command-line tools for
# `iconutil` and `sips`): target/packages/Ember.app, target/packages/Ember-<version>-macos.zip.
#   Ember.app/Contents/Info.plist        (packaging/macos/Info.plist, version filled in)
#   Ember.app/Contents/MacOS/ember       (the release binary; --features wgpu for Metal)
#   Ember.app/Contents/Resources/ember.icns
# `--layout-only` makes the same tree with any OS's binary, to check the layout.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
out=target/packages
app=$out/Ember.app
if [ "${1:-}" != --layout-only ]; then
    cargo build --release --locked -p ember --features "${EMBER_FEATURES:-wgpu}"
fi
rm -rf "$app"
mkdir -p "$app/Contents/MacOS" "$app/Contents/Resources"
sed "s/@VERSION@/$version/g" packaging/macos/Info.plist >"$app/Contents/Info.plist"
cp target/release/ember "$app/Contents/MacOS/ember"
if command -v iconutil >/dev/null; then
    iconset=$(mktemp -d)/ember.iconset
    mkdir -p "$iconset"
    for size in 16 32 128 256; do
        sips -z $size $size assets/icon.png --out "$iconset/icon_${size}x${size}.png" >/dev/null
        sips -z $((size * 2)) $((size * 2)) assets/icon.png --out "$iconset/icon_${size}x${size}@2x.png" >/dev/null
    done
    iconutil -c icns "$iconset" -o "$app/Contents/Resources/ember.icns"
    (cd "$out" && ditto -c -k --keepParent Ember.app "Ember-$version-macos.zip")
    echo "$out/Ember-$version-macos.zip"
else
    cp assets/icon.png "$app/Contents/Resources/ember.png"
    echo "$app (layout only: no iconutil here, so no .icns and no zip)"
fi
