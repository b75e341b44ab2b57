#!/usr/bin/env bash
# Issue 12: allocator-managed memory on lavapipe's own table. For each program below: no layer,
# echo enforce with the plan of a profile run, and the program's zero-copy twin (where it has
# one); time per iteration from the difference of a long and a short run (start-up cancels),
# ROUNDS interleaved rounds; the fastest round (noise on a busy machine only adds time) and the
# median, with the spread; checksums compared. Wall clock, and the CPU time (user + system) of
# the process: lavapipe's "GPU" is threads of the process, so the CPU time counts the work done
# (copies included) and not the time spent waiting for a core other processes hold.
# Usage: bench/allocators.sh [ROUNDS] [SHORT] [LONG] [MIB]  (MIB per buffer: $ECHO_SIZE_MIB)
#
# Release builds: run `cargo build --release -p vk-layer-echo -p echo-cli -p echo-gpu-allocator
# -p echo-vma -p echo-wgpu-app` first (the layer, vkecho and the Rust programs come from target/release). The C
# programs are compiled here from tests/c with tests/build.rs's flags (-O1, -lvulkan), and the
# shader with glslangValidator, so no test build is needed.
#
# Another program: add a `row` line at the bottom (name, twin mode or -, program, arguments with
# ITERS where the iteration count goes; the twin runs the program with its first argument
# replaced by the twin mode, or, for a twin mode starting with `+`, with that flag added:
# `+--zero`). A program printing a JSON line with a "checksum" field is compared on that field.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-7} short=${2:-3} long=${3:-33} mib=${4:-15}
export ECHO_SIZE_MIB=$mib
t=$root/target/release
for f in libVkLayer_echo.so vkecho echo-gpu-allocator echo-vma echo-wgpu-app; do
  [ -x "$t/$f" ] || [ -f "$t/$f" ] || { echo "missing $t/$f: cargo build --release first" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -Wall -Werror -std=c11 -o "$work/c_suballoc" "$root/tests/c/c_suballoc.c" -lvulkan
glslangValidator -V --target-env vulkan1.0 -o "$work/c_double.spv" \
  "$root/tests/shaders/c_double.comp" > /dev/null
spv=$work/c_double.spv
"$root/scripts/layer-manifest.py" "$t/libVkLayer_echo.so" "$work/data/vulkan/implicit_layer.d/VkLayer_echo.json"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
dirs="$work/data:/usr/local/share:/usr/share"
echo_env() { env XDG_DATA_DIRS="$dirs" VK_ECHO_ENABLE=1 "$@"; }
secs() { # CMD...: "wall cpu" seconds (bash's `time`: milliseconds, children's user + system)
  local TIMEFORMAT='%3R %3U %3S'
  { time "$@" > "$work/out" 2>/dev/null; } 2> "$work/time"
  awk '{print $1, $2 + $3}' "$work/time"
}
per_iter() { # CMD... with ITERS (and PLAN, the plan made for that count) replaced: "wall cpu" ms/iteration
  local a b l=("${@/ITERS/$long}") s=("${@/ITERS/$short}")
  a=$(secs "${l[@]/PLAN/$work/$name.$long.plan.json}")
  b=$(secs "${s[@]/PLAN/$work/$name.$short.plan.json}")
  echo "$a $b" | awk -v n=$((long - short)) '{printf "%.4f %.4f\n", ($1 - $3) * 1000 / n, ($2 - $4) * 1000 / n}'
}
# The program's result: its last line, or the "checksum" field of a JSON last line.
result() { tail -1 | sed -E 's/.*"checksum":"([0-9a-f]+)".*/\1/'; }
twin_args() { # TWIN ARGS...: the twin's argument list
  local tw=$1; shift
  if [ "${tw#+}" != "$tw" ]; then printf '%s\n' "$@" "${tw#+}"; else printf '%s\n' "$tw" "${@:2}"; fi
}
min() { printf '%s\n' "$@" | sort -g | head -1; }
max() { printf '%s\n' "$@" | sort -g | tail -1; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
f2() { printf '%.2f' "$1"; }
# "median (min–max)" of a list of ms/iteration
spread() { printf '%.2f (%.2f–%.2f)' "$(median "$@")" "$(min "$@")" "$(max "$@")"; }
table=$work/table spreads=$work/spreads cpu=$work/cpu
: > "$table"; : > "$spreads"; : > "$cpu"
row() { # name, twin mode or -, program, args (with ITERS)...
  name=$1
  local twin=$2 prog=$3; shift 3
  local plan=$work/$name.$short.plan.json stats=$work/$name.stats.jsonl n
  # A plan applies to the argument list it was made with: one per iteration count.
  for n in "$short" "$long"; do
    echo_env VK_ECHO_MODE=profile VK_ECHO_TRACE="$work/$name.$n.jsonl" "$prog" "${@/ITERS/$n}" >/dev/null 2>&1
    "$t/vkecho" analyze "$work/$name.$n.jsonl" -o "$work/$name.$n.plan.json" > "$work/$name.$n.report" 2>&1
  done
  local base=() ech=() zero=() cbase=() cech=() czero=() r x
  for r in $(seq "$rounds"); do
    x=$(per_iter "$prog" "$@"); base+=("${x% *}"); cbase+=("${x#* }")
    x=$(per_iter echo_env VK_ECHO_MODE=enforce VK_ECHO_PLAN=PLAN "$prog" "$@")
    ech+=("${x% *}"); cech+=("${x#* }")
    if [ "$twin" != - ]; then
      local targs; mapfile -t targs < <(twin_args "$twin" "$@")
      x=$(per_iter "$prog" "${targs[@]}"); zero+=("${x% *}"); czero+=("${x#* }")
    fi
  done
  local b e z="" cb ce cz=""
  b=$(min "${base[@]}"); e=$(min "${ech[@]}")
  [ "$twin" = - ] || z=$(min "${zero[@]}")
  cb=$("$prog" "${@/ITERS/$short}" 2>/dev/null | result)
  ce=$(echo_env VK_ECHO_MODE=enforce VK_ECHO_PLAN="$plan" VK_ECHO_STATS="$stats" "$prog" "${@/ITERS/$short}" 2>/dev/null | result)
  if [ "$twin" != - ]; then
    local zargs; mapfile -t zargs < <(twin_args "$twin" "$@"); cz=$("$prog" "${zargs[@]/ITERS/$short}" 2>/dev/null | result)
  fi
  local elided groups
  elided=$(python3 -c "import json;s=[json.loads(l) for l in open('$stats')];print(sum(x['bytes_elided'] for x in s)//$short)")
  groups=$(python3 -c "import json;s=[json.loads(l) for l in open('$stats')];print(sum(x['groups_applied'] for x in s),'/',sum(x['groups_planned'] for x in s))")
  local same=no; [ "$cb" = "$ce" ] && same=yes
  if [ -n "$cz" ]; then
    if [ "$cz" = "$cb" ]; then same="$same (twin: yes)"; else same="$same (twin differs!)"; fi
  fi
  local bound="" rec=""
  if [ -n "$z" ]; then
    bound=$(printf '%.2fx' "$(echo "$b / $z" | bc -l)")
    rec=$(printf '%.0f %%' "$(echo "($b - $e) * 100 / ($b - $z)" | bc -l)")
  fi
  printf '| %s | %s | %s MiB | %s | %s | %s | %.2fx | %s | %s | %s |\n' "$name" "$groups" \
    "$((elided >> 20))" "$(f2 "$b")" "$(f2 "$e")" "${z:+$(f2 "$z")}" "$(echo "$b / $e" | bc -l)" \
    "$bound" "$rec" "$same" >> "$table"
  printf '| %s | %s | %s | %s | %.2fx |\n' "$name" "$(spread "${base[@]}")" "$(spread "${ech[@]}")" \
    "${z:+$(spread "${zero[@]}")}" "$(echo "$(median "${base[@]}") / $(median "${ech[@]}")" | bc -l)" >> "$spreads"
  # CPU time: medians (the spread beside them), speedup, bound and recovered fraction of medians.
  local mb me mz="" cb2="" cr=""
  mb=$(median "${cbase[@]}"); me=$(median "${cech[@]}")
  if [ -n "$z" ]; then
    mz=$(median "${czero[@]}")
    cb2=$(printf '%.2fx' "$(echo "$mb / $mz" | bc -l)")
    cr=$(printf '%.0f %%' "$(echo "($mb - $me) * 100 / ($mb - $mz)" | bc -l)")
  fi
  printf '| %s | %s | %s | %s | %.2fx | %s | %s |\n' "$name" "$(spread "${cbase[@]}")" \
    "$(spread "${cech[@]}")" "${z:+$(spread "${czero[@]}")}" "$(echo "$mb / $me" | bc -l)" \
    "$cb2" "$cr" >> "$cpu"
}
name=""
load0=$(cut -d' ' -f1-3 /proc/loadavg)
row c_suballoc zero "$work/c_suballoc" loop ITERS "$spv"
row echo-gpu-allocator zero "$t/echo-gpu-allocator" loop ITERS "$spv"
row echo-vma zero "$t/echo-vma" loop ITERS "$spv"
row echo-wgpu-app +--zero "$t/echo-wgpu-app" --size-mib "$mib" --iters ITERS
load1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$mib MiB buffers, $rounds rounds, $short and $long iterations; load average $load0 at the start, $load1 at the end"
echo
echo "Wall clock, fastest round:"
echo
echo "| program | groups applied | bytes elided per iteration | ms/iter no layer | ms/iter echo | ms/iter zero-copy twin | speedup | zero-copy bound | recovered | identical |"
echo "|---|---|---|---|---|---|---|---|---|---|"
cat "$table"
echo
echo "Wall clock, median (fastest–slowest) of the $rounds rounds, ms/iteration:"
echo
echo "| program | no layer | echo | zero-copy twin | speedup of the medians |"
echo "|---|---|---|---|---|"
cat "$spreads"
echo
echo "CPU time (user + system, all threads), median (least–most) of the $rounds rounds, ms/iteration:"
echo
echo "| program | no layer | echo | zero-copy twin | speedup | zero-copy bound | recovered |"
echo "|---|---|---|---|---|---|---|"
cat "$cpu"
