//! Step 6: the copy summary — every copy of the trace and, by reason, why those outside
//! accepted pairs stayed out, with the setting or code change that would change it.

use super::output::{CopySummary, ReasonSummary};
use crate::model::{BufId, Model};
use crate::pairing::{self, Candidate};
use crate::plan::Thresholds;
use crate::safety::{Cause, Verdict};
use std::collections::{BTreeMap, BTreeSet};

/// The copy summary of one device's analysis: every executed copy, and per reason the ones
/// outside accepted pairs.
pub(super) fn summarize(
    m: &Model,
    cands: &[Candidate],
    skipped: &[pairing::Skipped],
    verdict: &[Option<Verdict>],
    t: Thresholds,
) -> CopySummary {
    use crate::words::human_bytes;
    let mut s = CopySummary {
        unknown_copies: m.unknown_copies.0,
        ..Default::default()
    };
    for c in cands {
        s.copies += c.copies();
        s.bytes = s.bytes.saturating_add(c.bytes());
    }
    for k in skipped {
        s.copies += k.copies;
        s.bytes = s.bytes.saturating_add(k.bytes);
    }
    // cause → (pairs, copies, bytes). A refused pair is counted under its verdict's cause, the
    // one its row shows: never recomputed here.
    let mut by: BTreeMap<Cause, (u64, u64, u64)> = BTreeMap::new();
    let mut add = |r: Cause, new_pair: bool, copies: u64, bytes: u64| {
        let e = by.entry(r).or_default();
        e.0 += new_pair as u64;
        e.1 += copies;
        e.2 = e.2.saturating_add(bytes);
    };
    let mut below: Vec<&Candidate> = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        match &verdict[i] {
            None => {
                s.accepted_copies += c.copies();
                s.accepted_bytes = s.accepted_bytes.saturating_add(c.bytes());
            }
            Some(v) => {
                if v.cause == Cause::Threshold {
                    below.push(c);
                }
                add(v.cause, true, c.copies(), c.bytes())
            }
        }
    }
    let mut unobserved: BTreeSet<BufId> = BTreeSet::new();
    let mut small_largest = 0u64;
    // Both ways between two buffers are one pair.
    let mut pairs_seen: BTreeSet<(Cause, BufId, BufId)> = BTreeSet::new();
    for k in skipped {
        let r = match k.reason {
            pairing::Skip::GpuOnly => Cause::GpuOnly,
            pairing::Skip::HostBoth => Cause::HostBoth,
            pairing::Skip::HostNeither => Cause::HostNeither,
            // Too small to be armed, and below the thresholds anyway: say that first.
            pairing::Skip::NoEvidence(_) if k.largest < t.min_bytes => {
                small_largest = small_largest.max(k.largest);
                Cause::SmallUnwatched
            }
            pairing::Skip::NoEvidence(b) => {
                unobserved.insert(b);
                Cause::NoEvidence
            }
            pairing::Skip::SameBuffer => Cause::SameBuffer,
        };
        let new_pair = pairs_seen.insert((r, k.src.min(k.dst), k.src.max(k.dst)));
        add(r, new_pair, k.copies, k.bytes);
    }
    if m.unknown_copies.0 > 0 {
        let e = by.entry(Cause::UnknownBuffer).or_default();
        e.1 += m.unknown_copies.0;
        e.2 = e.2.saturating_add(m.unknown_copies.1);
    }
    for (cause, (pairs, copies, bytes)) in by {
        // The cause's own words, then what this trace's numbers add.
        let (more_explanation, more_remedy) = match cause {
            Cause::Threshold => threshold_remedy(m, &below, t),
            Cause::HostBoth => {
                let shared = skipped
                    .iter()
                    .filter(|k| k.reason == pairing::Skip::HostBoth)
                    .filter(|k| m.host_shared_page(k.src) || m.host_shared_page(k.dst))
                    .count();
                if shared > 0 {
                    (
                        format!("for {shared} of these copy directions a side was touched through a page it shares with other watched memory (a `readwrite` host record: sub-allocations closer than a page; an access that opened the page left the rest of it unseen, so it counts as touched)"),
                        "and sub-allocations with different roles must not share a page (align them to the page size)".into(),
                    )
                } else {
                    (String::new(), String::new())
                }
            }
            Cause::NoEvidence => {
                let smallest = unobserved
                    .iter()
                    .map(|&b| m.buffers[b].size)
                    .min()
                    .unwrap_or(0);
                (
                    format!(
                        "{} buffer{} not observed",
                        unobserved.len(),
                        if unobserved.len() == 1 { "" } else { "s" }
                    ),
                    format!(
                        "here min_bytes at most {smallest} ({})",
                        human_bytes(smallest)
                    ),
                )
            }
            Cause::SmallUnwatched => (
                format!("the largest {}", human_bytes(small_largest)),
                format!("here min_bytes at most {small_largest}"),
            ),
            _ => (String::new(), String::new()),
        };
        let join = |base: String, more: String| {
            if more.is_empty() {
                base
            } else {
                format!("{base}; {more}")
            }
        };
        s.reasons.push(ReasonSummary {
            reason: cause.key().into(),
            pairs,
            copies,
            bytes,
            explanation: join(cause.explanation(t), more_explanation),
            remedy: join(cause.remedy(t), more_remedy),
        });
    }
    s.reasons.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    s
}

/// Below thresholds: which `min_bytes` or `min_copies` would admit them.
fn threshold_remedy(m: &Model, below: &[&Candidate], t: Thresholds) -> (String, String) {
    use crate::words::{human_bytes, plural};
    let k = t.min_copies.max(1) as usize;
    // min_bytes that would admit a pair: its k-th largest copy (a one-time transfer: its copy).
    let by_bytes: Vec<u64> = below
        .iter()
        .filter_map(|c| {
            let mut v: Vec<u64> = c.links.iter().map(|l| l.bytes).collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            let need = if pairing::is_one_time(m, c) { 0 } else { k - 1 };
            v.get(need).copied().filter(|&b| b > 0)
        })
        .collect();
    // min_copies that would admit a pair: how many of its copies reach min_bytes.
    let by_copies: Vec<u64> = below
        .iter()
        .map(|c| c.links.iter().filter(|l| l.bytes >= t.min_bytes).count() as u64)
        .filter(|&n| n > 0)
        .collect();
    let mut parts = Vec::new();
    if let Some(&v) = by_bytes.iter().max() {
        let all = by_bytes.iter().copied().min().unwrap_or(v);
        parts.push(format!(
            "here min_bytes={v} ({}) admits {} of the {}{}",
            human_bytes(v),
            by_bytes.iter().filter(|&&b| b >= v).count(),
            plural(below.len() as u64, "pair", "pairs"),
            if all < v {
                format!(
                    ", min_bytes={all} ({}) all {}",
                    human_bytes(all),
                    by_bytes.len()
                )
            } else {
                String::new()
            }
        ));
    }
    if let Some(&n) = by_copies.iter().max() {
        parts.push(format!(
            "min_copies={n} admits {} (fewer repeats: the saving is made fewer times)",
            by_copies.iter().filter(|&&x| x >= n).count()
        ));
    }
    (String::new(), parts.join("; "))
}
