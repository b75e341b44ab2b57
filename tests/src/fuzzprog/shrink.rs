//! Delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing
//! Input", 2002): the smallest program found that still fails, first over the op list, then
//! over the commands of every recorded command buffer. Every candidate is [`repair`]ed first,
//! so only valid programs are tried.

use super::model::repair;
use super::{Op, Program};

/// `ddmin` over `n` units: `fails(kept)` says whether the program made of the units in `kept`
/// still fails. Returns the units kept (1-minimal as far as `budget` tries allowed).
pub fn ddmin(n: usize, mut fails: impl FnMut(&[usize]) -> bool, budget: &mut usize) -> Vec<usize> {
    let mut cur: Vec<usize> = (0..n).collect();
    let mut parts = 2usize;
    while cur.len() >= 2 && *budget > 0 {
        let chunk = cur.len().div_ceil(parts);
        let mut reduced = false;
        let n_parts = parts;
        for i in 0..n_parts {
            if *budget == 0 {
                break;
            }
            let lo = i * chunk;
            if lo >= cur.len() {
                break;
            }
            let hi = (lo + chunk).min(cur.len());
            let complement: Vec<usize> = cur[..lo].iter().chain(&cur[hi..]).copied().collect();
            *budget -= 1;
            if !complement.is_empty() && fails(&complement) {
                cur = complement;
                parts = (parts - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if parts >= cur.len() {
                break;
            }
            parts = (parts * 2).min(cur.len());
        }
    }
    cur
}

/// The program with only the ops at `keep`, repaired.
pub fn keep_ops(p: &Program, keep: &[usize]) -> Program {
    let ops = keep.iter().map(|&i| p.ops[i].clone()).collect();
    repair(&Program {
        seed: p.seed,
        caps: p.caps,
        ops,
    })
}

/// Every (op, command) position of the recorded commands.
fn cmd_units(p: &Program) -> Vec<(usize, usize)> {
    let mut out = vec![];
    for (i, op) in p.ops.iter().enumerate() {
        if let Op::Record { cmds, .. } = op {
            out.extend((0..cmds.len()).map(|j| (i, j)));
        }
    }
    out
}

/// The program with only the recorded commands at `keep` (of [`cmd_units`]), repaired.
fn keep_cmds(p: &Program, units: &[(usize, usize)], keep: &[usize]) -> Program {
    let kept: std::collections::BTreeSet<(usize, usize)> = keep.iter().map(|&k| units[k]).collect();
    let ops = p
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| match op {
            Op::Record {
                cb,
                cmds,
                secondary,
            } => Op::Record {
                cb: *cb,
                cmds: cmds
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| kept.contains(&(i, *j)))
                    .map(|(_, c)| c.clone())
                    .collect(),
                secondary: super::kept_runs(secondary, |j| kept.contains(&(i, j))),
            },
            o => o.clone(),
        })
        .collect();
    repair(&Program {
        seed: p.seed,
        caps: p.caps,
        ops,
    })
}

/// Shrinks `p` while `fails` holds, within `budget` runs of `fails`.
pub fn shrink(p: &Program, mut fails: impl FnMut(&Program) -> bool, mut budget: usize) -> Program {
    let mut best = repair(p);
    loop {
        let before = best.size();
        let base = best.clone();
        let keep = ddmin(base.ops.len(), |k| fails(&keep_ops(&base, k)), &mut budget);
        best = keep_ops(&base, &keep);
        let base = best.clone();
        let units = cmd_units(&base);
        if !units.is_empty() {
            let keep = ddmin(
                units.len(),
                |k| fails(&keep_cmds(&base, &units, k)),
                &mut budget,
            );
            if keep.len() < units.len() {
                best = keep_cmds(&base, &units, &keep);
            }
        }
        if best.size() >= before || budget == 0 {
            return best;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddmin_finds_the_two_units_that_matter() {
        let mut budget = 1000;
        let keep = ddmin(40, |k| k.contains(&7) && k.contains(&31), &mut budget);
        assert_eq!(keep, vec![7, 31]);
    }
}
