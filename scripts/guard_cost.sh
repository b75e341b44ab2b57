#!/usr/bin/env bash
# Cost of guarded enforce (issue 16), deterministic: instructions per saxpy iteration (one
# submission) spent in the guard — the inclusive cost of its entry points, which the hooks call
# (callgrind; difference of two loop lengths so start-up cancels; libc's malloc and mutex
# included, the kernel's side of mprotect not) — with guard off and on, and the mprotect/mmap
# system calls per iteration (strace). (Echo's whole exclusive count per iteration is not given:
# across runs it moves by tens of thousands of instructions, far more than the guard costs.)
# Wall time on a shared machine is not reliable; on a quiet machine add TIME=1: saxpy's median
# iteration time (release layer, 50 iterations) without echo, enforce, and enforce with the guard.
#
# Usage: [TIME=1] scripts/guard_cost.sh [SIZE_KIB] (default 256). Needs valgrind and strace.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
    export XDG_RUNTIME_DIR=/tmp
fi
size=${1:-256}
loops=(10 30)
cargo build --release -p vk-layer-echo >/dev/null
cargo build -p vk-layer-echo -p echo-analyzer -p echo-samples >/dev/null
B=target/debug
lib=$(pwd)/target/release/libVkLayer_echo.so
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/manifest"
cat >"$dir/manifest/VkLayer_echo.json" <<EOF
{"file_format_version": "1.2.0", "layer": {"name": "VK_LAYER_echo", "type": "GLOBAL",
 "library_path": "$lib", "api_version": "1.3.239", "implementation_version": "1",
 "description": "echo (guard costs)"}}
EOF
layer_env=(VK_ADD_LAYER_PATH="$dir/manifest" VK_INSTANCE_LAYERS=VK_LAYER_echo VK_ECHO_LOG=error)

# One plan per loop length (a plan applies to the arguments it was made with).
for n in "${loops[@]}"; do
    args=(saxpy --size-kib "$size" --iters "$n")
    VK_ECHO_MIN_BYTES=4096 $B/vkecho profile --trace "$dir/t$n.jsonl" -- $B/echo-samples "${args[@]}" >/dev/null 2>&1
    $B/vkecho analyze "$dir/t$n.jsonl" -o "$dir/p$n.json" >/dev/null
    chmod 600 "$dir/p$n.json"
done

# Instructions in the guard's entry points (inclusive) for saxpy with N iterations.
in_echo() { # guard n
    local g=$1 n=$2 out="$dir/cg-$1-$2.out"
    env "${layer_env[@]}" VK_ECHO_MODE=enforce VK_ECHO_PLAN="$dir/p$n.json" VK_ECHO_GUARD="$g" \
        VK_ECHO_STATS="$dir/stats-$g-$n.jsonl" \
        valgrind --tool=callgrind --callgrind-out-file="$out" \
        $B/echo-samples saxpy --size-kib "$size" --iters "$n" >/dev/null 2>"$dir/vg-$g-$n.log"
    callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null |
        { grep -E "enforce::guard::Guard::(before_submit|after_submit|use_buffers|use_all|bind_sets|execute|elided|fences_done|queue_idle|device_idle|begin|sets_updated|set_unknown|foreign_bind|aliased)( |$)" || true; } |
        awk '{gsub(",", "", $1); s += $1} END {print s + 0}'
}

syscalls() { # guard n
    local g=$1 n=$2
    env "${layer_env[@]}" VK_ECHO_MODE=enforce VK_ECHO_PLAN="$dir/p$n.json" VK_ECHO_GUARD="$g" \
        strace -f -qq -e trace=mprotect,mmap -o "$dir/st-$g-$n" \
        $B/echo-samples saxpy --size-kib "$size" --iters "$n" >/dev/null 2>&1
    echo "$(grep -c 'mprotect(' "$dir/st-$g-$n") $(grep -c 'mmap(' "$dir/st-$g-$n")"
}

d=$((loops[1] - loops[0]))
echo "| saxpy ${size} KiB, per iteration | guard off | guard on |"
echo "|---|---|---|"
declare -A ie
for g in 0 1; do
    a=$(in_echo $g "${loops[0]}")
    b=$(in_echo $g "${loops[1]}")
    ie[$g]=$(((b - a) / d))
done
echo "| instructions in the guard (callgrind, inclusive of its entry points) | ${ie[0]} | ${ie[1]} |"
declare -A mp mm
for g in 0 1; do
    read -r pa ma <<<"$(syscalls $g "${loops[0]}")"
    read -r pb mb <<<"$(syscalls $g "${loops[1]}")"
    mp[$g]=$(echo "scale=2; ($pb - $pa) / $d" | bc)
    mm[$g]=$(echo "scale=2; ($mb - $ma) / $d" | bc)
done
echo "| mprotect calls (strace, all threads) | ${mp[0]} | ${mp[1]} |"
echo "| mmap calls (strace, all threads) | ${mm[0]} | ${mm[1]} |"
s=$(tail -n 1 "$dir/stats-1-${loops[1]}.jsonl")
echo
echo "guard on, ${loops[1]} iterations: $(echo "$s" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("groups %d/%d applied, windows %d, splits %d, merges %d, timeouts %d" % (s["groups_applied"], s["groups_planned"], s["guard_windows"], s["guard_splits"], s["guard_merges"], s["guard_timeouts"]))')"

if [ "${TIME:-0}" = 1 ]; then
    n=50
    args=(saxpy --size-kib "$size" --iters "$n")
    VK_ECHO_MIN_BYTES=4096 $B/vkecho profile --trace "$dir/tt.jsonl" -- $B/echo-samples "${args[@]}" >/dev/null 2>&1
    $B/vkecho analyze "$dir/tt.jsonl" -o "$dir/pt.json" >/dev/null
    chmod 600 "$dir/pt.json"
    med() { python3 -c 'import json,sys; print([json.loads(l) for l in sys.stdin if l.startswith("{")][-1]["iter_ms_median"])'; }
    echo
    echo "wall clock, saxpy ${size} KiB, median ms per iteration ($n iterations):"
    echo "  no echo:       $($B/echo-samples "${args[@]}" 2>/dev/null | med)"
    for g in 0 1; do
        t=$(env "${layer_env[@]}" VK_ECHO_MODE=enforce VK_ECHO_PLAN="$dir/pt.json" VK_ECHO_GUARD=$g \
            $B/echo-samples "${args[@]}" 2>/dev/null | med)
        echo "  enforce, guard=$g: $t"
    done
fi
