#!/usr/bin/env bash
# The validation gate (issue 8, issue 23, DESIGN §3 "only valid calls go down", §8): every sample
# and every corpus program (tests/c/*.c, built by tests/build.rs) under VK_LAYER_KHRONOS_validation
# with synchronization validation, in every mode:
#
#   none      no echo: what validation alone reports (the reference)
#   off       echo loaded, mode off
#   profile   profile with every window watched (VK_ECHO_VALIDATE_SAMPLE_EVERY=1); its trace goes
#             through `vkecho analyze` into the plan that enforce and guard use
#   profile8  profile with sampled windows (VK_ECHO_VALIDATE_SAMPLE_EVERY=8)
#   enforce   enforce that plan
#   auto1     auto mode with an empty cache (profiles, writes the plan at exit)
#   auto2     auto mode again with that cache (enforces the cached plan)
#   guard     guarded enforce (VK_ECHO_GUARD=on) with the plan
#
# Every mode must report exactly the validation messages the `none` run reports (the multiset of
# VUIDs / SYNC-HAZARD ids / "MessageID = 0x..." ids: nothing new, nothing missing), exit 0, and
# compute the same result (a sample's checksum; a corpus program's whole stdout, validation's own
# lines left out). Prints a table and a machine-readable `$out/results.tsv`
# (program, mode, verdict, detail); exits 1 when any cell is not ok.
#
#   scripts/validate-all.sh                          every sample and corpus program, every mode
#   scripts/validate-all.sh --samples saxpy,bda --programs c_upload --modes none,enforce
#   scripts/validate-all.sh --samples '' ...         no samples (--programs '' : no corpus programs)
#
# Options: --size-kib N --iters N (samples; default 64 KiB, 2 iterations), --min-bytes (16K),
# --jobs N (programs checked at once; default $ECHO_VALIDATE_JOBS or 2), --c-src DIR (the corpus
# sources, default tests/c), --inject MODE:VAR=VALUE (adds VAR=VALUE to MODE's runs only; the
# gate's own test uses it to show the gate fails when one mode reports something new or less),
# --test-layer TABLE (VK_LAYER_ECHO_test_discrete below echo and validation, presenting TABLE:
# `discrete` (its default table, echo stays inactive), `jetson-nano`, `apu`, `real`; as the tests'
# World with test_layer: true), --no-validation (no validation layer: `none` is then no layer at
# all, and every mode must compute its result and report no message), --driver NAME (the Vulkan
# driver of the host: `lavapipe` (Mesa's ICD manifest), `swiftshader` (Debian's chromium package,
# /usr/lib/chromium/vk_swiftshader_icd.json); default: the loader's choice, or the caller's
# VK_DRIVER_FILES).
#
# The validation layer sits BELOW echo (echo is implicit, closest to the program; validation is
# explicit): it sees what echo sends to the driver, as in a program that enables validation
# itself. The gate checks that order once per run with the loader's own log (row `loader-order`).
#
# Samples: `echo-samples list`. Corpus programs: every tests/c/*.c; a program declares the
# argument lists it is checked with in its source, one line each (several lines: several runs):
#
#     /* gate-args: loop 3 */        or, inside a comment block:   * gate-args: seq
#
# A program without a `gate-args:` line runs once without arguments. The SPIR-V path comes from
# $ECHO_C_SPV as for the corpus tests (c_double.spv next to the programs).
#
# Binaries: $ECHO_BIN_DIR, else ${CARGO_TARGET_DIR:-target}/debug (built here with
# `cargo build --workspace` unless ECHO_NO_BUILD=1); corpus programs: $ECHO_C_DIR, else the newest
# target/debug/build/echo-tests-*/out that holds them. Logs: $ECHO_VALIDATE_OUT (default a temp
# dir), one directory per program with MODE.log and MODE.seconds (its wall time) per mode.
set -euo pipefail
cd "$(dirname "$0")/.."

samples=ALL
programs=ALL
modes="none,off,profile,profile8,enforce,auto1,auto2,guard"
size_kib=64
iters=2
min_bytes=16K
jobs="${ECHO_VALIDATE_JOBS:-2}"
c_src=tests/c
inject=()
test_layer=""
driver=""
validation=1
while [ $# -gt 0 ]; do
    case "$1" in
        --samples) samples="$2"; shift 2 ;;
        --programs) programs="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        --size-kib) size_kib="$2"; shift 2 ;;
        --iters) iters="$2"; shift 2 ;;
        --min-bytes) min_bytes="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --c-src) c_src="$2"; shift 2 ;;
        --inject) inject+=("$2"); shift 2 ;;
        --test-layer) test_layer="$2"; shift 2 ;;
        --driver) driver="$2"; shift 2 ;;
        --no-validation) validation=0; shift ;;
        -h|--help) sed -n '2,53p' "$0"; exit 0 ;;
        *) echo "validate-all.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
# enforce and guard need the plan of the full profile run.
case ",$modes," in *,enforce,*|*,guard,*) case ",$modes," in *,profile,*) ;; *) modes="$modes,profile" ;; esac ;; esac
case ",$modes," in *,auto2,*) case ",$modes," in *,auto1,*) ;; *) modes="$modes,auto1" ;; esac ;; esac
order=(none off profile profile8 enforce auto1 auto2 guard)

if [ -z "${ECHO_BIN_DIR:-}" ]; then
    ECHO_BIN_DIR="${CARGO_TARGET_DIR:-target}/debug"
    [ "${ECHO_NO_BUILD:-0}" = 1 ] || cargo build -q --workspace --exclude echo-wgpu-app >&2
fi
bin=$(cd "$ECHO_BIN_DIR" && pwd)
for f in echo-samples vkecho libVkLayer_echo.so; do
    [ -e "$bin/$f" ] || { echo "validate-all.sh: $bin/$f missing (build the workspace)" >&2; exit 2; }
done
[ "$validation" = 0 ] || [ -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] ||
    { echo "validate-all.sh: VK_LAYER_KHRONOS_validation is not installed (scripts/deps.sh)" >&2; exit 2; }

out="${ECHO_VALIDATE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/echo-validate.XXXXXX")}"
mkdir -p "$out/data/vulkan/implicit_layer.d" "$out/home" "$out/cache" "$out/runtime"
chmod 700 "$out/runtime"
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$bin/libVkLayer_echo.so\"#" \
    manifest/VkLayer_echo.json > "$out/data/vulkan/implicit_layer.d/VkLayer_echo.json"

# The list: one line per check, "label<TAB>program<TAB>args...".
checks=()
if [ "$samples" = ALL ]; then
    samples=$(XDG_RUNTIME_DIR="$out/runtime" "$bin/echo-samples" list | awk '{print $1}' | paste -sd, -)
fi
IFS=, read -r -a sample_list <<< "$samples"
for s in "${sample_list[@]}"; do
    [ -n "$s" ] && checks+=("$s"$'\t'"$bin/echo-samples"$'\t'"$s --size-kib $size_kib --iters $iters")
done
if [ "$programs" != "" ]; then
    c_dir="${ECHO_C_DIR:-}"
    if [ -z "$c_dir" ]; then
        c_dir=$(ls -td "${CARGO_TARGET_DIR:-target}"/debug/build/echo-tests-*/out 2>/dev/null |
            while read -r d; do [ -f "$d/c_double.spv" ] && { echo "$d"; break; }; done || true)
    fi
    [ -n "$c_dir" ] && [ -d "$c_dir" ] ||
        { echo "validate-all.sh: no corpus programs (build echo-tests, or set ECHO_C_DIR)" >&2; exit 2; }
    c_dir=$(cd "$c_dir" && pwd)
    if [ "$programs" = ALL ]; then
        programs=$(for f in "$c_src"/*.c; do basename "$f" .c; done | paste -sd, -)
    fi
    IFS=, read -r -a prog_list <<< "$programs"
    for p in "${prog_list[@]}"; do
        [ -f "$c_src/$p.c" ] || { echo "validate-all.sh: $c_src/$p.c does not exist" >&2; exit 2; }
        [ -x "$c_dir/$p" ] || { echo "validate-all.sh: $c_dir/$p is not built (cargo build -p echo-tests)" >&2; exit 2; }
        arg_sets=$(sed -n 's/.*gate-args:\(.*\)$/\1/p' "$c_src/$p.c" | sed 's#\*/.*##; s/^ *//; s/ *$//')
        if [ -z "$(sed -n '/gate-args:/p' "$c_src/$p.c")" ]; then
            checks+=("$p"$'\t'"$c_dir/$p"$'\t')
        else
            while IFS= read -r a; do
                checks+=("$p${a:+ $a}"$'\t'"$c_dir/$p"$'\t'"$a")
            done <<< "$arg_sets"
        fi
    done
fi
[ "${#checks[@]}" -gt 0 ] || { echo "validate-all.sh: nothing to check" >&2; exit 2; }

# A clean environment: echo only from this build, validation with sync validation (':'-separated
# on Linux for layers 1.3.239), nothing else from the caller's Vulkan settings.
base_env=(env -i "PATH=$PATH" "HOME=$out/home" "XDG_RUNTIME_DIR=$out/runtime"
    "XDG_DATA_HOME=$out/data" "XDG_DATA_DIRS=/usr/local/share:/usr/share"
    "XDG_CONFIG_HOME=$out/home/.config" "XDG_CACHE_HOME=$out/cache"
    "VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation"
    "VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT:VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT"
    "VK_ECHO_MIN_BYTES=$min_bytes" "VK_ECHO_LOG=warn")
[ -n "${c_dir:-}" ] && base_env+=("ECHO_C_SPV=$c_dir/c_double.spv")
# Without validation (--no-validation): no VK_INSTANCE_LAYERS (env keeps the last of a name).
[ "$validation" = 1 ] || base_env+=("VK_INSTANCE_LAYERS=")
# The test layer below echo and validation (tests/layers/discrete; the tests' World does the same).
if [ -n "$test_layer" ]; then
    [ -e "$bin/libVkLayer_echo_test_discrete.so" ] ||
        { echo "validate-all.sh: $bin/libVkLayer_echo_test_discrete.so missing (cargo build --workspace)" >&2; exit 2; }
    mkdir -p "$out/layers"
    printf '{"file_format_version": "1.2.0", "layer": {"name": "VK_LAYER_ECHO_test_discrete", "type": "GLOBAL", "library_path": "%s", "api_version": "1.3.239", "implementation_version": "1", "description": "test only"}}\n' \
        "$bin/libVkLayer_echo_test_discrete.so" > "$out/layers/VkLayer_ECHO_test_discrete.json"
    base_env+=("VK_ADD_LAYER_PATH=$out/layers"
        "VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation:VK_LAYER_ECHO_test_discrete")
    [ "$validation" = 1 ] || base_env+=("VK_INSTANCE_LAYERS=VK_LAYER_ECHO_test_discrete")
    [ "$test_layer" = discrete ] || base_env+=("VK_ECHO_TEST_TABLE=$test_layer")
fi
for k in VK_ICD_FILENAMES VK_DRIVER_FILES LD_LIBRARY_PATH; do
    [ -n "${!k:-}" ] && base_env+=("$k=${!k}")
done
case "$driver" in
    "") ;;
    lavapipe) icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | grep -F ".$(uname -m).json" | head -1)
              [ -n "$icd" ] || { echo "validate-all.sh: no lavapipe ICD (scripts/deps.sh)" >&2; exit 2; }
              base_env+=("VK_DRIVER_FILES=$icd") ;;
    swiftshader) icd=/usr/lib/chromium/vk_swiftshader_icd.json
              [ -f "$icd" ] || { echo "validate-all.sh: $icd missing (scripts/deps.sh installs chromium)" >&2; exit 2; }
              base_env+=("VK_DRIVER_FILES=$icd") ;;
    *) echo "validate-all.sh: unknown driver $driver (lavapipe, swiftshader)" >&2; exit 2 ;;
esac

# Validation's lines: its default callback's "Validation Error/Warning" lines, sync hazards, and
# the "VALIDATION: <id>" lines of a program that installs its own messenger (c_validation).
is_validation='Validation (Error|Warning|Performance Warning|Information)|SYNC-HAZARD|^VALIDATION: '
# Message keys of a log, one per message (a multiset, sorted): VUIDs, SYNC-HAZARD-*, and
# "MessageID = 0x..." for the rest.
keys() {
    { grep -E "$is_validation" "$1" || true; } |
        sed -E 's/^VALIDATION: ([^ ]+).*/\1/; t; s/.*\[ ([A-Za-z0-9_.:-]+) \].*/\1/; t; s/.*MessageID = (0x[0-9a-f]+).*/MessageID=\1/' |
        LC_ALL=C sort
}
# What the program computed: a sample's checksum, else its stdout without validation's lines.
result() {
    if grep -q '"checksum":"' "$1.stdout"; then
        grep -o '"checksum":"[0-9a-f]*"' "$1.stdout" | tail -1 | cut -d'"' -f4
    else
        # A validation message goes on with indented "Objects: N" / "[i] 0x..." lines (layers
        # 1.3.239); from 1.4 (Debian 13's 1.4.309) it is a block: "Validation Error: [ ID ] |
        # MessageID = 0x...", the text on lines of its own (handles in it), a blank line,
        # "Objects: N", the objects, a blank line. Both are left out.
        awk -v re="$is_validation" '
            blk == 3 && /^Objects: [0-9]+$/ { blk = 2; next }
            blk == 3 { blk = 0 }
            blk == 2 && /^$/ { blk = 0; next }
            blk == 1 && /^$/ { blk = 3; next }
            blk { next }
            /^Validation [A-Za-z ]+: \[ .* \] \| MessageID = 0x[0-9a-f]+$/ { blk = 1; next }
            $0 ~ re { next }
            /^ +(Objects: [0-9]+|\[[0-9]+\] 0x)/ { next }
            { print }' "$1.stdout" | md5sum | cut -c1-16
    fi
}
elided() {
    [ -f "$1" ] || { echo "no stats"; return; }
    local b m
    b=$(grep -o '"bytes_elided":[0-9]*' "$1" | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
    m=$(grep -o '"mode":"[a-z]*"' "$1" | head -1 | cut -d'"' -f4)
    echo "${m:-?} ${b:-0} B elided"
}

# One program through every mode; writes $dir/row and $dir/results.tsv.
gate_one() {
    local label="$1" prog="$2" argstr="$3" dir="$4"
    local -a args=()
    [ -n "$argstr" ] && read -r -a args <<< "$argstr"
    mkdir -p "$dir/home" "$dir/cache"
    local row ref_sum="" m envm rc n sum new missing cell
    row=$(printf '%-22s' "$label")
    : > "$dir/results.tsv"
    : > "$dir/none.keys"
    for m in "${order[@]}"; do
        case ",$modes," in *,"$m",*) ;; *) continue ;; esac
        envm=("${base_env[@]}")
        case "$m" in
            none) envm+=("VK_ECHO_DISABLE=1") ;;
            off) envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=off") ;;
            profile) envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=profile" "VK_ECHO_TRACE=$dir/trace.jsonl"
                            "VK_ECHO_VALIDATE_SAMPLE_EVERY=1") ;;
            profile8) envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=profile" "VK_ECHO_TRACE=$dir/trace8.jsonl"
                             "VK_ECHO_VALIDATE_SAMPLE_EVERY=8") ;;
            enforce|guard)
                if [ ! -f "$dir/plan.json" ]; then
                    row+=$(printf ' | %-22s' "NO PLAN")
                    printf '%s\t%s\tFAIL\tno plan (profile or analyze failed)\n' "$label" "$m" >> "$dir/results.tsv"
                    continue
                fi
                envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=enforce" "VK_ECHO_PLAN=$dir/plan.json"
                       "VK_ECHO_STATS=$dir/$m.stats.jsonl")
                [ "$m" = guard ] && envm+=("VK_ECHO_GUARD=on") ;;
            auto1|auto2) envm+=("VK_ECHO_ENABLE=1" "VK_ECHO_MODE=auto" "VK_ECHO_CACHE_DIR=$dir/cache"
                                "VK_ECHO_STATS=$dir/$m.stats.jsonl") ;;
        esac
        local inj
        for inj in ${inject[@]+"${inject[@]}"}; do
            [ "${inj%%:*}" = "$m" ] && envm+=("${inj#*:}")
        done
        rc=0
        local t0 t1
        t0=$(date +%s.%N)
        (cd "$dir/home" && timeout 300 "${envm[@]}" "$prog" "${args[@]}") \
            > "$dir/$m.stdout" 2> "$dir/$m.stderr" || rc=$?
        t1=$(date +%s.%N)
        # The run's wall time (scripts/host-writes-table.sh reports profile's).
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' > "$dir/$m.seconds"
        cat "$dir/$m.stdout" "$dir/$m.stderr" > "$dir/$m.log"
        keys "$dir/$m.log" > "$dir/$m.keys"
        n=$(wc -l < "$dir/$m.keys")
        sum=$(result "$dir/$m")
        if [ "$m" = profile ] && [ -f "$dir/trace.jsonl" ]; then
            "$bin/vkecho" analyze "$dir/trace.jsonl" -o "$dir/plan.json" > "$dir/analyze.txt" 2>&1 || true
        fi
        local verdict=ok detail
        if [ "$rc" -ne 0 ]; then
            verdict=FAIL; cell="FAILED (exit $rc)"; detail="exit status $rc"
        elif [ "$m" = none ]; then
            ref_sum=$sum
            cell="ok, $n msg"; detail="$n messages"
        else
            new=$(LC_ALL=C comm -13 "$dir/none.keys" "$dir/$m.keys" | uniq -c | awk '{print $2 (($1>1)?"x"$1:"")}' | paste -sd' ' -)
            missing=$(LC_ALL=C comm -23 "$dir/none.keys" "$dir/$m.keys" | uniq -c | awk '{print $2 (($1>1)?"x"$1:"")}' | paste -sd' ' -)
            cell=""
            [ -n "$new" ] && cell="NEW: $new"
            [ -n "$missing" ] && cell+="${cell:+; }MISSING: $missing"
            [ "$sum" != "$ref_sum" ] && cell+="${cell:+; }RESULT DIFFERS"
            if [ -n "$cell" ]; then
                verdict=FAIL
                detail="$cell"
                [ "$sum" != "$ref_sum" ] && detail+=" (result $sum, without echo $ref_sum)"
            else
                cell="ok, $n msg"; detail="$n messages"
                case "$m" in enforce|guard|auto2) detail+=", $(elided "$dir/$m.stats.jsonl")" ;; esac
            fi
        fi
        row+=$(printf ' | %-22s' "$cell")
        printf '%s\t%s\t%s\t%s\n' "$label" "$m" "$verdict" "$detail" >> "$dir/results.tsv"
    done
    echo "$row" > "$dir/row"
    echo "$row" >&2
}

# The layer order: the loader inserts layers from the driver up, so validation's insert line must
# come before echo's (validation below echo).
: > "$out/order.tsv"
if [ "$validation" = 1 ] && command -v vulkaninfo > /dev/null; then
    mkdir -p "$out/order-home"
    (cd "$out/order-home" && timeout 120 "${base_env[@]}" VK_ECHO_ENABLE=1 VK_ECHO_MODE=off VK_LOADER_DEBUG=layer \
        vulkaninfo --summary) > "$out/order.log" 2>&1 || true
    inserts=$(grep -o 'Insert instance layer "[A-Za-z_]*"' "$out/order.log" | sed 's/.*"\(.*\)"/\1/' | paste -sd' ' -)
    case " $inserts " in
        *" VK_LAYER_KHRONOS_validation "*" VK_LAYER_echo "*)
            printf 'loader-order\t-\tok\tvalidation below echo (inserted from the driver up: %s)\n' "$inserts" > "$out/order.tsv" ;;
        *)
            printf 'loader-order\t-\tFAIL\tvalidation is not below echo (inserted from the driver up: %s)\n' "${inserts:-none}" > "$out/order.tsv" ;;
    esac
fi

start=$(date +%s)
i=0
for c in "${checks[@]}"; do
    IFS=$'\t' read -r label prog argstr <<< "$c"
    dir="$out/$(printf '%03d' "$i")-${label// /_}"
    i=$((i + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    gate_one "$label" "$prog" "${argstr:-}" "$dir" &
done
wait
elapsed=$(( $(date +%s) - start ))

header=$(printf '%-22s' program)
for m in "${order[@]}"; do
    case ",$modes," in *,"$m",*) header+=$(printf ' | %-22s' "$m") ;; esac
done
cp "$out/order.tsv" "$out/results.tsv"
rows=()
for d in "$out"/[0-9][0-9][0-9]-*/; do
    [ -f "$d/row" ] && rows+=("$(cat "$d/row")") || rows+=("$(basename "$d"): NO RESULT")
    [ -f "$d/results.tsv" ] && cat "$d/results.tsv" >> "$out/results.tsv"
done
echo
echo "validation gate ($([ "$validation" = 1 ] && echo "sync validation on, below echo" || echo "no validation layer")$([ -n "$test_layer" ] && echo ", test layer $test_layer")$([ -n "$driver" ] && echo ", driver $driver")): ${#checks[@]} programs, modes $modes; samples ${size_kib} KiB, ${iters} iterations; ${elapsed} s with $jobs jobs; logs in $out"
echo "$header"
printf '%s\n' "${rows[@]}"
if grep -q $'\tFAIL\t' "$out/results.tsv" || [ "${#rows[@]}" -ne "${#checks[@]}" ]; then
    echo "validate-all: FAILED (echo changed what validation reports, changed a result, or a run failed):"
    grep $'\tFAIL\t' "$out/results.tsv" | sed 's/^/  /' || true
    exit 1
fi
echo "validate-all: ok (every mode reports exactly what validation alone reports)"
