#!/usr/bin/env bash
# Packages the cross-built VK_LAYER_echo (scripts/cross.sh builds it, then runs this):
#
#   vk-layer-echo_<version>_<arm64|amd64>.deb    for dpkg/apt systems (a Jetson: arm64)
#       /usr/lib/<triplet>/libVkLayer_echo.so
#       /usr/share/vulkan/implicit_layer.d/VkLayer_echo.json   library_path "libVkLayer_echo.so":
#           a bare name, so the loader's dlopen finds the library of its own architecture in the
#           multiarch directory (as Debian's own layers do)
#       /usr/bin/vkecho
#       /usr/share/doc/vk-layer-echo/{README.md,copyright}
#   vk-layer-echo-<version>-linux-<aarch64|x86_64>.tar.gz   for systems without dpkg: one
#       directory with bin/, lib/ and share/vulkan/implicit_layer.d/ whose manifest names the
#       library relatively (../../../lib/libVkLayer_echo.so), so it works wherever it is unpacked
#       with --strip-components=1: /usr/local, ~/.local, … (README "On a Jetson").
#
# The layer is implicit and off unless VK_ECHO_ENABLE=1 is set for a program. The Maintainer
# field is ECHO_DEB_MAINTAINER (default: a placeholder address).
#
#   scripts/package.sh [--arch arm64|amd64]... [--out DIR]     (default: both, target/cross/dist)
#
# Test only: ECHO_PACKAGE_PLANT_LEFTOVER=1 builds a .deb whose postinst leaves a file behind that
# removal does not take away (tests/tests/cross.rs shows the install/remove test catches it).
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-target}
out=$target/cross/dist
arches=()
while [ $# -gt 0 ]; do
    case "$1" in
        --arch) arches+=("$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "scripts/package.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ ${#arches[@]} -gt 0 ] || arches=(arm64 amd64)

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "scripts/package.sh: no version in Cargo.toml" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

manifest_with_library() { # $1: library_path
    sed "s|\"library_path\": \"[^\"]*\"|\"library_path\": \"$1\"|" manifest/VkLayer_echo.json
}

copyright() {
    cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: VK_LAYER_echo

Files: *
Copyright: the VK_LAYER_echo authors
License: MIT or Apache-2.0
EOF
}

for arch in "${arches[@]}"; do
    case "$arch" in
        arm64) rust=aarch64-unknown-linux-gnu; triplet=aarch64-linux-gnu; strip=aarch64-linux-gnu-strip ;;
        amd64) rust=x86_64-unknown-linux-gnu; triplet=x86_64-linux-gnu; strip=strip ;;
        *) echo "scripts/package.sh: unknown architecture '$arch' (arm64, amd64)" >&2; exit 2 ;;
    esac
    bin=$target/$rust/release
    for f in libVkLayer_echo.so vkecho; do
        [ -f "$bin/$f" ] || { echo "scripts/package.sh: $bin/$f is missing: run scripts/cross.sh first" >&2; exit 1; }
    done
    command -v "$strip" >/dev/null ||
        { echo "scripts/package.sh: $strip is missing (scripts/cross.sh installs binutils-aarch64-linux-gnu)" >&2; exit 1; }

    # ------------------------------------------------------------------ .deb
    root=$work/deb-$arch
    install -d "$root/DEBIAN" "$root/usr/lib/$triplet" "$root/usr/bin" \
        "$root/usr/share/vulkan/implicit_layer.d" "$root/usr/share/doc/vk-layer-echo"
    "$strip" --strip-debug -o "$root/usr/lib/$triplet/libVkLayer_echo.so" "$bin/libVkLayer_echo.so"
    "$strip" --strip-debug -o "$root/usr/bin/vkecho" "$bin/vkecho"
    chmod 0644 "$root/usr/lib/$triplet/libVkLayer_echo.so"
    chmod 0755 "$root/usr/bin/vkecho"
    manifest_with_library libVkLayer_echo.so >"$root/usr/share/vulkan/implicit_layer.d/VkLayer_echo.json"
    install -m 0644 README.md "$root/usr/share/doc/vk-layer-echo/README.md"
    copyright >"$root/usr/share/doc/vk-layer-echo/copyright"
    size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
    cat >"$root/DEBIAN/control" <<EOF
Package: vk-layer-echo
Version: $version
Architecture: $arch
Maintainer: ${ECHO_DEB_MAINTAINER:-VK_LAYER_echo authors <vk-layer-echo@localhost>}
Installed-Size: $size
Depends: libc6 (>= 2.27), libvulkan1
Section: libs
Priority: optional
Description: Vulkan layer that removes staging copies on unified-memory GPUs
 VK_LAYER_echo profiles a Vulkan application, plans which staging/device buffer
 pairs may share one memory range, and on later runs binds them to it and drops
 the copies that became self-copies (Jetson, Raspberry Pi, Mali, Adreno, Intel
 integrated GPUs, lavapipe). On discrete GPUs it stays out of the call path.
 .
 The layer is implicit and off by default: set VK_ECHO_ENABLE=1 for a program.
 vkecho doctor explains the machine; vkecho profile/analyze/run drive the steps.
EOF
    echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
    if [ "${ECHO_PACKAGE_PLANT_LEFTOVER:-}" = 1 ]; then
        # Planted fault (tests only): a file the package does not own, left behind on removal.
        cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
touch /usr/share/vulkan/implicit_layer.d/VkLayer_echo_leftover.json
EOF
        chmod 0755 "$root/DEBIAN/postinst"
    fi
    (cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
    deb=$out/vk-layer-echo_${version}_$arch.deb
    dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
    echo "scripts/package.sh: $deb ($(du -h "$deb" | cut -f1))"

    # ------------------------------------------------------------------ tarball
    [ "${ECHO_PACKAGE_PLANT_LEFTOVER:-}" = 1 ] && continue
    name=vk-layer-echo-$version-linux-${triplet%%-*}
    top=$work/$name
    install -d "$top/bin" "$top/lib" "$top/share/vulkan/implicit_layer.d" "$top/share/doc/vk-layer-echo"
    cp "$root/usr/bin/vkecho" "$top/bin/"
    cp "$root/usr/lib/$triplet/libVkLayer_echo.so" "$top/lib/"
    manifest_with_library ../../../lib/libVkLayer_echo.so >"$top/share/vulkan/implicit_layer.d/VkLayer_echo.json"
    cp "$root/usr/share/doc/vk-layer-echo/"* "$top/share/doc/vk-layer-echo/"
    cat >"$top/INSTALL" <<EOF
VK_LAYER_echo $version for Linux ${triplet%%-*} (glibc 2.27 or newer, a Vulkan loader).

Unpack into a prefix whose share/ the Vulkan loader searches, for example
  sudo tar -C /usr/local --strip-components=1 -xzf $name.tar.gz    (all users)
  tar -C ~/.local --strip-components=1 -xzf $name.tar.gz           (you only)
The manifest (share/vulkan/implicit_layer.d/VkLayer_echo.json) names the library relative to
itself (../../../lib/libVkLayer_echo.so), so the two must stay together.

Enable it for one program:  VK_ECHO_ENABLE=1 ./my-app
Check:                      vkecho doctor
Remove:                     delete the files this archive lists (tar -tzf $name.tar.gz).
EOF
    tar -C "$work" --owner=0 --group=0 --numeric-owner --sort=name -czf "$out/$name.tar.gz" "$name"
    echo "scripts/package.sh: $out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1))"
done
