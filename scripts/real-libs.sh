#!/usr/bin/env bash
# Real libraries beside their zero-copy twins (issue 26): tests/c/c_tensors (Kompute's tensor
# layout) and tests/c/c_vkfft (VkFFT, staging as its sample code does it). Writes
# bench/real-libraries.md (the table, the command, the load average), bench/real-libraries.tsv
# and the plot bench/real_libraries.svg (+ .png when a converter is installed).
#
#   scripts/real-libs.sh [ROUNDS=5]            wall clock only
#   CG=1 scripts/real-libs.sh [ROUNDS]         also instructions under callgrind (slow: minutes)
#   CG=c_tensors scripts/real-libs.sh [ROUNDS] callgrind for the named programs only
#
# Per program: a plan made by profile + `vkecho analyze` for exactly the arguments measured; one
# enforce run with VK_ECHO_STATS for groups, bytes elided and memory not allocated at the driver.
# Wall clock: ROUNDS rounds of base (staging, no layer), echo (enforce), twin (zero-copy, no
# layer), the order rotating per round; each process reports `loop_ms` (its loop's wall time) on
# stderr; a configuration's time is the median over its processes; recovered = (base - echo) /
# (base - twin) per round, median [min-max]. "f_copy (twin)" = (base - twin) / base: the share
# of the loop that the zero-copy version removes, an upper estimate of the copy fraction.
# Instructions (CG=1): callgrind counts every thread of the process (lavapipe's included; run
# with LP_NUM_THREADS=0 and --fair-sched=yes so it finishes), one dump per iteration
# (--dump-before=iteration_mark, tests/c/common.h); scripts/cg-steady.py keeps each case's
# steady iterations (not the first, not the last) and sums one iteration of every case, so
# start-up (shader compiles, plan parsing) and teardown stay out, and leaves glibc's heap
# allocator out (its cost follows the heap's layout); recovered = (b - e) / (b - z)
# on those, with its resolution (half the range of base's and echo's steady iterations, in
# points). c_tensors is counted at the wall clock's size, c_vkfft at `small` (its large FFTs
# take too long under callgrind), with its plan made with min_bytes 128 KiB (the threshold of a
# pair, default 256 KiB): its smallest case at `small` is 128 KiB, and the plan then covers the
# same three cases as the wall clock's plan does at the large sizes (16, 8 and 32 MiB). Mesa's
# shader cache is off under callgrind (MESA_SHADER_CACHE_DISABLE=true), so no run's compiles
# depend on what an earlier run left on disk. The three get the same environment variables (getenv's cost
# follows the environment's length). It counts work, not time: cache misses, memory bandwidth
# and waiting cost time without instructions (scripts/agreement.sh compares the two).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
scripts/deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cargo build --release -p vk-layer-echo -p echo-cli -p echo-bench
cargo build -p echo-tests
R=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
C=$(ls -td "${CARGO_TARGET_DIR:-target}"/debug/build/echo-tests-*/out | while read -r d; do
      [ -x "$d/c_vkfft" ] && [ -x "$d/c_tensors" ] && { (cd "$d" && pwd); break; }; done)
[ -n "$C" ] || { echo "real-libs.sh: c_vkfft/c_tensors not built (scripts/deps.sh)" >&2; exit 1; }
export ECHO_C_SPV=$C/c_double.spv
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
scripts/layer-manifest.py "$R/libVkLayer_echo.so" "$tmp/data/vulkan/implicit_layer.d/VkLayer_echo.json"
export XDG_DATA_HOME=$tmp/data XDG_DATA_DIRS=${XDG_DATA_DIRS:-/usr/local/share:/usr/share}
load0=$(cut -d' ' -f1-3 /proc/loadavg); t0=$(date -u '+%Y-%m-%d %H:%M UTC')

# name | staging args | zero args | size label | callgrind: args with N, N, cases in a run, min_bytes of its plan
PROGS=(
  "c_tensors|staging 4 16|zero 4 16|3 tensors x 16 MiB, 4 iterations|staging N 16|zero N 16|4|1|"
  "c_vkfft|staging 3 large|zero 3 large|1D 4096x512, 2D 1024², 2D 2048² (16+8+32 MiB), 3 iterations|staging N small|zero N small|4|3|131072"
)
plan() { # prog args... -> $tmp/plan.json (min_bytes from $MINB when set)
  local p=$1; shift
  env ${MINB:+VK_ECHO_MIN_BYTES=$MINB} VK_ECHO_ENABLE=1 VK_ECHO_MODE=profile VK_ECHO_TRACE="$tmp/t.jsonl" "$C/$p" "$@" >/dev/null 2>&1
  "$R/vkecho" analyze "$tmp/t.jsonl" -o "$tmp/plan.json" >/dev/null
}
runcfg() { # cfg prog stagingargs zeroargs -> stdout of the program; loop_ms to $tmp/err
  local c=$1 p=$2 s=$3 z=$4
  case $c in
    base) VK_ECHO_DISABLE=1 "$C/$p" $s 2>"$tmp/err" ;;
    echo) VK_ECHO_ENABLE=1 VK_ECHO_MODE=enforce VK_ECHO_PLAN=$tmp/plan.json "$C/$p" $s 2>"$tmp/err" ;;
    twin) VK_ECHO_DISABLE=1 "$C/$p" $z 2>"$tmp/err" ;;
  esac
}
: > "$tmp/rows"
for spec in "${PROGS[@]}"; do
  IFS='|' read -r p s z label cs cz n cases minb <<<"$spec"
  plan "$p" $s
  VK_ECHO_ENABLE=1 VK_ECHO_MODE=enforce VK_ECHO_PLAN=$tmp/plan.json VK_ECHO_STATS=$tmp/stats.jsonl \
    "$C/$p" $s >"$tmp/out.enforce" 2>/dev/null
  : > "$tmp/wall"
  for r in $(seq 1 "$ROUNDS"); do
    case $((r % 3)) in 1) order="base echo twin";; 2) order="echo twin base";; 0) order="twin base echo";; esac
    for c in $order; do
      runcfg "$c" "$p" "$s" "$z" > "$tmp/out.$c"
      cmp -s "$tmp/out.$c" "$tmp/out.enforce" || { echo "real-libs.sh: $p $c output differs" >&2; exit 1; }
      echo "$r $c $(sed -n 's/^loop_ms //p' "$tmp/err")" >> "$tmp/wall"
    done
  done
  cg="-"
  if [ "${CG:-}" = 1 ] || [[ ",${CG:-}," == *",$p,"* ]]; then
    : > "$tmp/cg"
    a0=${cs//N/$n}
    MINB=$minb plan "$p" $a0
    for c in base echo twin; do
      # The same variables in all three (the layer is not loaded with VK_ECHO_DISABLE=1):
      # getenv walks the environment, and the programs and lavapipe call it ~27 times an
      # iteration (tests/c/common.h's buffer_barrier, lavapipe's submit), so 2 variables
      # fewer in base and twin made echo look ~400 instructions an iteration dearer (c_tensors).
      same=(VK_ECHO_MODE=enforce VK_ECHO_PLAN=$tmp/plan.json VK_ECHO_STATS=$tmp/cgstats.jsonl
            MESA_SHADER_CACHE_DISABLE=true)
      case $c in
        base) envs=(VK_ECHO_DISABLE=1 "${same[@]}"); a=${cs//N/$n} ;;
        echo) envs=(VK_ECHO_ENABLE=1 "${same[@]}"); a=${cs//N/$n} ;;
        twin) envs=(VK_ECHO_DISABLE=1 "${same[@]}"); a=${cz//N/$n} ;;
      esac
      rm -f "$tmp"/cg.out* "$tmp/cgstats.jsonl"
      env "${envs[@]}" LP_NUM_THREADS=0 valgrind --tool=callgrind --fair-sched=yes \
        --dump-before=iteration_mark --callgrind-out-file="$tmp/cg.out" "$C/$p" $a \
        >"$tmp/cgout.$c" 2>/dev/null
      cmp -s "$tmp/cgout.$c" "$tmp/cgout.base" || { echo "real-libs.sh: $p $c output differs under callgrind" >&2; exit 1; }
      # A count from a run whose plan was not applied measures the passthrough: refuse it.
      [ "$c" != echo ] || python3 - "$tmp/cgstats.jsonl" "$p" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
a, p = sum(x.get("groups_applied", 0) for x in s), sum(x.get("groups_planned", 0) for x in s)
if a == 0 or a != p:
    sys.exit(f"real-libs.sh: {sys.argv[2]} under callgrind: {a} of {p} planned groups applied")
PY
      echo "$c $(scripts/cg-steady.py "$tmp/cg.out" "$n" "$cases" libVkLayer_echo.so libgcc_s.so.1)" >> "$tmp/cg"
      echo "real-libs.sh: callgrind $p $c" >&2
    done
    cg=$(python3 - "$tmp/cg" <<'PY'
import sys
per, spread, own = {}, {}, {}
for l in open(sys.argv[1]):
    c, v, s, alloc, *objs = l.split(); per[c] = int(v); spread[c] = int(s)
    own[c] = sum(int(o.split("=")[1]) for o in objs)  # echo's library and the unwinder
b, e, z = per["base"], per["echo"], per["twin"]
# The resolution in points of the fraction: echo's and base's spreads against the gain.
res = (spread["echo"] + spread["base"]) / (b - z) * 100
mine = own["echo"] - own["base"]
print(f"{(b - e) / (b - z) * 100:.2f}|{b:.0f}|{e:.0f}|{z:.0f}|{mine}|{res:.2f}")
PY
)
  fi
  python3 - "$tmp/wall" "$tmp/stats.jsonl" "$p" "$label" "$cg" >> "$tmp/rows" <<'PY'
import json, sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
t = {c: [float(r[2]) for r in rows if r[1] == c] for c in ("base", "echo", "twin")}
byr = {}
for r in rows: byr.setdefault(r[0], {})[r[1]] = float(r[2])
rec = [(d["base"] - d["echo"]) / (d["base"] - d["twin"]) * 100 for d in byr.values() if d["base"] != d["twin"]]
m = {c: st.median(v) for c, v in t.items()}
stats = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
s = lambda k: sum(x.get(k, 0) for x in stats)
print("\t".join(map(str, [sys.argv[3], sys.argv[4], f"{(m['base'] - m['twin']) / m['base']:.3f}",
      f"{m['base'] / m['echo']:.3f}", f"{m['base'] / m['twin']:.3f}",
      f"{st.median(rec):.1f}", f"{min(rec):.0f}", f"{max(rec):.0f}", sys.argv[5],
      s("bytes_elided"), s("memory_not_allocated"), s("groups_applied"), s("groups_planned"),
      f"{m['base']:.1f}", f"{m['echo']:.1f}", f"{m['twin']:.1f}"])))
PY
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# Asked before the results are written (writing them is a change of its own).
dirty=$(git diff --quiet || echo ', with uncommitted changes')
cp "$tmp/rows" bench/real-libraries.tsv
mib() { python3 -c "print(f'{$1/2**20:.1f} MiB')"; }
n() { python3 -c "print(f'{$1:,}')"; }
{
  echo "## Real libraries"
  echo
  echo "Written by \`${CG:+CG=$CG }scripts/real-libs.sh $ROUNDS\` ($t0, commit $(git rev-parse --short HEAD)$dirty; load average $load0 at the start, $load1 at the end). Programs: tests/c/c_tensors.c (Kompute's tensor layout, in C: see its header), tests/c/c_vkfft.c (VkFFT 1.2.26, Debian libvkfft-dev). Wall clock: median of $ROUNDS interleaved processes per configuration of the loop's time; recovered per round, median [min–max]. Instructions (\`CG=1\`; \"-\" when not run): callgrind, every thread, one steady iteration, glibc's heap allocator left out (c_tensors at the wall clock's size; c_vkfft at its small sizes, 128 KiB + 512 KiB + 2 MiB, its plan made with min_bytes 128 KiB so that it covers all three cases as at the large sizes: its large FFTs take too long under callgrind; Mesa's shader cache off), ± the method's resolution in points (half the range of the steady iterations). f_copy (twin) = (base − twin)/base."
  echo
  echo "| program | size | f_copy (twin) | speedup base/echo | twin base/twin | recovered, wall clock | recovered, instructions | bytes elided (run) | memory not allocated at the driver | groups | base / echo / twin ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r p label f se sz rm rlo rhi cg be mna ga gp tb te tz; do
    ci="-"; [ "$cg" != "-" ] && ci="${cg%%|*} % ± ${cg##*|}"
    echo "| $p | $label | $f | ${se}× | ${sz}× | $rm % [$rlo–$rhi] | $ci | $(mib "$be") | $(mib "$mna") | $ga of $gp | $tb / $te / $tz |"
  done < "$tmp/rows"
  echo
  while IFS=$'\t' read -r p label f se sz rm rlo rhi cg rest; do
    [ "$cg" = "-" ] && continue
    IFS='|' read -r rec b e z mine res <<<"$cg"
    echo "$p, one steady iteration (instructions): base − twin $(n $((b - z))), echo − twin $(n $((e - z))), of which echo's own code (libVkLayer_echo.so, and libgcc_s unwinding call sites) $(n "$mine"); the rest of echo − twin is work of the program's that echo keeps and the twin does not do (its barriers; c_vkfft's per-transfer staging buffer, command buffer, submission and wait)."
    echo
  done < "$tmp/rows"
  echo "Where the rest of the twin's gain goes (by object and function, per iteration, c_tensors at 2 and 16 MiB, c_vkfft per case) and the first iterations: warmup.md, \"Issue 26\"."
  echo
  echo "Plot: [real_libraries.svg](real_libraries.svg) (speedup against f_copy, echo and twin, with the Amdahl bound). The table and plot are carried into RESULTS.md by echo-bench."
} > bench/real-libraries.md
"$R/echo-bench-plot" bench/real-libraries.tsv bench/real_libraries.svg
"$R/echo-bench" --kept
cat bench/real-libraries.md
