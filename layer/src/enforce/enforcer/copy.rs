//! Copy elision (DESIGN §6): a region of `vkCmdCopyBuffer`/`vkCmdCopyBuffer2(KHR)` whose source
//! and destination resolve to the same memory and offset is a self-copy and is dropped (it must
//! be: forwarding it violates VUID-vkCmdCopyBuffer-pRegions-00117); the other regions pass
//! through. In place of dropped regions one substitute barrier is recorded:
//!
//! `ALL_COMMANDS → ALL_COMMANDS | HOST`, memory barrier `MEMORY_WRITE → MEMORY_READ |
//! MEMORY_WRITE | HOST_READ | HOST_WRITE`.
//!
//! Why that keeps every ordering the copy gave: the copy was a transfer-stage command that read
//! the source and wrote the destination, so the application's barriers before it end in a
//! scope that contains TRANSFER, and its barriers after it start in one that contains TRANSFER.
//! The substitute barrier's first scope (ALL_COMMANDS) contains TRANSFER and every earlier
//! command, so it chains after the barriers before; its second scope (ALL_COMMANDS) contains
//! TRANSFER, so the barriers after chain on it. Its first access scope is every earlier write,
//! which also covers the case where the copy was what carried a shader write into a later
//! TRANSFER_WRITE → HOST_READ barrier's source scope (readback): the shader's writes are now
//! made available and visible to the host by this barrier itself. Host writes before the
//! submission are visible to every command of the submission (no barrier needed); every
//! `vkQueueSubmit` is kept, so fences and semaphores signal as before.

use super::{Elided, Enforcer};
use crate::events::BufferCopy;
use crate::log;
use crate::records::Device;
use ash::vk;
use ash::vk::Handle;
use std::sync::atomic::Ordering;

/// One region, as (src offset, dst offset, size).
type Region = (u64, u64, u64);

impl Elided {
    fn add(&mut self, o: &Elided) {
        self.copies += o.copies;
        self.regions += o.regions;
        self.bytes += o.bytes;
    }
}

/// Which regions of one copy are dropped: a bit per region for up to 64 regions (no
/// allocation on the recording path), else one flag each.
struct Drops {
    n: usize,
    bits: u64,
    more: Vec<bool>,
}

impl Drops {
    fn new(n: usize) -> Drops {
        Drops {
            n,
            bits: 0,
            more: if n > 64 { vec![false; n] } else { Vec::new() },
        }
    }

    fn set(&mut self, i: usize) {
        if self.n > 64 {
            self.more[i] = true;
        } else {
            self.bits |= 1 << i;
        }
    }

    fn get(&self, i: usize) -> bool {
        if self.n > 64 {
            self.more[i]
        } else {
            self.bits & (1 << i) != 0
        }
    }

    fn any(&self) -> bool {
        self.bits != 0 || self.more.iter().any(|&d| d)
    }

    fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.n).map(|i| self.get(i))
    }
}

impl Enforcer {
    /// Which regions of a copy from `src` to `dst` are self-copies. `None`: nothing to change
    /// (the fast path: no buffer aliased, or the buffers live in different memory).
    fn self_copies(
        &self,
        dev: &Device,
        src: u64,
        dst: u64,
        regions: impl Iterator<Item = Region> + Clone,
    ) -> Option<Drops> {
        // A bind still held back happens now, before any early return: the copy must never
        // reach the driver naming a buffer with no memory bound (issue 23: held back while no
        // buffer is aliased yet, so `any_alias` is still false; VUID-vkCmdCopyBuffer-
        // dstBuffer-00121). One relaxed load each when nothing is held back.
        self.touch(dev, src);
        self.touch(dev, dst);
        if !self.any_alias.load(Ordering::Acquire) || self.keep_self_copies {
            return None;
        }
        let (sm, so) = dev.state.buffers.get(&src).and_then(|b| b.bound)?;
        let (dm, doff) = dev.state.buffers.get(&dst).and_then(|b| b.bound)?;
        // Only for `regions_passed` (a region of a group's copy that still runs): looked up when
        // some region passes, never on the path where every region is dropped.
        let same_group = || self.same_group(src, dst);
        if sm != dm {
            if same_group() {
                let n = regions.count() as u64;
                self.c.regions_passed.fetch_add(n, Ordering::Relaxed);
            }
            return None;
        }
        let mut drop = Drops::new(regions.clone().count());
        let mut passed = 0u64;
        for (i, (s, d, n)) in regions.enumerate() {
            let (a, b) = (so + s, doff + d);
            if a == b {
                drop.set(i);
                continue;
            }
            if a < b + n && b < a + n {
                log::warn_once(
                    "enforce-overlap",
                    format_args!(
                        "enforce: a copy region overlaps itself inside one allocation after aliasing (src {a}, dst {b}, {n} bytes); passed through unchanged"
                    ),
                );
            }
            passed += 1;
        }
        if passed > 0 && same_group() {
            self.c.regions_passed.fetch_add(passed, Ordering::Relaxed);
        }
        drop.any().then_some(drop)
    }

    /// Counts regions dropped while recording `cb` (the recorded count), and keeps them in
    /// `cb`'s tally, which every submission of `cb` adds to the executed count
    /// ([`Enforcer::on_submit`]).
    fn count_dropped(&self, cb: vk::CommandBuffer, dropped: u64, bytes: u64, all: bool) {
        self.c.regions_elided.fetch_add(dropped, Ordering::Relaxed);
        self.c.bytes_elided.fetch_add(bytes, Ordering::Relaxed);
        if all {
            self.c.copies_elided.fetch_add(1, Ordering::Relaxed);
        }
        let mut t = self.elided_in.entry(cb.as_raw()).or_default();
        t.copies += u64::from(all);
        t.regions += dropped;
        t.bytes += bytes;
        self.any_elided.store(true, Ordering::Release);
    }

    /// `vkBeginCommandBuffer`, `vkResetCommandBuffer`, a pool reset or free: `cbs` hold no
    /// elided copy any more.
    pub fn on_reset(&self, cbs: &[u64]) {
        self.clear_content(cbs);
        if self.elides() {
            for cb in cbs {
                self.elided_in.remove(cb);
            }
        }
    }

    /// `vkCmdExecuteCommands`: the secondaries' elided copies run with `cb`.
    pub fn on_execute(&self, cb: u64, secondaries: &[u64]) {
        if !self.elides() {
            return;
        }
        let mut sum = Elided::default();
        for s in secondaries {
            if let Some(t) = self.elided_in.get(s) {
                sum.add(&t);
            }
        }
        if sum.regions > 0 {
            self.elided_in.entry(cb).or_default().add(&sum);
        }
    }

    /// Some command buffer was recorded with an elided copy (else recording and submissions
    /// skip the tally: one relaxed load).
    #[inline]
    pub fn elides(&self) -> bool {
        self.any_elided.load(Ordering::Relaxed)
    }

    /// A submission of `cbs` went down successfully: their elided copies did not run this time
    /// (bytes elided count what ran: a command buffer submitted N times elides N times).
    pub fn on_submit(&self, cbs: impl Iterator<Item = u64>) {
        if !self.elides() {
            return;
        }
        for cb in cbs {
            if let Some(t) = self.elided_in.get(&cb) {
                self.c
                    .copies_elided_run
                    .fetch_add(t.copies, Ordering::Relaxed);
                self.c
                    .regions_elided_run
                    .fetch_add(t.regions, Ordering::Relaxed);
                self.c
                    .bytes_elided_run
                    .fetch_add(t.bytes, Ordering::Relaxed);
            }
        }
    }

    /// Guard: tells the guard which ranges of guarded memory `cb`'s dropped regions covered
    /// (`(src offset, size)` of each), and whether they were uploads (out of a staging member).
    fn note_elided(
        &self,
        dev: &Device,
        cb: vk::CommandBuffer,
        src: u64,
        dropped: impl Iterator<Item = (u64, u64)>,
    ) {
        let Some(g) = self.guard() else { return };
        let Some((memory, so)) = dev.state.buffers.get(&src).and_then(|b| b.bound) else {
            return;
        };
        let upload = self.is_staging_member(src);
        for (s, size) in dropped {
            g.elided(
                cb.as_raw(),
                crate::enforce::guard::Elided {
                    memory,
                    offset: so + s,
                    size,
                    upload,
                },
            );
        }
    }

    /// Records the substitute barrier (see the module comment).
    fn substitute_barrier(&self, dev: &Device, cb: vk::CommandBuffer) {
        let mb = vk::MemoryBarrier {
            src_access_mask: vk::AccessFlags::MEMORY_WRITE,
            dst_access_mask: vk::AccessFlags::MEMORY_READ
                | vk::AccessFlags::MEMORY_WRITE
                | vk::AccessFlags::HOST_READ
                | vk::AccessFlags::HOST_WRITE,
            ..Default::default()
        };
        // SAFETY: cb is the application's command buffer in the recording state (it just
        // recorded a copy, which is only legal outside a render pass).
        unsafe {
            (dev.fp.cmd_pipeline_barrier)(
                cb,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::ALL_COMMANDS | vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                1,
                &mb,
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        };
        self.c.barriers_inserted.fetch_add(1, Ordering::Relaxed);
    }

    /// `vkCmdCopyBuffer` and `vkCmdCopyBuffer2(KHR)`, one path (`events::BufferCopy`):
    /// `down(c)` records `c` — as asked, or with the self-copy regions left out — through the
    /// next layer.
    ///
    /// # Safety
    /// `c` describes the application's valid arguments.
    pub unsafe fn cmd_copy<C: BufferCopy>(&self, dev: &Device, c: C, down: impl FnOnce(C)) {
        let cb = c.cb();
        let (src, dst) = c.buffers();
        let rs = c.regions();
        let Some(drop) = self.self_copies(dev, src, dst, rs.iter().map(C::region)) else {
            return down(c);
        };
        let (keep, bytes) = split_regions(rs, &drop, |r| C::region(r).2);
        self.count_dropped(cb, (rs.len() - keep.len()) as u64, bytes, keep.is_empty());
        if self.guard.is_some() {
            let dropped = rs.iter().zip(drop.iter()).filter(|(_, d)| *d);
            self.note_elided(
                dev,
                cb,
                src,
                dropped.map(|(r, _)| (C::region(r).0, C::region(r).2)),
            );
        }
        if !keep.is_empty() {
            down(c.with_regions(&keep));
        }
        self.substitute_barrier(dev, cb);
    }
}

/// The regions to keep (in order) and the bytes of the dropped ones.
fn split_regions<R: Copy>(rs: &[R], drop: &Drops, size: impl Fn(&R) -> u64) -> (Vec<R>, u64) {
    let keep = rs
        .iter()
        .zip(drop.iter())
        .filter(|(_, d)| !d)
        .map(|(r, _)| *r)
        .collect();
    let bytes = rs
        .iter()
        .zip(drop.iter())
        .filter(|(_, d)| *d)
        .map(|(r, _)| size(r))
        .sum();
    (keep, bytes)
}
