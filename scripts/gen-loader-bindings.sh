#!/bin/sh
# Regenerates layer/src/loader/vk_layer_bindings.rs from vk_layer.h with bindgen.
# Needs libclang (Debian: libclang-dev, installed through scripts/deps.sh when missing, with
# libvulkan-dev's vk_layer.h) and network access to crates.io the first time.
# A normal build of the layer never runs this: the output is committed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ECHO_EXTRA_PACKAGES="libclang-dev ${ECHO_EXTRA_PACKAGES:-}" "$root/scripts/deps.sh"
header=${VK_LAYER_H:-/usr/include/vulkan/vk_layer.h}
out="$root/layer/src/loader/vk_layer_bindings.rs"
[ -f "$header" ] || { echo "gen-loader-bindings: $header not found (apt-get install libvulkan-dev)" >&2; exit 1; }
cargo run --quiet --release \
    --manifest-path "$root/layer/bindgen/Cargo.toml" \
    --target-dir "${CARGO_TARGET_DIR:-$root/target}/bindgen" \
    -- "$header" "$out"
rustfmt --edition 2021 "$out"
echo "wrote $out"
