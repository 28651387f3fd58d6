#!/usr/bin/env bash
# Removes what install.sh installed under PREFIX (default ~/.local). Settings (the config
# folder) and images (Pictures/Ember) stay.
set -euo pipefail
prefix=${PREFIX:-$HOME/.local}
rm -f "$prefix/bin/ember" \
    "$prefix/share/applications/ember.desktop" \
    "$prefix/share/mime/packages/ember.xml" \
    "$prefix/share/icons/hicolor/256x256/apps/ember.png" \
    "$prefix/share/icons/hicolor/scalable/apps/ember.svg" \
    "$prefix/share/doc/ember/README.md"
rmdir "$prefix/share/doc/ember" 2>/dev/null || true
command -v update-mime-database >/dev/null && [ -d "$prefix/share/mime" ] && update-mime-database "$prefix/share/mime" || true
command -v update-desktop-database >/dev/null && [ -d "$prefix/share/applications" ] && update-desktop-database -q "$prefix/share/applications" || true
echo "removed Ember from $prefix (settings and images are kept)"
