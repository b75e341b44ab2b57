//! What the validity model knows about memory: which bytes are defined (an interval set per
//! allocation) and every access not yet superseded, with what barriers and semaphores made it
//! visible to (a log in submission order; one queue). The rules are Vulkan's memory model,
//! taken conservatively: a generated program may do less than the specification allows, never
//! more.

use super::{access, stage};

/// A set of half-open byte ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    pub fn add(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let (mut lo, mut hi) = (lo, hi);
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b < lo || a > hi {
                out.push((a, b));
            } else {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        }
        out.push((lo, hi));
        out.sort_unstable();
        self.0 = out;
    }
    pub fn remove(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b <= lo || a >= hi {
                out.push((a, b));
            } else {
                if a < lo {
                    out.push((a, lo));
                }
                if b > hi {
                    out.push((hi, b));
                }
            }
        }
        self.0 = out;
    }
    pub fn covers(&self, lo: u64, hi: u64) -> bool {
        lo >= hi || self.0.iter().any(|&(a, b)| a <= lo && hi <= b)
    }
    /// The parts of `lo..hi` in the set.
    pub fn within(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        self.0
            .iter()
            .filter(|&&(a, b)| b > lo && a < hi)
            .map(|&(a, b)| (a.max(lo), b.min(hi)))
            .collect()
    }
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().copied()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Every stage a mask names (ALL_COMMANDS expanded).
pub fn stages(mask: u64) -> u64 {
    if mask & stage::ALL_COMMANDS != 0 {
        mask | stage::DRAW_INDIRECT | stage::VERTEX_SHADER | stage::COMPUTE | stage::TRANSFER
    } else {
        mask
    }
}

/// Every access a mask names (MEMORY_READ / MEMORY_WRITE expanded).
pub fn accesses(mask: u64) -> u64 {
    let mut m = mask;
    if mask & access::MEMORY_READ != 0 {
        m |= access::INDIRECT_READ
            | access::UNIFORM_READ
            | access::SHADER_READ
            | access::TRANSFER_READ
            | access::HOST_READ;
    }
    if mask & access::MEMORY_WRITE != 0 {
        m |= access::SHADER_WRITE | access::TRANSFER_WRITE | access::HOST_WRITE;
    }
    m
}

/// One access to a memory range.
#[derive(Clone, Debug)]
pub struct Access {
    /// What made it: (0, buffer), (1, image), (2, 0) the host.
    pub res: (u8, u32),
    pub mem: u32,
    pub lo: u64,
    pub hi: u64,
    pub write: bool,
    pub stage: u64,
    pub access: u64,
    /// The submission that made it; `None`: the host.
    pub sub: Option<u64>,
    /// A write made available (by a barrier's source access scope or a semaphore signal).
    pub avail: bool,
    /// (stages, accesses) the write has been made visible to.
    pub vis: Vec<(u64, u64)>,
    /// Stages that have an execution dependency on it.
    pub dep: u64,
    /// The command buffer execution that made it (a device access; set by [`Log::push`]).
    pub run: u64,
    /// A write that superseded an access of another command buffer execution (set by
    /// [`Log::push`]): an event does not order it (see [`Log::barrier`]).
    pub shadows: bool,
}

impl Access {
    fn overlaps(&self, mem: u32, lo: u64, hi: u64) -> bool {
        self.mem == mem && self.lo < hi && lo < self.hi
    }
    fn visible_to(&self, st: u64, acc: u64) -> bool {
        self.vis
            .iter()
            .any(|&(s, a)| stages(s) & st == st && accesses(a) & acc == acc)
    }
}

/// A dependency a new access lacks: what a barrier must cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub src_stage: u64,
    pub src_access: u64,
    pub dst_stage: u64,
    pub dst_access: u64,
}

/// The accesses not yet superseded, in submission order.
#[derive(Clone, Debug, Default)]
pub struct Log {
    pub accesses: Vec<Access>,
    /// The command buffer execution now simulated (the model counts them).
    pub run: u64,
}

impl Log {
    /// What a new device access would lack (empty: it is ordered after everything it must be).
    pub fn device_needs(
        &self,
        mem: u32,
        lo: u64,
        hi: u64,
        write: bool,
        st: u64,
        acc: u64,
    ) -> Vec<(Need, (u8, u32))> {
        let mut needs = Vec::new();
        for e in self.accesses.iter().filter(|e| e.overlaps(mem, lo, hi)) {
            if e.sub.is_none() {
                // The host's accesses before a submission are ordered by the submission.
                continue;
            }
            if e.write && !e.visible_to(st, acc) {
                needs.push((
                    Need {
                        src_stage: e.stage,
                        src_access: e.access,
                        dst_stage: st,
                        dst_access: acc,
                    },
                    e.res,
                ));
            } else if !e.write && write && e.dep & st != st {
                needs.push((
                    Need {
                        src_stage: e.stage,
                        src_access: 0,
                        dst_stage: st,
                        dst_access: acc,
                    },
                    e.res,
                ));
            }
        }
        needs
    }

    /// Whether the host may access the range now: every device access to it completed (its
    /// submission ≤ `done`), and every device write made visible to the host.
    pub fn host_ok(
        &self,
        mem: u32,
        lo: u64,
        hi: u64,
        write: bool,
        done: u64,
    ) -> Result<(), String> {
        let acc = if write {
            access::HOST_WRITE
        } else {
            access::HOST_READ
        };
        for e in self.accesses.iter().filter(|e| e.overlaps(mem, lo, hi)) {
            let Some(s) = e.sub else { continue };
            if s > done {
                return Err(format!(
                    "host {} of memory {mem} [{lo}, {hi}) while submission {s} may still access it",
                    if write { "write" } else { "read" }
                ));
            }
            if e.write && !e.visible_to(stage::HOST, acc) {
                return Err(format!(
                    "host access to memory {mem} [{lo}, {hi}): a GPU write was not made visible to the host"
                ));
            }
        }
        Ok(())
    }

    /// Logs an access (after its checks passed). A write supersedes the accesses it covers
    /// whole.
    pub fn push(&mut self, mut a: Access) {
        if a.sub.is_some() {
            a.run = self.run;
        }
        if a.write {
            let (m, lo, hi) = (a.mem, a.lo, a.hi);
            let covered = |e: &Access| e.mem == m && lo <= e.lo && e.hi <= hi;
            a.shadows |= self
                .accesses
                .iter()
                .any(|e| covered(e) && e.sub.is_some() && e.run != a.run);
            self.accesses.retain(|e| !covered(e));
        }
        self.accesses.push(a);
    }

    /// A pipeline barrier; `scope`: a buffer or image barrier's resource. Taken
    /// conservatively (as synchronization validation does), such a barrier orders only the
    /// accesses made through that resource, not those of others over the same memory.
    /// `event`: an event set and waited on at once; its first scope is taken to hold only the
    /// accesses of this command buffer execution (synchronization validation's reading: the
    /// Vulkan spec's scope, every command before the set in submission order, is wider), and
    /// not a write that hid an earlier execution's access: Vulkan 1.4's validation layer
    /// (Debian 13) still saw a copy's write of an earlier command buffer under a dispatch's
    /// write over the same bytes, and called the read after the event a hazard.
    pub fn barrier(&mut self, scope: Option<(u8, u32)>, n: Need, event: bool) {
        let (ss, sa) = (stages(n.src_stage), accesses(n.src_access));
        let ds = stages(n.dst_stage);
        let run = self.run;
        for e in self
            .accesses
            .iter_mut()
            .filter(|e| e.sub.is_some() && (!event || (e.run == run && !e.shadows)))
        {
            let in_scope = e.stage & ss != 0 || e.dep & ss != 0;
            if !in_scope || scope.is_some_and(|r| r != e.res) {
                continue;
            }
            e.dep |= ds;
            // A memory dependency chains only through an access the write was already made
            // visible to (synchronization validation's rule): an empty source access mask
            // orders execution, nothing more.
            let chained = (e.stage & ss != 0 && e.access & sa != 0)
                || e.vis
                    .iter()
                    .any(|&(vs, va)| stages(vs) & ss != 0 && accesses(va) & sa != 0);
            if e.write && chained {
                e.avail = true;
                e.vis.push((n.dst_stage, n.dst_access));
            }
        }
    }

    /// A semaphore wait at stages `st`: every device access of submissions up to `upto` is
    /// made available and visible to every access of those stages.
    pub fn semaphore(&mut self, upto: u64, st: u64) {
        for e in self.accesses.iter_mut() {
            if e.sub.is_some_and(|s| s <= upto) {
                e.dep |= stages(st);
                if e.write {
                    e.avail = true;
                    e.vis.push((st, access::MEMORY_READ | access::MEMORY_WRITE));
                }
            }
        }
    }

    /// A submission: the host's earlier accesses become visible to all device work after it.
    pub fn host_submitted(&mut self) {
        for e in self.accesses.iter_mut().filter(|e| e.sub.is_none()) {
            e.dep = u64::MAX;
            e.avail = true;
            e.vis = vec![(
                stage::ALL_COMMANDS,
                access::MEMORY_READ | access::MEMORY_WRITE,
            )];
        }
    }

    /// Forgets every access to `mem` (freed).
    pub fn forget(&mut self, mem: u32) {
        self.accesses.retain(|e| e.mem != mem);
    }

    /// Whether a submission after `done` accesses `mem` (at all, or in `lo..hi`).
    pub fn in_flight(&self, mem: u32, range: Option<(u64, u64)>, done: u64) -> bool {
        self.accesses.iter().any(|e| {
            e.sub.is_some_and(|s| s > done)
                && e.mem == mem
                && range.is_none_or(|(lo, hi)| e.lo < hi && lo < e.hi)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let mut r = Ranges::default();
        r.add(0, 10);
        r.add(20, 30);
        assert!(r.covers(0, 10) && !r.covers(5, 25));
        r.add(10, 20);
        assert!(r.covers(0, 30));
        r.remove(5, 8);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(0, 5), (8, 30)]);
        assert_eq!(r.within(4, 9), vec![(4, 5), (8, 9)]);
    }

    /// An event orders the accesses of its own command buffer execution only, and not a write
    /// that hid an earlier execution's access; a pipeline barrier orders both.
    #[test]
    fn an_event_orders_only_its_own_command_buffer() {
        let write = |stage, access, sub| Access {
            res: (0, 1),
            mem: 0,
            lo: 0,
            hi: 64,
            write: true,
            stage,
            access,
            sub: Some(sub),
            avail: false,
            vis: vec![],
            dep: 0,
            run: 0,
            shadows: false,
        };
        let read =
            |log: &Log| log.device_needs(0, 0, 4, false, stage::TRANSFER, access::TRANSFER_READ);
        let mut log = Log {
            run: 1,
            ..Default::default()
        };
        log.push(write(stage::TRANSFER, access::TRANSFER_WRITE, 1));
        log.run = 2;
        let n = read(&log)[0].0;
        let mut ev = log.clone();
        ev.barrier(None, n, true);
        assert_eq!(
            read(&ev).len(),
            1,
            "an event does not reach an earlier execution"
        );
        log.barrier(None, n, false);
        assert!(read(&log).is_empty());
        // A dispatch of this execution writes the same bytes: it hides the copy's write.
        let mut log = Log {
            run: 1,
            ..Default::default()
        };
        log.push(write(stage::TRANSFER, access::TRANSFER_WRITE, 1));
        log.run = 2;
        log.push(write(stage::COMPUTE, access::SHADER_WRITE, 2));
        assert!(log.accesses.len() == 1 && log.accesses[0].shadows);
        let n = read(&log)[0].0;
        let mut ev = log.clone();
        ev.barrier(None, n, true);
        assert_eq!(
            read(&ev).len(),
            1,
            "an event does not order a write that hid another"
        );
        // One that hides a write of its own execution only is ordered by the event.
        let mut log = Log {
            run: 2,
            ..Default::default()
        };
        log.push(write(stage::TRANSFER, access::TRANSFER_WRITE, 2));
        log.push(write(stage::COMPUTE, access::SHADER_WRITE, 2));
        let n = read(&log)[0].0;
        log.barrier(None, n, true);
        assert!(read(&log).is_empty());
    }

    #[test]
    fn a_read_after_a_write_needs_a_barrier() {
        let mut log = Log::default();
        log.push(Access {
            res: (0, 1),
            mem: 0,
            lo: 0,
            hi: 64,
            write: true,
            stage: stage::TRANSFER,
            access: access::TRANSFER_WRITE,
            sub: Some(1),
            avail: false,
            vis: vec![],
            dep: 0,
            run: 0,
            shadows: false,
        });
        let need = log.device_needs(0, 0, 4, false, stage::COMPUTE, access::SHADER_READ);
        assert_eq!(need.len(), 1);
        // A barrier over another buffer orders nothing of this one.
        let n = need[0].0;
        log.barrier(Some((0, 2)), n, false);
        assert_eq!(
            log.device_needs(0, 0, 4, false, stage::COMPUTE, access::SHADER_READ)
                .len(),
            1
        );
        log.barrier(None, n, false);
        assert!(log
            .device_needs(0, 0, 4, false, stage::COMPUTE, access::SHADER_READ)
            .is_empty());
        assert!(
            log.host_ok(0, 0, 4, false, 1).is_err(),
            "not visible to the host"
        );
        let to_host = |src_access| Need {
            src_stage: stage::COMPUTE,
            src_access,
            dst_stage: stage::HOST,
            dst_access: access::HOST_READ,
        };
        log.barrier(None, to_host(0), false);
        assert!(
            log.host_ok(0, 0, 4, false, 1).is_err(),
            "an empty source access mask does not chain"
        );
        log.barrier(None, to_host(access::SHADER_READ), false);
        assert!(log.host_ok(0, 0, 4, false, 0).is_err(), "not complete");
        assert!(
            log.host_ok(0, 0, 4, false, 1).is_ok(),
            "chained through the compute stage"
        );
    }
}
