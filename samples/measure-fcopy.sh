#!/usr/bin/env bash
# Copy fraction of every sample on the local Vulkan device (release build).
#
# For each sample it runs the staging variant with --timing (a timestamp query before and after
# every vkCmdCopyBuffer: f_copy = Σ copy time / Σ iteration time over the timed iterations) and
# then the zero-copy twin, and prints both plus the cross-check 1 - t_zero/t_staging (medians).
# Iteration time = host input fill + record + submit + wait + host postprocess; the checksum fold
# is excluded.
#
#   samples/measure-fcopy.sh [SIZE_MIB] [ITERS] [SAMPLE...]
#
# SIZE_MIB defaults to 64, ITERS to 3 (after 1 warm-up iteration). sgemm is O(n³): it runs at
# ECHO_SGEMM_MIB (default 4, n = 1024) unless you set it.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-64}
iters=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
samples=("$@")
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p echo-samples
bin="$target/release/echo-samples"
[ ${#samples[@]} -eq 0 ] && mapfile -t samples < <("$bin" list | awk '{print $1}')
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

printf '%-11s %8s %8s %10s %12s %12s %10s\n' sample size_MiB f_copy copy_ms staging_ms zerocopy_ms 1-tz/ts
for s in "${samples[@]}"; do
    mib=$size
    [ "$s" = sgemm ] && mib=${ECHO_SGEMM_MIB:-4}
    common=("$s" --size-mib "$mib" --iters "$iters" --warmup 1)
    a=$("$bin" "${common[@]}" --timing 2>/dev/null | tail -n1)
    b=$("$bin" "${common[@]}" --variant zero-copy 2>/dev/null | tail -n1)
    python3 - "$a" "$b" "$mib" <<'PY'
import json, sys
a, b, mib = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
assert a["checksum"] == b["checksum"], "checksums differ"
ts, tz = a["iter_ms_median"], b["iter_ms_median"]
print(f'{a["sample"]:<11} {mib:>8} {a["f_copy"]:8.3f} {a["copy_ms_median"]:10.1f} {ts:12.1f} {tz:12.1f} {1 - tz / ts:10.3f}')
PY
done
