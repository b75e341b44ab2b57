#!/usr/bin/env bash
# THE test command of VK_LAYER_echo (README): installs the Debian packages it needs when they
# are missing, builds every crate and target of the workspace (debug), cross-builds the aarch64
# (Jetson) artifacts and packages and installs qemu-user with arm64 lavapipe (scripts/cross.sh
# --qemu), and runs every test on the real Vulkan loader with Mesa lavapipe — the aarch64 ones
# under qemu in their short form (tests/tests/cross.rs; scripts/qemu-e2e.sh runs the full one),
# then one shard of the mutation tests of the safety analysis (scripts/mutants.sh, below).
# Exits non-zero when anything fails.
#
# Extra arguments go to `cargo test` (e.g. `scripts/test.sh -p echo-tests --test cli`).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
# The Jetson's software (issue 13): aarch64 with the glibc 2.27 floor, packages, qemu runtime.
scripts/cross.sh --qemu

# Mesa complains on every Vulkan program without it; the loader and tests do not care where.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
    export XDG_RUNTIME_DIR=/tmp
fi
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
log="$target/test-log.txt"

echo "== cargo build --workspace --all-targets"
cargo build --workspace --all-targets
# tests/tests/costs.rs counts the instructions a user pays, so it measures the release library;
# tests/tests/selftest.rs runs the release vkecho and layer (what the packages hold).
echo "== cargo build --release -p vk-layer-echo -p echo-cli"
cargo build --release -p vk-layer-echo -p echo-cli

echo "== cargo test --workspace $*"
status=0
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?

# The Vulkan 1.4 stage (issue 33): every sample and corpus program, built above, inside a Debian 13
# root (loader, lavapipe and validation layers 1.4; scripts/modern-stack.sh, cached in
# /var/cache/vk-echo) through the validation gate in every mode, also under the Jetson and
# discrete test layers (scripts/modern-check.sh). Runs when no arguments narrowed the tests;
# ECHO_MODERN=0 skips it, ECHO_MODERN=1 runs it anyway.
modern_status=skipped
if [ "${ECHO_MODERN:-}" = 1 ] || { [ $# -eq 0 ] && [ "${ECHO_MODERN:-}" != 0 ]; }; then
    echo "== scripts/modern-check.sh (Vulkan 1.4: Debian 13 root)"
    modern_status=0
    ECHO_MODERN_OUT="$target/modern" scripts/modern-check.sh 2>&1 | tee "$target/modern-log.txt" ||
        modern_status=$?
fi

# Mutation testing (issue 55): one shard of scripts/mutants.sh's mutants of the safety analysis
# (1 of ECHO_MUTANTS_SHARDS, default 25: about 13 mutants, a few minutes), the shard chosen by the
# day of the year, so that a change that weakens the tests is seen within a few runs; fails on a
# survivor not listed in tests/mutants-equivalent.txt. Runs when no arguments narrowed the tests;
# ECHO_MUTANTS=0 skips it, ECHO_MUTANTS=1 runs it anyway, ECHO_MUTANTS_SHARD=K picks the shard.
mutants_status=skipped
if [ "${ECHO_MUTANTS:-}" = 1 ] || { [ $# -eq 0 ] && [ "${ECHO_MUTANTS:-}" != 0 ]; }; then
    shards=${ECHO_MUTANTS_SHARDS:-25}
    shard=${ECHO_MUTANTS_SHARD:-$(( 10#$(date -u +%j) % shards ))}
    echo "== scripts/mutants.sh --shard $shard/$shards (mutation testing of the safety analysis)"
    mutants_status=0
    OUT="$target/mutants" scripts/mutants.sh --shard "$shard/$shards" 2>&1 | tee "$target/mutants-log.txt" ||
        mutants_status=$?
fi

# Summary over every test binary's "test result:" line.
passed=0 failed=0 ignored=0 binaries=0
while read -r p f i; do
    passed=$((passed + p)); failed=$((failed + f)); ignored=$((ignored + i)); binaries=$((binaries + 1))
done < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' "$log")

echo
echo "== summary: $passed passed, $failed failed, $ignored ignored, in $binaries test binaries (log: $log)"
case "$modern_status" in
    skipped) echo "== Vulkan 1.4 stage: skipped" ;;
    0) echo "== Vulkan 1.4 stage: ok ($(grep '^== modern stack: .* checks ok' "$target/modern-log.txt" | sed 's/^== modern stack: //'))" ;;
    *) echo "== Vulkan 1.4 stage: FAILED (log: $target/modern-log.txt, results: $target/modern/results.tsv)"
       grep 'NOT OK: ' "$target/modern-log.txt" | head -20 || true ;;
esac
case "$mutants_status" in
    skipped) echo "== mutation shard: skipped" ;;
    0) echo "== mutation shard: ok ($(grep '^== mutants: ' "$target/mutants-log.txt" | sed 's/^== mutants: //'))" ;;
    *) echo "== mutation shard: FAILED (log: $target/mutants-log.txt)"
       grep -E '^== mutants: |NEW SURVIVOR: ' "$target/mutants-log.txt" | head -20 || true ;;
esac
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || { [ "$modern_status" != skipped ] && [ "$modern_status" != 0 ]; } ||
    { [ "$mutants_status" != skipped ] && [ "$mutants_status" != 0 ]; }; then
    grep -E '^test .* \.\.\. FAILED$' "$log" | sed 's/^test /   FAILED: /; s/ \.\.\. FAILED$//' || true
    grep -E '^error(\[|:)' "$log" | sort -u | head -20 | sed 's/^/   /' || true
    echo "== FAILED (cargo test exit status $status, Vulkan 1.4 stage: $modern_status, mutation shard: $mutants_status)"
    exit 1
fi
echo "== all tests passed"
