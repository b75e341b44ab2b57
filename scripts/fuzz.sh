#!/usr/bin/env bash
# Fuzz the trace and plan readers for a bounded time each (default 60 s; FUZZ_SECONDS=N).
#
# Needs a nightly toolchain and cargo-fuzz (installed here with `cargo install cargo-fuzz` when
# missing). Without nightly, it runs the stable stand-in instead: a deterministic mutation loop over
# the same entry points (analyzer/tests/never_panics.rs), longer than the one CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-60}"
targets=(trace_reader plan_reader)

stable_fallback() {
    echo "fuzz.sh: $1; running the stable mutation loop instead" >&2
    VKECHO_FUZZ_ITERS="${VKECHO_FUZZ_ITERS:-50000}" VKECHO_FUZZ_SEED="${VKECHO_FUZZ_SEED:-$RANDOM}" \
        cargo test -p echo-analyzer --test never_panics -- --nocapture
    exit $?
}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    stable_fallback "no nightly toolchain (rustup toolchain install nightly)"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz || stable_fallback "cargo install cargo-fuzz failed"
fi

# Seeds: a realistic trace and plan from the synthetic-trace builder.
for t in "${targets[@]}"; do mkdir -p "fuzz/corpus/$t"; done
VKECHO_WRITE_SEEDS="$PWD/fuzz/corpus" cargo test -q -p echo-analyzer --test never_panics write_seeds >/dev/null

for t in "${targets[@]}"; do
    echo "fuzz.sh: $t for ${secs}s" >&2
    cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -max_len=65536
done
echo "fuzz.sh: no crash in ${#targets[@]} targets × ${secs}s" >&2
