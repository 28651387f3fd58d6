#!/usr/bin/env bash
# Installs Ember for the current user on Linux: the release binary in ~/.local/bin, the
# desktop entry and the icon where freedesktop menus and docks find them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p ember ${EMBER_FEATURES:+--features "$EMBER_FEATURES"}
data=${XDG_DATA_HOME:-$HOME/.local/share}
install -Dm755 target/release/ember "$HOME/.local/bin/ember"
install -Dm644 packaging/ember.desktop "$data/applications/ember.desktop"
install -Dm644 assets/icon.png "$data/icons/hicolor/256x256/apps/ember.png"
install -Dm644 assets/icon.svg "$data/icons/hicolor/scalable/apps/ember.svg"
echo "installed: $HOME/.local/bin/ember (make sure ~/.local/bin is on PATH)"
