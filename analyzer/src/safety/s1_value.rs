//! S1 value: every read of a group buffer (host or GPU) must see, once the buffers share memory,
//! the value the original program read.
//!
//! Version simulation in device-buffer coordinates: every write makes a new version. The
//! *original* world keeps one byte-range version map per buffer (the device buffer and each
//! member); linking copies (the ones enforce drops) propagate versions between them. The *merged*
//! world keeps one map for the shared range; linking copies are no-ops there. A read is fine iff
//! over the bytes it reads the original version equals the merged one (or the original bytes were
//! never written: reading undefined contents is not a value to keep).
//!
//! GPU commands are placed at their submission (S2 guarantees separately that no host access to a
//! member overlaps GPU work on the group). A host access record says the host touched the buffer,
//! not which bytes: a *read* may be of any byte (the whole buffer is compared), and a *write* may
//! have left any byte as it was (issue 45: a program that rewrites only part of its upload buffer
//! found the earlier "a write covers the whole buffer" wrong). So a host write gives a byte one new
//! version in both worlds where the two worlds agree on it already — whatever bytes the host
//! wrote, they then still agree — and, where they disagree, a new version in each world that is
//! not the other's: the byte is the host's in both, or still what it was in each, and a later
//! read of it is caught either way.
//!
//! A GPU write through a shader binding is of unknown extent as well: the use names the bound
//! range, and a shader writes what its invocations reach (a dispatch with a base or fewer groups
//! writes part of it; the fuzzer's program did, and a copy the group drops had overwritten the
//! rest). So it gets the same treatment; only fills and updates write exactly their range.
//!
//! Bytes the host wrote into a member's memory before its bind (map → memcpy → unmap → bind) are
//! carried into the shared range by enforce at the bind: a write in both worlds at the bind.
//!
//! The layer sees host accesses to a staging buffer only once it is a candidate (after its first
//! copy), so what the host wrote into a mapped member before that is not in the trace. When a
//! member that no recorded host access or GPU command has touched yet is first *read* by a GPU
//! command, its contents count as one such unseen host write, made at a time the trace does not
//! show: the original world holds it; the shared range holds it where nothing was written there
//! yet, and elsewhere a version of its own (the host's bytes, or what the GPU wrote after them).
//! A later value in the device buffer that clobbers it is then caught, instead of passing as
//! "undefined", and so is one written before it.

use super::{Cause, Ctx, GroupSpec, Verdict};
use crate::model::{BufId, OpKind, Step};
use crate::trace::UseKind;

type Ver = u32;

/// Versions over `[lo, hi)`: sorted, contiguous segments `(start, end, version)`; 0 = never written.
#[derive(Clone, Debug)]
struct VMap {
    lo: i64,
    hi: i64,
    segs: Vec<(i64, i64, Ver)>,
}

impl VMap {
    fn new(lo: i64, hi: i64) -> VMap {
        let segs = if lo < hi { vec![(lo, hi, 0)] } else { vec![] };
        VMap { lo, hi, segs }
    }

    fn set(&mut self, a: i64, b: i64, v: Ver) {
        let (a, b) = (a.max(self.lo), b.min(self.hi));
        if a >= b {
            return;
        }
        let mut out: Vec<(i64, i64, Ver)> = Vec::with_capacity(self.segs.len() + 2);
        let mut inserted = false;
        let push = |out: &mut Vec<(i64, i64, Ver)>, s: i64, e: i64, x: Ver| {
            if s >= e {
                return;
            }
            if let Some(last) = out.last_mut() {
                if last.2 == x && last.1 == s {
                    last.1 = e;
                    return;
                }
            }
            out.push((s, e, x));
        };
        for &(s, e, x) in &self.segs {
            if s < a {
                push(&mut out, s, e.min(a), x);
            }
            if e > a && s < b && !inserted {
                push(&mut out, a, b, v);
                inserted = true;
            }
            if e > b {
                push(&mut out, s.max(b), e, x);
            }
        }
        self.segs = out;
    }

    fn slices(&self, a: i64, b: i64) -> Vec<(i64, i64, Ver)> {
        self.segs
            .iter()
            .filter(|&&(s, e, _)| s < b && e > a)
            .map(|&(s, e, x)| (s.max(a), e.min(b), x))
            .collect()
    }

    fn copy_from(&mut self, src: &VMap, a: i64, b: i64) {
        for (s, e, x) in src.slices(a, b) {
            self.set(s, e, x);
        }
    }
}

/// Ranges for a message: the first few, and how many more.
fn ranges_text(r: &[(u64, u64)]) -> String {
    if r.is_empty() {
        return "no byte".into();
    }
    let mut s: Vec<String> = r.iter().take(4).map(|(a, b)| format!("{a}..{b}")).collect();
    if r.len() > 4 {
        s.push(format!("and {} more ranges", r.len() - 4));
    }
    format!("bytes {}", s.join(", "))
}

/// First byte range in `[a, b)` where the original world holds a defined version that differs
/// from the merged world's: `(original, merged)`.
fn mismatch(orig: &VMap, merged: &VMap, a: i64, b: i64) -> Option<(Ver, Ver)> {
    for (s, e, x) in orig.slices(a, b) {
        if x == 0 {
            continue;
        }
        for (_, _, y) in merged.slices(s, e) {
            if y != x {
                return Some((x, y));
            }
        }
    }
    None
}

struct Sim<'a> {
    g: &'a GroupSpec,
    /// Index 0: the device buffer; 1..: the members, in `g.members` order.
    orig: Vec<VMap>,
    merged: VMap,
    /// Where each version came from, for messages. Index 0 = undefined.
    origin: Vec<String>,
    /// Per slot: a recorded host access or a GPU command touched it already.
    seen: Vec<bool>,
}

impl Sim<'_> {
    fn slot(&self, b: BufId) -> Option<usize> {
        if b == self.g.device {
            return Some(0);
        }
        self.g.members.iter().position(|m| m.0 == b).map(|i| i + 1)
    }
    fn delta(&self, slot: usize) -> i64 {
        if slot == 0 {
            0
        } else {
            self.g.members[slot - 1].1
        }
    }
    /// Buffer range → device coordinates.
    fn range(&self, slot: usize, off: u64, len: u64) -> (i64, i64) {
        let d = self.delta(slot) as i128;
        let a = off as i128 - d;
        let b = a + len as i128;
        (
            a.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            b.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        )
    }
    fn fresh(&mut self, what: String) -> Ver {
        self.origin.push(what);
        (self.origin.len() - 1) as Ver
    }
    fn write(&mut self, slot: usize, a: i64, b: i64, what: String) {
        let v = self.fresh(what);
        self.orig[slot].set(a, b, v);
        self.merged.set(a, b, v);
    }
    /// A write of unknown extent within `[a, b)` by the host or a shader (see the module doc).
    fn partial_write(&mut self, slot: usize, a: i64, b: i64, what: String) {
        let v = self.fresh(what.clone());
        // Where the worlds disagree, each byte may now be the writer's (the same in both) or
        // what it was (different): two fresh versions, so any later read of it is caught.
        let (p, q) = (
            self.fresh(format!(
                "{what} (or, where it did not write, the bytes before it)"
            )),
            self.fresh(format!(
                "{what} (or, where it did not write, the group's bytes before it)"
            )),
        );
        // Bytes the original program never wrote count as agreeing: where the writer did not
        // reach them they stay undefined there, and reading undefined bytes keeps no value.
        let mut segs = Vec::new();
        for (s, e, x) in self.orig[slot].slices(a, b) {
            for (s2, e2, y) in self.merged.slices(s, e) {
                segs.push((s2, e2, x == y || x == 0));
            }
        }
        for (s, e, agree) in segs {
            if agree {
                self.orig[slot].set(s, e, v);
                self.merged.set(s, e, v);
            } else {
                self.orig[slot].set(s, e, p);
                self.merged.set(s, e, q);
            }
        }
    }
    /// A host write whose bytes the profiler saw exactly (issue 54): `ranges` (offsets in the
    /// member, sorted, disjoint) are the host's in both worlds; every other byte of the member
    /// kept what it held in each. Where the two disagree there, the original's bytes get a
    /// version of their own that names the gap, so the read that finds them says which bytes
    /// of which write were not rewritten.
    fn exact_write(
        &mut self,
        slot: usize,
        size: u64,
        ranges: &[(u64, u64)],
        what: String,
        number: usize,
    ) {
        let v = self.fresh(what.clone());
        for &(f, t) in ranges {
            let (x, y) = self.range(slot, f, t.saturating_sub(f));
            self.orig[slot].set(x, y, v);
            self.merged.set(x, y, v);
        }
        // The gaps: [0, size) less the ranges.
        let mut gaps = Vec::new();
        let mut at = 0u64;
        for &(f, t) in ranges {
            if f > at {
                gaps.push((at, f));
            }
            at = at.max(t);
        }
        if at < size {
            gaps.push((at, size));
        }
        for (f, t) in gaps {
            let (x, y) = self.range(slot, f, t - f);
            let mut relabel = Vec::new();
            for (s, e, o) in self.orig[slot].slices(x, y) {
                if o == 0 {
                    continue;
                }
                for (s2, e2, m) in self.merged.slices(s, e) {
                    if m != o {
                        relabel.push((s2, e2, o));
                    }
                }
            }
            for (s2, e2, o) in relabel {
                let d = self.delta(slot);
                let (b0, b1) = (s2 + d, e2 + d);
                let kept = format!(
                    "bytes {b0}..{b1} of staging buffer #{number}, which {what} did not rewrite (the exact host writes of its window cover {}), so still {}",
                    ranges_text(ranges),
                    self.desc(o)
                );
                let k = self.fresh(kept);
                self.orig[slot].set(s2, e2, k);
            }
        }
    }
    fn read(&self, slot: usize, a: i64, b: i64) -> Option<(Ver, Ver)> {
        mismatch(&self.orig[slot], &self.merged, a, b)
    }
    /// A GPU command reads member `slot` (buffer `b`): if nothing recorded touched it before and
    /// the host maps it, the host's unseen writes before its first copy become its value now.
    ///
    /// The device buffer, when it lives in memory the host had mapped before its bind (an
    /// allocator's persistently mapped block), may likewise hold host writes made before the
    /// bind (its accesses are watched only from the bind on): the same unseen write.
    fn first_read(&mut self, m: &crate::model::Model, slot: usize, b: BufId) {
        if std::mem::replace(&mut self.seen[slot], true) || !m.host_mapped(b) {
            return;
        }
        if slot == 0 && !m.written_before_bind.iter().any(|x| x.0 == b) {
            return;
        }
        let (a, e) = self.range(slot, 0, m.buffers[b].size);
        let what = format!(
            "the host's writes to {} buffer #{} before {} (not traced)",
            if slot == 0 { "device" } else { "staging" },
            m.buffers[b].number,
            if slot == 0 {
                "its bind"
            } else {
                "its first copy"
            }
        );
        if slot == 0 {
            // Those bytes lie where the device buffer was first bound; once it shares a
            // staging range they are not in the shared range (fail closed: either direction).
            let v = self.fresh(what);
            self.orig[0].set(a, e, v);
        } else {
            // When they were made is not known: before or after what the trace shows written
            // into the shared range since. Where something was, the shared range holds either
            // (a version of its own); where nothing was, the host's.
            let v = self.fresh(what.clone());
            let q = self.fresh(format!(
                "{what}, or what the group's memory held after them (their time is unknown)"
            ));
            self.orig[slot].set(a, e, v);
            for (s, t, y) in self.merged.slices(a, e) {
                self.merged.set(s, t, if y == 0 { v } else { q });
            }
        }
    }
    fn desc(&self, v: Ver) -> &str {
        self.origin
            .get(v as usize)
            .map(|s| s.as_str())
            .unwrap_or("an unknown write")
    }
}

pub fn check(ctx: &Ctx, g: &GroupSpec) -> Result<(), Verdict> {
    let m = ctx.m;
    let dbuf = &m.buffers[g.device];
    let mut lo = 0i64;
    let mut hi = dbuf.size.min(i64::MAX as u64) as i64;
    let mut orig = vec![VMap::new(0, hi)];
    for &(h, delta) in &g.members {
        let size = m.buffers[h].size.min(i64::MAX as u64) as i64;
        let (a, b) = (-delta, size.saturating_sub(delta));
        lo = lo.min(a);
        hi = hi.max(b);
        orig.push(VMap::new(a, b));
    }
    let slots = orig.len();
    let mut sim = Sim {
        g,
        orig,
        merged: VMap::new(lo, hi),
        origin: vec!["nothing (undefined contents)".into()],
        seen: vec![false; slots],
    };
    let role = |slot: usize| if slot == 0 { "device" } else { "staging" };
    let buf_of = |slot: usize| {
        if slot == 0 {
            g.device
        } else {
            g.members[slot - 1].0
        }
    };
    let name = |slot: usize| ctx.name(buf_of(slot), role(slot));
    let short = |slot: usize| ctx.short(buf_of(slot), role(slot));

    // Members the host wrote before their bind, by bind seq: carried in both worlds at the bind.
    let mut carried: Vec<(u64, usize, BufId)> = m
        .written_before_bind
        .iter()
        .filter_map(|&(b, at)| sim.slot(b).filter(|&s| s > 0).map(|s| (at, s, b)))
        .collect();
    carried.sort_unstable();
    let mut carried = carried.into_iter().peekable();
    for (seq, step) in &m.timeline {
        while let Some((at, slot, b)) = carried.next_if(|c| c.0 < *seq) {
            sim.seen[slot] = true;
            let (x, y) = sim.range(slot, 0, m.buffers[b].size);
            let what = format!(
                "the host's writes to staging buffer #{} before its bind at event {at}",
                m.buffers[b].number
            );
            // The carry moves every byte of the member's first memory: all of it, both worlds.
            sim.write(slot, x, y, what);
        }
        match step {
            Step::Complete(_) => {}
            Step::Host { buffer, access } => {
                let Some(slot) = sim.slot(*buffer) else {
                    continue;
                };
                sim.seen[slot] = true;
                let (a, b) = sim.range(slot, 0, m.buffers[*buffer].size);
                if access.reads() {
                    if let Some((x, y)) = sim.read(slot, a, b) {
                        return Err(Verdict {
                            cause: Cause::S1HostRead,
                            event: Some(*seq),
                            message: format!(
                                "S1: the host read {} at event {seq}; the original program reads there {}, but sharing memory with the group it would read {} (the host expects the buffers to hold different data at once)",
                                name(slot),
                                sim.desc(x),
                                sim.desc(y)
                            ),
                            plain: format!(
                                "The program reads {} expecting {}; sharing memory it would read {} instead. The program needs the two buffers to hold different data at the same time.",
                                short(slot),
                                sim.desc(x),
                                sim.desc(y)
                            ),
                        });
                    }
                }
                if access.writes() {
                    let what = format!(
                        "the host's write to staging buffer #{} at event {seq}",
                        m.buffers[*buffer].number
                    );
                    if m.whole_host_writes {
                        sim.write(slot, a, b, what);
                    } else if let Some(Ok(ranges)) = m.exact_writes.get(seq) {
                        let size = m.buffers[*buffer].size;
                        sim.exact_write(slot, size, ranges, what, m.buffers[*buffer].number);
                    } else {
                        sim.partial_write(slot, a, b, what);
                    }
                }
            }
            Step::Submit(s) => {
                let sub_seq = m.submissions[*s].seq;
                for op in m.ops(*s) {
                    match &op.kind {
                        OpKind::Copy { src, dst, regions } => {
                            let (ss, ds) = (sim.slot(*src), sim.slot(*dst));
                            if ss.is_none() && ds.is_none() {
                                continue;
                            }
                            if let Some(a) = ss {
                                sim.first_read(m, a, *src);
                            }
                            if let Some(b) = ds {
                                sim.seen[b] = true;
                            }
                            for r in regions {
                                // A linking copy: member ↔ device at the member's delta.
                                if let (Some(a), Some(b)) = (ss, ds) {
                                    let linking = (a == 0) != (b == 0) && {
                                        let slot = a.max(b);
                                        let (ho, dof) = if a == 0 {
                                            (r.dst_offset, r.src_offset)
                                        } else {
                                            (r.src_offset, r.dst_offset)
                                        };
                                        ho as i128 - dof as i128 == sim.delta(slot) as i128
                                    };
                                    if linking {
                                        let (x, y) = sim.range(a, r.src_offset, r.size);
                                        let src_map = sim.orig[a].clone();
                                        sim.orig[b].copy_from(&src_map, x, y);
                                        continue;
                                    }
                                }
                                if let Some(a) = ss {
                                    let (x, y) = sim.range(a, r.src_offset, r.size);
                                    if let Some((o, mm)) = sim.read(a, x, y) {
                                        return Err(gpu_verdict(
                                            (&name(a), &short(a)),
                                            op.recorded,
                                            "vkCmdCopyBuffer",
                                            sub_seq,
                                            sim.desc(o),
                                            sim.desc(mm),
                                        ));
                                    }
                                }
                                if let Some(b) = ds {
                                    let (x, y) = sim.range(b, r.dst_offset, r.size);
                                    let what = format!(
                                        "the copy into {} buffer #{} in submission {sub_seq}",
                                        role(b),
                                        m.buffers[*dst].number
                                    );
                                    sim.write(b, x, y, what);
                                }
                            }
                        }
                        OpKind::Use {
                            buffer,
                            offset,
                            size,
                            access,
                            command,
                            kind,
                        } => {
                            let Some(slot) = sim.slot(*buffer) else {
                                continue;
                            };
                            if access.reads() {
                                sim.first_read(m, slot, *buffer);
                            }
                            sim.seen[slot] = true;
                            let (x, y) = sim.range(slot, *offset, *size);
                            if access.reads() {
                                if let Some((o, mm)) = sim.read(slot, x, y) {
                                    return Err(gpu_verdict(
                                        (&name(slot), &short(slot)),
                                        op.recorded,
                                        command,
                                        sub_seq,
                                        sim.desc(o),
                                        sim.desc(mm),
                                    ));
                                }
                            }
                            if access.writes() {
                                let what = format!(
                                    "{command} writing {} buffer #{} in submission {sub_seq}",
                                    role(slot),
                                    m.buffers[*buffer].number
                                );
                                if matches!(kind, UseKind::Fill | UseKind::Update) {
                                    sim.write(slot, x, y, what);
                                } else {
                                    sim.partial_write(slot, x, y, what);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn gpu_verdict(
    (buf, short): (&str, &str),
    recorded: u64,
    command: &str,
    sub_seq: u64,
    orig: &str,
    merged: &str,
) -> Verdict {
    Verdict {
        cause: Cause::S1GpuRead,
        event: Some(sub_seq),
        message: format!(
            "S1: {command} (recorded at event {recorded}) in submission {sub_seq} reads {buf}; in the original program it holds {orig}, but sharing memory it would hold {merged} (a value still live on the device was overwritten through the staging buffer, or the reverse)"
        ),
        plain: format!(
            "The GPU reads {short} ({command} in submission {sub_seq}) expecting {orig}; sharing memory it would find {merged} there instead — sharing memory would change what the GPU reads."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmap_set_splits_and_merges() {
        let mut v = VMap::new(0, 100);
        v.set(10, 20, 1);
        v.set(20, 30, 1);
        assert_eq!(v.segs, vec![(0, 10, 0), (10, 30, 1), (30, 100, 0)]);
        v.set(-5, 5, 2);
        assert_eq!(v.segs[0], (0, 5, 2));
        v.set(0, 100, 3);
        assert_eq!(v.segs, vec![(0, 100, 3)]);
        let mut w = VMap::new(0, 100);
        w.set(50, 60, 3);
        assert_eq!(mismatch(&w, &v, 0, 100), None);
        w.set(55, 56, 4);
        assert_eq!(mismatch(&w, &v, 0, 100), Some((4, 3)));
        assert_eq!(mismatch(&w, &v, 0, 55), None);
    }

    /// A byte-per-entry model of a version map, the obvious way.
    fn bytes(v: &VMap) -> Vec<Ver> {
        let mut out = Vec::new();
        for &(s, e, x) in &v.segs {
            out.extend((s..e).map(|_| x));
        }
        out
    }

    /// The segments are the map's normal form: they cover `[lo, hi)` in order, each non-empty,
    /// and no two neighbours hold the same version.
    fn assert_normal(v: &VMap) {
        let mut at = v.lo;
        for (i, &(s, e, x)) in v.segs.iter().enumerate() {
            assert_eq!(s, at, "segments not contiguous: {:?}", v.segs);
            assert!(s < e, "empty segment: {:?}", v.segs);
            if i > 0 {
                assert_ne!(v.segs[i - 1].2, x, "neighbours not merged: {:?}", v.segs);
            }
            at = e;
        }
        assert_eq!(
            at,
            v.hi.max(v.lo),
            "segments do not reach the end: {:?}",
            v.segs
        );
    }

    /// `set`, `slices`, `copy_from` and `mismatch` against the byte model, over random ranges
    /// that start and end inside, on and outside the map's bounds (issue 55: each boundary of
    /// these comparisons decides whether a read sees the value the original program read).
    #[test]
    fn vmap_agrees_with_a_byte_model() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let lo = next(6) as i64 - 3;
            let hi = lo + next(12) as i64;
            let mut v = VMap::new(lo, hi);
            let mut w = VMap::new(lo, hi);
            let mut model = vec![0 as Ver; (hi - lo) as usize];
            let mut wmodel = model.clone();
            for step in 0..12 {
                let a = lo - 2 + next((hi - lo + 5) as u64) as i64;
                let b = a + next(6) as i64 - 1;
                let x = 1 + next(3) as Ver;
                if step % 3 == 2 {
                    // copy_from: w takes v's versions over [a, b).
                    w.copy_from(&v, a, b);
                    for i in a.max(lo)..b.min(hi) {
                        wmodel[(i - lo) as usize] = model[(i - lo) as usize];
                    }
                } else if step % 2 == 0 {
                    v.set(a, b, x);
                    for i in a.max(lo)..b.min(hi) {
                        model[(i - lo) as usize] = x;
                    }
                } else {
                    w.set(a, b, x);
                    for i in a.max(lo)..b.min(hi) {
                        wmodel[(i - lo) as usize] = x;
                    }
                }
                assert_normal(&v);
                assert_normal(&w);
                assert_eq!(bytes(&v), model);
                assert_eq!(bytes(&w), wmodel);
                if a >= b {
                    // An empty range (no copy or use reads zero bytes) is not asked about.
                    continue;
                }
                // slices over [a, b): the bytes of the map there, clipped, in order.
                let sl = v.slices(a, b);
                let mut got = Vec::new();
                for &(s, e, x) in &sl {
                    assert!(a <= s && s < e && e <= b, "slice {s}..{e} outside {a}..{b}");
                    got.extend((s..e).map(|_| x));
                }
                let want: Vec<Ver> = (a.max(lo)..b.min(hi))
                    .map(|i| model[(i - lo) as usize])
                    .collect();
                assert_eq!(got, want, "slices({a}, {b}) of {:?}", v.segs);
                // mismatch: the first byte where w holds a defined version v does not.
                let want = (a.max(lo)..b.min(hi))
                    .map(|i| (wmodel[(i - lo) as usize], model[(i - lo) as usize]))
                    .find(|&(o, m)| o != 0 && o != m);
                assert_eq!(mismatch(&w, &v, a, b), want, "{:?} vs {:?}", w.segs, v.segs);
            }
        }
    }
}
