//! Host-access validation by page protection (DESIGN §4).
//!
//! A candidate staging buffer's host mapping is *armed*: its page-aligned range is set to
//! `PROT_NONE`. The first host access faults; our SIGSEGV handler finds the range, reads from the
//! fault context whether the instruction read or wrote, opens the WHOLE range (read fault →
//! `PROT_READ`, so a later write still faults once; write fault → `PROT_READ|PROT_WRITE`), pushes
//! `(id, access, seq)` into a preallocated ring and returns; the instruction re-executes. So a
//! window costs at most two faults per buffer (read, then write). Hooks re-arm at every window
//! boundary (`vkQueueSubmit`, host completion observation) and turn ring entries into
//! `HostAccess` events with [`drain`].
//!
//! The handler is async-signal-safe: it touches only atomics, the preallocated slot table and
//! ring, `mprotect`, `sigaction` and `raise`; it allocates nothing, takes no lock, formats
//! nothing, and saves/restores `errno`. A fault that is not ours goes to the handler that was
//! installed before us (an `SA_SIGINFO` or plain handler is called; `SIG_DFL`/`SIG_IGN`: the
//! default action is restored and the fault re-raised, so the process dies as it would have).
//!
//! Pages shared with memory outside every armed range (a buffer that does not start or end on a
//! page boundary) fault too. Allocators pack buffers closer than a page (64- or 256-byte
//! alignment), so one page may hold bytes of several armed buffers. A page is never opened
//! further than its most protected buffer allows (`prot::page_prot`: `PROT_NONE` while a buffer with
//! bytes there is unseen in this window, `PROT_READ` while one has only been read): a fault opens
//! its buffer's range *except* such shared pages. An access that still faults on a shared page
//! (its own buffer already recorded, or bytes of no armed buffer: *collateral*) is, on x86_64,
//! **emulated** when it is a plain move and the page has a shadow (the other view of a double
//! mapping, given to [`arm_shadowed`]): the handler decodes it, does the load or store through
//! the shadow and moves rip past it (`emulate.rs`; counted as `emulated`); every armed buffer the
//! decoded bytes reach is recorded (`reached`). Otherwise it is **stepped**: the page is opened
//! for that one instruction (the trap flag set in the signal context), and the SIGTRAP that
//! follows it restores the page's protection (`stepped`). So a neighbour's access is never
//! mistaken for a buffer's, and a buffer's access on a shared page is never missed.
//!
//! Where stepping is not possible — not x86_64, a second host thread has faulted on armed memory
//! (another thread could slip an access into the instruction-long opening), SIGTRAP blocked or
//! taken over by the application, the step table full — the page is opened for the rest of the
//! window and every other armed buffer with bytes on it is recorded once as read *and* written
//! (`readwrite`, counted as `shared_page`): fail closed, never an unseen access.
//!
//! Arming a range of a double mapping's application view (a `MAP_SHARED` memfd mapping) does
//! not rewrite its page-table entries: they are *parked*, moved aside with `mremap`, and the
//! emptied range closed; the first access moves them back (`park.rs`). Same faults, same
//! records, a few microseconds instead of a 16 MiB `mprotect`'s 0.2–0.6 ms each way.
//!
//! **Exact host writes** (issue 54, `cover.rs`): a range armed with [`arm_exact`] is not opened
//! by a write. Its first write is recorded as above, its range opens only for reads, and every
//! store faults and is emulated through the other view (x86_64: `emulate.rs`), its bytes set in
//! the slot's coverage bitmap; a page whose bytes of the range are all covered opens for the rest
//! of the window (`prot::slot_allows`). A store the handler cannot do (not decoded, a page
//! crossing, no other view) makes the window "any part" (`cover::Why`) and opens the range as a
//! written one. [`take_writes`] reads the bitmap at the window's end. On other platforms an
//! exact arm is "any part" from the start.
//!
//! Rules for callers: [`disarm`] before the memory is unmapped or freed; [`arm`] only mappings
//! that are readable and writable when open (Vulkan host-visible maps are).
//!
//! The files, bottom up: `slots.rs` (the slot table the handler reads), `ring.rs` (the access
//! ring it writes), `prot.rs` (protection arithmetic: how far a page shared by armed buffers may
//! open), `park.rs` (parking page tables), `code.rs` (whose code faulted), `emulate.rs` and
//! `step.rs` (an access on a shared page done by the handler, or single-stepped), `handler.rs`
//! (the SIGSEGV handler and its installation), and this file: the interface normal code calls
//! (arm, disarm, drain, stats). Tests: `tests.rs`, `park_tests.rs`, `emulate_tests.rs`,
//! `lost_tests.rs`. The lints below cover every one of them (the handler reaches most).

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented,
        clippy::indexing_slicing
    )
)]

/// Whose code made a fault: the program's, or a driver's or JIT-compiled code.
mod code;
/// Exact host-write coverage (issue 54): the bytes each store of an exact slot wrote.
mod cover;
#[cfg(test)]
mod cover_tests;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod emulate;
#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod emulate_tests;
mod handler;
#[cfg(test)]
mod lost_tests;
/// Arming a double mapping's range by moving its page tables aside instead of rewriting them.
mod park;
#[cfg(test)]
mod park_tests;
mod prot;
mod ring;
mod slots;
/// Single-stepping one access on a shared page (x86_64): the SIGSEGV handler opens the page,
/// sets the trap flag in the signal context and notes `(thread, page)`; the CPU runs the one
/// instruction and raises SIGTRAP, whose handler puts the page back to the protection it may
/// have now and clears the flag. An instruction that touches two shared pages faults twice
/// before its trap: both are noted. A SIGTRAP that is not ours goes to the disposition installed
/// before ours.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod step;
#[cfg(test)]
mod tests;

pub use cover::{spent as exact_budget_spent, Why, MAX_STORES};
pub use handler::GuardError;
pub use ring::Seen;

use handler::{
    install, CHAINED, COLLATERAL, EMULATED, EMULATING, EXACT_STORES, FAULTS, LOST, LOST_PC, PANICS,
    REACHED, SHARED_PAGE, STEPPED, UNCLASSIFIED,
};
use prot::{page_size, protect, reprotect, MPROTECTS, MPROTECT_NS};
use ring::DROPPED;
use slots::{slots, Range, HIGH, SLOTS, TABLE, TOMB_BUDGET};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Serializes arm/disarm/drain (normal code only; never taken by the handler).
static CONTROL: Mutex<()> = Mutex::new(());
/// Re-arms that found their range still wholly protected (no `mprotect`).
static REARMS_SKIPPED: AtomicU64 = AtomicU64::new(0);
/// Windows a candidate was left unprotected in (sampled validation).
static UNWATCHED: AtomicU64 = AtomicU64::new(0);

/// Count a window a candidate was left unprotected in (sampled validation).
pub fn note_unwatched() {
    UNWATCHED.fetch_add(1, Ordering::Relaxed);
}

// ------------------------------------------------------------------------- public interface

fn lock() -> std::sync::MutexGuard<'static, ()> {
    CONTROL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Protect `[ptr, ptr+len)` (page-aligned outward) for buffer `id`; a fault then records one
/// access. Arming an `id` that is already armed re-protects it and starts a new window.
/// Installs the SIGSEGV handler on first use.
pub fn arm(id: u64, ptr: *const u8, len: usize) -> Result<(), GuardError> {
    arm_shadowed(id, ptr, len, None)
}

/// [`arm`], with `shadow`: where the same `len` bytes can be reached without protection (the
/// other view of a double mapping), so an access on a page shared with another armed buffer
/// can be done by the handler instead of stepped.
pub fn arm_shadowed(
    id: u64,
    ptr: *const u8,
    len: usize,
    shadow: Option<*const u8>,
) -> Result<(), GuardError> {
    arm_exact(id, ptr, len, shadow, false)
}

/// [`arm_shadowed`], and with `exact` the window records which bytes the host's stores wrote
/// (issue 54): a write does not open the range, each store is emulated through `shadow` and its
/// bytes set in the slot's coverage map; [`take_writes`] reads them at the window's end. Where
/// that cannot be (no `shadow`, not x86_64 Linux) the window is "any part" from the start.
pub fn arm_exact(
    id: u64,
    ptr: *const u8,
    len: usize,
    shadow: Option<*const u8>,
    exact: bool,
) -> Result<(), GuardError> {
    let delta = shadow.map_or(0, |p| (p as usize).wrapping_sub(ptr as usize));
    // A window boundary: code pages are proven readable again in the new window.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    emulate::forget_code_pages();
    if len == 0 {
        return Ok(());
    }
    let _g = lock();
    install()?;
    code::refresh();
    let ps = page_size();
    let start = ptr as usize;
    let end = start.checked_add(len).ok_or(GuardError::Full)?;
    let pstart = start & !(ps - 1);
    let pend = (end + ps - 1) & !(ps - 1);
    let high = HIGH.load(Ordering::Relaxed);
    // Same id → reuse its slot; else a free slot, else grow, else a tombstone.
    let mut idx = None;
    let mut free = None;
    let mut tomb = None;
    for (i, s) in slots(high).iter().enumerate() {
        match s.state.load(Ordering::Relaxed) {
            Range::Free => free = free.or(Some(i)),
            Range::Tomb => tomb = tomb.or(Some(i)),
            _ if s.id.load(Ordering::Relaxed) == id => {
                idx = Some(i);
                break;
            }
            _ => {}
        }
    }
    // Tombstones are reused last: a fault that raced their disarm may still be in flight.
    let i = match idx.or(free) {
        Some(i) => i,
        None if high < SLOTS => {
            HIGH.store(high + 1, Ordering::Release);
            high
        }
        None => tomb.ok_or(GuardError::Full)?,
    };
    let Some(s) = TABLE.get(i) else {
        return Err(GuardError::Full);
    };
    let prev_state = s.state.load(Ordering::Relaxed);
    if idx.is_some()
        && prev_state == Range::Armed
        && !s.stale.load(Ordering::SeqCst)
        && s.exact.load(Ordering::SeqCst) == exact
        && s.shadow.load(Ordering::Relaxed) == delta
        && (
            s.start.load(Ordering::Relaxed),
            s.end.load(Ordering::Relaxed),
        ) == (start, end)
    {
        // Untouched since its last arm and nothing opened any of its pages: still wholly
        // PROT_NONE, so the new window is already armed (a fault racing this check is handled
        // as a fault of the new window, as it would be after an mprotect).
        REARMS_SKIPPED.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let (old0, old1) = (
        s.pstart.load(Ordering::Relaxed),
        s.pend.load(Ordering::Relaxed),
    );
    s.gen.fetch_add(1, Ordering::SeqCst);
    s.state.store(Range::Busy, Ordering::SeqCst);
    // Stores into the window that ends are done and recorded before its coverage is read and
    // cleared (bounded: one still going makes the new window "any part").
    let quiet = s.quiesce();
    if idx.is_some() {
        collect(s, prev_state);
    }
    if (old0, old1) != (pstart, pend) {
        // A new place (remapped, or a new slot): the old park goes.
        unsafe { park::release(s) };
        if matches!(prev_state, Range::Armed | Range::Read) {
            // Open the old range (but for pages that other armed buffers share), or it stays
            // protected.
            unsafe { reprotect(old0, old1, libc::PROT_READ | libc::PROT_WRITE, Some(i)) };
        }
    }
    s.id.store(id, Ordering::Relaxed);
    s.start.store(start, Ordering::Relaxed);
    s.end.store(end, Ordering::Relaxed);
    s.pstart.store(pstart, Ordering::Relaxed);
    s.pend.store(pend, Ordering::Relaxed);
    s.shadow.store(delta, Ordering::Relaxed);
    s.budget.store(0, Ordering::Relaxed);
    s.lost.store(false, Ordering::SeqCst);
    s.wseq.store(0, Ordering::SeqCst);
    prepare_cover(s, len, exact, delta != 0, quiet);
    // Fresh before protecting: an open that lands after the mprotect marks it stale again.
    s.stale.store(false, Ordering::SeqCst);
    // Protect while BUSY (a racing fault waits in the handler), then publish ARMED. A range of
    // a double mapping's view is parked (its tables moved aside) rather than rewritten.
    let parked = delta != 0 && unsafe { park::park(s, pstart, pend) };
    let r = if parked {
        0
    } else {
        unsafe { protect(pstart, pend - pstart, libc::PROT_NONE) }
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        s.state.store(Range::Free, Ordering::SeqCst);
        return Err(GuardError::Protect(e.to_string()));
    }
    // A step that began before this slot was BUSY may have put a shared page back to what it
    // allowed then: once steps in flight are over, protect again.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if step::settle() {
        unsafe { protect(pstart, pend - pstart, libc::PROT_NONE) };
    }
    s.state.store(Range::Armed, Ordering::SeqCst);
    Ok(())
}

/// The coverage map of slot `s` (BUSY, under the control lock) for a new window of `len`
/// bytes: cleared, or made larger (the old one leaked: a handler may still hold it).
fn prepare_cover(s: &slots::Slot, len: usize, exact: bool, shadowed: bool, quiet: bool) {
    s.cov_any.store(0, Ordering::SeqCst);
    s.wstores.store(0, Ordering::SeqCst);
    s.wbytes.store(0, Ordering::SeqCst);
    s.exact.store(exact, Ordering::SeqCst);
    if !exact {
        return;
    }
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        s.fall_back(Why::Platform);
        return;
    }
    if !shadowed {
        s.fall_back(Why::NoShadow);
        return;
    }
    // A store of the window that ends still being recorded could set bits of this one.
    if !quiet {
        s.fall_back(Why::Busy);
        return;
    }
    let p = s.cov.load(Ordering::Acquire);
    // SAFETY: published by this function with `Box::into_raw`, never freed.
    let have = if p.is_null() {
        0
    } else {
        unsafe { (*p).bytes() }
    };
    if have >= len {
        // SAFETY: as above.
        unsafe { (*p).clear() };
    } else {
        let c = Box::into_raw(Box::new(cover::Cover::new(len)));
        s.cov.store(c, Ordering::Release);
    }
}

/// Byte ranges `[from, to)` a window's stores wrote, or why the window could not say.
pub type Writes = Result<Vec<(usize, usize)>, Why>;

/// What the host's stores wrote of buffer `id` in the window now ending, when it was armed
/// exact and written in it: `Ok(ranges)`, byte offsets `[from, to)` from the start of the
/// range given to [`arm_exact`], or `Err(why)` when the window fell back to "any part".
/// `None`: not exact in this window, or not written. Call before the next arm.
pub fn take_writes(id: u64) -> Option<Writes> {
    take_writes_at(id).map(|x| x.1)
}

/// [`take_writes`], with the sequence number of the window's write record it belongs to
/// (0: that record was dropped). The window an [`arm_exact`] or [`disarm`] of `id` closed, if
/// there is one not taken yet; else the window now open (at process exit: what it saw so far).
pub fn take_writes_at(id: u64) -> Option<(u64, Writes)> {
    let _g = lock();
    let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = closed.iter().position(|c| c.0 == id) {
        let (_, at, w) = closed.swap_remove(i);
        return Some((at, w));
    }
    drop(closed);
    let high = HIGH.load(Ordering::Acquire);
    let s = slots(high).iter().find(|s| {
        matches!(
            s.state.load(Ordering::SeqCst),
            Range::Armed | Range::Read | Range::Written
        ) && s.id.load(Ordering::Relaxed) == id
    })?;
    s.quiesce();
    read_writes(s, s.state.load(Ordering::SeqCst))
}

/// Windows closed by an arm or disarm whose writes the recorder has not taken yet:
/// `(id, write record's seq, writes)` (normal code only).
static CLOSED: Mutex<Vec<(u64, u64, Writes)>> = Mutex::new(Vec::new());

/// The window of slot `s` (its state then `st`) is closing: keep what it saw written for
/// [`take_writes_at`] (under the control lock, no store into it in flight).
fn collect(s: &slots::Slot, st: Range) {
    if let Some((at, w)) = read_writes(s, st) {
        let id = s.id.load(Ordering::Relaxed);
        let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
        closed.retain(|c| c.0 != id);
        closed.push((id, at, w));
    }
}

/// What slot `s` (in state `st`) saw written in its window, when it was exact and written.
fn read_writes(s: &slots::Slot, st: Range) -> Option<(u64, Writes)> {
    if !s.exact.load(Ordering::SeqCst) || st != Range::Written {
        return None;
    }
    let at = s.wseq.load(Ordering::SeqCst);
    let why = Why::from_u8(s.cov_any.load(Ordering::SeqCst));
    if why != Why::Exact {
        return Some((at, Err(why)));
    }
    let n = s
        .end
        .load(Ordering::Relaxed)
        .saturating_sub(s.start.load(Ordering::Relaxed));
    let ranges = cover::runs(s.cover_words(), n);
    // A fall-back that raced the read: the ranges may be short of what was written.
    let why = Why::from_u8(s.cov_any.load(Ordering::SeqCst));
    if why != Why::Exact {
        return Some((at, Err(why)));
    }
    Some((at, Ok(ranges)))
}

/// Open buffer `id`'s range again and forget it. Call before unmapping or freeing it.
pub fn disarm(id: u64) {
    let _g = lock();
    let high = HIGH.load(Ordering::Relaxed);
    for (i, s) in slots(high).iter().enumerate() {
        let st = s.state.load(Ordering::Relaxed);
        if st == Range::Free || st == Range::Tomb || s.id.load(Ordering::Relaxed) != id {
            continue;
        }
        let (p0, p1) = (
            s.pstart.load(Ordering::Relaxed),
            s.pend.load(Ordering::Relaxed),
        );
        // The window's writes (exact host writes), once no store into it is in flight.
        s.quiesce();
        collect(s, st);
        // Open first, then tombstone: a fault raised before the open but handled after it
        // finds the tombstone and retries instead of being sent to the app's handler; one
        // handled before the open is recorded (a real access in this window). Pages other
        // armed buffers share keep their protection.
        unsafe {
            park::release(s);
            reprotect(p0, p1, libc::PROT_READ | libc::PROT_WRITE, Some(i));
        }
        s.budget.store(TOMB_BUDGET, Ordering::Relaxed);
        s.state.store(Range::Tomb, Ordering::SeqCst);
    }
    // An emulation that found the slot live before the tombstone may still be using its other
    // view, which the caller may unmap next: wait for it (bounded; an emulation is one move).
    for _ in 0..100_000 {
        if EMULATING.load(Ordering::SeqCst) == 0 {
            break;
        }
        std::thread::yield_now();
    }
}

/// Is buffer `id` armed at `[ptr, ptr+len)` and still wholly protected (no fault since its last
/// arm, no page of it opened by a neighbour)? Then re-arming it costs nothing, and a window it is
/// not re-armed for is still observed.
pub fn still_armed(id: u64, ptr: *const u8, len: usize) -> bool {
    let (start, end) = (ptr as usize, (ptr as usize).saturating_add(len));
    let high = HIGH.load(Ordering::Acquire);
    slots(high).iter().any(|s| {
        s.state.load(Ordering::SeqCst) == Range::Armed
            && s.id.load(Ordering::Relaxed) == id
            && !s.stale.load(Ordering::SeqCst)
            && (
                s.start.load(Ordering::Relaxed),
                s.end.load(Ordering::Relaxed),
            ) == (start, end)
    })
}

/// Did a fault on buffer `id` open it since its last arm (the window now closing saw an access)?
pub fn was_touched(id: u64) -> bool {
    let high = HIGH.load(Ordering::Acquire);
    slots(high).iter().any(|s| {
        matches!(s.state.load(Ordering::SeqCst), Range::Read | Range::Written)
            && s.id.load(Ordering::Relaxed) == id
    })
}

/// Is buffer `id` armed (protected, or opened by a fault in the current window)?
pub fn is_armed(id: u64) -> bool {
    let high = HIGH.load(Ordering::Acquire);
    slots(high).iter().any(|s| {
        matches!(
            s.state.load(Ordering::Relaxed),
            Range::Armed | Range::Read | Range::Written
        ) && s.id.load(Ordering::Relaxed) == id
    })
}

/// Take the accesses recorded since the last drain, oldest first: `f(id, seen, stamp,
/// thread)`, where `stamp` is the global sequence number and host time taken in the handler at
/// the fault, and `thread` the small id of the thread that faulted (0: unknown).
pub fn drain(mut f: impl FnMut(u64, Seen, crate::profile::sink::Stamp, u32)) {
    let _g = lock();
    while let Some((id, seen, at, thread)) = ring::take() {
        f(id, seen, at, thread);
    }
}

/// The program counter of the last fault echo could not explain (0: none).
pub fn last_lost_pc() -> usize {
    LOST_PC.load(Ordering::Relaxed)
}

/// Counters since process start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Faults on pages we protected.
    pub faults: u64,
    /// Faults on protected pages outside every armed buffer (edge pages), opened page-wise.
    pub collateral: u64,
    /// Accesses lost because the ring was full.
    pub dropped: u64,
    /// Faults that were not ours, handed to the previous handler.
    pub chained: u64,
    /// Faults whose read/write direction came from the fault context (x86_64: the page-fault
    /// error code; aarch64: ESR_EL1 from the signal frame's `esr_context`).
    pub by_context: u64,
    /// Faults whose direction came from decoding the faulting instruction (aarch64 without an
    /// `esr_context`, e.g. under qemu-user).
    pub by_instruction: u64,
    /// Faults whose direction was not known (taken as writes).
    pub unclassified: u64,
    /// Window boundaries whose re-arm found the range still wholly protected (no `mprotect`).
    pub rearms_skipped: u64,
    /// Armed buffers that lost sight of a page another fault opened (sub-allocations sharing a
    /// page), each recorded as read and written.
    pub shared_page: u64,
    /// Windows a candidate was left unprotected in (sampled validation).
    pub unwatched: u64,
    /// Calls to `mprotect` (arms, and opens by faults and disarms).
    pub mprotects: u64,
    /// Time spent in them, nanoseconds.
    pub mprotect_ns: u64,
    /// Arms that parked the range's page tables instead of rewriting them, and opens that
    /// moved them back.
    pub parked: u64,
    pub unparked: u64,
    /// Time spent moving page tables, nanoseconds.
    pub move_ns: u64,
    /// Accesses on pages shared with a buffer still unseen in the window, run as one stepped
    /// instruction (x86_64).
    pub stepped: u64,
    /// Accesses on such pages done by the handler through the other view of a double mapping
    /// instead (x86_64; no page opened, no trap).
    pub emulated: u64,
    /// Armed buffers first reached by an access whose first byte was another buffer's (or no
    /// buffer's), found by decoding the instruction.
    pub reached: u64,
    /// Faults echo could not explain (code that is not the program's: a driver's module,
    /// JIT-compiled code) or finish: ranges left open, their buffers lost.
    pub lost: u64,
    /// Panics caught in the handler.
    pub panics: u64,
    /// Stores into buffers armed exact (issue 54) emulated and recorded byte for byte.
    pub exact_stores: u64,
}

pub fn stats() -> Stats {
    Stats {
        faults: FAULTS.load(Ordering::Relaxed),
        collateral: COLLATERAL.load(Ordering::Relaxed),
        dropped: DROPPED.load(Ordering::Relaxed),
        chained: CHAINED.load(Ordering::Relaxed),
        by_context: crate::hostmem::fault::BY_CONTEXT.load(Ordering::Relaxed),
        by_instruction: crate::hostmem::fault::BY_INSTRUCTION.load(Ordering::Relaxed),
        unclassified: UNCLASSIFIED.load(Ordering::Relaxed),
        rearms_skipped: REARMS_SKIPPED.load(Ordering::Relaxed),
        shared_page: SHARED_PAGE.load(Ordering::Relaxed),
        unwatched: UNWATCHED.load(Ordering::Relaxed),
        mprotects: MPROTECTS.load(Ordering::Relaxed),
        mprotect_ns: MPROTECT_NS.load(Ordering::Relaxed),
        parked: park::PARKS.load(Ordering::Relaxed),
        unparked: park::UNPARKS.load(Ordering::Relaxed),
        move_ns: park::MOVE_NS.load(Ordering::Relaxed),
        stepped: STEPPED.load(Ordering::Relaxed),
        emulated: EMULATED.load(Ordering::Relaxed),
        reached: REACHED.load(Ordering::Relaxed),
        lost: LOST.load(Ordering::Relaxed),
        panics: PANICS.load(Ordering::Relaxed),
        exact_stores: EXACT_STORES.load(Ordering::Relaxed),
    }
}
