#!/usr/bin/env bash
# Every sample in every mode under VK_LAYER_KHRONOS_validation with synchronization validation
# (issue 8, DESIGN §8): no layer, echo off, echo profile, echo enforce (with the plan that the
# profile run's trace gives through `vkecho analyze`). Prints a table and fails when echo adds a
# validation message (by VUID / message id) that the run without echo does not have, when a
# checksum differs from the run without echo, or when a run fails.
#
#   scripts/validate-all.sh                       all samples, all modes, 1 MiB, 2 iterations
#   scripts/validate-all.sh --samples saxpy,bda --modes none,enforce --size-kib 64 --iters 2
#
# Binaries: $ECHO_BIN_DIR, else ${CARGO_TARGET_DIR:-target}/debug (built here with
# `cargo build --workspace` unless ECHO_NO_BUILD=1). Logs: $ECHO_VALIDATE_OUT (default a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."

samples="saxpy,sgemm,conv2d,pipeline,suballoc,multiqueue,threads,race,stale,reuse,bda"
modes="none,off,profile,enforce"
size_kib=1024
iters=2
min_bytes=64K
while [ $# -gt 0 ]; do
    case "$1" in
        --samples) samples="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        --size-kib) size_kib="$2"; shift 2 ;;
        --iters) iters="$2"; shift 2 ;;
        --min-bytes) min_bytes="$2"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "validate-all.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
case ",$modes," in *,enforce,*) case ",$modes," in *,profile,*) ;; *) modes="$modes,profile" ;; esac ;; esac

if [ -z "${ECHO_BIN_DIR:-}" ]; then
    ECHO_BIN_DIR="${CARGO_TARGET_DIR:-target}/debug"
    [ "${ECHO_NO_BUILD:-0}" = 1 ] || cargo build -q --workspace --exclude echo-wgpu-app >&2
fi
bin=$(cd "$ECHO_BIN_DIR" && pwd)
for f in echo-samples vkecho libVkLayer_echo.so; do
    [ -e "$bin/$f" ] || { echo "validate-all.sh: $bin/$f missing (build the workspace)" >&2; exit 2; }
done
[ -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] ||
    { echo "validate-all.sh: VK_LAYER_KHRONOS_validation is not installed (scripts/deps.sh)" >&2; exit 2; }

out="${ECHO_VALIDATE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/echo-validate.XXXXXX")}"
mkdir -p "$out/data/vulkan/implicit_layer.d" "$out/home" "$out/cache" "$out/runtime"
chmod 700 "$out/runtime"
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$bin/libVkLayer_echo.so\"#" \
    manifest/VkLayer_echo.json > "$out/data/vulkan/implicit_layer.d/VkLayer_echo.json"

# A clean environment: echo only from this build, validation with sync validation (':'-separated
# on Linux for layers 1.3.239), nothing else from the caller's Vulkan settings.
base_env=(env -i "PATH=$PATH" "HOME=$out/home" "XDG_RUNTIME_DIR=$out/runtime"
    "XDG_DATA_HOME=$out/data" "XDG_DATA_DIRS=/usr/local/share:/usr/share"
    "XDG_CONFIG_HOME=$out/home/.config" "XDG_CACHE_HOME=$out/cache"
    "VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation"
    "VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT:VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT"
    "VK_ECHO_MIN_BYTES=$min_bytes" "VK_ECHO_LOG=warn")
for k in VK_ICD_FILENAMES VK_DRIVER_FILES LD_LIBRARY_PATH; do
    [ -n "${!k:-}" ] && base_env+=("$k=${!k}")
done

# Message keys of a log: VUIDs, SYNC-HAZARD-*, and "MessageID = 0x..." for the rest.
keys() {
    grep -E 'Validation (Error|Warning)|SYNC-HAZARD' "$1" |
        sed -E 's/.*\[ ([A-Za-z0-9_-]+) \].*/\1/; t; s/.*(MessageID = 0x[0-9a-f]+).*/\1/' |
        sort -u || true
}
checksum() { grep -o '"checksum":"[0-9a-f]*"' "$1" | tail -1 | cut -d'"' -f4; }

IFS=, read -r -a sample_list <<< "$samples"
IFS=, read -r -a mode_list <<< "$modes"
order=(none off profile enforce)
fail=0
header=$(printf '%-11s' sample)
for m in "${order[@]}"; do
    case ",$modes," in *,"$m",*) header+=$(printf ' | %-24s' "$m") ;; esac
done
rows=()
for s in "${sample_list[@]}"; do
    args=("$s" --size-kib "$size_kib" --iters "$iters")
    row=$(printf '%-11s' "$s")
    ref_sum="" ; ref_keys="$out/$s.none.keys"; : > "$ref_keys"
    for m in "${order[@]}"; do
        case ",$modes," in *,"$m",*) ;; *) continue ;; esac
        log="$out/$s.$m.log"
        envm=("${base_env[@]}")
        case "$m" in
            none) envm+=("VK_ECHO_DISABLE=1") ;;
            profile) envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=profile" "VK_ECHO_TRACE=$out/$s.trace.jsonl") ;;
            enforce)
                if [ ! -f "$out/$s.plan.json" ]; then
                    row+=$(printf ' | %-24s' "NO PLAN"); fail=1; continue
                fi
                envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=enforce" "VK_ECHO_PLAN=$out/$s.plan.json"
                       "VK_ECHO_STATS=$out/$s.stats.jsonl") ;;
            *) envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=$m") ;;
        esac
        rc=0
        (cd "$out/home" && timeout 900 "${envm[@]}" "$bin/echo-samples" "${args[@]}") > "$log" 2>&1 || rc=$?
        keys "$log" > "$out/$s.$m.keys"
        n=$(wc -l < "$out/$s.$m.keys")
        sum=$(checksum "$log" || true)
        if [ "$m" = profile ] && [ -f "$out/$s.trace.jsonl" ]; then
            "$bin/vkecho" analyze "$out/$s.trace.jsonl" -o "$out/$s.plan.json" > "$out/$s.analyze.txt" 2>&1 || true
        fi
        if [ "$rc" -ne 0 ] || [ -z "$sum" ]; then
            cell="FAILED (exit $rc)"; fail=1
        elif [ "$m" = none ]; then
            ref_sum=$sum
            cell="ok, $n msg"
        else
            new=$(comm -13 "$ref_keys" "$out/$s.$m.keys" | tr '\n' ' ')
            if [ -n "$ref_sum" ] && [ "$sum" != "$ref_sum" ]; then
                cell="CHECKSUM DIFFERS"; fail=1
            elif [ -n "$new" ]; then
                cell="NEW: $new"; fail=1
            else
                cell="ok, $n msg"
                if [ "$m" = enforce ] && [ -f "$out/$s.stats.jsonl" ]; then
                    eb=$(grep -o '"bytes_elided":[0-9]*' "$out/$s.stats.jsonl" | tail -1 | cut -d: -f2)
                    cell+=", ${eb:-0} B elided"
                fi
            fi
        fi
        row+=$(printf ' | %-24s' "$cell")
    done
    rows+=("$row")
    echo "$row" >&2
done

echo
echo "validation (sync validation on) per sample and mode; ${size_kib} KiB, ${iters} iterations; logs in $out"
echo "$header"
printf '%s\n' "${rows[@]}"
if [ "$fail" -ne 0 ]; then
    echo "validate-all: FAILED (echo added messages, changed a checksum, or a run failed; see $out/SAMPLE.MODE.log)"
    exit 1
fi
echo "validate-all: ok (echo adds no validation message in any mode)"
