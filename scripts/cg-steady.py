#!/usr/bin/env python3
"""Instructions per steady iteration from one callgrind run made with
`--dump-before=iteration_mark` (tests/c/common.h: the programs call it at the start of every
timed iteration). Callgrind then writes OUT.1 (start-up, up to the first mark), OUT.2, OUT.3, ...
(one iteration each, every thread) and OUT (the last iteration and the teardown).

The program runs CASES cases one after another, ITERS iterations each. Iteration j of case k is
OUT.(k*ITERS + j + 2); a case's first iteration (first touch, first dispatch) and its last (it
also holds the next case's set-up, or the teardown) are left out, so ITERS must be at least 3.

glibc's heap allocator is left out of CYCLE and counted apart (ALLOC): what malloc and free
cost follows the heap's layout, not the work. Two configurations that make the same calls
differed by 1.4 million instructions an iteration in `_int_free` and `unlink_chunk` alone
(c_tensors at 3 x 2 MiB, where the copies echo removes cost 700,000), and the same
configuration moves with the length of the environment.

usage: scripts/cg-steady.py OUT ITERS CASES [OBJECT...]
prints: CYCLE SPREAD ALLOC [OBJECT=COST...], where CYCLE is the sum over the cases of the mean
of their steady iterations (one iteration of every case) without the allocator, SPREAD the sum
over the cases of half the range of those steady iterations (how far one iteration strays from
another: the method's resolution), ALLOC the allocator's part (same sum), and COST the same sum
of the instructions executed inside each OBJECT (a file name, e.g. libVkLayer_echo.so:
exclusive cost of its functions, read from the ob=/fn=/calls= records, as tests/src/callgrind.rs
does).
"""
import re
import sys


def total(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"^(?:totals|summary):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    raise SystemExit(f"cg-steady.py: no totals in {path}")


# glibc's malloc family (libc.so.6), by function name.
ALLOCATOR = re.compile(
    r"^(_int_)?(malloc|free|calloc|realloc|memalign)$|^unlink_chunk|^malloc_consolidate|"
    r"^tcache_|^sysmalloc|^systrim|^__libc_(malloc|free|calloc|realloc|memalign)|"
    r"^(posix_memalign|aligned_alloc|_mid_memalign|cfree|malloc_trim|mremap_chunk|munmap_chunk)$"
)


def by_function(path):
    """Exclusive cost per (object file name, function): a cost line counts for the current
    `ob=` / `fn=`, except the line after `calls=` (a call's inclusive cost)."""
    obs, fns, cost, ob, fn, after_calls = {}, {}, {}, "", "", False

    def name(table, v):
        v = v.strip()
        m = re.match(r"^\((\d+)\)\s*(.*)$", v)
        if not m:
            return v
        if m.group(2):
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "")

    with open(path) as f:
        for line in f:
            if line.startswith("ob="):
                ob = name(obs, line[3:]).rsplit("/", 1)[-1]
            elif line.startswith("cob="):
                name(obs, line[4:])
            elif line.startswith("fn="):
                fn = name(fns, line[3:])
            elif line.startswith("cfn="):
                name(fns, line[4:])
            elif line.startswith("calls="):
                after_calls = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                p = line.split()
                if len(p) > 1 and p[1].isdigit():
                    cost[(ob, fn)] = cost.get((ob, fn), 0) + int(p[1])
    return cost


def by_object(path):
    """Exclusive cost per object file name."""
    out = {}
    for (ob, _), v in by_function(path).items():
        out[ob] = out.get(ob, 0) + v
    return out


def allocator(costs):
    return sum(v for (ob, fn), v in costs.items() if ob == "libc.so.6" and ALLOCATOR.match(fn))


def main():
    out, iters, cases, objects = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    if iters < 3:
        raise SystemExit("cg-steady.py: ITERS must be at least 3 (first and last are left out)")
    cycle = spread = alloc = 0.0
    own = {o: 0.0 for o in objects}
    for k in range(cases):
        files = [f"{out}.{k * iters + j + 2}" for j in range(1, iters - 1)]
        costs = [by_function(f) for f in files]
        for f, c in zip(files, costs):
            if sum(c.values()) != total(f):
                raise SystemExit(f"cg-steady.py: {f}: the records do not add up to its total")
        a = [allocator(c) for c in costs]
        v = [sum(c.values()) - x for c, x in zip(costs, a)]
        cycle += sum(v) / len(v)
        spread += (max(v) - min(v)) / 2
        alloc += sum(a) / len(a)
        for c in costs:
            for o in objects:
                own[o] += sum(x for (ob, _), x in c.items() if ob == o) / len(costs)
    print(f"{cycle:.0f} {spread:.0f} {alloc:.0f}" + "".join(f" {o}={v:.0f}" for o, v in own.items()))


if __name__ == "__main__":
    main()
