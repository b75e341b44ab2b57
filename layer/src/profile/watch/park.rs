//! Parking: arming a range of the double mapping's application view without rewriting its
//! page-table entries.
//!
//! `mprotect` of a 16 MiB range rewrites 4,096 page-table entries and flushes the TLBs: 0.2–0.6 ms
//! on this machine, once to arm a watched buffer and once to open it at its first access, every
//! window — the whole of what profiling costs on a program that fills and reads a few large
//! staging buffers an iteration. A range of the application's view is a `MAP_SHARED` mapping of
//! a memfd (DESIGN §4), so its page tables only cache what the memfd holds. Arming *parks* them:
//! `mremap` with `MREMAP_DONTUNMAP` moves them to a reserved address of the slot's own (whole
//! page-table pages at a time where both sides are 2 MiB-aligned alike) and leaves the range
//! mapped but empty, which `mprotect(PROT_NONE)` then closes with nothing to rewrite. The first
//! access faults as before, and the handler moves the tables back ([`unpark`]), set first, out of
//! the application's reach, to the protection the range may have now — never more. An access
//! that lands between the move and the `mprotect` refills its page from the memfd (the same
//! bytes) and belongs to the window before, like one just before an `mprotect`; an access to the
//! emptied range refills it the same way, so a move that fails, or a park dropped by `disarm`
//! without moving back, costs time, never a byte.
//!
//! Only the pages no other live slot shares are parked: a sub-allocated buffer's first and last
//! page may hold a neighbour's bytes, and those are protected (and later cut page by page,
//! [`super::reprotect`]) as before. A neighbour armed later over parked pages is met when the
//! range opens: the tables come back at the least protection any slot there allows, and the
//! range is cut as before. Linux ≥ 5.13 moves shared mappings with `MREMAP_DONTUNMAP`;
//! older kernels refuse it (`EINVAL`), and arming falls back to `mprotect` from then on.
//! `VK_ECHO_PARK=0` turns parking off, to measure it (docs/settings.md; ignored, like every
//! `VK_ECHO_*` variable, in secure-execution processes).

use super::*;

/// `MREMAP_DONTUNMAP` (Linux 5.7; shared mappings since 5.13).
const MREMAP_DONTUNMAP: libc::c_int = 4;
const MOVE: libc::c_int = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | MREMAP_DONTUNMAP;
/// Page-table page span on x86_64 and aarch64 (4 KiB pages): a park is aligned like its range
/// modulo this, so whole page-table pages move.
const SPAN: usize = 2 << 20;

/// The `parking` field of a slot.
pub(super) const NONE: u8 = 0;
pub(super) const PARKED: u8 = 1;
/// Being moved: by `arm` (the handler waits for it, as for any BUSY slot), or by the handler
/// (`arm` and `release` wait; a second fault's open finds it moving and opens the range the slow
/// way, with `mprotect`; a page the move then leaves too closed faults once more and is opened).
const MOVING: u8 = 2;

/// Parking is off: `VK_ECHO_PARK=0`, or the kernel refused `MREMAP_DONTUNMAP` on a shared
/// mapping.
pub(super) static OFF: AtomicBool = AtomicBool::new(false);
static ENV_READ: std::sync::Once = std::sync::Once::new();
/// Arms that parked.
pub(super) static PARKS: AtomicU64 = AtomicU64::new(0);
/// Opens that moved the page tables back.
pub(super) static UNPARKS: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds spent moving page tables (both ways).
pub(super) static MOVE_NS: AtomicU64 = AtomicU64::new(0);

unsafe fn mremap(from: usize, len: usize, to: usize) -> bool {
    let t0 = now_ns();
    let r = libc::syscall(libc::SYS_mremap, from, len, len, MOVE, to) as usize;
    MOVE_NS.fetch_add(now_ns().wrapping_sub(t0), Ordering::Relaxed);
    r == to
}

/// A `PROT_NONE` reservation of `len` bytes aligned like `like` modulo [`SPAN`]; 0 when none.
unsafe fn reserve(len: usize, like: usize) -> usize {
    let Some(total) = len.checked_add(SPAN) else {
        return 0;
    };
    let r = libc::mmap(
        std::ptr::null_mut(),
        total,
        libc::PROT_NONE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if r == libc::MAP_FAILED {
        return 0;
    }
    let r = r as usize;
    let p = r + (like.wrapping_sub(r) & (SPAN - 1));
    if p > r {
        libc::munmap(r as *mut c_void, p - r);
    }
    if r + total > p + len {
        libc::munmap((p + len) as *mut c_void, r + total - (p + len));
    }
    p
}

/// Wait (bounded, normal context) until no move of `s` is in flight; its `parking` state.
fn settled(s: &Slot) -> u8 {
    for i in 0..2_000_000u32 {
        let p = s.parking.load(Ordering::SeqCst);
        if p != MOVING {
            return p;
        }
        if i % 64 == 63 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    MOVING
}

/// Whether a live slot other than `me` has page-range bytes in `[a, b)`.
fn shared(me: &Slot, a: usize, b: usize) -> bool {
    let high = HIGH.load(Ordering::Acquire).min(SLOTS);
    slots(high).iter().any(|s| {
        !std::ptr::eq(s, me)
            && allowed(s.state.load(Ordering::SeqCst)).is_some()
            && s.pstart.load(Ordering::Relaxed) < b
            && a < s.pend.load(Ordering::Relaxed)
    })
}

/// Arm slot `s` (BUSY, under the control lock) over `[a, b)` by parking the page tables of its
/// pages no other live slot shares (all but a shared first or last page) and closing the
/// range. False: not parked (off, shared beyond its end pages, the kernel refused, no address
/// for a park); the caller protects the range with `mprotect` instead.
pub(super) unsafe fn park(s: &Slot, a: usize, b: usize) -> bool {
    ENV_READ.call_once(|| {
        let env = crate::settings::env_lookup(crate::settings::secure_execution());
        if env("VK_ECHO_PARK").is_some_and(|v| v == "0") {
            OFF.store(true, Ordering::SeqCst);
        }
    });
    match settled(s) {
        // Still parked (a neighbour opened some of it since): close what it opened.
        PARKED => return protect(a, b - a, libc::PROT_NONE) == 0,
        NONE => {}
        _ => return false,
    }
    if OFF.load(Ordering::Relaxed) {
        return false;
    }
    // The pages that are this slot's alone: sub-allocations share at most their end pages.
    let ps = page_size();
    let (mut lo, mut hi) = (a, b);
    if shared(s, lo, lo + ps) {
        lo += ps;
    }
    if hi > lo && shared(s, hi - ps, hi) {
        hi -= ps;
    }
    if hi <= lo || shared(s, lo, hi) {
        return false;
    }
    let len = hi - lo;
    let mut at = s.park.load(Ordering::Relaxed);
    if at == 0 || s.park_len.load(Ordering::Relaxed) != len || at & (SPAN - 1) != lo & (SPAN - 1) {
        drop_park(s);
        at = reserve(len, lo);
        if at == 0 {
            return false;
        }
        s.park.store(at, Ordering::Relaxed);
        s.park_len.store(len, Ordering::Relaxed);
    }
    s.parking.store(MOVING, Ordering::SeqCst);
    if !mremap(lo, len, at) {
        if *libc::__errno_location() == libc::EINVAL {
            OFF.store(true, Ordering::SeqCst); // this kernel cannot: mprotect from now on
        }
        s.parking.store(NONE, Ordering::SeqCst);
        return false;
    }
    // The emptied pages cost nothing to close; shared end pages are rewritten as before.
    if protect(a, b - a, libc::PROT_NONE) != 0 {
        // Put the tables back where they were; the caller's mprotect reports the failure.
        mremap(at, len, lo);
        s.parking.store(NONE, Ordering::SeqCst);
        return false;
    }
    s.park_lo.store(lo, Ordering::Relaxed);
    s.parking.store(PARKED, Ordering::SeqCst);
    PARKS.fetch_add(1, Ordering::Relaxed);
    true
}

/// The part of its range slot `s` parked, `[lo, hi)` (meaningful while it is parked).
pub(super) fn parked_range(s: &Slot) -> (usize, usize) {
    let lo = s.park_lo.load(Ordering::Relaxed);
    (lo, lo + s.park_len.load(Ordering::Relaxed))
}

/// Move slot `s`'s parked page tables back over [`parked_range`] at protection `prot`
/// (async-signal-safe). True when they came back: those pages allow exactly `prot`. False: not
/// parked, or the move failed (the pages are still closed and empty).
pub(super) unsafe fn unpark(s: &Slot, prot: libc::c_int) -> bool {
    if s.parking
        .compare_exchange(PARKED, MOVING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    let at = s.park.load(Ordering::Relaxed);
    let (lo, hi) = parked_range(s);
    // At the park nothing of the application's reaches it: set it there, then move it.
    let ok = protect(at, hi - lo, prot) == 0 && mremap(at, hi - lo, lo);
    s.parking.store(NONE, Ordering::SeqCst);
    if ok {
        UNPARKS.fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// Unmap slot `s`'s park (it maps the application's memory: it must go before the memory is
/// freed), never moving parked tables back: the range stays empty, and opening it (the
/// caller's next step) lets it refill from the memfd. Normal context.
pub(super) unsafe fn release(s: &Slot) {
    settled(s);
    s.parking.store(NONE, Ordering::SeqCst);
    drop_park(s);
}

unsafe fn drop_park(s: &Slot) {
    let at = s.park.swap(0, Ordering::Relaxed);
    if at != 0 {
        libc::munmap(at as *mut c_void, s.park_len.load(Ordering::Relaxed));
    }
    s.park_len.store(0, Ordering::Relaxed);
}
