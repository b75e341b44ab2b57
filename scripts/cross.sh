#!/usr/bin/env bash
# Cross-builds VK_LAYER_echo for the Jetson's software (JetPack 4.6: Ubuntu 18.04, glibc 2.27,
# aarch64) and packages it (issue 13). Installs what it needs when it is missing, builds into
# target/, and prints the time each step took.
#
#   scripts/cross.sh            tools, aarch64 + x86_64 builds with the glibc 2.27 floor, packages
#   scripts/cross.sh --qemu     the same, plus what running the aarch64 build needs here:
#                               qemu-user-static and arm64 lavapipe (multiarch)
#   scripts/cross.sh --no-packages   builds only
#   scripts/cross.sh --unit-tests     only the aarch64 unit-test binary (scripts/qemu-system.sh)
#
# What it builds (cargo-zigbuild: zig links against glibc 2.27's symbol versions, so nothing
# newer than GLIBC_2.27 is required — tests/tests/cross.rs checks the floor):
#
#   target/aarch64-unknown-linux-gnu/release/   libVkLayer_echo.so, vkecho, echo-samples, the
#       test layer (libVkLayer_echo_test_discrete.so: the Jetson Nano table on arm64 lavapipe),
#       and vk-layer-echo-unit-tests (the layer's unit tests, run under qemu by tests/tests/cross.rs)
#   target/x86_64-unknown-linux-gnu/release/    libVkLayer_echo.so, vkecho (for the amd64 package)
#   target/cross/dist/                          vk-layer-echo_<version>_{arm64,amd64}.deb and
#       vk-layer-echo-<version>-linux-{aarch64,x86_64}.tar.gz   (scripts/package.sh)
#
# Tools it installs when missing: the Rust targets (rustup), cargo-zigbuild and zig (pip, pinned,
# in a virtual environment under target/cross/venv), and the Debian packages python3,
# python3-venv, binutils-aarch64-linux-gnu (strip for arm64) through scripts/deps.sh; with
# --qemu: `dpkg --add-architecture arm64`, then qemu-user-static libvulkan1:arm64
# mesa-vulkan-drivers:arm64 (apt-get --no-remove: it aborts rather than remove anything).
# Never vulkan-tools:arm64 — it would replace the amd64 vulkaninfo (the package is not
# multi-arch). Root (or passwordless sudo) is needed only when something must be installed.
set -euo pipefail
cd "$(dirname "$0")/.."

qemu=0
packages=1
unit_only=0
for a in "$@"; do
    case "$a" in
        --qemu) qemu=1 ;;
        --no-packages) packages=0 ;;
        --unit-tests) unit_only=1; packages=0 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "scripts/cross.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
    esac
done

CARGO_ZIGBUILD_VERSION=0.24.1
ZIGLANG_VERSION=0.15.2
GLIBC_FLOOR=2.27

step_start=$SECONDS
step() {
    echo "== cross: $* (after $((SECONDS - step_start)) s)"
}

sudo_cmd() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        echo "scripts/cross.sh: needs root (or passwordless sudo) to run: $*" >&2
        exit 1
    fi
}

# ---------------------------------------------------------------- host tools
step "host packages"
ECHO_EXTRA_PACKAGES="python3 python3-venv binutils-aarch64-linux-gnu ${ECHO_EXTRA_PACKAGES:-}" \
    scripts/deps.sh

if [ "$qemu" -eq 1 ]; then
    step "qemu-user and arm64 lavapipe"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        sudo_cmd dpkg --add-architecture arm64
        sudo_cmd apt-get update -qq
    fi
    need=()
    for p in qemu-user-static libvulkan1:arm64 mesa-vulkan-drivers:arm64; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        echo "scripts/cross.sh: installing ${need[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        # A fresh arm64 architecture has no package lists yet.
        apt-cache show libvulkan1:arm64 >/dev/null 2>&1 || sudo_cmd apt-get update -qq
        # Multi-Arch: same packages must match the amd64 version; --no-remove refuses any plan
        # that would remove a package (an amd64 Vulkan package among them).
        sudo_cmd apt-get install -y -qq --no-install-recommends --no-remove "${need[@]}" >&2
    fi
    command -v qemu-aarch64-static >/dev/null || { echo "qemu-aarch64-static missing" >&2; exit 1; }
fi

step "Rust targets"
if command -v rustup >/dev/null; then
    installed=$(rustup target list --installed)
    for t in aarch64-unknown-linux-gnu x86_64-unknown-linux-gnu; do
        grep -qx "$t" <<<"$installed" || rustup target add "$t"
    done
else
    echo "scripts/cross.sh: rustup not found; the aarch64-unknown-linux-gnu standard library must be installed" >&2
fi

step "cargo-zigbuild $CARGO_ZIGBUILD_VERSION and zig $ZIGLANG_VERSION"
target=${CARGO_TARGET_DIR:-target}
venv=$target/cross/venv
want="cargo-zigbuild==$CARGO_ZIGBUILD_VERSION ziglang==$ZIGLANG_VERSION"
if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$want" ]; then
    rm -rf "$venv"
    mkdir -p "$target/cross"
    # Debian's python3 (python3-venv) when there is one: a pyenv shim may lack venv.
    py=python3
    [ -x /usr/bin/python3 ] && py=/usr/bin/python3
    "$py" -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q --disable-pip-version-check $want
    echo "$want" >"$venv/.installed"
fi
export PATH="$(cd "$venv/bin" && pwd):$PATH"

# ---------------------------------------------------------------- builds
aarch64=aarch64-unknown-linux-gnu
x86_64=x86_64-unknown-linux-gnu

if [ "$unit_only" -eq 0 ]; then
step "aarch64 build (glibc $GLIBC_FLOOR): layer, vkecho, samples, test layer"
cargo zigbuild --release --target "$aarch64.$GLIBC_FLOOR" -p vk-layer-echo -p echo-cli -p echo-samples \
    -p vk-layer-echo-test-discrete
fi

step "aarch64 build: the layer's unit tests"
# The test harness binary's name carries a hash; copy it to a stable name.
unit=$(cargo zigbuild --release --target "$aarch64.$GLIBC_FLOOR" -p vk-layer-echo --lib --tests \
        --message-format=json-render-diagnostics |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -n "$unit" ] && [ -f "$unit" ] || { echo "scripts/cross.sh: no unit-test binary was built" >&2; exit 1; }
cp -f "$unit" "$target/$aarch64/release/vk-layer-echo-unit-tests"
[ "$unit_only" -eq 1 ] && { step "done"; exit 0; }

step "x86_64 build (glibc $GLIBC_FLOOR): layer, vkecho"
cargo zigbuild --release --target "$x86_64.$GLIBC_FLOOR" -p vk-layer-echo -p echo-cli

if [ "$packages" -eq 1 ]; then
    step "packages"
    scripts/package.sh --out "$target/cross/dist"
fi
step "done"
ls -l "$target/$aarch64/release/libVkLayer_echo.so" "$target/$aarch64/release/vkecho" \
    "$target/$aarch64/release/echo-samples" "$target/$x86_64/release/libVkLayer_echo.so" \
    "$target/$x86_64/release/vkecho"
