# Builds Ember's portable Windows .zip (and, with WiX 3 installed, an .msi), on Windows with
# the MSVC toolchain and the Windows SDK (rc.exe):
#   target\packages\ember-<version>-windows-x86_64.zip   ember.exe (icon linked in), README
#   target\packages\ember-<version>-x86_64.msi           `cargo wix` (cargo install cargo-wix)
# The icon resource is packaging\windows\ember.rc (ember.ico: 16-256 px, made from
# assets\icon.png). Double-clicking a .safetensors opens Ember once the .msi registered it,
# or after "Open with > Ember" for the portable zip.
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
$version = (Select-String -Path Cargo.toml -Pattern '^version = "(.*)"').Matches[0].Groups[1].Value
$out = "target\packages"
New-Item -ItemType Directory -Force $out | Out-Null
rc.exe /nologo /fo target\ember.res packaging\windows\ember.rc
$env:RUSTFLAGS = "-C link-arg=$((Resolve-Path target\ember.res).Path)"
cargo build --release --locked -p ember --features $(if ($env:EMBER_FEATURES) { $env:EMBER_FEATURES } else { "wgpu" })
$stage = Join-Path $out "ember-$version-windows-x86_64"
Remove-Item -Recurse -Force $stage -ErrorAction SilentlyContinue
New-Item -ItemType Directory $stage | Out-Null
Copy-Item target\release\ember.exe, README.md $stage
Compress-Archive -Force $stage "$stage.zip"
if (Get-Command cargo-wix -ErrorAction SilentlyContinue) { cargo wix -p ember --nocapture --output $out }
Write-Output "$stage.zip"
