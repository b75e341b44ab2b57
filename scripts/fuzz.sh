#!/usr/bin/env bash
# Fuzz the trace and plan readers, the settings parser and the layer's SPIR-V access analysis
# (spirv_access: rspirv's parser, then layer/src/spirv_access.rs), one target after another, each for a
# bounded time (default 60 s; FUZZ_SECONDS=N) or to a number of executions (FUZZ_RUNS=N, libFuzzer's
# -runs=N; with FUZZ_RUNS and no FUZZ_SECONDS there is no time limit). FUZZ_TARGETS="settings"
# picks targets. Prints executions, exec/s, coverage and findings per target and exits non-zero
# when any target found a crash, timeout or OOM (reproducer under fuzz/artifacts/TARGET/).
#
# Runs gently: one libFuzzer process (no -jobs/-workers, no -fork), one build job, under
# `nice -n 19`, so a shared machine stays usable. Per input: -timeout=FUZZ_TIMEOUT seconds
# (default 10; libFuzzer's own default, 1200 s, would never report a hang), -rss_limit_mb=
# FUZZ_RSS_MB (default 2048), -max_len=FUZZ_MAX_LEN (default 65536). Built without a sanitizer
# (FUZZ_SANITIZER=none; cargo-fuzz's default is address): the analyzer is safe Rust, so ASan could
# only find what a panic already shows, and it halves the executions per second. Overflow checks
# and debug assertions stay on (cargo-fuzz's default build).
#
# The exact command behind the figures in docs/architecture.md ("Fuzzing"):
#   FUZZ_RUNS=10000000 scripts/fuzz.sh
#
# Needs a nightly toolchain and cargo-fuzz (installed here with `cargo install cargo-fuzz` when
# missing). Without nightly, it runs the stable stand-in instead: a deterministic mutation loop over
# the same entry points (analyzer/tests/never_panics.rs; for SPIR-V the layer's
# spirv_golden::spirv_access_never_panics), longer than the one CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${FUZZ_RUNS:-}"
secs="${FUZZ_SECONDS:-}"
[ -z "$runs" ] && [ -z "$secs" ] && secs=60
limit=()
[ -n "$runs" ] && limit+=("-runs=$runs")
[ -n "$secs" ] && limit+=("-max_total_time=$secs")
what="${runs:+$runs runs}${runs:+${secs:+ or }}${secs:+${secs}s}"
# shellcheck disable=SC2206
targets=(${FUZZ_TARGETS:-trace_reader plan_reader settings spirv_access})
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
san="${FUZZ_SANITIZER:-none}"

stable_fallback() {
    echo "fuzz.sh: $1; running the stable mutation loop instead" >&2
    export VKECHO_FUZZ_ITERS="${VKECHO_FUZZ_ITERS:-50000}" VKECHO_FUZZ_SEED="${VKECHO_FUZZ_SEED:-$RANDOM}"
    nice -n 19 cargo test -p echo-analyzer --test never_panics -- --nocapture || exit $?
    nice -n 19 cargo test -p vk-layer-echo --lib spirv_access_never_panics -- --nocapture
    exit $?
}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    stable_fallback "no nightly toolchain (rustup toolchain install nightly)"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    nice -n 19 cargo install cargo-fuzz || stable_fallback "cargo install cargo-fuzz failed"
fi

# Seeds: a realistic trace and plan from the synthetic-trace builder, and a settings file; for
# spirv_access, the 146 modules of the layer's golden test (layer/src/spirv_golden.rs: needs
# glslangValidator).
for t in "${targets[@]}"; do mkdir -p "fuzz/corpus/$t"; done
VKECHO_WRITE_SEEDS="$PWD/fuzz/corpus" nice -n 19 \
    cargo test -q -p echo-analyzer --test never_panics write_seeds >/dev/null
if [[ " ${targets[*]} " == *" spirv_access "* ]]; then
    VKECHO_WRITE_SEEDS="$PWD/fuzz/corpus" nice -n 19 \
        cargo test -q -p vk-layer-echo --lib write_spirv_seeds >/dev/null
fi

summary=()
found=0
for t in "${targets[@]}"; do
    echo "fuzz.sh: $t for $what" >&2
    log="fuzz/artifacts/$t.log"
    mkdir -p "fuzz/artifacts/$t"
    touch "$log.start"
    nice -n 19 cargo +nightly fuzz build -s "$san" "$t" 2>&1 | tail -n 3 >&2
    start=$(date +%s)
    set +e
    nice -n 19 cargo +nightly fuzz run -s "$san" "$t" "fuzz/corpus/$t" -- "${limit[@]}" \
        -max_len="${FUZZ_MAX_LEN:-65536}" -timeout="${FUZZ_TIMEOUT:-10}" \
        -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -print_final_stats=1 \
        2>&1 | tee "$log" | grep -E '^(#[0-9]+ +DONE|Done|==[0-9]+==|SUMMARY|.*panicked)' >&2
    status=${PIPESTATUS[0]}
    set -e
    wall=$(($(date +%s) - start))
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    # From the final stats, else from libFuzzer's "Done N runs in S second(s)" line.
    [ -z "$n" ] && n=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' || true)
    crashes=$(find "fuzz/artifacts/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' \
        -o -name 'timeout-*' -o -name 'slow-unit-*' \) -newer "$log.start" 2>/dev/null | wc -l)
    [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes="exit $status"
    [ "$crashes" != 0 ] && found=1
    summary+=("$(printf '%-13s %10s execs  %6s exec/s  %5ss  %s  peak %s MB  findings: %s' \
        "$t" "${n:-?}" "${rate:-?}" "$wall" "${cov:-cov: ?}" "${rss:-?}" "$crashes")")
done
echo "fuzz.sh: $what per target" >&2
printf '  %s\n' "${summary[@]}" >&2
if [ "$found" -ne 0 ]; then
    echo "fuzz.sh: FINDINGS (reproducers in fuzz/artifacts/TARGET/; logs fuzz/artifacts/TARGET.log)" >&2
    exit 1
fi
echo "fuzz.sh: no crash, timeout or OOM in ${#targets[@]} targets × $what" >&2
