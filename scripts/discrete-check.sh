#!/usr/bin/env bash
# Echo on a discrete GPU (issue 15: "an inactive device adds 0 instructions to device commands"):
# run on a machine with a discrete GPU and its vendor driver, from a folder of prebuilt artifacts
# (`scripts/discrete-check.sh --pack DIR` makes it here: stripped release libVkLayer_echo.so,
# vkecho, echo-samples, the C program c_calls, a manifest, and valgrind's .deb if present).
#
#   scripts/discrete-check.sh DIR [OUTDIR]
#
# Prints, and writes to OUTDIR/discrete.md:
#   1. vkecho doctor: each device's topology class (a discrete GPU: echo stays inactive).
#   2. c_calls where: the object each device command's dispatch pointer lives in, no layer vs
#      echo in auto/profile/enforce: no command may point into echo.
#   3. echo-samples saxpy (staging, 64 MiB): checksums identical with and without echo in every
#      mode; no trace written in profile mode.
#   4. wall clock: $ECHO_ROUNDS (default 9) interleaved rounds of saxpy, no layer vs echo (auto),
#      median of the paired ratios and their range.
#   5. callgrind (when valgrind's .deb is in DIR): c_calls loops ($ECHO_CG_LOOPS, default all three),
#      instructions per iteration and inside echo; each valgrind run bounded by $ECHO_CG_TIMEOUT s;
#      ECHO_CG_LOOPS= (empty) skips it.
set -uo pipefail
if [ "${1:-}" = "--pack" ]; then
    cd "$(dirname "$0")/.."
    dst=${2:?usage: --pack DIR}; mkdir -p "$dst"
    R=${CARGO_TARGET_DIR:-target}/release
    for f in libVkLayer_echo.so vkecho echo-samples; do strip -o "$dst/$f" "$R/$f"; done
    c=$(ls -td "${CARGO_TARGET_DIR:-target}"/debug/build/echo-tests-*/out | head -1)
    cp "$c/c_calls" "$dst/"
    sed 's#"library_path": "libVkLayer_echo.so"#"library_path": "./libVkLayer_echo.so"#' \
        manifest/VkLayer_echo.json > "$dst/VkLayer_echo.json"
    exit 0
fi
D=$(cd "${1:?usage: discrete-check.sh DIR [OUTDIR]}" && pwd)
OUT=${2:-$(mktemp -d)}; mkdir -p "$OUT"
W=$(mktemp -d)
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp} HOME=$W XDG_CACHE_HOME=$W/cache
mkdir -p "$W/layers" && cp "$D/VkLayer_echo.json" "$W/layers/" && ln -sf "$D/libVkLayer_echo.so" "$W/layers/"
report="$OUT/discrete.md"; : > "$report"
say() { echo "$*" | tee -a "$report"; }
none() { env VK_ECHO_DISABLE=1 "$@"; }
echo_in() { local mode=$1; shift; env VK_ADD_LAYER_PATH="$W/layers" VK_INSTANCE_LAYERS=VK_LAYER_echo \
    VK_ECHO_MODE="$mode" VK_ECHO_LOG=info VK_ECHO_TRACE="$W/trace-$mode.jsonl" "$@"; }

say "## echo on a discrete GPU ($(date -u '+%Y-%m-%d %H:%M UTC'))"
say
say '### 1. vkecho doctor'
say '```'
"$D/vkecho" doctor 2>&1 | grep -iE 'device|topology|class|heap|type' | head -20 | tee -a "$report"
say '```'

say '### 2. device dispatch pointers (c_calls where)'
none "$D/c_calls" where > "$W/where-none" 2>&1
say "no layer: $(awk '{print $2}' "$W/where-none" | sort | uniq -c | tr -s ' ' | paste -sd, -)"
fail=0
for m in auto profile enforce; do
    echo_in $m "$D/c_calls" where > "$W/where-$m" 2>"$W/where-$m.err"
    n=$(grep -c 'libVkLayer_echo' "$W/where-$m")
    same=$(cmp -s "$W/where-none" "$W/where-$m" && echo identical || echo DIFFERENT)
    say "echo mode=$m: $n of $(wc -l < "$W/where-$m") commands point into echo; objects $same to no layer"
    grep -m2 -i 'echo' "$W/where-$m.err" | sed 's/^/    /' | tee -a "$report"
    [ "$n" = 0 ] && [ "$same" = identical ] || fail=1
done

say '### 3. saxpy outputs'
args=(saxpy --size-mib 64 --iters 10 --variant staging)
base=$(none "$D/echo-samples" "${args[@]}" 2>/dev/null | grep -o '"checksum":"[0-9a-f]*"')
say "no layer: $base"
for m in off auto profile enforce; do
    got=$(echo_in $m "$D/echo-samples" "${args[@]}" 2>/dev/null | grep -o '"checksum":"[0-9a-f]*"')
    t=$([ -s "$W/trace-$m.jsonl" ] && echo "trace written" || echo "no trace")
    say "echo mode=$m: $got ($([ "$got" = "$base" ] && echo identical || echo DIFFERENT), $t)"
    [ "$got" = "$base" ] || fail=1
done

ROUNDS=${ECHO_ROUNDS:-9}
say "### 4. wall clock: saxpy 64 MiB staging, 20 iterations, $ROUNDS interleaved rounds (ABBA order)"
args=(saxpy --size-mib 64 --iters 20 --variant staging)
for r in $(seq 1 "$ROUNDS"); do
    for c in A B; do
        if [ $((r % 2)) = 0 ]; then c=$([ $c = A ] && echo B || echo A); fi
        if [ $c = A ]; then v=$(none "$D/echo-samples" "${args[@]}" 2>/dev/null)
        else v=$(echo_in auto "$D/echo-samples" "${args[@]}" 2>/dev/null); fi
        echo "$r $c $(echo "$v" | sed 's/.*"iter_ms_median":\([0-9.]*\).*/\1/')" >> "$W/times"
    done
done
python3 - "$W/times" <<'PY' | tee -a "$report"
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
t = {}
for r, c, v in rows: t.setdefault(r, {})[c] = float(v)
ratios = sorted(x["B"] / x["A"] for x in t.values() if "A" in x and "B" in x)
a = st.median(x["A"] for x in t.values()); b = st.median(x["B"] for x in t.values())
print(f"per-iteration median: no layer {a:.3f} ms, echo auto {b:.3f} ms; paired ratio echo/no layer "
      f"median {st.median(ratios):.4f} [{ratios[0]:.4f} … {ratios[-1]:.4f}] over {len(ratios)} rounds")
PY

vg=$(ls "$D"/valgrind_*.deb 2>/dev/null | head -1)
if [ -n "$vg" ]; then
    say '### 5. callgrind: instructions per iteration inside c_calls bench_loop (100 vs 300 loops)'
    mkdir -p "$W/vg" && dpkg -x "$vg" "$W/vg"
    export VALGRIND_LIB="$W/vg/usr/libexec/valgrind"
    count() { # cfg what n -> "total in_echo"
        local cfg=$1 what=$2 n=$3 f="$W/cg-$1-$2-$3"
        if [ "$cfg" = none ]; then pre=(env VK_ECHO_DISABLE=1); else pre=(env VK_ADD_LAYER_PATH="$W/layers" VK_INSTANCE_LAYERS=VK_LAYER_echo VK_ECHO_MODE=$cfg VK_ECHO_LOG=error); fi
        timeout "${ECHO_CG_TIMEOUT:-300}" "${pre[@]}" "$W/vg/usr/bin/valgrind" --tool=callgrind --toggle-collect=bench_loop \
            --callgrind-out-file="$f" "$D/c_calls" "$what" "$n" >/dev/null 2>"$f.err" || { echo "failed"; return; }
        tot=$(sed -n 's/^summary: \([0-9]*\).*/\1/p; s/^totals: \([0-9]*\).*/\1/p' "$f" | head -1)
        ech=$(perl "$W/vg/usr/bin/callgrind_annotate" --threshold=100 "$f" 2>/dev/null | grep 'libVkLayer_echo' | awk '{gsub(",","",$1); s+=$1} END {print s+0}')
        echo "$tot $ech"
    }
    say "| loop | no layer | echo enforce (in echo) |"
    say "|---|---|---|"
    for what in ${ECHO_CG_LOOPS-create submit record}; do
        a1=$(count none $what 100); a3=$(count none $what 300)
        e1=$(count enforce $what 100); e3=$(count enforce $what 300)
        if [[ "$a1 $a3 $e1 $e3" == *failed* ]]; then say "| $what | callgrind failed: $(tail -2 "$W"/cg-*-$what-*.err | tr '\n' ' ') | |"; continue; fi
        set -- $a1; ta1=$1; set -- $a3; ta3=$1; set -- $e1; te1=$1; ee1=$2; set -- $e3; te3=$1; ee3=$2
        say "| $what | $(( (ta3 - ta1) / 200 )) | $(( (te3 - te1) / 200 )) ($(( (ee3 - ee1) / 200 ))) |"
    done
fi
cp "$W"/where-* "$OUT/" 2>/dev/null
say
[ $fail = 0 ] && say "RESULT: echo stayed inactive: no device command entered echo; outputs identical" || say "RESULT: FAILED (see above)"
exit $fail
