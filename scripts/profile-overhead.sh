#!/usr/bin/env bash
# Profiling overhead per iteration (issues 4, 15): no layer (A) vs profile with validation off
# (B, trace only) vs profile with sampled validation (C, the default: every window for a
# buffer's first validate_full_windows windows, then one in validate_sample_every) vs profile
# validating every window (D, validate_sample_every=1), interleaved over several processes;
# prints the median of per-process mean iteration times and the ratios to A. First, the guard's
# own counts per iteration for C and D (deterministic: mprotect calls and faults, from the
# layer's closing log line), which do not depend on how busy the machine is.
# usage: scripts/profile-overhead.sh [ROUNDS] (release build in $CARGO_TARGET_DIR or target/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
R=${CARGO_TARGET_DIR:-target}/release
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
SPECS=("saxpy --size-mib 16 --iters 20" "pipeline --size-mib 4 --iters 10")
run() { # cfg sample args...
  local cfg=$1; shift
  case $cfg in
    A) VK_ECHO_DISABLE=1 "$R/echo-samples" "$@" ;;
    B) "$R/vkecho" profile --no-validate --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
    C) "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
    D) VK_ECHO_VALIDATE_SAMPLE_EVERY=1 "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
  esac | grep '^{' | sed 's/.*"iter_ms_mean":\([0-9.]*\).*/\1/'
}
for spec in "${SPECS[@]}"; do
  iters=${spec##* }
  for c in C D; do
    every=""; [ "$c" = D ] && every=1
    line=$(env ${every:+VK_ECHO_VALIDATE_SAMPLE_EVERY=$every} VK_ECHO_LOG=info \
      "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" $spec --variant staging 2>&1 >/dev/null |
      grep 'host-access validation:' || true)
    python3 - "$line" "$c" "$spec" "$iters" <<'PY'
import re, sys
line, c, spec, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
g = lambda pat: int(re.search(pat, line).group(1)) if re.search(pat, line) else -1
f, mp, sk, un = g(r"(\d+) faults"), g(r"(\d+) mprotect calls"), g(r"(\d+) re-arms skipped"), g(r"(\d+) windows unwatched")
what = "sampled validation" if c == "C" else "every window"
print(f"{spec.split()[0]} ({spec}), {what}: {mp} mprotect calls ({mp/iters:.2f}/iteration), "
      f"{f} faults ({f/iters:.2f}/iteration), {sk} re-arms skipped, {un} buffer-windows unwatched")
PY
  done
done
for spec in "${SPECS[@]}"; do
  name=${spec%% *}
  for r in $(seq 1 "$ROUNDS"); do
    case $((r % 4)) in 1) order="A B C D";; 2) order="B C D A";; 3) order="C D A B";; 0) order="D A B C";; esac
    for c in $order; do echo "$c $(run $c $spec --variant staging)" >> "$tmp/$name"; done
  done
  python3 - "$tmp/$name" "$name" "$spec" <<'PY'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1])]
m={c: st.median(float(v) for k,v in rows if k==c) for c in "ABCD"}
n=len(rows)//4
print(f"{sys.argv[2]} ({sys.argv[3]}, {n} processes each): median of per-process mean iteration "
      f"no layer {m['A']:.2f} ms, trace only {m['B']:.2f} ms ({m['B']/m['A']:.3f}x), "
      f"sampled validation {m['C']:.2f} ms ({m['C']/m['A']:.3f}x), "
      f"every window {m['D']:.2f} ms ({m['D']/m['A']:.3f}x)")
PY
done
