#!/usr/bin/env bash
# THE main job of VK_LAYER_echo (README): installs the Debian packages it needs when missing,
# builds the workspace in release mode, and runs `vkecho demo`: the samples are profiled,
# analyzed and enforced on Mesa lavapipe, and a results table is printed.
# Arguments go to `vkecho demo` (see `vkecho demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
    export XDG_RUNTIME_DIR=/tmp
fi

# The wgpu test program (tests/wgpu-app) is a test subject only: leave it out of release builds.
cargo build --release --workspace --exclude echo-wgpu-app
exec "${CARGO_TARGET_DIR:-target}/release/vkecho" demo "$@"
