#!/usr/bin/env python3
"""Pools the per-process rows that scripts/warmup.sh and scripts/profile-overhead.sh keep with
SAMPLES_OUT=FILE, over several runs (one file per run), by round: every round's processes ran
back to back, so per-round ratios compare like with like whatever the machine did between
rounds. Prints medians of per-round ratios with their interquartile range and a bootstrap 90 %
interval over rounds.

usage: scripts/pool-rounds.py ROWS_FILE...
warmup.sh rows:           warmup=W ROUND base|echo|twin MS CPU_MS ...
profile-overhead.sh rows: SAMPLE ROUND A|B|C|D MS CPU_MS
"""
import random
import statistics as st
import sys


def q(v):
    v = sorted(v)
    n = len(v)
    return f"{st.median(v):.3f} (IQR {v[(n - 1) // 4]:.3f}-{v[(3 * (n - 1)) // 4]:.3f})"


def boot(full, f, n=4000):
    rnd = random.Random(2)
    bs = [f([rnd.choice(full) for _ in full]) for _ in range(n)]
    bs = sorted(x for x in bs if x == x)  # NaN (a resample with no saving) out before sorting
    return bs[len(bs) // 20], bs[len(bs) * 19 // 20]


groups = {}
for path in sys.argv[1:]:
    for line in open(path):
        p = line.split()
        if len(p) < 5:
            continue
        groups.setdefault(p[0], {}).setdefault((path, p[1]), {})[p[2]] = (float(p[3]), float(p[4]))

for g, by in sorted(groups.items()):
    kinds = set().union(*by.values())
    full = [d for d in by.values() if len(d) == len(kinds)]
    print(f"## {g}: {len(full)} rounds from {len(sys.argv) - 1} file(s)")
    if kinds == {"base", "echo", "twin"}:
        ratio = lambda s, a, b, i=0: [d[a][i] / d[b][i] for d in s]
        print(f"  echo/twin wall {q(ratio(full, 'echo', 'twin'))}, CPU {q(ratio(full, 'echo', 'twin', 1))}; "
              f"base/twin wall {q(ratio(full, 'base', 'twin'))}")
        lo, hi = boot(full, lambda s: st.median(ratio(s, "echo", "twin")))
        print(f"  echo/twin wall median: bootstrap 90 % interval {lo:.3f}-{hi:.3f}")
        gap = lambda s: [(d["echo"][0] - d["twin"][0]) / d["base"][0] for d in s]
        save = lambda s: [(d["base"][0] - d["twin"][0]) / d["base"][0] for d in s]
        rec = lambda s: (1 - st.median(gap(s)) / st.median(save(s))) * 100 if st.median(save(s)) > 0 else float("nan")
        lo, hi = boot(full, rec)
        print(f"  saving (base-twin)/base {q(save(full))}, gap (echo-twin)/base {q(gap(full))}; "
              f"recovered = 1 - median gap / median saving {rec(full):.1f} %, bootstrap 90 % interval {lo:.0f}-{hi:.0f} %")
    elif kinds == set("ABCD"):
        for a, b in (("C", "A"), ("B", "A"), ("C", "B"), ("D", "A")):
            w = [d[a][0] / d[b][0] for d in full]
            c = [d[a][1] / d[b][1] for d in full]
            lo, hi = boot(full, lambda s: st.median(d[a][0] / d[b][0] for d in s))
            print(f"  {a}/{b}: wall {q(w)} (median's bootstrap 90 % interval {lo:.3f}-{hi:.3f}), CPU {q(c)}")
    else:
        print(f"  unknown configurations {sorted(kinds)}")
