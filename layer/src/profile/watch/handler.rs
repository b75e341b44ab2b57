//! The SIGSEGV handler: installing it (and chaining faults that are not ours to the disposition
//! installed before), finding the armed slot a fault hit, recording the buffer's first read or
//! first write of the window into the ring and opening its range as far as its neighbours allow;
//! an access that must not open its page (a neighbour still unseen) is emulated through the other
//! view ([`super::emulate`]), stepped ([`super::step`]), or — where neither can be — lets the
//! page open with its neighbours recorded as read and written (fail closed). A fault from code
//! that is not the program's, or that cannot be finished, loses the buffers there for good
//! ([`unexplained`]). Async-signal-safe throughout: atomics, the slot table, the ring,
//! `mprotect`, `sigaction`; no allocation, no lock, no formatting; nothing here may panic (the
//! lints of `watch/mod.rs`), and a panic all the same is caught and loses every range.

use super::code;
use super::cover::Why;
use super::park;
use super::prot::{page_prot, page_size, range_prot, rank, reprotect, set_prot, slot_allows};
use super::ring::{self, Seen};
use super::slots::{slots, snapshot, Range, Slot, HIGH, PARKED, SLOTS, TABLE};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use super::{emulate, step};
use crate::hostmem::fault::fault_is_write;
use crate::hostmem::signal::{segv_handler_is, Previous};
use echo_analyzer::trace::Access;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

// Counters (for stats and tests).
pub(super) static FAULTS: AtomicU64 = AtomicU64::new(0);
pub(super) static COLLATERAL: AtomicU64 = AtomicU64::new(0);
/// Armed buffers that lost sight of a page another fault opened (sub-allocations sharing a page).
pub(super) static SHARED_PAGE: AtomicU64 = AtomicU64::new(0);
pub(super) static CHAINED: AtomicU64 = AtomicU64::new(0);
/// Faults whose direction was not known (taken as a write); those known are counted in
/// [`crate::hostmem::fault`] (from the fault context, or by decoding the instruction).
pub(super) static UNCLASSIFIED: AtomicU64 = AtomicU64::new(0);
/// Accesses on shared pages run as one stepped instruction.
pub(super) static STEPPED: AtomicU64 = AtomicU64::new(0);
/// Accesses on shared pages done by the handler through the other view (x86_64).
pub(super) static EMULATED: AtomicU64 = AtomicU64::new(0);
/// Armed buffers reached by an access whose first byte was another's (found by decoding it).
pub(super) static REACHED: AtomicU64 = AtomicU64::new(0);
/// Stores into exact slots (issue 54) emulated and recorded in a coverage map.
pub(super) static EXACT_STORES: AtomicU64 = AtomicU64::new(0);
/// Emulations in flight: `disarm` waits for them (the other view may be unmapped after it).
pub(super) static EMULATING: AtomicUsize = AtomicUsize::new(0);

/// Faults echo could not explain or finish: the ranges were left open, the buffers lost.
pub(super) static LOST: AtomicU64 = AtomicU64::new(0);
/// The program counter of the last such fault (for the closing log line).
pub(super) static LOST_PC: AtomicUsize = AtomicUsize::new(0);
/// Panics caught in the handler (each one lost every armed range).
pub(super) static PANICS: AtomicU64 = AtomicU64::new(0);
/// The emulation and stepping of accesses on shared pages, switched off (`VK_ECHO_EMULATE=0`,
/// `VK_ECHO_STEP=0`: diagnostics, as `VK_ECHO_PARK=0`); an access either would have done opens
/// its page for the window with the neighbours recorded as read and written (fail closed).
pub(super) static EMULATE_OFF: AtomicBool = AtomicBool::new(false);
/// Handlers running now. A panic while one runs prints nothing (the layer's panic hook, which
/// is the layer's own std's and no one else's, skips it): printing a message and a backtrace
/// from a signal handler can fault again, which the kernel answers by killing the process.
pub(super) static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// The planted fault of `lost_tests`: the next fault handled panics.
#[cfg(test)]
pub(super) static PANIC_NEXT: AtomicBool = AtomicBool::new(false);
pub(super) static STEP_OFF: AtomicBool = AtomicBool::new(false);

// ---------------------------------------------------------------- installation and chaining

pub(super) static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The handler that was installed before ours.
static PREV: Previous = Previous::new();

/// Why the guard cannot arm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError {
    /// sigaction failed.
    Install(String),
    /// Someone (the application) replaced our SIGSEGV handler after we installed it; arming
    /// now would send our faults to them.
    Replaced,
    /// The table is full.
    Full,
    /// mprotect failed (not a mapping we may protect).
    Protect(String),
}

impl std::fmt::Display for GuardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuardError::Install(e) => write!(f, "cannot install the SIGSEGV handler: {e}"),
            GuardError::Replaced => write!(
                f,
                "the application replaced the layer's SIGSEGV handler; host-access validation is off"
            ),
            GuardError::Full => write!(f, "too many protected buffers ({SLOTS})"),
            GuardError::Protect(e) => write!(f, "mprotect failed: {e}"),
        }
    }
}

pub(super) fn install() -> Result<(), GuardError> {
    if INSTALLED.load(Ordering::Acquire) {
        // Still ours? (an app may install its own after us)
        if !segv_handler_is(handler as *const () as usize) {
            return Err(GuardError::Replaced);
        }
        return Ok(());
    }
    ring::ring_init();
    page_size();
    crate::hostmem::fault::setup();
    code::refresh();
    let quiet_in_handler = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if IN_HANDLER.load(Ordering::SeqCst) == 0 {
            quiet_in_handler(info)
        }
    }));
    // One quiet panic now, in normal code: the unwinder's lazily bound symbols (libgcc_s) are
    // resolved here, not in a handler on a thread's small alternate signal stack, where the
    // resolver's register save area alone can overflow it.
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    #[allow(clippy::panic)]
    let _ = std::panic::catch_unwind(|| panic!("echo: resolving the unwinder before any fault"));
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    let env = crate::settings::env_lookup(crate::settings::secure_execution());
    EMULATE_OFF.store(
        env("VK_ECHO_EMULATE").is_some_and(|v| v == "0"),
        Ordering::SeqCst,
    );
    STEP_OFF.store(
        env("VK_ECHO_STEP").is_some_and(|v| v == "0"),
        Ordering::SeqCst,
    );
    // SAFETY: once (INSTALLED), from normal code, before any fault of ours.
    unsafe { PREV.install_segv(handler as *const () as usize) }.map_err(GuardError::Install)?;
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        step::install();
        emulate::install();
    }
    INSTALLED.store(true, Ordering::Release);
    Ok(())
}

/// Hand a fault that is not ours to the previous disposition.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    CHAINED.fetch_add(1, Ordering::Relaxed);
    PREV.chain_segv(sig, info, ctx);
}

pub(super) extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    unsafe {
        let errno = *libc::__errno_location();
        // Nothing here should panic (the lints at the top of this module); if something does
        // all the same, the panic stays here: every armed range is lost (opened for good, its
        // buffers refused for missing evidence) and the instruction runs again — a fault that
        // was not ours then faults again and is chained.
        IN_HANDLER.fetch_add(1, Ordering::SeqCst);
        let caught = std::panic::catch_unwind(|| handle(info, ctx));
        IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
        let ours = caught.unwrap_or_else(|_| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            lose_all(code::pc_of(ctx));
            true
        });
        if !ours {
            chain(sig, info, ctx);
        }
        *libc::__errno_location() = errno;
    }
}

/// Buffer slot `s` loses its evidence for good: recorded once as lost, its whole range opened
/// (parked page tables moved back). The caller opens the faulting page.
unsafe fn lose(s: &Slot, id: u64, a: usize, b: usize, pc: usize) {
    for _ in 0..8 {
        let st = s.state.load(Ordering::SeqCst);
        if !matches!(st, Range::Armed | Range::Read | Range::Written) {
            return;
        }
        if st == Range::Written
            || s.state
                .compare_exchange(st, Range::Written, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            break;
        }
    }
    s.fall_back(Why::Lost);
    if !s.lost.swap(true, Ordering::SeqCst) {
        LOST_PC.store(pc, Ordering::Relaxed);
        let _ = ring::record(id, Seen::Lost);
    }
    open(s, a, b, libc::PROT_READ | libc::PROT_WRITE);
}

/// After a panic in the handler: every live range is lost.
unsafe fn lose_all(pc: usize) {
    let high = HIGH.load(Ordering::Acquire).min(SLOTS);
    for s in TABLE.iter().take(high) {
        let (id, a, b) = (
            s.id.load(Ordering::Relaxed),
            s.pstart.load(Ordering::Relaxed),
            s.pend.load(Ordering::Relaxed),
        );
        lose(s, id, a, b, pc);
        if b > a {
            set_prot(a, b, libc::PROT_READ | libc::PROT_WRITE);
        }
    }
}

/// A fault on a page echo protected that echo cannot explain (code that is not the program's)
/// or finish: every armed buffer with bytes on `page` is lost, the page opened. True when the
/// page was ours.
unsafe fn unexplained(page: usize, pc: usize, high: usize) -> bool {
    let ps = page_size();
    let mut hit = false;
    for s in TABLE.iter().take(high) {
        let st = s.state.load(Ordering::SeqCst);
        if matches!(st, Range::Free | Range::Tomb) {
            continue;
        }
        let (a, b) = (
            s.pstart.load(Ordering::Relaxed),
            s.pend.load(Ordering::Relaxed),
        );
        if page < a || page >= b {
            continue;
        }
        hit = true;
        lose(s, s.id.load(Ordering::Relaxed), a, b, pc);
    }
    if hit {
        FAULTS.fetch_add(1, Ordering::Relaxed);
        LOST.fetch_add(1, Ordering::Relaxed);
        set_prot(page, page + ps, page_prot(page));
    }
    hit
}

/// Record an access of slot `s` (snapshot `snap`) if it is the buffer's first read or first
/// write in this window, and open its range as far as its new state and its neighbours on
/// shared pages allow. True when it did.
unsafe fn note(s: &Slot, snap: (Range, usize, usize, usize, usize, u64), write: bool) -> bool {
    let (st, st0, en0, ps0, pe0, id) = snap;
    let (to, acc, prot) = if write {
        (
            Range::Written,
            Access::Write,
            // An exact slot (issue 54) stays closed to writes: each store faults, is emulated
            // and its bytes recorded; reads may run.
            if s.exact_live() {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_WRITE
            },
        )
    } else {
        (Range::Read, Access::Read, libc::PROT_READ)
    };
    // A failed exchange means another thread changed the state meanwhile: a fault of
    // its own (then there is nothing left to record), or a re-arm at a window boundary
    // (then this access is the new window's first): look again.
    let mut st = st;
    for _ in 0..8 {
        if !(st == Range::Armed || (st == Range::Read && to == Range::Written)) {
            break;
        }
        if s.state
            .compare_exchange(st, to, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let at = ring::record(id, Seen::Access(acc));
            if write {
                s.wseq.store(at, Ordering::SeqCst);
            }
            open(s, ps0, pe0, prot);
            return true;
        }
        match snapshot(s) {
            Some((now, a, b, _, _, i)) if (a, b, i) == (st0, en0, id) => st = now,
            _ => break,
        }
    }
    false
}

/// Open slot `s`'s range `[a, b)` to `prot` after a recorded access: parked page tables come
/// back at the least protection any live slot with bytes there allows (all of `prot` when the
/// range shares no page), and shared pages are then cut as [`reprotect`] does.
unsafe fn open(s: &Slot, a: usize, b: usize, prot: libc::c_int) {
    if s.parking.load(Ordering::SeqCst) == PARKED {
        let (lo, hi) = park::parked_range(s);
        let least = range_prot(lo, hi, prot, None);
        if park::unpark(s, least) {
            s.stale.store(true, Ordering::SeqCst);
            if least == prot && (lo, hi) == (a, b) {
                return;
            }
        }
    }
    // (Pages the tables came back to at `prot` already have it: mprotect leaves them alone.)
    reprotect(a, b, prot, None);
}

/// Returns true when the fault was ours (and the memory now allows the access).
unsafe fn handle(info: *mut libc::siginfo_t, ctx: *mut c_void) -> bool {
    if info.is_null() || (*info).si_code <= 0 {
        return false; // sent by kill/raise/sigqueue, not a fault
    }
    #[cfg(test)]
    #[allow(clippy::panic)]
    if PANIC_NEXT.swap(false, Ordering::SeqCst) {
        panic!("a panic planted in the SIGSEGV handler");
    }
    let addr = (*info).si_addr() as usize;
    let ps = page_size();
    let page = addr & !(ps - 1);
    // The direction, found (and counted) only for a fault on a page we protected. Unknown
    // direction: treat as a write (opens the range; never re-faults forever).
    let mut direction: Option<bool> = None;
    let mut write = || {
        *direction.get_or_insert_with(|| match fault_is_write(ctx) {
            Some(w) => w,
            None => {
                UNCLASSIFIED.fetch_add(1, Ordering::Relaxed);
                true
            }
        })
    };
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let high = HIGH.load(Ordering::Acquire).min(SLOTS);
    // Code that is not the program's (a driver's module, JIT-compiled code): not a host access
    // echo can explain. Never fatal, never the program's access.
    let pc = code::pc_of(ctx);
    if !code::program_code(pc) && unexplained(page, pc, high) {
        return true;
    }
    let mut page_hit = false;
    let mut exact_hit = false;
    // A slot holding the faulting byte changed state, and its range (this page included) was
    // set to what it may be now.
    let mut reopened = false;
    for s in TABLE.iter().take(high) {
        let Some((st, st0, en0, ps0, pe0, id)) = snapshot(s) else {
            // A slot another thread keeps BUSY for seconds (an arm that cannot finish): the
            // fault cannot be finished either. Its page is lost, never fatal.
            if s.state.load(Ordering::SeqCst) == Range::Busy
                && page >= s.pstart.load(Ordering::Relaxed)
                && page < s.pend.load(Ordering::Relaxed)
            {
                return unexplained(page, pc, high);
            }
            continue;
        };
        if addr < ps0 || addr >= pe0 {
            continue;
        }
        if st == Range::Tomb {
            // A fault that raced disarm (which opened the range before tombstoning it):
            // retry it, a bounded number of times (the range may be reused by someone else).
            let mut b = s.budget.load(Ordering::Relaxed);
            while b > 0 {
                match s
                    .budget
                    .compare_exchange_weak(b, b - 1, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(x) => b = x,
                }
            }
            if b > 0 {
                page_hit = true;
                exact_hit = true;
            }
            continue;
        }
        page_hit = true;
        if addr < st0 || addr >= en0 {
            continue; // the byte is not this slot's: collateral for it
        }
        exact_hit = true;
        // The buffer's first read or first write in this window.
        reopened |= note(s, (st, st0, en0, ps0, pe0, id), write());
    }
    if !page_hit {
        return false;
    }
    FAULTS.fetch_add(1, Ordering::Relaxed);
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    let tid = step::note_thread();
    if !exact_hit {
        // Collateral: a page we protected, but the byte is in no armed buffer.
        COLLATERAL.fetch_add(1, Ordering::Relaxed);
    }
    // The access itself: it may proceed once the page allows it. A page that still holds
    // bytes of a buffer needing more protection (unseen, or only read, in this window) is
    // opened for this one instruction; where that is not possible, for the rest of the window,
    // with those buffers recorded as read and written.
    let need = if write() { rw } else { libc::PROT_READ };
    let p = page_prot(page);
    if rank(p) >= rank(need) {
        if !reopened {
            set_prot(page, page + ps, p);
        }
        return true;
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if !ctx.is_null() && !EMULATE_OFF.load(Ordering::Relaxed) && stack_room() >= EMULATE_ROOM {
        EMULATING.fetch_add(1, Ordering::SeqCst);
        let done = emulated(addr, page, need, &mut *(ctx as *mut libc::ucontext_t), high);
        EMULATING.fetch_sub(1, Ordering::SeqCst);
        if done {
            return true;
        }
    }
    if need & libc::PROT_WRITE != 0 && exact_fall_back(page, high) {
        // Exact slots on the page that could not see this store are "any part" for the rest
        // of the window, their ranges open as any written buffer's: the page may allow it now.
        let p = page_prot(page);
        if rank(p) >= rank(need) {
            set_prot(page, page + ps, p);
            return true;
        }
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if !STEP_OFF.load(Ordering::Relaxed) && step::begin(tid, page, need, ctx) {
        STEPPED.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    for s in slots(high) {
        let Some((st, st0, en0, _, _, id)) = snapshot(s) else {
            continue;
        };
        // Other buffers with bytes on the page: the faulting byte's own was recorded above.
        let held = addr >= st0 && addr < en0;
        if held || !matches!(st, Range::Armed | Range::Read) || en0 <= page || st0 >= page + ps {
            continue;
        }
        // (A written exact slot on the page fell back above: it no longer constrains it.)
        if rank(slot_allows(s, st, page, page + ps).unwrap_or(rw)) >= rank(need) {
            continue;
        }
        s.fall_back(Why::Decode);
        if s.state
            .compare_exchange(st, Range::Written, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            SHARED_PAGE.fetch_add(1, Ordering::Relaxed);
            let _ = ring::record(id, Seen::Access(Access::ReadWrite));
        }
    }
    set_prot(page, page + ps, page_prot(page));
    true
}

/// Stack the emulation path may need below the handler's frame (it measures under 2 KiB,
/// `lost_tests::the_handler_fits_a_small_alternate_stack`); with less room left on an alternate
/// signal stack the access is stepped instead (or, where it cannot be, fails closed).
const EMULATE_ROOM: usize = 3 << 10;

/// Bytes left below this frame on the alternate signal stack the handler runs on
/// (`usize::MAX` when it runs on the thread's own stack). Async-signal-safe: `sigaltstack`.
fn stack_room() -> usize {
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut ss) } != 0
        || ss.ss_flags & libc::SS_ONSTACK == 0
    {
        return usize::MAX;
    }
    let here = &ss as *const libc::stack_t as usize;
    here.saturating_sub(ss.ss_sp as usize)
}

/// An access on a page that must stay closed (x86_64): decode it; record every other armed
/// buffer its bytes reach (the faulting byte's own was recorded by the caller); then, when the
/// page allows it now, let it run, else do it through the other view of the page's double
/// mapping. False: not done (decoded as nothing echo emulates, no other view): step it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn emulated(
    addr: usize,
    page: usize,
    need: libc::c_int,
    uc: &mut libc::ucontext_t,
    high: usize,
) -> bool {
    let Some(a) = emulate::decode(uc, page) else {
        return false;
    };
    let ps = page_size();
    let end = a.ea.wrapping_add(a.size);
    if a.write != (need & libc::PROT_WRITE != 0) || a.ea < page || end > page + ps || end < a.ea {
        return false;
    }
    let mut shadow = 0usize;
    let mut reached = false;
    if a.other != 0 {
        // A string move's other side is done through the pipe: never on a page echo watches.
        let (o0, o1) = (a.other & !(ps - 1), a.other + a.size);
        for s in slots(high) {
            let Some((st, _, _, ps0, pe0, _)) = snapshot(s) else {
                continue;
            };
            if st != Range::Tomb && o0 < pe0 && ps0 < o1 {
                return false;
            }
        }
    }
    for s in slots(high) {
        let Some(snap) = snapshot(s) else { continue };
        let (st, st0, en0, ps0, pe0, _) = snap;
        if st == Range::Tomb || page < ps0 || page >= pe0 {
            continue;
        }
        if shadow == 0 {
            shadow = s.shadow.load(Ordering::Relaxed);
        }
        let held = addr >= st0 && addr < en0;
        if !held && st0 < end && a.ea < en0 && note(s, snap, a.write) {
            REACHED.fetch_add(1, Ordering::Relaxed);
            reached = true;
        }
    }
    if reached {
        // Recording opened ranges: the page may allow the access now.
        let p = page_prot(page);
        if rank(p) >= rank(need) {
            set_prot(page, page + ps, p);
            return true;
        }
    }
    if shadow == 0 {
        return false;
    }
    // The exact slots (issue 54) the store writes are held while it is done and recorded, so
    // the window it is done in is the window it is recorded in.
    let mut held: [Option<&'static Slot>; HOLD] = [None; HOLD];
    if a.write {
        match hold_exact(a.ea, end, high, &mut held) {
            Some(true) => {}
            // An arm is rewriting one of them: do nothing; the instruction runs again, in the
            // window that arm opens.
            Some(false) => return true,
            None => return false,
        }
    }
    if !emulate::perform(&a, uc, a.ea.wrapping_add(shadow)) {
        release(&held);
        return false;
    }
    EMULATED.fetch_add(1, Ordering::Relaxed);
    let full = a.write && covered(&held, a.ea, end, page);
    release(&held);
    for s in held.iter().flatten() {
        if s.cov_any.load(Ordering::SeqCst) == Why::Budget as u8 {
            budget_spent(s);
        }
    }
    if full {
        // Every exact slot's bytes on the page are written in this window: the rest of its
        // stores there need not fault.
        let p = page_prot(page);
        if rank(p) > 0 {
            set_prot(page, page + ps, p);
        }
    }
    true
}

/// Exact slots one store may hold at once (a store reaching further falls back).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const HOLD: usize = 4;

/// Hold every exact slot with bytes in `[a, b)` (`Slot::hold`) into `held`: `Some(true)` when
/// all are held, `Some(false)` when an arm is rewriting one or has opened a new window of it
/// since the fault (none held then: the caller lets the instruction run again), `None` when more
/// than [`HOLD`] (none held).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn hold_exact(
    a: usize,
    b: usize,
    high: usize,
    held: &mut [Option<&'static Slot>; HOLD],
) -> Option<bool> {
    let mut n = 0;
    for s in slots(high) {
        if !s.exact.load(Ordering::SeqCst)
            || s.end.load(Ordering::Relaxed) <= a
            || s.start.load(Ordering::Relaxed) >= b
            || matches!(s.state.load(Ordering::SeqCst), Range::Free | Range::Tomb)
        {
            continue;
        }
        let Some(slot) = held.get_mut(n) else {
            release(held);
            *held = [None; HOLD];
            return None;
        };
        if !s.hold() {
            release(held);
            *held = [None; HOLD];
            return Some(false);
        }
        *slot = Some(s);
        n += 1;
        // Written in this window (the fault noted it): else a window boundary came between the
        // fault and now, and the store belongs to the new window, whose first write it may be —
        // run it again there.
        if s.state.load(Ordering::SeqCst) != Range::Written {
            release(held);
            *held = [None; HOLD];
            return Some(false);
        }
    }
    Some(true)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn release(held: &[Option<&'static Slot>; HOLD]) {
    for s in held.iter().flatten() {
        s.release();
    }
}

/// The held exact slots (issue 54) record bytes `[a, b)` (on `page`) as written in this window.
/// True when one of them now has every byte it holds on the page covered.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn covered(held: &[Option<&'static Slot>; HOLD], a: usize, b: usize, page: usize) -> bool {
    let ps = page_size();
    let mut full = false;
    for s in held.iter().flatten() {
        // Held, and found written in this window when held (`hold_exact`): `arm` cannot read or
        // clear the map, nor rewrite the slot, until it is released (its state may already
        // say BUSY: that arm waits for this store).
        let (st0, en0) = (
            s.start.load(Ordering::Relaxed),
            s.end.load(Ordering::Relaxed),
        );
        if en0 <= a || st0 >= b {
            continue;
        }
        let words = s.cover_words();
        let (lo, hi) = (a.max(st0), b.min(en0));
        super::cover::mark(words, lo - st0, hi - st0);
        EXACT_STORES.fetch_add(1, Ordering::Relaxed);
        let max = super::cover::max_stores();
        if max != 0 && super::cover::SPENT.fetch_add(1, Ordering::Relaxed) >= max {
            // Past the run's budget: this window is "any part" (the caller opens the range).
            s.fall_back(Why::Budget);
        }
        let n = s.wstores.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = s.wbytes.fetch_add((hi - lo) as u64, Ordering::Relaxed) + (hi - lo) as u64;
        if super::cover::too_dear(n, bytes, (en0 - st0) as u64, max) {
            // A whole rewrite at this rate would cost more stores than a window may: give up
            // now, after a few stores, rather than after paying most of them.
            s.fall_back(Why::Budget);
        }
        let (p0, p1) = (page.max(st0), (page + ps).min(en0));
        full |= super::cover::all_set(words, p0 - st0, p1 - st0);
    }
    full
}

/// An exact slot (issue 54) past its store budget: its range opens as a written slot's does,
/// so the rest of its window's stores run without a fault.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn budget_spent(s: &Slot) {
    if let Some((Range::Written, _, _, ps0, pe0, _)) = snapshot(s) {
        open(s, ps0, pe0, libc::PROT_READ | libc::PROT_WRITE);
    }
}

/// A store on `page` that echo did not emulate: every exact slot (issue 54) written in this
/// window with bytes on the page cannot know what it wrote, so its window falls back to "any
/// part" and its range opens as a written slot's does. True when there was one.
unsafe fn exact_fall_back(page: usize, high: usize) -> bool {
    let ps = page_size();
    let mut any = false;
    for s in slots(high) {
        let Some((st, st0, en0, ps0, pe0, _)) = snapshot(s) else {
            continue;
        };
        if st != Range::Written || !s.exact_live() || en0 <= page || st0 >= page + ps {
            continue;
        }
        s.fall_back(Why::Decode);
        open(s, ps0, pe0, libc::PROT_READ | libc::PROT_WRITE);
        any = true;
    }
    any
}
