//! The slot table: one slot per armed range, in a fixed static array the SIGSEGV handler reads
//! without a lock or an allocation. `arm` and `disarm` (normal code, under the table mutex) write
//! a slot while it is [`Range::Busy`] and publish it with its state; the handler takes a
//! consistent [`snapshot`] (a seqlock on `gen`), waiting a bounded time for a slot another thread
//! keeps busy.

use super::cover::Cover;
use crate::hostmem::slot_state::StateCell;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Armed ranges the table holds at once.
pub const SLOTS: usize = 1024;

crate::hostmem::slot_state::slot_states! {
    /// An armed range.
    pub(super) enum Range {
        Free,
        /// Being written by `arm` (under the table mutex); the handler waits for it to finish.
        Busy,
        Armed,
        /// Read fault seen: range is PROT_READ.
        Read,
        /// Write fault seen: range is open.
        Written,
        /// Disarmed recently; its range swallows a few faults that raced the disarm.
        Tomb,
    }
}

/// The `parking` field of a slot (`park.rs`): no park, or parked.
pub(super) const PARK_NONE: u8 = 0;
pub(super) const PARKED: u8 = 1;
/// Being moved: by `arm` (the handler waits for it, as for any BUSY slot), or by the handler
/// (`arm` and `release` wait; a second fault's open finds it moving and opens the range the slow
/// way, with `mprotect`; a page the move then leaves too closed faults once more and is opened).
pub(super) const PARK_MOVING: u8 = 2;

/// How many faults a tombstone swallows before its range stops being ours.
pub(super) const TOMB_BUDGET: u64 = 16;

/// One armed range: written by `arm`/`disarm` under the table mutex, read by the handler
/// through [`snapshot`].
pub(super) struct Slot {
    pub(super) state: StateCell<Range>,
    pub(super) id: AtomicU64,
    /// Exact byte range [start, end).
    pub(super) start: AtomicUsize,
    pub(super) end: AtomicUsize,
    /// Page-aligned range [pstart, pend).
    pub(super) pstart: AtomicUsize,
    pub(super) pend: AtomicUsize,
    /// Tombstone budget.
    pub(super) budget: AtomicU64,
    /// Bumped by every arm (seqlock for the handler's snapshot).
    pub(super) gen: AtomicU64,
    /// Some page of `[pstart, pend)` was opened since the last arm (by any slot's fault, a
    /// collateral fault, or a disarm): an ARMED slot that is not stale is still wholly
    /// `PROT_NONE`, and re-arming it needs no `mprotect`.
    pub(super) stale: AtomicBool,
    /// Where the same bytes can be reached unprotected, as `shadow address - address`
    /// (wrapping; 0: nowhere): the other view of a double mapping. Lets the handler do an
    /// access on a shared page itself (`emulate`) instead of stepping it.
    pub(super) shadow: AtomicUsize,
    /// Where this slot's page tables are parked while it is armed (`park`; 0: no park), and
    /// the park's length.
    pub(super) park: AtomicUsize,
    pub(super) park_len: AtomicUsize,
    /// The first page of the range that is parked (its end pages may be shared, not parked).
    pub(super) park_lo: AtomicUsize,
    /// [`PARK_NONE`], [`PARKED`] (the range is empty and closed, its tables at `park`), or
    /// [`PARK_MOVING`].
    pub(super) parking: AtomicU8,
    /// A fault echo could not explain opened this range since its last arm (recorded once).
    pub(super) lost: AtomicBool,
    /// Exact host writes (issue 54): in this window a write does not open the range; every
    /// store is emulated through the other view and its bytes set in `cov` (a page whose bytes
    /// of this range are all covered opens for the rest of the window).
    pub(super) exact: AtomicBool,
    /// Why this window of an exact slot fell back to "any part" (`cover::Why`; 0: exact so far).
    pub(super) cov_any: AtomicU8,
    /// The coverage bitmap (`cover.rs`): allocated by `arm`, never freed (null: none yet).
    pub(super) cov: AtomicPtr<Cover>,
    /// The sequence number of this window's write record (0: none, or dropped).
    pub(super) wseq: AtomicU64,
    /// Handlers doing a store into this exact slot now (between [`Slot::hold`] and its
    /// release): `arm` and `disarm` wait for none before they read and clear the coverage map,
    /// so a store is in the window it was done in, never in the next.
    pub(super) inflight: AtomicUsize,
    /// This window's exact stores into this slot, and the bytes they covered (overlaps
    /// counted again): what the handler projects a whole rewrite's cost from (`cover::WINDOW`).
    pub(super) wstores: AtomicU64,
    pub(super) wbytes: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const SLOT_INIT: Slot = Slot {
    state: StateCell::new(Range::Free as u8),
    id: AtomicU64::new(0),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    pstart: AtomicUsize::new(0),
    pend: AtomicUsize::new(0),
    budget: AtomicU64::new(0),
    gen: AtomicU64::new(0),
    stale: AtomicBool::new(false),
    shadow: AtomicUsize::new(0),
    park: AtomicUsize::new(0),
    park_len: AtomicUsize::new(0),
    park_lo: AtomicUsize::new(0),
    parking: AtomicU8::new(PARK_NONE),
    lost: AtomicBool::new(false),
    exact: AtomicBool::new(false),
    cov_any: AtomicU8::new(0),
    cov: AtomicPtr::new(std::ptr::null_mut()),
    wseq: AtomicU64::new(0),
    inflight: AtomicUsize::new(0),
    wstores: AtomicU64::new(0),
    wbytes: AtomicU64::new(0),
};
pub(super) static TABLE: [Slot; SLOTS] = [SLOT_INIT; SLOTS];
/// One past the highest slot ever used (the handler scans `0..HIGH`).
pub(super) static HIGH: AtomicUsize = AtomicUsize::new(0);

/// The slots `0..high` (at most the table).
pub(super) fn slots(high: usize) -> &'static [Slot] {
    TABLE.get(..high).unwrap_or(TABLE.as_slice())
}

impl Slot {
    /// Is this slot tracking exact writes in this window (exact, and not fallen back)?
    pub(super) fn exact_live(&self) -> bool {
        self.exact.load(Ordering::SeqCst) && self.cov_any.load(Ordering::SeqCst) == 0
    }

    /// Its coverage bitmap's words (empty when it has none). Never freed, so the slice stays
    /// valid however long the handler holds it.
    pub(super) fn cover_words(&self) -> &'static [AtomicU64] {
        let p = self.cov.load(Ordering::Acquire);
        if p.is_null() {
            return &[];
        }
        // SAFETY: a `Cover` published by `arm` with `Box::into_raw` and never freed.
        unsafe { &(*p).words }
    }

    /// Hold this slot for a store (async-signal-safe): false when `arm` is rewriting it (the
    /// caller then does not do the store: the instruction runs again, in the new window).
    /// SeqCst on both sides: either `arm` sees the hold and waits for it, or this sees BUSY.
    pub(super) fn hold(&self) -> bool {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) == Range::Busy {
            self.inflight.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    pub(super) fn release(&self) {
        self.inflight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wait (bounded) until no handler holds this slot; false when one still does.
    pub(super) fn quiesce(&self) -> bool {
        for _ in 0..100_000 {
            if self.inflight.load(Ordering::SeqCst) == 0 {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// This window falls back to "any part" for `why` (the first reason stays).
    pub(super) fn fall_back(&self, why: super::cover::Why) {
        let _ = self
            .cov_any
            .compare_exchange(0, why as u8, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Wait (bounded) until slot `s` is not BUSY; returns its state and a consistent snapshot of
/// its fields `(gen, start, end, pstart, pend, id)`.
pub(super) unsafe fn snapshot(s: &Slot) -> Option<(Range, usize, usize, usize, usize, u64)> {
    let mut deadline: Option<libc::timespec> = None;
    let mut spins = 0u32;
    loop {
        let g1 = s.gen.load(Ordering::SeqCst);
        let st = s.state.load(Ordering::SeqCst);
        if st == Range::Free {
            return None;
        }
        if st != Range::Busy {
            let v = (
                st,
                s.start.load(Ordering::Relaxed),
                s.end.load(Ordering::Relaxed),
                s.pstart.load(Ordering::Relaxed),
                s.pend.load(Ordering::Relaxed),
                s.id.load(Ordering::Relaxed),
            );
            fence(Ordering::Acquire);
            if s.gen.load(Ordering::SeqCst) == g1 && s.state.load(Ordering::SeqCst) == st {
                return Some(v);
            }
            continue;
        }
        // arm() is writing this slot on another thread (it never touches the memory itself, so
        // it is not this thread): wait for it, up to two seconds.
        spins += 1;
        if spins & 63 == 0 {
            libc::sched_yield();
            let mut now: libc::timespec = std::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
            match deadline {
                None => {
                    now.tv_sec += 2;
                    deadline = Some(now);
                }
                Some(d) if (now.tv_sec, now.tv_nsec) > (d.tv_sec, d.tv_nsec) => return None,
                _ => {}
            }
        } else {
            std::hint::spin_loop();
        }
    }
}
