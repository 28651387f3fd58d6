#!/usr/bin/env bash
# Installs this unpacked Ember for the current user (or under PREFIX): the binary in
# PREFIX/bin, the menu entry, icon and file types in PREFIX/share. Default PREFIX: ~/.local.
# ./uninstall.sh removes exactly these files; settings and images are never touched.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${PREFIX:-$HOME/.local}
files=(
    bin/ember
    share/applications/ember.desktop
    share/mime/packages/ember.xml
    share/icons/hicolor/256x256/apps/ember.png
    share/icons/hicolor/scalable/apps/ember.svg
    share/doc/ember/README.md
)
for f in "${files[@]}"; do
    mode=644
    [ "$f" = bin/ember ] && mode=755
    install -Dm"$mode" "$here/$f" "$prefix/$f"
done
# The menu entry must find the binary even when PREFIX/bin is not on PATH.
sed -i "s|^Exec=ember |Exec=$prefix/bin/ember |" "$prefix/share/applications/ember.desktop"
command -v update-mime-database >/dev/null && update-mime-database "$prefix/share/mime" || true
command -v update-desktop-database >/dev/null && update-desktop-database -q "$prefix/share/applications" || true
echo "installed Ember in $prefix (run: $prefix/bin/ember, or find Ember in the menu)"
