#!/usr/bin/env bash
# The recovered fraction by instructions for every positive sample of echo-samples (issue 26):
# base (staging, no layer), echo (enforce, a plan made for exactly these arguments) and the
# zero-copy twin, each under callgrind with one dump per iteration (--dump-before=iteration_mark,
# samples/src/harness.rs), every thread (LP_NUM_THREADS=0, --fair-sched=yes); the steady
# iterations (not the first, not the last) without glibc's heap allocator, whose cost follows
# the heap's layout (scripts/cg-steady.py). recovered = (base - echo) / (base - twin), with the
# method's resolution (half the range of the steady iterations of base and echo, in points),
# and echo's own instructions (its library and libgcc_s's unwinder).
#
#   scripts/samples-cg.sh [MIB=4] [ITERS=4]     writes bench/instructions-samples.md
#
# Compute-heavy samples run smaller, as echo-bench --quick caps them (sgemm and pipeline 1 MiB,
# conv2d 4 MiB). Every output is compared with the no-layer run's.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-4}; ITERS=${2:-4}
scripts/deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cargo build --release -p vk-layer-echo -p echo-cli -p echo-samples -p echo-bench
R=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data/vulkan/implicit_layer.d"
python3 - "$R/libVkLayer_echo.so" "$tmp/data/vulkan/implicit_layer.d/VkLayer_echo.json" <<'PY'
import json, sys
m = json.load(open("manifest/VkLayer_echo.json"))
m["layer"]["library_path"] = sys.argv[1]
json.dump(m, open(sys.argv[2], "w"))
PY
export XDG_DATA_HOME=$tmp/data XDG_DATA_DIRS=${XDG_DATA_DIRS:-/usr/local/share:/usr/share}
export LP_NUM_THREADS=0
load0=$(cut -d' ' -f1-3 /proc/loadavg); t0=$(date -u '+%Y-%m-%d %H:%M UTC')
: > "$tmp/rows"
for s in $("$R/echo-samples" list | awk '$2 == "positive:" {print $1}'); do
  case $s in sgemm | pipeline) m=$(python3 -c "print(min($MIB, 1))") ;; conv2d) m=$(python3 -c "print(min($MIB, 4))") ;; *) m=$MIB ;; esac
  a=("$s" --size-mib "$m" --iters "$ITERS")
  # The plan is bound to the arguments: profile with exactly those of the enforce run, and
  # under valgrind too: the outermost frames of a thread's stack are valgrind's there, so the
  # call sites of buffers created on the threads sample's threads differ from a native run's
  # (a native plan applies 0 of its 8 groups under valgrind: echo fails closed).
  VK_ECHO_ENABLE=1 VK_ECHO_MODE=profile VK_ECHO_TRACE="$tmp/t.jsonl" valgrind --tool=none \
    --fair-sched=yes "$R/echo-samples" "${a[@]}" --variant staging >/dev/null 2>&1
  "$R/vkecho" analyze "$tmp/t.jsonl" -o "$tmp/plan.json" >/dev/null 2>&1
  : > "$tmp/cg"
  for c in base echo twin; do
    # The same variables in all three (getenv's cost follows the environment's length).
    case $c in
      base) e=(VK_ECHO_DISABLE=1); v=staging ;;
      echo) e=(VK_ECHO_ENABLE=1 VK_ECHO_STATS="$tmp/stats.jsonl"); v=staging ;;
      twin) e=(VK_ECHO_DISABLE=1); v=zero-copy ;;
    esac
    rm -f "$tmp"/cg.out* "$tmp/stats.jsonl"
    env "${e[@]}" VK_ECHO_MODE=enforce VK_ECHO_PLAN="$tmp/plan.json" valgrind --tool=callgrind \
      --fair-sched=yes --dump-before=iteration_mark --callgrind-out-file="$tmp/cg.out" \
      "$R/echo-samples" "${a[@]}" --variant "$v" > "$tmp/out.$c" 2>/dev/null
    python3 - "$tmp/out.$c" "$tmp/out.base" "$s $c" <<'PY'
import json, sys
sum_ = lambda p: json.loads(open(p).read().strip().splitlines()[-1])["checksum"]
if sum_(sys.argv[1]) != sum_(sys.argv[2]):
    sys.exit(f"samples-cg.sh: {sys.argv[3]}: the checksum differs from the no-layer run's")
PY
    echo "$c $(scripts/cg-steady.py "$tmp/cg.out" "$ITERS" 1 libVkLayer_echo.so libgcc_s.so.1)" >> "$tmp/cg"
    if [ "$c" = echo ]; then
      # A count from a run whose plan was not applied measures the passthrough: refuse it.
      groups=$(python3 - "$tmp/stats.jsonl" "$s" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
a, p = sum(x.get("groups_applied", 0) for x in s), sum(x.get("groups_planned", 0) for x in s)
if a == 0 or a != p:
    sys.exit(f"samples-cg.sh: {sys.argv[2]}: {a} of {p} planned groups applied")
print(a, "of", p)
PY
)
    fi
    echo "samples-cg.sh: $s $c" >&2
  done
  python3 - "$tmp/cg" "$s" "$m" "$groups" >> "$tmp/rows" <<'PY'
import sys
per, spread, own = {}, {}, {}
for l in open(sys.argv[1]):
    c, v, sp, alloc, *objs = l.split()
    per[c], spread[c] = int(v), int(sp)
    own[c] = sum(int(o.split("=")[1]) for o in objs)
b, e, z = per["base"], per["echo"], per["twin"]
gain = b - z
rec = f"{(b - e) / gain * 100:.2f} %" if gain > 0 else "n/a (no gain)"
res = (spread["base"] + spread["echo"]) / gain * 100 if gain > 0 else float("nan")
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {b:,} | {e:,} | {z:,} | {gain:,} | {e - z:,} | {own['echo'] - own['base']:,} | {rec} | ± {res:.2f} |")
PY
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
dirty=$(git diff --quiet || echo ', with uncommitted changes')
{
  echo "## Recovered fraction by instructions, every positive sample"
  echo
  echo "Written by \`scripts/samples-cg.sh $MIB $ITERS\` ($t0, commit $(git rev-parse --short HEAD)$dirty; load average $load0 at the start, $load1 at the end: it changes no count). echo-samples, $ITERS iterations, one callgrind dump per iteration, every thread (\`LP_NUM_THREADS=0\`), one steady iteration without glibc's heap allocator (scripts/cg-steady.py); compute-heavy samples smaller (sgemm, pipeline ≤ 1 MiB, conv2d ≤ 4 MiB). Instructions count work, not time (a memcpy moves about 8 bytes an instruction, however long the bytes take): bench/agreement.md compares the two. Every output identical to the no-layer run's."
  echo
  echo "| sample | MiB | groups applied | base | echo | twin | base − twin | echo − twin | echo's own code | recovered | resolution (points) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$tmp/rows"
  echo
  echo "echo − twin: what echo's run does that the twin's does not, per iteration; echo's own code is the part of it inside libVkLayer_echo.so and libgcc_s (libgcc's unwinder: echo's fallback for call-site identities); the rest is the program's own work that echo keeps and the twin does not do (its barriers around the copies, its submissions, from which a command buffer that held only dropped copies is left out) and echo's substitute barriers."
} > bench/instructions-samples.md
"$R/echo-bench" --kept
cat bench/instructions-samples.md
