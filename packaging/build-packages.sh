#!/usr/bin/env bash
# Builds Ember's Linux packages from a release build:
#   target/packages/ember_<version>_<arch>.deb          (dpkg -i; apt remove ember)
#   target/packages/ember-<version>-linux-<arch>.tar.gz  (portable: ./install.sh, ./uninstall.sh)
# Both carry the binary, the desktop entry (files on its command line: `Exec=ember %F`), the
# icon, and the MIME types that make a double-clicked .safetensors / .ckpt open in Ember.
# The default build includes the GPU backend; EMBER_FEATURES adds features. Needs dpkg-deb
# (Debian/Ubuntu).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
machine=$(uname -m)
out=target/packages
cargo build --release --locked -p ember ${EMBER_FEATURES:+--features "$EMBER_FEATURES"}
rm -rf "$out/stage"
mkdir -p "$out/stage"

# The files every package installs, under a prefix ($1).
lay_out() {
    local root=$1
    install -Dm755 target/release/ember "$root/bin/ember"
    install -Dm644 packaging/ember.desktop "$root/share/applications/ember.desktop"
    install -Dm644 packaging/linux/ember-mime.xml "$root/share/mime/packages/ember.xml"
    install -Dm644 assets/icon.png "$root/share/icons/hicolor/256x256/apps/ember.png"
    install -Dm644 assets/icon.svg "$root/share/icons/hicolor/scalable/apps/ember.svg"
    install -Dm644 README.md "$root/share/doc/ember/README.md"
}

# --- .deb -------------------------------------------------------------------------------
deb=$out/stage/deb
lay_out "$deb/usr"
size=$(du -sk "$deb/usr" | cut -f1)
mkdir -p "$deb/DEBIAN"
cat >"$deb/DEBIAN/control" <<CONTROL
Package: ember
Version: $version
Architecture: $arch
Maintainer: Ember developers <ember@users.noreply.invalid>
Installed-Size: $size
Depends: libc6, libgcc-s1, libxkbcommon-x11-0, libvulkan1 | libgl1
Recommends: mesa-vulkan-drivers, xdg-desktop-portal
Section: graphics
Priority: optional
Description: Stable Diffusion image studio (SD 1.x, SD 2.x, SDXL)
 Drop a checkpoint on the window, type a prompt and watch the picture form: txt2img,
 img2img, inpainting, LoRA, ControlNet, hires fix and ESRGAN upscalers, with the same
 image for the same seed as diffusers, A1111 and ComfyUI. No Python needed.
CONTROL
# Menus, icons and file types learn about Ember (and forget it on removal).
for script in postinst postrm; do
    cat >"$deb/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
command -v update-mime-database >/dev/null && update-mime-database /usr/share/mime || true
command -v update-desktop-database >/dev/null && update-desktop-database -q /usr/share/applications || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t /usr/share/icons/hicolor || true
exit 0
SCRIPT
    chmod 755 "$deb/DEBIAN/$script"
done
deb_file=$out/ember_${version}_${arch}.deb
dpkg-deb --root-owner-group --build "$deb" "$deb_file" >/dev/null

# --- portable .tar.gz ---------------------------------------------------------------------
name=ember-$version-linux-$machine
tar_root=$out/stage/$name
lay_out "$tar_root"
cp packaging/linux/install-portable.sh "$tar_root/install.sh"
cp packaging/linux/uninstall-portable.sh "$tar_root/uninstall.sh"
chmod 755 "$tar_root/install.sh" "$tar_root/uninstall.sh"
tar -C "$out/stage" -czf "$out/$name.tar.gz" "$name"
rm -rf "$out/stage"
echo "$deb_file"
echo "$out/$name.tar.gz"
