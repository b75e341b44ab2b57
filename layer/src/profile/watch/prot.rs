//! Protection arithmetic: how far a page or range may open while armed buffers share it, and the
//! one way the guard changes a protection ([`protect`], counted and timed). A page never opens
//! further than its most protected buffer allows: `PROT_NONE` while a buffer with bytes there is
//! unseen in this window, `PROT_READ` while one has only been read ([`page_prot`]); opening a
//! range cuts it at its neighbours' page ranges and gives each piece its own ceiling
//! ([`reprotect`]). Async-signal-safe: the slot table, atomics and `mprotect`.

use super::slots::{slots, Range, Slot, HIGH, SLOTS};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The system page size (read once).
pub(super) fn page_size() -> usize {
    static PS: AtomicUsize = AtomicUsize::new(0);
    let v = PS.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    PS.store(v, Ordering::Relaxed);
    v
}

/// Calls to `mprotect` the guard made (arms, and ranges or pages opened by faults and disarms).
pub(super) static MPROTECTS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds spent in those calls (CLOCK_MONOTONIC, the vDSO: async-signal-safe).
pub(super) static MPROTECT_NS: AtomicU64 = AtomicU64::new(0);

/// CLOCK_MONOTONIC in nanoseconds (the vDSO: async-signal-safe).
pub(super) fn now_ns() -> u64 {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// `mprotect`, counted and timed: the one way the guard changes a protection.
pub(super) unsafe fn protect(start: usize, len: usize, prot: libc::c_int) -> libc::c_int {
    MPROTECTS.fetch_add(1, Ordering::Relaxed);
    let t0 = now_ns();
    let r = libc::mprotect(start as *mut c_void, len, prot);
    MPROTECT_NS.fetch_add(now_ns().wrapping_sub(t0), Ordering::Relaxed);
    r
}

/// Open `[start, end)` (`prot` is never `PROT_NONE`: arming protects in `arm`) and mark every
/// slot whose pages overlap it stale, so its next arm protects again.
pub(super) unsafe fn set_prot(start: usize, end: usize, prot: libc::c_int) {
    if end > start {
        let high = HIGH.load(Ordering::Acquire).min(SLOTS);
        for s in slots(high) {
            if s.pstart.load(Ordering::Relaxed) < end && start < s.pend.load(Ordering::Relaxed) {
                s.stale.store(true, Ordering::SeqCst);
            }
        }
        protect(start, end - start, prot);
    }
}

/// How far a slot in state `st` lets the pages holding its bytes open; `None`: no constraint.
pub(super) fn allowed(st: Range) -> Option<libc::c_int> {
    match st {
        Range::Armed | Range::Busy => Some(libc::PROT_NONE),
        Range::Read => Some(libc::PROT_READ),
        Range::Written => Some(libc::PROT_READ | libc::PROT_WRITE),
        _ => None,
    }
}

/// How far slot `s` (in state `st`) lets `[a, b)` open: as [`allowed`], but an exact slot
/// (issue 54) that has been written keeps its pages readable only — every store of the window
/// must fault and be emulated — except where each of its bytes in `[a, b)` is covered already.
pub(super) fn slot_allows(s: &Slot, st: Range, a: usize, b: usize) -> Option<libc::c_int> {
    if st == Range::Written && s.exact_live() {
        let (s0, s1) = (
            s.start.load(Ordering::Relaxed),
            s.end.load(Ordering::Relaxed),
        );
        let (lo, hi) = (a.max(s0), b.min(s1));
        let full = hi <= lo || super::cover::all_set(s.cover_words(), lo - s0, hi - s0);
        return Some(if full {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        });
    }
    allowed(st)
}

/// Order of protections: none < read < read+write.
pub(super) fn rank(p: libc::c_int) -> u8 {
    if p & libc::PROT_WRITE != 0 {
        2
    } else if p & libc::PROT_READ != 0 {
        1
    } else {
        0
    }
}

/// The lesser of two protections.
fn lower(a: libc::c_int, b: libc::c_int) -> libc::c_int {
    if rank(a) <= rank(b) {
        a
    } else {
        b
    }
}

/// The most `[a, b)` may be opened: the least any live slot with bytes there allows, at most
/// `ceil`; slot `skip` (being disarmed) does not count.
pub(super) unsafe fn range_prot(
    a: usize,
    b: usize,
    ceil: libc::c_int,
    skip: Option<usize>,
) -> libc::c_int {
    let high = HIGH.load(Ordering::Acquire).min(SLOTS);
    let mut p = ceil;
    for (i, s) in slots(high).iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let st = s.state.load(Ordering::SeqCst);
        if allowed(st).is_none() {
            continue;
        }
        if s.pstart.load(Ordering::Relaxed) < b && a < s.pend.load(Ordering::Relaxed) {
            let Some(q) = slot_allows(s, st, a, b) else {
                continue;
            };
            p = lower(p, q);
        }
    }
    p
}

/// The protection page `page` may have now.
pub(super) unsafe fn page_prot(page: usize) -> libc::c_int {
    range_prot(
        page,
        page + page_size(),
        libc::PROT_READ | libc::PROT_WRITE,
        None,
    )
}

/// Open `[a, b)` up to `ceil`, piece by piece: pages also holding bytes of a live slot that
/// allows less keep that slot's protection (they are already at most that: an armed slot's
/// pages are protected when it is armed, and nothing opens them further than it allows).
pub(super) unsafe fn reprotect(a: usize, b: usize, ceil: libc::c_int, skip: Option<usize>) {
    if b <= a {
        return;
    }
    // Cut points: the range's ends and every live slot's page range ends inside it.
    const CUTS: usize = 64;
    let mut cuts = [0usize; CUTS];
    let mut n = 0;
    let push = |c: usize, cuts: &mut [usize; CUTS], n: &mut usize| -> bool {
        if c <= a || c >= b || cuts.iter().take(*n).any(|x| *x == c) {
            return true;
        }
        if *n == CUTS {
            return false;
        }
        match cuts.get_mut(*n) {
            Some(slot) => *slot = c,
            None => return false,
        }
        *n += 1;
        true
    };
    let high = HIGH.load(Ordering::Acquire).min(SLOTS);
    let mut fits = true;
    for (i, s) in slots(high).iter().enumerate() {
        if Some(i) == skip || allowed(s.state.load(Ordering::SeqCst)).is_none() {
            continue;
        }
        let (s0, s1) = (
            s.pstart.load(Ordering::Relaxed),
            s.pend.load(Ordering::Relaxed),
        );
        if s0 < b && a < s1 {
            fits &= push(s0, &mut cuts, &mut n) && push(s1, &mut cuts, &mut n);
        }
    }
    if !fits {
        // Too many neighbours to cut around: the whole range at the least any of them allows.
        let p = range_prot(a, b, ceil, skip);
        if rank(p) > 0 {
            set_prot(a, b, p);
        }
        return;
    }
    let cuts = cuts.get_mut(..n).unwrap_or(&mut []);
    cuts.sort_unstable();
    let mut lo = a;
    for i in 0..=cuts.len() {
        let hi = cuts.get(i).copied().unwrap_or(b);
        let p = range_prot(lo, hi, ceil, skip);
        if rank(p) > 0 {
            set_prot(lo, hi, p);
        }
        lo = hi;
    }
}
