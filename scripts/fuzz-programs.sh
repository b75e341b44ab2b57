#!/usr/bin/env bash
# Random legal Vulkan programs, echo against none (issue 45; docs/fuzzing-programs.md).
#
#   scripts/fuzz-programs.sh SECONDS [SEED]
#
# Builds echo-fuzzprog, the layer and vkecho (release; FUZZ_PROFILE=debug for a debug build,
# FUZZ_NO_BUILD=1 to use what is built), then gives each driver its share of SECONDS (equal
# unless weighted), one after another: each generates programs from SEED (default 1) and runs
# every one without the layer, under profile, under enforce with the plan vkecho analyze made,
# and twice in auto mode, on FUZZ_JOBS (default 2) at once. Every output (one hash per host
# read, the final readbacks) must be the no-layer run's; a divergence is shrunk and written to
# the output directory.
#
# Drivers (FUZZ_DRIVERS overrides, e.g. "lavapipe swiftshader:4": a weight after the colon gives
# that driver a larger share of SECONDS): lavapipe (the default ICD), swiftshader (Debian's
# chromium package: /usr/lib/chromium/vk_swiftshader_icd.json) when installed, mesa25 (the
# Debian 13 root of scripts/modern-stack.sh, as root) when the root exists.
#
# Output: FUZZ_OUT (default a new /tmp/echo-fuzzprog.XXXXXX): per driver its log, coverage-<driver>.txt
# (Vulkan commands called, analyzer causes reached, followed commands no program called) and
# div-<driver>-<seed>.json / -min.json for each divergence. The last line:
#   N programs, A with a group applied, D divergences
# Exit status 1 when there was a divergence (or a driver failed to run), else 0.
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:?usage: scripts/fuzz-programs.sh SECONDS [SEED]}
seed=${2:-1}
jobs=${FUZZ_JOBS:-2}
profile=${FUZZ_PROFILE:-release}
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
out=${FUZZ_OUT:-$(mktemp -d /tmp/echo-fuzzprog.XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

if [ "${FUZZ_NO_BUILD:-}" != 1 ]; then
    flag=(); [ "$profile" = release ] && flag=(--release)
    echo "== building echo-fuzzprog, the layer and vkecho ($profile)"
    { cargo build "${flag[@]}" -p vk-layer-echo -p echo-cli &&
      cargo build "${flag[@]}" -p echo-tests --bin echo-fuzzprog; } >"$out/build.log" 2>&1 ||
        { tail -20 "$out/build.log"; exit 2; }
fi
bin="$target/$profile"
for f in echo-fuzzprog vkecho libVkLayer_echo.so; do
    [ -e "$bin/$f" ] || { echo "fuzz-programs: $bin/$f is missing"; exit 2; }
done

if [ -n "${FUZZ_DRIVERS:-}" ]; then
    read -r -a drivers <<< "$FUZZ_DRIVERS"
else
    drivers=(lavapipe)
    [ -f /usr/lib/chromium/vk_swiftshader_icd.json ] && drivers+=(swiftshader)
    root=${ECHO_MODERN_ROOT:-/var/cache/vk-echo/modern-root}
    if [ "$(id -u)" -eq 0 ] && [ -f "$root.stamp" ]; then
        drivers+=(mesa25)
    else
        echo "== mesa25 left out: the Debian 13 root ($root) is not built or this is not root (scripts/modern-stack.sh --build)"
    fi
fi
# A driver may carry a weight, `swiftshader:4`: its share of SECONDS is its weight over the sum
# (default 1 each: equal shares).
total=0
for e in "${drivers[@]}"; do
    w=${e#*:}; [ "$w" = "$e" ] && w=1
    [[ "$w" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-programs: bad weight in FUZZ_DRIVERS: $e"; exit 2; }
    total=$((total + w))
done
echo "== ${#drivers[@]} driver(s) in $secs s, seed $seed, $jobs jobs, output $out"

n=0 a=0 d=0 failed=0
for e in "${drivers[@]}"; do
    drv=${e%%:*}; w=${e#*:}; [ "$w" = "$e" ] && w=1
    share=$((secs * w / total))
    [ "$share" -ge 1 ] || share=1
    args=(fuzz --driver "$drv" --seconds "$share" --seed "$seed" --jobs "$jobs" --out "$out/$drv")
    [ "${FUZZ_NO_SHRINK:-}" = 1 ] && args+=(--no-shrink)
    echo "== $drv ($share s)"
    # The log keeps everything; the terminal gets the run's progress line each minute.
    if [ "$drv" = mesa25 ]; then
        ECHO_FUZZ_BIN_DIR="$bin" scripts/modern-stack.sh "$bin/echo-fuzzprog" "${args[@]}" 2>&1
    else
        ECHO_FUZZ_BIN_DIR="$bin" "$bin/echo-fuzzprog" "${args[@]}" 2>&1
    fi | tee "$out/$drv.log" | { grep --line-buffered '^progress:' | sed -u 's/^/   /'; true; }
    rc=${PIPESTATUS[0]}
    grep -E '^(DIVERGENCE|shrunk|  skipped|  divergence)|commands called' "$out/$drv.log" | sed 's/^/   /'
    line=$(grep '^result ' "$out/$drv.log" | tail -1)
    if [ -z "$line" ]; then
        echo "   $drv did not run (exit $rc): $(tail -3 "$out/$drv.log")"
        failed=1
        continue
    fi
    read -r _ _ pn pa pd pauto <<< "$line"
    echo "   $drv: $pn programs, $pa with a group applied (enforce; auto mode: $pauto), $pd divergences"
    n=$((n + pn)); a=$((a + pa)); d=$((d + pd))
done
pct=0; [ "$n" -gt 0 ] && pct=$((100 * a / n))
echo "== drivers: ${drivers[*]%%:*}; ${pct}% of programs with a group applied; output $out"
echo "$n programs, $a with a group applied, $d divergences"
[ "$d" -eq 0 ] && [ "$failed" -eq 0 ]
