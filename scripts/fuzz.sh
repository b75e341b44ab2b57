#!/usr/bin/env bash
# Fuzz the trace and plan readers and the settings parser for a bounded time each (default 60 s;
# FUZZ_SECONDS=N; FUZZ_TARGETS="settings" picks targets). Prints executions and findings per target
# and exits non-zero when any target found a crash (reproducer under fuzz/artifacts/TARGET/).
#
# Needs a nightly toolchain and cargo-fuzz (installed here with `cargo install cargo-fuzz` when
# missing). Without nightly, it runs the stable stand-in instead: a deterministic mutation loop over
# the same entry points (analyzer/tests/never_panics.rs), longer than the one CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-60}"
# shellcheck disable=SC2206
targets=(${FUZZ_TARGETS:-trace_reader plan_reader settings})

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

summary=()
found=0
for t in "${targets[@]}"; do
    echo "fuzz.sh: $t for ${secs}s" >&2
    log="fuzz/artifacts/$t.log"
    mkdir -p "fuzz/artifacts/$t"
    touch "$log.start"
    set +e
    cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -max_len=65536 \
        2>&1 | tee "$log" | grep -E '^(#[0-9]+ +DONE|Done|==[0-9]+==|SUMMARY|.*panicked)' >&2
    status=${PIPESTATUS[0]}
    set -e
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
    crashes=$(find "fuzz/artifacts/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' \
        -o -name 'timeout-*' \) -newer "$log.start" 2>/dev/null | wc -l)
    [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes="exit $status"
    [ "$crashes" != 0 ] && found=1
    summary+=("$(printf '%-14s %12s executions  findings: %s' "$t" "${runs:-?}" "$crashes")")
done
echo "fuzz.sh: ${secs}s per target" >&2
printf '  %s\n' "${summary[@]}" >&2
if [ "$found" -ne 0 ]; then
    echo "fuzz.sh: FINDINGS (reproducers in fuzz/artifacts/TARGET/; logs fuzz/artifacts/TARGET.log)" >&2
    exit 1
fi
echo "fuzz.sh: no crash in ${#targets[@]} targets × ${secs}s" >&2
