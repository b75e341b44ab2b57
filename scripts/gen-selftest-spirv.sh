#!/usr/bin/env bash
# Compiles the shaders of `vkecho selftest` (cli/src/selftest/shaders/*.comp, *.vert, *.frag) to
# the SPIR-V files committed beside them (<file>.spv), which vkecho embeds (include_bytes!): an
# installed vkecho needs no shader compiler. Target: Vulkan 1.0 (SPIR-V 1.0), so the workloads
# run on every Vulkan device. Run it after changing a shader and commit the result; the CLI's
# test `selftest::shaders::committed_spirv_is_current` fails while a .spv is not current.
#
#   scripts/gen-selftest-spirv.sh [--check]     --check: compare only, exit 1 when one differs
#
# Needs glslangValidator (Debian package glslang-tools; scripts/deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../cli/src/selftest/shaders"
check=0
[ "${1:-}" = --check ] && check=1
tool=${GLSLANG_VALIDATOR:-glslangValidator}
command -v "$tool" >/dev/null || { echo "gen-selftest-spirv.sh: $tool not found (apt-get install glslang-tools)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for src in *.comp *.vert *.frag; do
    "$tool" -V --target-env vulkan1.0 -o "$tmp/$src.spv" "$src" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log" >&2; echo "gen-selftest-spirv.sh: $src does not compile" >&2; exit 1; }
    if [ $check = 1 ]; then
        cmp -s "$tmp/$src.spv" "$src.spv" || { echo "$src.spv is not current" >&2; status=1; }
    else
        cp "$tmp/$src.spv" "$src.spv"
        echo "gen-selftest-spirv.sh: $src.spv"
    fi
done
exit $status
