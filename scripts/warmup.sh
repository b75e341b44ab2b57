#!/usr/bin/env bash
# Does enforce cost more in the first iterations than the zero-copy twin (issue 15, "the last
# 15 %")? Two measures that do not depend on how busy the machine is:
#  1. minor page faults of the process during each timed iteration (`echo-samples --per-iter`),
#     saxpy SIZE MiB x ITERS, no warm-up: baseline (staging, no layer), echo (enforce), twin;
#  2. instructions per iteration under callgrind (a dump before each `Stream::run`, one per saxpy
#     iteration), saxpy CG_SIZE MiB x CG_ITERS, the same three.
# usage: [WALL=ROUNDS] [ONLY_WALL=1] [SAMPLES_OUT=FILE] scripts/warmup.sh [SIZE=64] [ITERS=8] [CG_SIZE=4] [CG_ITERS=4]
# (release build in $CARGO_TARGET_DIR or target/; valgrind installed)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64}; ITERS=${2:-8}; CG_SIZE=${3:-4}; CG_ITERS=${4:-4}
R=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Echo as an implicit layer of this build, enabled per process.
scripts/layer-manifest.py "$R/libVkLayer_echo.so" "$tmp/data/vulkan/implicit_layer.d/VkLayer_echo.json"
export XDG_DATA_HOME=$tmp/data XDG_DATA_DIRS=${XDG_DATA_DIRS:-/usr/local/share:/usr/share}
plan() { # args... → $tmp/plan-<size>.json for exactly these arguments
  VK_ECHO_ENABLE=1 VK_ECHO_MODE=profile VK_ECHO_TRACE="$tmp/t.jsonl" "$R/echo-samples" "$@" --variant staging >/dev/null 2>&1
  "$R/vkecho" analyze "$tmp/t.jsonl" -o "$tmp/plan.json" >/dev/null 2>&1
}
cfg() { # base|echo|twin → environment and variant
  case $1 in
    base) echo "VK_ECHO_DISABLE=1 staging" ;;
    echo) echo "VK_ECHO_ENABLE=1 VK_ECHO_MODE=enforce VK_ECHO_PLAN=$tmp/plan.json staging" ;;
    twin) echo "VK_ECHO_DISABLE=1 zero-copy" ;;
  esac
}
if [ -z "${ONLY_WALL:-}" ]; then
A=(saxpy --size-mib "$SIZE" --iters "$ITERS" --per-iter)
plan "${A[@]}"
echo "## minor page faults per timed iteration: saxpy $SIZE MiB x $ITERS, no warm-up"
for c in base echo twin; do
  set -- $(cfg $c); v=${*: -1}; envs=("${@:1:$#-1}")
  env "${envs[@]}" "$R/echo-samples" "${A[@]}" --variant "$v" 2>/dev/null |
    python3 -c "import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[0]); print('$c', 'faults', j['iter_minflt'], 'ms', [round(x,1) for x in j['iter_ms']], 'checksum', j['checksum'])"
done
A=(saxpy --size-mib "$CG_SIZE" --iters "$CG_ITERS")
plan "${A[@]}"
echo "## instructions (callgrind): saxpy $CG_SIZE MiB x $CG_ITERS; [start .. first run], then [run k .. run k+1] (iteration k's submission, wait and readback, and the next iteration's fills), then the last run and teardown"
for c in base echo twin; do
  set -- $(cfg $c); v=${*: -1}; envs=("${@:1:$#-1}")
  env "${envs[@]}" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$c.%p" \
    --dump-before='echo_samples::vk::Stream::run*' "$R/echo-samples" "${A[@]}" --variant "$v" >/dev/null 2>&1
  python3 - "$c" "$tmp" <<'PY'
import glob, re, sys
c, tmp = sys.argv[1], sys.argv[2]
files = glob.glob(f"{tmp}/cg.{c}.*")
def part(f):
    m = re.search(r"\.(\d+)$", f[len(f"{tmp}/cg.{c}."):])
    return int(m.group(1)) if m and "." in f[len(f"{tmp}/cg.{c}."):] else 10**9
tot = []
for f in sorted(files, key=part):
    for line in open(f):
        if line.startswith(("totals:", "summary:")):
            tot.append(int(line.split()[1])); break
print(c, tot)
PY
done
fi
# 3. With WALL=N (rounds): wall clock and CPU time, base/echo/twin interleaved (the order
#    rotates each round), saxpy SIZE MiB x ITERS with no warm-up and with --warmup 2, every
#    process with --per-iter (its plan made for exactly those arguments). Per configuration:
#    the fastest per-process mean iteration time (least disturbed: noise only adds time), the
#    median and quartiles of per-process means, and the median per-iteration CPU time of the
#    whole process (every thread, kernel included; a busy machine stretches wall time far more
#    than CPU time). Echo vs twin: the median of the per-round ratios echo/twin and how often
#    echo's process was faster than the twin's over all pairs (0.5 when they are one
#    distribution). Recovered fraction (base - echo)/(base - twin) from each statistic, and per
#    round with a bootstrap interval.
#    ONLY_WALL=1 skips parts 1 and 2; SAMPLES_OUT=FILE keeps every process's row.
if [ "${WALL:-0}" -gt 0 ]; then
  for w in 0 2; do
    A=(saxpy --size-mib "$SIZE" --iters "$ITERS" --warmup "$w" --per-iter)
    plan "${A[@]}"
    : > "$tmp/wall"
    for r in $(seq 1 "$WALL"); do
      case $((r % 3)) in 1) order="base echo twin";; 2) order="echo twin base";; 0) order="twin base echo";; esac
      for c in $order; do
        set -- $(cfg $c); v=${*: -1}; envs=("${@:1:$#-1}")
        env "${envs[@]}" "$R/echo-samples" "${A[@]}" --variant "$v" 2>/dev/null | grep '^{' |
          python3 -c "
import json, sys
j = json.loads(sys.stdin.readline()); m = lambda k: sum(j[k]) / len(j[k])
print('$r $c', j['iter_ms_mean'], m('iter_cpu_ms'), m('iter_sys_ms'), m('iter_ivcsw'), m('iter_steal_ms'), j['checksum'], j['iter_minflt'][0], m('iter_vcsw'))" >> "$tmp/wall"
      done
    done
    [ -n "${SAMPLES_OUT:-}" ] && sed "s/^/warmup=$w /" "$tmp/wall" >> "$SAMPLES_OUT"
    python3 - "$tmp/wall" "$w" "$WALL" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
cs = ("base", "echo", "twin")
col = lambda c, i: [float(r[i]) for r in rows if r[1] == c]
assert len({r[7] for r in rows}) == 1, "checksums differ"
def q(v):
    v = sorted(v); n = len(v)
    return st.median(v), v[(n - 1) // 4], v[(3 * (n - 1)) // 4]
rec = lambda b, e, z: (b - e) / (b - z) * 100 if b > z else float("nan")
wall = {c: col(c, 2) for c in cs}; cpu = {c: col(c, 3) for c in cs}
best = {c: min(wall[c]) for c in cs}; med = {c: st.median(wall[c]) for c in cs}
cmed = {c: st.median(cpu[c]) for c in cs}
print(f"## --warmup {sys.argv[2]}, {sys.argv[3]} rounds (load average at the end {sys.argv[4]})")
for c in cs:
    m, lo, hi = q(wall[c])
    print(f"  {c}: wall per iteration fastest {best[c]:.1f} ms, median {m:.1f} (IQR {lo:.1f}-{hi:.1f}); "
          f"CPU per iteration median {cmed[c]:.1f} ms (kernel {st.median(col(c, 4)):.1f}), "
          f"voluntary / involuntary switches {st.median(col(c, 9)):.1f} / {st.median(col(c, 5)):.1f}, steal {st.median(col(c, 6)):.1f} ms; "
          f"faults in iteration 0 {st.median(col(c, 8)):.0f}")
byr = {}
for r in rows: byr.setdefault(r[0], {})[r[1]] = float(r[2])
ratios = [d["echo"] / d["twin"] for d in byr.values() if "echo" in d and "twin" in d]
m, lo, hi = q(ratios)
faster = sum(e < z for e in wall["echo"] for z in wall["twin"]) / (len(wall["echo"]) * len(wall["twin"]))
print(f"  echo/twin per round: median {m:.3f} (IQR {lo:.3f}-{hi:.3f}); echo faster than twin in {faster*100:.0f} % of all pairs")
# Per round (its three processes ran back to back, under the same conditions): the gap
# (echo - twin)/base and the saving (base - twin)/base; recovered = 1 - median gap / median
# saving, with a bootstrap 90 % interval over rounds (how far the machine's noise lets it move).
import random
full = [d for d in byr.values() if len(d) == 3]
def rec_rounds(s):
    g = st.median((d["echo"] - d["twin"]) / d["base"] for d in s)
    v = st.median((d["base"] - d["twin"]) / d["base"] for d in s)
    return (1 - g / v) * 100 if v > 0 else float("nan")
rnd = random.Random(1)
bs = [rec_rounds([rnd.choice(full) for _ in full]) for _ in range(2000)]
bs = sorted(x for x in bs if x == x)  # NaN (a resample with no saving) out before sorting
print(f"  recovered per round (1 - median (echo - twin)/base / median (base - twin)/base): "
      f"{rec_rounds(full):.1f} %, bootstrap 90 % interval {bs[len(bs) // 20]:.0f}-{bs[len(bs) * 19 // 20]:.0f} %")
print(f"  recovered: least disturbed (fastest) {rec(best['base'], best['echo'], best['twin']):.1f} %, "
      f"medians {rec(med['base'], med['echo'], med['twin']):.1f} %, "
      f"CPU time medians {rec(cmed['base'], cmed['echo'], cmed['twin']):.1f} %")
PY
  done
fi
