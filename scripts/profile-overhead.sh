#!/usr/bin/env bash
# Profiling overhead per iteration (issues 4, 15, 22): no layer (A) vs profile with validation
# off (B, trace only) vs profile validating every window (C, the default since issue 22) vs
# profile with sampled validation (D, validate_sample_every=8: every window for a buffer's first
# validate_full_windows windows, then one in 8; an option that can only refuse), interleaved;
# prints the median of per-process mean iteration times and the ratios to A. First, the guard's
# own counts per iteration for C and D (deterministic: mprotect calls and faults, from the
# layer's closing log line), which do not depend on how busy the machine is.
# usage: [SPECS_ONLY=saxpy] [NO_COUNTS=1] [SAMPLES_OUT=FILE] scripts/profile-overhead.sh [ROUNDS]
# (release build in $CARGO_TARGET_DIR or target/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
R=${CARGO_TARGET_DIR:-target}/release
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
SPECS=("saxpy --size-mib 16 --iters 20" "pipeline --size-mib 4 --iters 10")
[ "${SPECS_ONLY:-}" = saxpy ] && SPECS=("saxpy --size-mib 16 --iters 20")
run() { # cfg sample args...
  local cfg=$1; shift
  case $cfg in
    A) VK_ECHO_DISABLE=1 "$R/echo-samples" "$@" 2>/dev/null ;;
    B) "$R/vkecho" profile --no-validate --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
    C) "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
    D) VK_ECHO_VALIDATE_SAMPLE_EVERY=8 "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
  esac | grep '^{' | python3 -c "
import json, sys
j = json.loads(sys.stdin.readline())
print(j['iter_ms_mean'], sum(j['iter_cpu_ms']) / len(j['iter_cpu_ms']))"

}
for spec in "${SPECS[@]}"; do
  [ -n "${NO_COUNTS:-}" ] && break
  iters=${spec##* }
  for c in C D; do
    every=""; [ "$c" = D ] && every=8
    line=$(env ${every:+VK_ECHO_VALIDATE_SAMPLE_EVERY=$every} VK_ECHO_LOG=info \
      "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" $spec --variant staging 2>&1 >/dev/null |
      grep 'host-access validation:' || true)
    python3 - "$line" "$c" "$spec" "$iters" <<'PY'
import re, sys
line, c, spec, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
g = lambda pat: int(re.search(pat, line).group(1)) if re.search(pat, line) else -1
f, mp, sk, un = g(r"(\d+) faults"), g(r"(\d+) mprotect calls"), g(r"(\d+) re-arms skipped"), g(r"(\d+) windows unwatched")
what = "every window (default)" if c == "C" else "sampled (1 in 8)"
print(f"{spec.split()[0]} ({spec}), {what}: {mp} mprotect calls ({mp/iters:.2f}/iteration), "
      f"{f} faults ({f/iters:.2f}/iteration), {sk} re-arms skipped, {un} buffer-windows unwatched")
PY
  done
done
# Wall clock and CPU time: each round runs A B C D once, in an order that rotates; per round the
# ratios C/A (the issue's goal: sampled validation <= 1.05x no layer), B/A and C/B (validation's
# own cost over trace only) of the processes' mean iteration times. Reported: the median of the
# per-round ratios and their interquartile range, the ratio of each configuration's fastest
# process (least disturbed: noise only adds time), and the ratio of median per-iteration CPU
# time of the whole process (every thread, kernel included; less sensitive to a busy machine).
for spec in "${SPECS[@]}"; do
  name=${spec%% *}
  : > "$tmp/$name"
  for r in $(seq 1 "$ROUNDS"); do
    case $((r % 4)) in 1) order="A B C D";; 2) order="B C D A";; 3) order="C D A B";; 0) order="D A B C";; esac
    for c in $order; do echo "$r $c $(run $c $spec --variant staging --per-iter)" >> "$tmp/$name"; done
  done
  [ -n "${SAMPLES_OUT:-}" ] && sed "s/^/$name /" "$tmp/$name" >> "$SAMPLES_OUT"
  python3 - "$tmp/$name" "$name" "$spec" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 4]
by = {}
for r, c, ms, cpu in rows: by.setdefault(r, {})[c] = (float(ms), float(cpu))
def q(v):
    v = sorted(v); n = len(v)
    return f"{st.median(v):.3f}x (IQR {v[(n - 1) // 4]:.3f}-{v[(3 * (n - 1)) // 4]:.3f})"
full = [d for d in by.values() if len(d) == 4]
ratio = lambda a, b: [d[a][0] / d[b][0] for d in full]
best = {c: min(d[c][0] for d in full) for c in "ABCD"}
cpu = {c: st.median(d[c][1] for d in full) for c in "ABCD"}
wall = {c: st.median(d[c][0] for d in full) for c in "ABCD"}
print(f"{sys.argv[2]} ({sys.argv[3]}), {len(full)} rounds, load average at the end {sys.argv[4]}:")
print(f"  median per-process mean iteration: no layer {wall['A']:.2f} ms, trace only {wall['B']:.2f}, "
      f"every window (default) {wall['C']:.2f}, sampled 1 in 8 {wall['D']:.2f}")
print(f"  per-round ratios, median (IQR): every window / no layer {q(ratio('C', 'A'))}; "
      f"trace only / no layer {q(ratio('B', 'A'))}; every window / trace only {q(ratio('C', 'B'))}; "
      f"sampled / no layer {q(ratio('D', 'A'))}")
print(f"  least disturbed (fastest of each): no layer {best['A']:.2f} ms, every window / no layer "
      f"{best['C'] / best['A']:.3f}x, trace only / no layer {best['B'] / best['A']:.3f}x, "
      f"every window / trace only {best['C'] / best['B']:.3f}x, sampled / no layer {best['D'] / best['A']:.3f}x")
print(f"  CPU time per iteration (all threads), medians: no layer {cpu['A']:.2f} ms, every window / "
      f"no layer {cpu['C'] / cpu['A']:.3f}x, trace only / no layer {cpu['B'] / cpu['A']:.3f}x, "
      f"sampled / no layer {cpu['D'] / cpu['A']:.3f}x")
PY
done
