#!/usr/bin/env bash
# Mutation testing of the code that decides safety (issue 55): cargo-mutants changes the analyzer's
# rules one small edit at a time (a `<` for a `<=`, a function that returns `Ok(())`, a deleted
# `!`) and runs the fast tests against each change; a change no test notices is a *survivor*.
#
#   scripts/mutants.sh                    every mutant of the scope below (see docs/mutation-testing.md)
#   scripts/mutants.sh --shard 3/25       one share of them (cargo-mutants' round-robin shards)
#   scripts/mutants.sh --all              all of the code that decides safety: the analyzer's
#                                         safety/, model/, pairing.rs and analysis/
#   scripts/mutants.sh --list             the mutants, not run
#   scripts/mutants.sh -- ARGS            ARGS go to cargo-mutants (e.g. -- --re 'in overlap')
#
# The judge: echo-analyzer's unit tests and the integration tests (analyzer/tests/) that
# .cargo/mutants.toml names, which need no GPU and no Vulkan; cargo-mutants builds the tree in a
# copy under /tmp with the `mutants` profile (the test profile without debug info), and
# CARGO_TARGET_DIR is unset for it so each copy builds in its own target.
#
# The scope: ECHO_MUTANTS_SCOPE, space-separated file globs (default: the areas whose every
# survivor has been dealt with, below; --all: every area). Each survivor (a "missed" mutant) must be killed by a test
# or listed in tests/mutants-equivalent.txt with the reason it cannot change a decision; the exit
# status is non-zero only for survivors not listed there ("new survivors"), or when the run itself
# fails (the unmutated tree's tests fail, a usage error). A timeout counts as caught: the mutant
# made a test hang, and a hang fails the suite.
#
# Writes $OUT (default target/mutants): mutants.out/ (cargo-mutants' own records), table.md (the
# per-file table docs/status.md quotes) and new-survivors.txt.
#
# Installs cargo-mutants (pinned below) with `cargo install --locked` when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

version=27.1.0
default_scope="analyzer/src/safety/**/*.rs"
all_scope="analyzer/src/safety/**/*.rs analyzer/src/model/**/*.rs analyzer/src/pairing.rs analyzer/src/analysis/**/*.rs"
scope=${ECHO_MUTANTS_SCOPE:-$default_scope}
equivalents=tests/mutants-equivalent.txt
out=${OUT:-${CARGO_TARGET_DIR:-target}/mutants}

shard=() all=0 list=0 extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --shard) shard=(--shard "$2"); shift 2 ;;
        --shard=*) shard=(--shard "${1#--shard=}"); shift ;;
        --all) all=1; shift ;;
        --list) list=1; shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "scripts/mutants.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if [ "$(cargo mutants --version 2>/dev/null)" != "cargo-mutants $version" ]; then
    echo "scripts/mutants.sh: installing cargo-mutants $version" >&2
    nice -n 10 cargo install --locked cargo-mutants --version "$version" >&2
fi

[ "$all" = 1 ] && scope=$all_scope
filters=()
set -f # the globs are cargo-mutants', not the shell's
for p in $scope; do filters+=(-f "$p"); done
set +f

if [ "$list" = 1 ]; then
    exec cargo mutants --workspace "${filters[@]}" "${shard[@]}" "${extra[@]}" --list
fi

mkdir -p "$out"
rm -rf "$out/mutants.out"
start=$(date +%s)
status=0
env -u CARGO_TARGET_DIR nice -n 10 cargo mutants --workspace "${filters[@]}" "${shard[@]}" "${extra[@]}" \
    --no-times --colors never -o "$out" || status=$?
seconds=$(( $(date +%s) - start ))
# cargo-mutants: 0 all caught, 2 some missed, 3 some timed out; anything else (1 usage, 4 the
# unmutated tree failed its tests) means the run proves nothing.
case "$status" in
    0|2|3) ;;
    *) echo "== mutants: cargo-mutants failed (exit status $status; log: $out/mutants.out/debug.log)" >&2
       exit 1 ;;
esac

python3 - "$out/mutants.out/outcomes.json" "$equivalents" "$out" "$seconds" "${shard[1]:-all}" <<'PY'
import collections, json, re, sys
outcomes, equivalents, out, seconds, shard = sys.argv[1:6]
d = json.load(open(outcomes))
strip = lambda name: re.sub(r'^([^:]+):\d+:\d+: ', r'\1: ', name.strip())
rows = collections.OrderedDict()
missed, mutant_seconds = [], []
kind = {'CaughtMutant': 'caught', 'MissedMutant': 'missed', 'Timeout': 'timeout', 'Unviable': 'unviable'}
for o in d['outcomes']:
    sc = o['scenario']
    if sc == 'Baseline' or not isinstance(sc, dict):
        continue
    m = sc['Mutant']
    k = kind.get(o['summary'])
    if k is None:
        continue
    r = rows.setdefault(m['file'], collections.Counter())
    r[k] += 1
    if k == 'missed':
        missed.append(m['name'])
    if k != 'unviable':
        mutant_seconds.append(sum(p['duration'] for p in o['phase_results']))
rows = dict(sorted(rows.items()))
# The equivalents: one mutant a line, as cargo-mutants names it (`file:line:col: replace … in f`),
# then `# reason`. An entry matches its survivor by the whole name first; the entries left then
# match without the line and column (which move as the code is edited), each entry standing for
# one mutant: two survivors of the same description need two entries.
entries = [l.split('#', 1)[0].strip() for l in open(equivalents)]
entries = [e for e in entries if e]
exact = collections.Counter(entries)
rest = []
for name in missed:
    if exact[name.strip()] > 0:
        exact[name.strip()] -= 1
    else:
        rest.append(name)
known = collections.Counter()
for e, n in exact.items():
    known[strip(e)] += n
new = []
for name in rest:
    key = strip(name)
    if known[key] > 0:
        known[key] -= 1
    else:
        new.append(name)
total = collections.Counter()
lines = ['| file | mutants | caught | missed | timeout | unviable | score |',
         '|---|---:|---:|---:|---:|---:|---:|']
def score(c):
    viable = c['caught'] + c['missed'] + c['timeout']
    return f"{100 * (c['caught'] + c['timeout']) / viable:.1f} %" if viable else '–'
for f, c in rows.items():
    total += c
    lines.append(f"| `{f}` | {sum(c.values())} | {c['caught']} | {c['missed']} | {c['timeout']} | {c['unviable']} | {score(c)} |")
lines.append(f"| **all** | {sum(total.values())} | {total['caught']} | {total['missed']} | {total['timeout']} | {total['unviable']} | {score(total)} |")
per = sum(mutant_seconds) / len(mutant_seconds) if mutant_seconds else 0
table = '\n'.join(lines) + '\n'
open(f'{out}/table.md', 'w').write(table)
open(f'{out}/new-survivors.txt', 'w').write(''.join(n + '\n' for n in new))
print(table)
listed = len(missed) - len(new)
viable = total['caught'] + total['missed'] + total['timeout']
kept = f"{100 * (total['caught'] + total['timeout']) / (viable - listed):.1f} %" if viable > listed else '–'
print(f"== mutants: shard {shard}: {sum(total.values())} mutants, {total['caught']} caught, "
      f"{total['missed']} missed ({listed} listed equivalent, {len(new)} new), "
      f"{total['timeout']} timeout, {total['unviable']} unviable, score {score(total)} "
      f"({kept} with the equivalents set aside); "
      f"{seconds} s, {per:.1f} s a viable mutant (build + tests)")
for n in new:
    print(f"   NEW SURVIVOR: {n}")
sys.exit(1 if new else 0)
PY
