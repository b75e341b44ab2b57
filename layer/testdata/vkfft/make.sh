#!/bin/sh
# Regenerates modules.tar.xz: the SPIR-V modules VkFFT 1.2.26 (Debian libvkfft-dev) generates and
# compiles with glslang at run time for tests/c/c_vkfft.c, small and large cases, as it hands them
# to vkCreateShaderModule (dump_shim.c, LD_PRELOADed: c_vkfft links libvulkan and VkFFT calls
# vkCreateShaderModule directly). Only distinct modules are kept. The layer's golden test
# (layer/src/spirv_golden.rs) reads them. Needs a built c_vkfft (cargo build -p echo-tests) and a
# Vulkan driver (lavapipe). Run from the repository root.
set -e
d=layer/testdata/vkfft
bin=$(find target/debug/build -path '*echo-tests-*/out/c_vkfft' -type f | head -n 1)
[ -n "$bin" ] || { echo "build c_vkfft first: cargo build -p echo-tests" >&2; exit 1; }
t=$(mktemp -d)
cc -shared -fPIC -O1 -o "$t/shim.so" $d/dump_shim.c -ldl
for size in small large; do
    mkdir -p "$t/$size" "$t/out"
    XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" SPV_DUMP_DIR="$t/$size" LD_PRELOAD="$t/shim.so" \
        "$bin" staging 1 "$size" >/dev/null
    for f in "$t/$size"/*.spv; do
        h=$(md5sum < "$f" | cut -c1-32)
        ls "$t/out" | grep -q "$h" 2>/dev/null || cp "$f" "$t/out/$size-$(basename "$f" .spv)-$h.spv"
    done
done
# Names without the hash (the hash only deduplicates).
(cd "$t/out" && for f in *.spv; do mv "$f" "$(echo "$f" | sed 's/-[0-9a-f]\{32\}\.spv$/.spv/')"; done)
tar cf - -C "$t/out" --sort=name --owner=0 --group=0 --mtime=2026-01-01 . | xz -9 > $d/modules.tar.xz
rm -rf "$t"
