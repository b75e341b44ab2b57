//! Candidates (DESIGN §5): a staging buffer `h` — the side of a copy the host touches — and its
//! partner `d` — the side it does not — linked by executed buffer-to-buffer copies; roles come
//! from the host accesses the trace observed, not from whether an allocation is mapped (see
//! [`roles`]). Then the pairing rules that need no simulation: reuse over time, one constant
//! offset, and the thresholds (with the one-time-transfer exception).

use crate::model::{BufId, Model, OpKind, SubId};
use crate::plan::{Role, Thresholds};
use crate::safety::Cause;
use crate::safety::Verdict;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// `h → d`.
    Up,
    /// `d → h`.
    Down,
}

/// One execution of one `vkCmdCopyBuffer` between `h` and `d` (a command buffer submitted three
/// times gives three links).
#[derive(Clone, Debug)]
pub struct Link {
    pub submission: SubId,
    /// `seq` of the `CmdCopyBuffer` record.
    pub recorded: u64,
    pub way: Way,
    /// `(h offset, d offset, size)` per region.
    pub regions: Vec<(u64, u64, u64)>,
    pub bytes: u64,
}

#[derive(Clone, Debug)]
pub struct Candidate {
    pub staging: BufId,
    pub device: BufId,
    pub links: Vec<Link>,
}

impl Candidate {
    pub fn copies(&self) -> u64 {
        self.links.len() as u64
    }
    pub fn bytes(&self) -> u64 {
        self.links
            .iter()
            .map(|l| l.bytes)
            .fold(0u64, u64::saturating_add)
    }
    /// Distinct submissions that carried a linking copy: the iterations the trace saw.
    pub fn iterations(&self) -> u64 {
        let mut s: Vec<SubId> = self.links.iter().map(|l| l.submission).collect();
        s.dedup();
        s.len() as u64
    }
    pub fn role(&self) -> Role {
        let up = self.links.iter().any(|l| l.way == Way::Up);
        let down = self.links.iter().any(|l| l.way == Way::Down);
        match (up, down) {
            (true, true) => Role::Both,
            (false, true) => Role::Readback,
            _ => Role::Upload,
        }
    }
    /// The range of `h` the copies touched: `[lo, hi)`.
    pub fn staging_range(&self) -> (u64, u64) {
        let mut lo = u64::MAX;
        let mut hi = 0;
        for l in &self.links {
            for &(ho, _, sz) in &l.regions {
                lo = lo.min(ho);
                hi = hi.max(ho.saturating_add(sz));
            }
        }
        (lo.min(hi), hi)
    }
}

/// Why an executed copy between two known buffers made no candidate pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Skip {
    /// Neither side is ever mapped: a copy the host never sees (GPU-only traffic).
    GpuOnly,
    /// Both sides are mapped and the host touches both: neither is only a partner.
    HostBoth,
    /// Both sides are mapped and the host touches neither (that the trace shows).
    HostNeither,
    /// Both sides are mapped and the host's accesses to this one were not observed (it was
    /// never armed: below the profile's `min_bytes`, or a trace of an older layer).
    NoEvidence(BufId),
    /// Source and destination are the same buffer.
    SameBuffer,
}

/// Executed copies that made no candidate, per (src, dst) pair and reason.
#[derive(Clone, Debug)]
pub struct Skipped {
    pub src: BufId,
    pub dst: BufId,
    pub reason: Skip,
    pub copies: u64,
    pub bytes: u64,
    /// The largest single copy.
    pub largest: u64,
}

/// The host's part in a copy between `src` and `dst` (DESIGN §5: roles from behaviour): the
/// staging buffer is the side the host touches, its partner the side it does not. A side the
/// host never mapped cannot be touched; a mapped side counts only with its host accesses
/// observed (`Watched`); where both sides are mapped, the observed accesses decide.
pub fn roles(
    m: &Model,
    src: BufId,
    dst: BufId,
    host: &mut BTreeMap<BufId, (u64, u64)>,
) -> Result<(BufId, BufId, Way), Skip> {
    if src == dst {
        return Err(Skip::SameBuffer);
    }
    match (m.host_mapped(src), m.host_mapped(dst)) {
        (false, false) => Err(Skip::GpuOnly),
        (true, false) => Ok((src, dst, Way::Up)),
        (false, true) => Ok((dst, src, Way::Down)),
        (true, true) => {
            for b in [src, dst] {
                if !m.watched.contains_key(&b) {
                    return Err(Skip::NoEvidence(b));
                }
            }
            let mut touched = |b: BufId| {
                let (r, w) = *host.entry(b).or_insert_with(|| m.host_accesses(b));
                r + w > 0
            };
            match (touched(src), touched(dst)) {
                (true, true) => Err(Skip::HostBoth),
                (false, false) => Err(Skip::HostNeither),
                (true, false) => Ok((src, dst, Way::Up)),
                (false, true) => Ok((dst, src, Way::Down)),
            }
        }
    }
}

/// Every (staging, device) pair linked by at least one executed copy, in order of first copy;
/// and the executed copies that made none, with the reason.
pub fn candidates(m: &Model) -> (Vec<Candidate>, Vec<Skipped>) {
    let mut host: BTreeMap<BufId, (u64, u64)> = BTreeMap::new();
    let mut out: Vec<Candidate> = Vec::new();
    let mut index: BTreeMap<(BufId, BufId), usize> = BTreeMap::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    let mut skip_index: BTreeMap<(BufId, BufId, Skip), usize> = BTreeMap::new();
    for s in 0..m.submissions.len() {
        for op in m.ops(s) {
            let OpKind::Copy { src, dst, regions } = &op.kind else {
                continue;
            };
            let (h, d, way) = match roles(m, *src, *dst, &mut host) {
                Ok(r) => r,
                Err(reason) => {
                    let bytes = regions
                        .iter()
                        .map(|r| r.size)
                        .fold(0u64, u64::saturating_add);
                    let i = *skip_index.entry((*src, *dst, reason)).or_insert_with(|| {
                        skipped.push(Skipped {
                            src: *src,
                            dst: *dst,
                            reason,
                            copies: 0,
                            bytes: 0,
                            largest: 0,
                        });
                        skipped.len() - 1
                    });
                    let k = &mut skipped[i];
                    k.copies += 1;
                    k.bytes = k.bytes.saturating_add(bytes);
                    k.largest = k.largest.max(bytes);
                    continue;
                }
            };
            let regions: Vec<(u64, u64, u64)> = regions
                .iter()
                .map(|r| match way {
                    Way::Up => (r.src_offset, r.dst_offset, r.size),
                    Way::Down => (r.dst_offset, r.src_offset, r.size),
                })
                .collect();
            let bytes = regions.iter().map(|r| r.2).fold(0u64, u64::saturating_add);
            let i = *index.entry((h, d)).or_insert_with(|| {
                out.push(Candidate {
                    staging: h,
                    device: d,
                    links: Vec::new(),
                });
                out.len() - 1
            });
            out[i].links.push(Link {
                submission: s,
                recorded: op.recorded,
                way,
                regions,
                bytes,
            });
        }
    }
    (out, skipped)
}

pub fn delta_of(region: &(u64, u64, u64)) -> i64 {
    (region.0 as i128 - region.1 as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Reuse over time: a staging buffer whose copied ranges for two different partners overlap is
/// needed by both, so it pairs with neither. Returns a verdict per candidate index.
pub fn reuse(m: &Model, cands: &[Candidate]) -> BTreeMap<usize, Verdict> {
    let mut by_staging: BTreeMap<BufId, Vec<usize>> = BTreeMap::new();
    for (i, c) in cands.iter().enumerate() {
        by_staging.entry(c.staging).or_default().push(i);
    }
    let mut out = BTreeMap::new();
    for (h, idx) in by_staging {
        if idx.len() < 2 {
            continue;
        }
        for &i in &idx {
            let (lo, hi) = cands[i].staging_range();
            let clash: Vec<usize> = idx
                .iter()
                .copied()
                .filter(|&j| j != i)
                .filter(|&j| {
                    let (l2, h2) = cands[j].staging_range();
                    l2 < hi && lo < h2
                })
                .collect();
            if clash.is_empty() {
                continue;
            }
            let others: Vec<String> = clash
                .iter()
                .map(|&j| format!("#{}", m.buffers[cands[j].device].number))
                .collect();
            // The event: the first copy with another partner that came after one of ours.
            let first_ours = cands[i].links.first().map(|l| l.recorded).unwrap_or(0);
            let event = clash
                .iter()
                .flat_map(|&j| cands[j].links.iter())
                .map(|l| l.recorded)
                .filter(|&s| s > first_ours)
                .min()
                .or_else(|| cands[i].links.get(1).map(|l| l.recorded));
            out.insert(
                i,
                Verdict {
                    cause: Cause::Reuse,
                    event,
                    message: format!(
                        "reuse: staging buffer #{} carries data for device buffer #{} and also, in overlapping bytes [{lo}, {hi}), for {} over time; its bytes are needed by more than one partner, so it cannot share memory with any of them (give each destination its own staging buffer or its own sub-range)",
                        m.buffers[h].number,
                        m.buffers[cands[i].device].number,
                        others.join(", ")
                    ),
                    plain: format!(
                        "The program refills staging buffer #{} for several device buffers in turn (#{}, {}). Its bytes are needed by more than one of them, so it cannot become any one of them.",
                        m.buffers[h].number,
                        m.buffers[cands[i].device].number,
                        others.join(", ")
                    ),
                },
            );
        }
    }
    out
}

/// One constant offset: byte `i` of `d` ↔ byte `i + delta` of `h` for every region of every copy.
pub fn offset(m: &Model, c: &Candidate) -> Result<i64, Verdict> {
    let mut delta: Option<(i64, u64)> = None;
    for l in &c.links {
        for r in &l.regions {
            let d = delta_of(r);
            match delta {
                None => delta = Some((d, l.recorded)),
                Some((d0, first)) if d0 != d => {
                    return Err(Verdict {
                        cause: Cause::Offset,
                        event: Some(l.recorded),
                        message: format!(
                            "offset: the copy recorded at event {} maps byte i of device buffer #{} to byte i{:+} of staging buffer #{}, but the copy recorded at event {first} used i{d0:+}; the two cannot share one range (a ring of staging slots?)",
                            l.recorded,
                            m.buffers[c.device].number,
                            d,
                            m.buffers[c.staging].number
                        ),
                        plain: format!(
                            "The program copies between staging buffer #{} and device buffer #{} at changing positions (a ring of slots?), so no single overlap of the two keeps every copy's bytes in place.",
                            m.buffers[c.staging].number,
                            m.buffers[c.device].number
                        ),
                    })
                }
                _ => {}
            }
        }
    }
    Ok(delta.map_or(0, |d| d.0))
}

/// A single transfer, then the staging buffer destroyed: an upload (weights, tables) or a
/// download (a result read back once).
pub fn is_one_time(m: &Model, c: &Candidate) -> bool {
    c.links.len() == 1
        && m.buffers[c.staging]
            .destroyed
            .is_some_and(|d| d > m.submissions[c.links[0].submission].seq)
}

/// `≥ min_copies` copies of `≥ min_bytes` each, or a one-time transfer of `≥ min_bytes`.
pub fn threshold(m: &Model, c: &Candidate, t: Thresholds) -> Result<(), Verdict> {
    let big = c.links.iter().filter(|l| l.bytes >= t.min_bytes).count() as u64;
    if big >= t.min_copies {
        return Ok(());
    }
    if is_one_time(m, c) && c.links[0].bytes >= t.min_bytes {
        return Ok(());
    }
    let largest = c.links.iter().map(|l| l.bytes).max().unwrap_or(0);
    Err(Verdict {
        cause: Cause::Threshold,
        event: c.links.first().map(|l| l.recorded),
        message: format!(
            "threshold: {} cop{} between staging buffer #{} and device buffer #{} (largest {}), {big} of at least {} bytes; a pair needs {} such copies (settings min_copies/min_bytes), or one upload or download after which the staging buffer is destroyed",
            c.links.len(),
            if c.links.len() == 1 { "y" } else { "ies" },
            m.buffers[c.staging].number,
            m.buffers[c.device].number,
            crate::words::human_bytes(largest),
            t.min_bytes,
            t.min_copies
        ),
        plain: format!(
            "Staging buffer #{} and device buffer #{} exchange too little data to be worth sharing memory ({} cop{}, the largest {}).",
            m.buffers[c.staging].number,
            m.buffers[c.device].number,
            c.links.len(),
            if c.links.len() == 1 { "y" } else { "ies" },
            crate::words::human_bytes(largest)
        ),
    })
}
