#!/usr/bin/env bash
# Profiling with every window watched (the default) against no layer, per iteration, on every
# positive sample of echo-samples and on the real-library programs tests/c/c_tensors and
# tests/c/c_vkfft (issue 35: <= 1.10x no layer on each). scripts/profile-overhead.sh measures
# saxpy and pipeline in more configurations; this one covers the whole positive corpus in two.
#
#   scripts/profile-overhead-all.sh [ROUNDS=5]      prints a markdown table on stdout
#
# Per program:
#   - counted (deterministic: the layer's closing log line at VK_ECHO_LOG=info, the same whatever
#     the machine does): mprotect calls and faults of host-access validation per iteration; and
#     timed from the same line, the time those mprotect calls and the page-table moves of
#     parking (layer/src/profile/watch/park.rs) took, per iteration;
#   - timed: ROUNDS rounds, each running the program once with no layer (A, VK_ECHO_DISABLE=1)
#     and once profiling (C, `vkecho profile`, every window watched), the order alternating; per
#     round the ratio C/A of the time per iteration (samples: their iter_ms_mean; the C programs:
#     their loop_ms, the wall time of the iterations). Reported: the median ratio with its range,
#     and the ratio of the fastest process of each (noise only adds time). For the samples also
#     the ratio of median CPU time per iteration, all threads and the kernel included (the
#     page-protection cycle is kernel time: callgrind, which counts user-space instructions, does
#     not see it, so instructions cannot settle this figure).
#   - every profiled run's output is compared with the no-layer run's: a difference fails.
# Sizes: the samples at 16 MiB (sgemm and pipeline 1 MiB, conv2d 4 MiB, as echo-bench --quick
# caps them) x 10 iterations; c_tensors 3 tensors x 16 MiB x 10; c_vkfft its large FFTs
# (1D 4096x512, 2D 1024², 2D 2048²) x 3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
scripts/deps.sh >&2
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cargo build --release -p vk-layer-echo -p echo-cli -p echo-samples >&2
cargo build -p echo-tests >&2 # its build script compiles tests/c (the C programs are not Rust)
R=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
C=$(ls -td "${CARGO_TARGET_DIR:-target}"/debug/build/echo-tests-*/out | while read -r d; do
      [ -x "$d/c_vkfft" ] && [ -x "$d/c_tensors" ] && { (cd "$d" && pwd); break; }; done)
[ -n "$C" ] || { echo "profile-overhead-all.sh: c_vkfft/c_tensors not built (scripts/deps.sh)" >&2; exit 1; }
export ECHO_C_SPV=$C/c_double.spv
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg); t0=$(date -u '+%Y-%m-%d %H:%M UTC')

# kind | name | program and arguments | iterations
PROGS=()
for s in $("$R/echo-samples" list | awk '$2 == "positive:" {print $1}'); do
  case $s in sgemm | pipeline) m=1 ;; conv2d) m=4 ;; *) m=16 ;; esac
  PROGS+=("sample|$s $m MiB|$R/echo-samples $s --size-mib $m --iters 10 --variant staging --per-iter|10")
done
PROGS+=("c|c_tensors 3x16 MiB|$C/c_tensors staging 10 16|10")
PROGS+=("c|c_vkfft large|$C/c_vkfft staging 3 large|3")

run() { # cfg kind cmd... -> "ms cpu" (cpu "-" for the C programs); the output to $tmp/out.cfg
  local cfg=$1 kind=$2; shift 2
  case $cfg in
    A) VK_ECHO_DISABLE=1 "$@" >"$tmp/out.$cfg" 2>"$tmp/err" ;;
    C) "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$@" >"$tmp/out.$cfg" 2>"$tmp/err" ;;
  esac
  if [ "$kind" = sample ]; then
    grep '^{' "$tmp/out.$cfg" | python3 -c "
import json, sys
j = json.loads(sys.stdin.readline())
print(j['iter_ms_mean'], sum(j['iter_cpu_ms']) / len(j['iter_cpu_ms']))"
  else
    echo "$(sed -n 's/^loop_ms //p' "$tmp/err") -"
  fi
}
# What must be equal between the two runs: the checksum lines (the samples' JSON line also
# holds their timings).
same() {
  if [ "$1" = sample ]; then
    grep '^{' "$tmp/out.$2" | python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['checksum'])"
  else
    cat "$tmp/out.$2"
  fi
}

echo "| program | mprotect / iteration | faults / iteration | mprotect + page-table moves, ms / iteration | every window / no layer, per-round median [min–max] | fastest / fastest | CPU time / iteration |"
echo "|---|---|---|---|---|---|---|"
for spec in "${PROGS[@]}"; do
  IFS='|' read -r kind name cmd iters <<<"$spec"
  # shellcheck disable=SC2086
  line=$(VK_ECHO_LOG=info "$R/vkecho" profile --trace "$tmp/t.jsonl" -- $cmd 2>&1 >/dev/null |
    grep 'host-access validation:' || true)
  : > "$tmp/rows"
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="A C"; else order="C A"; fi
    for c in $order; do
      # shellcheck disable=SC2086
      echo "$r $c $(run $c $kind $cmd)" >> "$tmp/rows"
    done
    [ "$(same "$kind" A)" = "$(same "$kind" C)" ] ||
      { echo "profile-overhead-all.sh: $name: the profiled output differs from no layer's" >&2; exit 1; }
  done
  python3 - "$tmp/rows" "$name" "$line" "$iters" <<'PY'
import re, statistics as st, sys
rows, name, line, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
by = {}
for l in open(rows):
    r, c, ms, cpu = l.split()
    by.setdefault(r, {})[c] = (float(ms), None if cpu == "-" else float(cpu))
full = [d for d in by.values() if len(d) == 2]
ratios = sorted(d["C"][0] / d["A"][0] for d in full)
fast = min(d["C"][0] for d in full) / min(d["A"][0] for d in full)
g = lambda pat: int(re.search(pat, line).group(1)) if re.search(pat, line) else None
mp, f = g(r"(\d+) mprotect calls"), g(r"(\d+) faults")
cnt = lambda v: "-" if v is None else f"{v / iters:.2f}"
ms = [float(x) for x in re.findall(r"mprotect calls \(([\d.]+) ms\)", line) + re.findall(r"moves ([\d.]+) ms", line)]
prot = f"{sum(ms) / iters:.3f}" if ms else "-"
cpu = "-"
if all(d["A"][1] is not None for d in full):
    cpu = f"{st.median(d['C'][1] for d in full) / st.median(d['A'][1] for d in full):.3f}x"
print(f"| {name} | {cnt(mp)} | {cnt(f)} | {prot} | {st.median(ratios):.3f}x [{ratios[0]:.3f}–{ratios[-1]:.3f}] "
      f"| {fast:.3f}x | {cpu} |")
PY
done
echo
echo "Written by \`scripts/profile-overhead-all.sh $ROUNDS\` ($t0, commit $(git rev-parse --short HEAD); load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
