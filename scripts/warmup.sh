#!/usr/bin/env bash
# Does enforce cost more in the first iterations than the zero-copy twin (issue 15, "the last
# 15 %")? Two measures that do not depend on how busy the machine is:
#  1. minor page faults of the process during each timed iteration (`echo-samples --per-iter`),
#     saxpy SIZE MiB x ITERS, no warm-up: baseline (staging, no layer), echo (enforce), twin;
#  2. instructions per iteration under callgrind (a dump before each `Stream::run`, one per saxpy
#     iteration), saxpy CG_SIZE MiB x CG_ITERS, the same three.
# usage: [WALL=ROUNDS] scripts/warmup.sh [SIZE=64] [ITERS=8] [CG_SIZE=4] [CG_ITERS=4]
# (release build in $CARGO_TARGET_DIR or target/; valgrind installed)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64}; ITERS=${2:-8}; CG_SIZE=${3:-4}; CG_ITERS=${4:-4}
R=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Echo as an implicit layer of this build, enabled per process.
mkdir -p "$tmp/data/vulkan/implicit_layer.d"
python3 - "$R/libVkLayer_echo.so" "$tmp/data/vulkan/implicit_layer.d/VkLayer_echo.json" <<'PY'
import json, sys
m = json.load(open("manifest/VkLayer_echo.json"))
m["layer"]["library_path"] = sys.argv[1]
json.dump(m, open(sys.argv[2], "w"))
PY
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
# 3. With WALL=N (rounds, on a quiet machine): wall clock, interleaved base/echo/twin, saxpy
#    SIZE MiB x ITERS with no warm-up and with --warmup 2; each configuration's fastest mean
#    iteration time (noise only adds time) and the least-disturbed recovered fraction.
if [ "${WALL:-0}" -gt 0 ]; then
  for w in 0 2; do
    A=(saxpy --size-mib "$SIZE" --iters "$ITERS" --warmup "$w")
    plan "${A[@]}"
    : > "$tmp/wall"
    for r in $(seq 1 "$WALL"); do
      for c in base echo twin; do
        set -- $(cfg $c); v=${*: -1}; envs=("${@:1:$#-1}")
        env "${envs[@]}" "$R/echo-samples" "${A[@]}" --variant "$v" 2>/dev/null |
          sed -n 's/.*"iter_ms_mean":\([0-9.]*\).*/'"$c"' \1/p' >> "$tmp/wall"
      done
    done
    python3 - "$tmp/wall" "$w" "$WALL" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
best = {c: min(float(v) for k, v in rows if k == c) for c in ("base", "echo", "twin")}
b, e, z = best["base"], best["echo"], best["twin"]
rec = (b - e) / (b - z) if b > z else float("nan")
print(f"wall clock, --warmup {sys.argv[2]}, fastest of {sys.argv[3]}: no layer {b:.1f} ms, echo {e:.1f} ms, "
      f"twin {z:.1f} ms; recovered (least disturbed) {rec*100:.1f} %")
PY
  done
fi
