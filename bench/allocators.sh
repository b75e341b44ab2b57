#!/usr/bin/env bash
# Issue 12: allocator-managed memory on lavapipe's own table. For c_suballoc (one mapped block,
# C), echo-gpu-allocator (ash + gpu-allocator) and echo-vma (ash + VMA via vk-mem): no layer,
# echo enforce with the plan of a profile run, and (c_suballoc, echo-vma) the zero-copy twin;
# time per iteration from the difference of a long and a short run (start-up cancels), fastest of
# ROUNDS interleaved rounds (noise on a busy machine only adds time), checksums compared. Usage: bench/allocators.sh [ROUNDS] [SHORT] [LONG]
# after `cargo build -p vk-layer-echo -p echo-analyzer -p echo-gpu-allocator -p echo-vma` and
# `cargo test -p echo-tests --no-run` (the C programs come from the tests' build dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5} short=${2:-10} long=${3:-60}
t=$root/target/debug
c=$(ls -t "$t"/build/echo-tests-*/out/c_suballoc | head -1)
spv=$(dirname "$c")/c_double.spv
ga=$t/echo-gpu-allocator
vma=$t/echo-vma
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/data/vulkan/implicit_layer.d"
python3 - "$root" "$work" <<'PY'
import json, sys
root, work = sys.argv[1:]
m = json.load(open(f"{root}/manifest/VkLayer_echo.json"))
m["layer"]["library_path"] = f"{root}/target/debug/libVkLayer_echo.so"
json.dump(m, open(f"{work}/data/vulkan/implicit_layer.d/VkLayer_echo.json", "w"))
PY
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
dirs="$work/data:/usr/local/share:/usr/share"
echo_env() { env XDG_DATA_DIRS="$dirs" VK_ECHO_ENABLE=1 "$@"; }
secs() { local s e; s=$(date +%s.%N); "$@" > "$work/out" 2>/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
per_iter() { # CMD... with ITERS (and PLAN, the plan made for that count) replaced: ms/iteration
  local a b l=("${@/ITERS/$long}") s=("${@/ITERS/$short}")
  a=$(secs "${l[@]/PLAN/$work/$name.$long.plan.json}")
  b=$(secs "${s[@]/PLAN/$work/$name.$short.plan.json}")
  echo "($a - $b) * 1000 / ($long - $short)" | bc -l
}
min() { printf '%s\n' "$@" | sort -g | head -1; }
row() { # name, plan-making command prefix, program args (with ITERS)...
  local name=$1; shift
  local prog=$1; shift
  local plan=$work/$name.$short.plan.json stats=$work/$name.stats.jsonl n
  # A plan applies to the argument list it was made with: one per iteration count.
  for n in "$short" "$long"; do
    echo_env VK_ECHO_MODE=profile VK_ECHO_TRACE="$work/$name.$n.jsonl" "$prog" "${@/ITERS/$n}" >/dev/null
    "$t/vkecho" analyze "$work/$name.$n.jsonl" -o "$work/$name.$n.plan.json" > "$work/$name.$n.report" 2>&1
  done
  local base=() ech=() zero=()
  for _ in $(seq "$rounds"); do
    base+=("$(per_iter "$prog" "$@")")
    ech+=("$(per_iter echo_env VK_ECHO_MODE=enforce VK_ECHO_PLAN=PLAN "$prog" "$@")")
    if [ "$prog" = "$c" ] || [ "$prog" = "$vma" ]; then zero+=("$(per_iter "$prog" zero "${@:2}")"); fi
  done
  local b e z=""; b=$(min "${base[@]}"); e=$(min "${ech[@]}")
  if [ ${#zero[@]} -gt 0 ]; then z=$(min "${zero[@]}"); fi
  local cb ce cz=""
  cb=$("$prog" "${@/ITERS/$short}" | tail -1)
  ce=$(echo_env VK_ECHO_MODE=enforce VK_ECHO_PLAN="$plan" VK_ECHO_STATS="$stats" "$prog" "${@/ITERS/$short}" | tail -1)
  if [ -n "$z" ]; then cz=$("$prog" zero "$short" "${@:3}" | tail -1); fi
  local elided groups
  elided=$(python3 -c "import json;s=[json.loads(l) for l in open('$stats')];print(sum(x['bytes_elided'] for x in s)//$short)")
  groups=$(python3 -c "import json;s=[json.loads(l) for l in open('$stats')];print(sum(x['groups_applied'] for x in s),'/',sum(x['groups_planned'] for x in s))")
  local same=no; [ "$cb" = "$ce" ] && same=yes
  if [ -n "$cz" ] && [ "$cz" != "$cb" ]; then same="$same (zero-copy twin differs!)"; fi
  printf '| %s | %s | %s MiB | %.2f | %.2f | %s | %.2fx | %s | %s |\n' "$name" "$groups" \
    "$((elided >> 20))" "$b" "$e" "${z:+$(printf '%.2f' "$z")}" "$(echo "$b / $e" | bc -l)" \
    "${z:+$(printf '%.2fx' "$(echo "$b / $z" | bc -l)")}" "$same"
}
name=""
echo "| program | groups applied | bytes elided per iteration | ms/iter no layer | ms/iter echo | ms/iter zero-copy twin | speedup | zero-copy bound | identical |"
echo "|---|---|---|---|---|---|---|---|---|"
row c_suballoc "$c" loop ITERS "$spv"
row echo-gpu-allocator "$ga" loop ITERS "$spv"
row echo-vma "$vma" loop ITERS "$spv"
