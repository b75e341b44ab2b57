#!/usr/bin/env bash
# What a user running the defaults gets, beside the vouch (issue 54): every sample and corpus
# program profiled, analyzed and enforced twice through the gate (scripts/validate-all.sh
# --no-validation, modes none, profile, enforce): once with no settings (exact host writes:
# profile records which bytes each host write covered) and once with the user's vouch
# `host_writes=whole` (VK_ECHO_HOST_WRITES=whole in the profile run). Prints a Markdown table —
# per program the candidate pairs, the pairs accepted and the bytes elided by the enforce run,
# default and vouch, and the profile run's wall time in each. The enforce run's output must stay the
# program's with the defaults (the gate's own check; else the script exits 1); with the vouch a
# program that rewrites only part of a buffer gets wrong output (`WRONG OUTPUT` in its cell: why
# the default does not vouch).
#
#   scripts/host-writes-table.sh                        every program, samples at 4 MiB x 4
#   SIZE_KIB=1024 ITERS=2 scripts/host-writes-table.sh --samples saxpy --programs ''
#   DRIVER=swiftshader scripts/host-writes-table.sh     on SwiftShader (default: lavapipe)
#
# Extra arguments go to validate-all.sh (--samples, --programs, --jobs). Binaries as for the
# gate ($ECHO_BIN_DIR, ECHO_NO_BUILD=1 to skip its build). Logs and plans: $ECHO_TABLE_OUT
# (default a temp dir), `default/` and `vouch/` one gate run each.
set -euo pipefail
cd "$(dirname "$0")/.."

size_kib=${SIZE_KIB:-4096}
iters=${ITERS:-4}
driver=${DRIVER:-lavapipe}
out=${ECHO_TABLE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/echo-host-writes.XXXXXX")}
mkdir -p "$out"
status=0
for v in default vouch; do
    inj=()
    [ "$v" = vouch ] && inj=(--inject profile:VK_ECHO_HOST_WRITES=whole)
    echo "== $v: scripts/validate-all.sh --no-validation --modes none,profile,enforce" \
         "--size-kib $size_kib --iters $iters --driver $driver ${inj[*]} $*" >&2
    rc=0
    ECHO_VALIDATE_OUT="$out/$v" scripts/validate-all.sh --no-validation \
        --modes none,profile,enforce --size-kib "$size_kib" --iters "$iters" --driver "$driver" \
        ${inj[@]+"${inj[@]}"} "$@" > "$out/$v.log" 2>&1 || rc=$?
    if [ "$rc" != 0 ] && [ "$v" = default ]; then
        status=1
        echo "host-writes-table: the gate failed with the defaults: $out/$v.log" >&2
        grep 'FAIL' "$out/$v.log" >&2 || tail -20 "$out/$v.log" >&2
    fi
done

# One line per program: label, candidates, accepted, bytes elided, profile seconds.
facts() {
    local d label pairs acc bytes secs
    for d in "$1"/[0-9][0-9][0-9]-*/; do
        [ -f "$d/results.tsv" ] || continue
        label=$(cut -f1 "$d/results.tsv" | head -1)
        pairs=$(sed -n 's/^ *\([0-9]*\) candidate pairs\{0,1\}, \([0-9]*\) accepted.*/\1 \2/p' "$d/analyze.txt" 2>/dev/null | head -1)
        [ -n "$pairs" ] || pairs="0 0"
        bytes=$(awk -F'\t' '$2 == "enforce" { if ($3 != "ok") print "WRONG"; else if (match($4, /[0-9]+ B elided/)) print substr($4, RSTART, RLENGTH - 9) }' "$d/results.tsv")
        secs=$(cat "$d/profile.seconds" 2>/dev/null || echo "?")
        printf '%s\t%s\t%s\t%s\n' "$label" "$pairs" "${bytes:-0}" "$secs"
    done
}
facts "$out/default" | sort > "$out/default.tsv"
facts "$out/vouch" | sort > "$out/vouch.tsv"

mib() { if [ "$1" = WRONG ]; then echo "WRONG OUTPUT"; else awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; fi; }
echo "| program | pairs | accepted: default | accepted: vouch | MiB elided: default | MiB elided: vouch | profile s: default | profile s: vouch |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
join -t $'\t' "$out/default.tsv" "$out/vouch.tsv" | while IFS=$'\t' read -r label dp db ds vp vb vs; do
    read -r dc da <<< "$dp"
    read -r _ va <<< "$vp"
    echo "| $label | $dc | $da | $va | $(mib "$db") | $(mib "$vb") | $ds | $vs |"
done
join -t $'\t' "$out/default.tsv" "$out/vouch.tsv" | awk -F'\t' '
    { split($2, d, " "); split($5, v, " "); c += d[1]; da += d[2]; va += v[2]; db += $3; vb += $6;
      if (d[2] < v[2]) less++; if ($6 == "WRONG") wrong++; n++ }
    END { printf "\n%d programs: %d candidate pairs; accepted %d with the defaults, %d with the vouch (%d programs lose pairs without it, %d get wrong output with it); %.1f MiB elided with the defaults, %.1f MiB with the vouch (programs with wrong output not counted).\n", n, c, da, va, less, wrong, db / 1048576, vb / 1048576 }'
echo
echo "Command: SIZE_KIB=$size_kib ITERS=$iters DRIVER=$driver scripts/host-writes-table.sh $*; logs in $out"
exit "$status"
