#!/usr/bin/env bash
# The full aarch64 end-to-end test under qemu-user (issue 13): every sample (the seven positive
# ones and the four negative controls), ECHO_QEMU_SIZE_KIB (default 1024) KiB, 3 iterations,
# on arm64 lavapipe and below the test layer's Jetson Nano table (Vulkan 1.2, no
# VK_EXT_external_memory_host): baseline, profile, `vkecho analyze` (aarch64), enforce, with
# identical checksums — and the rest of tests/tests/cross.rs (glibc floor, unit tests under
# qemu, packages). scripts/test.sh runs the short form (saxpy, 256 KiB) of the same test.
# Installs and builds what it needs (scripts/deps.sh, scripts/cross.sh --qemu). Took about
# 3.5 minutes for the end-to-end part on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/cross.sh --qemu
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
    export XDG_RUNTIME_DIR=/tmp
fi
cargo build --workspace
start=$SECONDS
ECHO_QEMU_FULL=1 cargo test -p echo-tests --test cross -- --nocapture 2>&1 |
    grep -v '^\[VK_LAYER_echo\] info'
status=${PIPESTATUS[0]}
echo "== tests/tests/cross.rs with the full aarch64 run: $((SECONDS - start)) s, exit status $status"
exit "$status"
