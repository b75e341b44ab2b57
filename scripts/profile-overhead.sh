#!/usr/bin/env bash
# Profiling overhead per iteration (issue 4): no layer (A) vs profile with validation off (B,
# trace only) vs profile with validation (C), interleaved A B C / B C A / C A B over several
# processes; prints the median of per-process mean iteration times and the ratios B/A, C/A.
# usage: scripts/profile-overhead.sh [ROUNDS] (release build in $CARGO_TARGET_DIR or target/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
R=${CARGO_TARGET_DIR:-target}/release
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() { # cfg sample args...
  local cfg=$1; shift
  case $cfg in
    A) VK_ECHO_DISABLE=1 "$R/echo-samples" "$@" ;;
    B) "$R/vkecho" profile --no-validate --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
    C) "$R/vkecho" profile --trace "$tmp/t.jsonl" -- "$R/echo-samples" "$@" 2>/dev/null ;;
  esac | grep '^{' | sed 's/.*"iter_ms_mean":\([0-9.]*\).*/\1/'
}
for spec in "saxpy --size-mib 16 --iters 20" "pipeline --size-mib 4 --iters 10"; do
  name=${spec%% *}
  for r in $(seq 1 "$ROUNDS"); do
    case $((r % 3)) in 1) order="A B C";; 2) order="B C A";; 0) order="C A B";; esac
    for c in $order; do echo "$c $(run $c $spec --variant staging)" >> "$tmp/$name"; done
  done
  python3 - "$tmp/$name" "$name" "$spec" <<'PY'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1])]
m={c: st.median(float(v) for k,v in rows if k==c) for c in "ABC"}
n=len(rows)//3
print(f"{sys.argv[2]} ({sys.argv[3]}, {n} processes each): median of per-process mean iteration "
      f"no layer {m['A']:.2f} ms, trace only {m['B']:.2f} ms ({m['B']/m['A']:.3f}x), "
      f"trace+validation {m['C']:.2f} ms ({m['C']/m['A']:.3f}x)")
PY
done
