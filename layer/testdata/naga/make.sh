#!/bin/sh
# Regenerates the naga-made SPIR-V the layer's reflection tests read (issue 24), with naga 30 as
# wgpu 30 ships it (tests/wgpu-app/examples/wgsl_to_spv.rs). Run from the repository root.
set -e
d=layer/testdata/naga
for w in download accumulate; do
    cargo run -q -p echo-wgpu-app --example wgsl_to_spv -- $d/$w.wgsl $d/$w.spv 1.3
    cargo run -q -p echo-wgpu-app --example wgsl_to_spv -- $d/$w.wgsl $d/$w-spv16.spv 1.6
done
