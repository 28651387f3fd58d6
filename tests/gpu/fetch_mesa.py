#!/usr/bin/env python3
"""Fetches Mesa's lavapipe with cooperative matrices (matrix units), and everything it loads,
from Debian 13's backports into a folder of its own, for tests/gpu/matrix_units.sh.

Why: lavapipe offers VK_KHR_cooperative_matrix (8x8x8, f16 into f16 or f32) from Mesa 25.3;
Debian 12's own Mesa (22.3, 25.0 in its backports) has none, so the GPU tests there never run
the kernels a real GPU runs through SPIR-V: Burn's matrix products, convolutions and flash
attention on the matrix units. The newer Mesa needs a newer glibc than Debian 12's, so its
C library comes too and the test binaries are run with its loader (matrix_units.sh).

Usage: fetch_mesa.py FOLDER. Nothing is installed on the system: the .debs are unpacked into
FOLDER/root, and FOLDER/lvp_icd.json names the driver there. The package list is read from
the archive's index at the time, so a newer backport is taken as it comes.
"""
import lzma
import os
import shutil
import subprocess
import sys
import urllib.request

MIRROR = os.environ.get("EMBER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SUITES = ["trixie", "trixie-backports"]  # the later one wins where both have a package
WANTED = ["mesa-vulkan-drivers", "libvulkan1"]
# Never unpacked: packaging machinery the libraries do not load.
SKIP = {"debconf", "debconf-2.0", "perl-base", "dpkg", "libc-bin", "base-files", "tzdata"}


def fetch(url, attempts=3):
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                return response.read()
        except OSError as error:
            if attempt == attempts - 1:
                raise SystemExit(f"fetch_mesa.py: could not download {url}: {error}")


def packages():
    """Package name -> its index stanza, the later suite's version winning."""
    found = {}
    for suite in SUITES:
        index = lzma.decompress(fetch(f"{MIRROR}/dists/{suite}/main/binary-amd64/Packages.xz"))
        for stanza in index.decode().split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if ": " in line and not line.startswith(" "):
                    key, value = line.split(": ", 1)
                    fields[key] = value
            if "Package" in fields:
                found[fields["Package"]] = fields
    return found


def closure(found):
    """The wanted packages and everything they depend on (first alternative of each)."""
    provided = {}
    for name, fields in found.items():
        for item in fields.get("Provides", "").split(","):
            virtual = item.strip().split(" ")[0]
            if virtual:
                provided.setdefault(virtual, name)
    todo, seen = list(WANTED), set()
    while todo:
        name = todo.pop()
        name = name if name in found else provided.get(name, name)
        if name in seen or name in SKIP:
            continue
        if name not in found:
            raise SystemExit(f"fetch_mesa.py: {name} is in neither {SUITES}")
        seen.add(name)
        for field in ("Depends", "Pre-Depends"):
            for alternatives in found[name].get(field, "").split(","):
                first = alternatives.split("|")[0].strip().split(" ")[0].split(":")[0]
                if first:
                    todo.append(first)
    return sorted(seen)


def main():
    folder = sys.argv[1]
    root = os.path.join(folder, "root")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "debs"))
    found = packages()
    for name in closure(found):
        path = found[name]["Filename"]
        deb = os.path.join(folder, "debs", os.path.basename(path))
        with open(deb, "wb") as out:
            out.write(fetch(f"{MIRROR}/{path}"))
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    driver = os.path.join(root, "usr/lib/x86_64-linux-gnu/libvulkan_lvp.so")
    if not os.path.exists(driver):
        raise SystemExit("fetch_mesa.py: the Mesa package holds no lavapipe driver")
    with open(os.path.join(folder, "lvp_icd.json"), "w") as out:
        out.write(
            '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", '
            '"api_version": "1.4.0"}}\n' % driver
        )
    shutil.rmtree(os.path.join(folder, "debs"))
    print(f"fetch_mesa.py: {found['mesa-vulkan-drivers']['Version']} in {folder}")


if __name__ == "__main__":
    main()
