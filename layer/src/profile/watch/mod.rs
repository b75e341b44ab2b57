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
//! further than its most protected buffer allows ([`page_prot`]: `PROT_NONE` while a buffer with
//! bytes there is unseen in this window, `PROT_READ` while one has only been read): a fault opens
//! its buffer's range *except* such shared pages. An access that still faults on a shared page
//! (its own buffer already recorded, or bytes of no armed buffer: *collateral*) is, on x86_64,
//! **emulated** when it is a plain move and the page has a shadow (the other view of a double
//! mapping, given to [`arm_shadowed`]): the handler decodes it, does the load or store through
//! the shadow and moves rip past it ([`emulate`]; counted as `emulated`); every armed buffer the
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
//! emptied range closed; the first access moves them back ([`park`]). Same faults, same
//! records, a few microseconds instead of a 16 MiB `mprotect`'s 0.2–0.6 ms each way.
//!
//! Rules for callers: [`disarm`] before the memory is unmapped or freed; [`arm`] only mappings
//! that are readable and writable when open (Vulkan host-visible maps are).

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

use std::ffi::c_void;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::hostmem::fault::fault_is_write;
use crate::hostmem::signal::{segv_handler_is, Previous};
use crate::hostmem::slot_state::StateCell;
use echo_analyzer::trace::Access;

/// Armed ranges the table holds at once.
pub const SLOTS: usize = 1024;
/// Accesses the ring holds between two drains (more are counted as dropped).
pub const RING: usize = 4096;

crate::hostmem::slot_state::slot_states! {
    /// An armed range.
    enum Range {
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

/// How many faults a tombstone swallows before its range stops being ours.
const TOMB_BUDGET: u64 = 16;

struct Slot {
    state: StateCell<Range>,
    id: AtomicU64,
    /// Exact byte range [start, end).
    start: AtomicUsize,
    end: AtomicUsize,
    /// Page-aligned range [pstart, pend).
    pstart: AtomicUsize,
    pend: AtomicUsize,
    /// Tombstone budget.
    budget: AtomicU64,
    /// Bumped by every arm (seqlock for the handler's snapshot).
    gen: AtomicU64,
    /// Some page of `[pstart, pend)` was opened since the last arm (by any slot's fault, a
    /// collateral fault, or a disarm): an ARMED slot that is not stale is still wholly
    /// `PROT_NONE`, and re-arming it needs no `mprotect`.
    stale: AtomicBool,
    /// Where the same bytes can be reached unprotected, as `shadow address - address`
    /// (wrapping; 0: nowhere): the other view of a double mapping. Lets the handler do an
    /// access on a shared page itself ([`emulate`]) instead of stepping it.
    shadow: AtomicUsize,
    /// Where this slot's page tables are parked while it is armed ([`park`]; 0: no park), and
    /// the park's length.
    park: AtomicUsize,
    park_len: AtomicUsize,
    /// The first page of the range that is parked (its end pages may be shared, not parked).
    park_lo: AtomicUsize,
    /// [`park::NONE`], [`park::PARKED`] (the range is empty and closed, its tables at `park`),
    /// or being moved.
    parking: AtomicU8,
    /// A fault echo could not explain opened this range since its last arm (recorded once).
    lost: AtomicBool,
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
    parking: AtomicU8::new(park::NONE),
    lost: AtomicBool::new(false),
};
static TABLE: [Slot; SLOTS] = [SLOT_INIT; SLOTS];
/// One past the highest slot ever used (the handler scans `0..HIGH`).
static HIGH: AtomicUsize = AtomicUsize::new(0);

/// The slots `0..high` (at most the table).
fn slots(high: usize) -> &'static [Slot] {
    TABLE.get(..high).unwrap_or(TABLE.as_slice())
}

/// Ring cell of position `pos`.
fn cell(pos: usize) -> &'static Cell {
    // `pos % RING` is always an index of the ring.
    CELLS.get(pos % RING).unwrap_or(&CELLS_FALLBACK)
}
/// Serializes arm/disarm/drain (normal code only; never taken by the handler).
static CONTROL: Mutex<()> = Mutex::new(());

// Vyukov bounded MPMC queue; producers are signal handlers.
struct Cell {
    seq: AtomicUsize,
    id: AtomicU64,
    access: AtomicU8,
    at: AtomicU64,
    /// Host time of the fault (the trace's clock) and the faulting thread's small id.
    t: AtomicU64,
    thread: AtomicU32,
}
#[allow(clippy::declare_interior_mutable_const)]
const CELL_INIT: Cell = Cell {
    seq: AtomicUsize::new(0),
    id: AtomicU64::new(0),
    access: AtomicU8::new(0),
    at: AtomicU64::new(0),
    t: AtomicU64::new(0),
    thread: AtomicU32::new(0),
};
static CELLS: [Cell; RING] = [CELL_INIT; RING];
/// Never used: what [`cell`] would give for an index it cannot have.
static CELLS_FALLBACK: Cell = CELL_INIT;
static RING_INIT: AtomicBool = AtomicBool::new(false);
static ENQ: AtomicUsize = AtomicUsize::new(0);
static DEQ: AtomicUsize = AtomicUsize::new(0);

// Counters (for stats and tests).
static FAULTS: AtomicU64 = AtomicU64::new(0);
static COLLATERAL: AtomicU64 = AtomicU64::new(0);
/// Armed buffers that lost sight of a page another fault opened (sub-allocations sharing a page).
static SHARED_PAGE: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static CHAINED: AtomicU64 = AtomicU64::new(0);
/// Faults whose direction was not known (taken as a write); those known are counted in
/// [`crate::hostmem::fault`] (from the fault context, or by decoding the instruction).
static UNCLASSIFIED: AtomicU64 = AtomicU64::new(0);
/// Re-arms that found their range still wholly protected (no `mprotect`).
static REARMS_SKIPPED: AtomicU64 = AtomicU64::new(0);
/// Windows a candidate was left unprotected in (sampled validation).
static UNWATCHED: AtomicU64 = AtomicU64::new(0);
/// Calls to `mprotect` the guard made (arms, and ranges or pages opened by faults and disarms).
static MPROTECTS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds spent in those calls (CLOCK_MONOTONIC, the vDSO: async-signal-safe).
static MPROTECT_NS: AtomicU64 = AtomicU64::new(0);

fn now_ns() -> u64 {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// `mprotect`, counted and timed: the one way the guard changes a protection.
unsafe fn protect(start: usize, len: usize, prot: libc::c_int) -> libc::c_int {
    MPROTECTS.fetch_add(1, Ordering::Relaxed);
    let t0 = now_ns();
    let r = libc::mprotect(start as *mut c_void, len, prot);
    MPROTECT_NS.fetch_add(now_ns().wrapping_sub(t0), Ordering::Relaxed);
    r
}
/// Accesses on shared pages run as one stepped instruction.
static STEPPED: AtomicU64 = AtomicU64::new(0);
/// Accesses on shared pages done by the handler through the other view (x86_64).
static EMULATED: AtomicU64 = AtomicU64::new(0);
/// Armed buffers reached by an access whose first byte was another's (found by decoding it).
static REACHED: AtomicU64 = AtomicU64::new(0);
/// Emulations in flight: `disarm` waits for them (the other view may be unmapped after it).
static EMULATING: AtomicUsize = AtomicUsize::new(0);

/// Count a window a candidate was left unprotected in (sampled validation).
pub fn note_unwatched() {
    UNWATCHED.fetch_add(1, Ordering::Relaxed);
}

const ACC_READ: u8 = 1;
const ACC_WRITE: u8 = 2;
/// A fault opened a page that also holds bytes of this (other) armed buffer: its accesses to
/// that page are no longer seen in this window, so it counts as read and written (fail closed).
const ACC_SHARED: u8 = 3;
/// A fault echo cannot explain (code that is not the program's, [`code`]) or cannot finish
/// opened this buffer's range for good: its host accesses are not seen from here on (the
/// recorder stops watching it and the analyzer refuses its pairs: missing evidence).
const ACC_LOST: u8 = 4;

/// Faults echo could not explain or finish: the ranges were left open, the buffers lost.
static LOST: AtomicU64 = AtomicU64::new(0);
/// The program counter of the last such fault (for the closing log line).
static LOST_PC: AtomicUsize = AtomicUsize::new(0);
/// Panics caught in the handler (each one lost every armed range).
static PANICS: AtomicU64 = AtomicU64::new(0);
/// The emulation and stepping of accesses on shared pages, switched off (`VK_ECHO_EMULATE=0`,
/// `VK_ECHO_STEP=0`: diagnostics, as `VK_ECHO_PARK=0`); an access either would have done opens
/// its page for the window with the neighbours recorded as read and written (fail closed).
static EMULATE_OFF: AtomicBool = AtomicBool::new(false);
/// Handlers running now. A panic while one runs prints nothing (the layer's panic hook, which
/// is the layer's own std's and no one else's, skips it): printing a message and a backtrace
/// from a signal handler can fault again, which the kernel answers by killing the process.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// The planted fault of `lost_tests`: the next fault handled panics.
#[cfg(test)]
static PANIC_NEXT: AtomicBool = AtomicBool::new(false);
static STEP_OFF: AtomicBool = AtomicBool::new(false);

fn page_size() -> usize {
    static PS: AtomicUsize = AtomicUsize::new(0);
    let v = PS.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    PS.store(v, Ordering::Relaxed);
    v
}

fn ring_init() {
    if !RING_INIT.load(Ordering::Acquire) {
        for (i, c) in CELLS.iter().enumerate() {
            c.seq.store(i, Ordering::Relaxed);
        }
        RING_INIT.store(true, Ordering::Release);
    }
}

/// Async-signal-safe push of an access stamped now, by the calling thread. Returns false when
/// full.
fn push_now(id: u64, access: u8) -> bool {
    let at = super::sink::stamp();
    push(id, access, at, super::sink::thread_id_in_handler())
}

/// Async-signal-safe push. Returns false when full.
fn push(id: u64, access: u8, at: super::sink::Stamp, thread: u32) -> bool {
    let mut pos = ENQ.load(Ordering::Relaxed);
    loop {
        let c = cell(pos);
        let s = c.seq.load(Ordering::Acquire);
        let diff = s as isize - pos as isize;
        if diff == 0 {
            match ENQ.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    c.id.store(id, Ordering::Relaxed);
                    c.access.store(access, Ordering::Relaxed);
                    c.at.store(at.seq, Ordering::Relaxed);
                    c.t.store(at.t, Ordering::Relaxed);
                    c.thread.store(thread, Ordering::Relaxed);
                    c.seq.store(pos + 1, Ordering::Release);
                    return true;
                }
                Err(p) => pos = p,
            }
        } else if diff < 0 {
            return false;
        } else {
            pos = ENQ.load(Ordering::Relaxed);
        }
    }
}

fn pop() -> Option<(u64, u8, super::sink::Stamp, u32)> {
    let mut pos = DEQ.load(Ordering::Relaxed);
    loop {
        let c = cell(pos);
        let s = c.seq.load(Ordering::Acquire);
        let diff = s as isize - (pos + 1) as isize;
        if diff == 0 {
            match DEQ.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let v = (
                        c.id.load(Ordering::Relaxed),
                        c.access.load(Ordering::Relaxed),
                        super::sink::Stamp {
                            seq: c.at.load(Ordering::Relaxed),
                            t: c.t.load(Ordering::Relaxed),
                        },
                        c.thread.load(Ordering::Relaxed),
                    );
                    c.seq.store(pos + RING, Ordering::Release);
                    return Some(v);
                }
                Err(p) => pos = p,
            }
        } else if diff < 0 {
            return None;
        } else {
            pos = DEQ.load(Ordering::Relaxed);
        }
    }
}

// ---------------------------------------------------------------- installation and chaining

static INSTALLED: AtomicBool = AtomicBool::new(false);
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

fn install() -> Result<(), GuardError> {
    if INSTALLED.load(Ordering::Acquire) {
        // Still ours? (an app may install its own after us)
        if !segv_handler_is(handler as *const () as usize) {
            return Err(GuardError::Replaced);
        }
        return Ok(());
    }
    ring_init();
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

// -------------------------------------------------------------------------------- handler

/// Open `[start, end)` (`prot` is never `PROT_NONE`: arming protects in [`arm`]) and mark every
/// slot whose pages overlap it stale, so its next arm protects again.
unsafe fn set_prot(start: usize, end: usize, prot: libc::c_int) {
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
fn allowed(st: Range) -> Option<libc::c_int> {
    match st {
        Range::Armed | Range::Busy => Some(libc::PROT_NONE),
        Range::Read => Some(libc::PROT_READ),
        Range::Written => Some(libc::PROT_READ | libc::PROT_WRITE),
        _ => None,
    }
}

/// Order of protections: none < read < read+write.
fn rank(p: libc::c_int) -> u8 {
    if p & libc::PROT_WRITE != 0 {
        2
    } else if p & libc::PROT_READ != 0 {
        1
    } else {
        0
    }
}

fn lower(a: libc::c_int, b: libc::c_int) -> libc::c_int {
    if rank(a) <= rank(b) {
        a
    } else {
        b
    }
}

/// The most `[a, b)` may be opened: the least any live slot with bytes there allows, at most
/// `ceil`; slot `skip` (being disarmed) does not count.
unsafe fn range_prot(a: usize, b: usize, ceil: libc::c_int, skip: Option<usize>) -> libc::c_int {
    let high = HIGH.load(Ordering::Acquire).min(SLOTS);
    let mut p = ceil;
    for (i, s) in slots(high).iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let st = s.state.load(Ordering::SeqCst);
        let Some(q) = allowed(st) else { continue };
        if s.pstart.load(Ordering::Relaxed) < b && a < s.pend.load(Ordering::Relaxed) {
            p = lower(p, q);
        }
    }
    p
}

/// The protection page `page` may have now.
unsafe fn page_prot(page: usize) -> libc::c_int {
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
unsafe fn reprotect(a: usize, b: usize, ceil: libc::c_int, skip: Option<usize>) {
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

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
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
    if !s.lost.swap(true, Ordering::SeqCst) {
        LOST_PC.store(pc, Ordering::Relaxed);
        if !push_now(id, ACC_LOST) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
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

/// Wait (bounded) until slot `s` is not BUSY; returns its state and a consistent snapshot of
/// its fields `(gen, start, end, pstart, pend, id)`.
unsafe fn snapshot(s: &Slot) -> Option<(Range, usize, usize, usize, usize, u64)> {
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

/// Record an access of slot `s` (snapshot `snap`) if it is the buffer's first read or first
/// write in this window, and open its range as far as its new state and its neighbours on
/// shared pages allow. True when it did.
unsafe fn note(s: &Slot, snap: (Range, usize, usize, usize, usize, u64), write: bool) -> bool {
    let (st, st0, en0, ps0, pe0, id) = snap;
    let (to, acc, prot) = if write {
        (
            Range::Written,
            ACC_WRITE,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    } else {
        (Range::Read, ACC_READ, libc::PROT_READ)
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
            if !push_now(id, acc) {
                DROPPED.fetch_add(1, Ordering::Relaxed);
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
    if s.parking.load(Ordering::SeqCst) == park::PARKED {
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
    let tid = note_thread();
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
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if !STEP_OFF.load(Ordering::Relaxed) && step::begin(tid, page, need, ctx) {
        STEPPED.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    let _ = tid;
    for s in slots(high) {
        let Some((st, st0, en0, _, _, id)) = snapshot(s) else {
            continue;
        };
        // Other buffers with bytes on the page: the faulting byte's own was recorded above.
        let held = addr >= st0 && addr < en0;
        if held || !matches!(st, Range::Armed | Range::Read) || en0 <= page || st0 >= page + ps {
            continue;
        }
        if rank(allowed(st).unwrap_or(rw)) >= rank(need) {
            continue;
        }
        if s.state
            .compare_exchange(st, Range::Written, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            SHARED_PAGE.fetch_add(1, Ordering::Relaxed);
            if !push_now(id, ACC_SHARED) {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
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
    if shadow == 0 || !emulate::perform(&a, uc, a.ea.wrapping_add(shadow)) {
        return false;
    }
    EMULATED.fetch_add(1, Ordering::Relaxed);
    true
}

/// The host threads that fault on armed memory: stepping is safe while there is one (a second
/// thread's access could slip into the instruction-long opening of a shared page unseen).
static HOST_TID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static MULTI: AtomicBool = AtomicBool::new(false);

fn note_thread() -> i32 {
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    match HOST_TID.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(t) if t == tid => {}
        Err(_) => MULTI.store(true, Ordering::SeqCst),
    }
    tid
}

/// Whose code made a fault: the program's, or a driver's or JIT-compiled code.
mod code;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod emulate;
#[cfg(test)]
mod lost_tests;
/// Arming a double mapping's range by moving its page tables aside instead of rewriting them.
mod park;
/// Single-stepping one access on a shared page (x86_64): the SIGSEGV handler opens the page,
/// sets the trap flag in the signal context and notes `(thread, page)`; the CPU runs the one
/// instruction and raises SIGTRAP, whose handler puts the page back to [`page_prot`] and clears
/// the flag. An instruction that touches two shared pages faults twice before its trap: both
/// are noted. A SIGTRAP that is not ours goes to the disposition installed before ours.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod step;

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

/// What a fault recorded of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The program's host access.
    Access(Access),
    /// A fault echo could not explain (code that is not the program's) or finish opened the
    /// buffer's range for good: its host accesses are not seen from here on.
    Lost,
}

/// Take the accesses recorded since the last drain, oldest first: `f(id, seen, stamp,
/// thread)`, where `stamp` is the global sequence number and host time taken in the handler at
/// the fault, and `thread` the small id of the thread that faulted (0: unknown).
pub fn drain(mut f: impl FnMut(u64, Seen, super::sink::Stamp, u32)) {
    let _g = lock();
    while let Some((id, acc, at, thread)) = pop() {
        let a = match acc {
            ACC_WRITE => Seen::Access(Access::Write),
            ACC_SHARED => Seen::Access(Access::ReadWrite),
            ACC_LOST => Seen::Lost,
            _ => Seen::Access(Access::Read),
        };
        f(id, a, at, thread);
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use crate::hostmem::fault::{a64_access_is_write, aarch64_esr_is_write};

    const CHILD_ENV: &str = "ECHO_GUARD_CHILD";

    /// Run test `name` alone in a fresh process with the child flag set (through
    /// `ECHO_TEST_RUNNER` under an emulator).
    fn child(name: &str) -> std::process::Output {
        crate::testutil::run_alone(&format!("profile::watch::tests::{name}"), CHILD_ENV)
    }

    fn in_child() -> bool {
        std::env::var_os(CHILD_ENV).is_some()
    }

    fn assert_child_ok(name: &str) -> String {
        let out = child(name);
        let so = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && so.contains("CHILD-OK"),
            "child {name} failed: {:?}\nstdout:\n{so}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        so
    }

    struct Pages {
        p: *mut u8,
        len: usize,
    }
    impl Pages {
        fn new(n: usize) -> Pages {
            let len = n * page_size();
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Pages {
                p: p as *mut u8,
                len,
            }
        }
    }
    impl Drop for Pages {
        fn drop(&mut self) {
            unsafe { libc::munmap(self.p as *mut c_void, self.len) };
        }
    }

    fn drained() -> Vec<(u64, Access, u64)> {
        let mut v = Vec::new();
        drain(|id, a, s, _| {
            if let Seen::Access(a) = a {
                v.push((id, a, s.seq))
            }
        });
        v
    }

    #[test]
    fn planted_write_is_caught_as_write() {
        if !in_child() {
            assert_child_ok("planted_write_is_caught_as_write");
            return;
        }
        let m = Pages::new(4);
        arm(7, m.p, m.len).unwrap();
        unsafe { std::ptr::write_volatile(m.p.add(100), 42u8) };
        unsafe { std::ptr::write_volatile(m.p.add(3 * page_size()), 43u8) }; // no second fault
        let v = drained();
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].0, v[0].1), (7, Access::Write));
        assert!(v[0].2 > 0);
        assert_eq!(unsafe { *m.p.add(100) }, 42);
        assert_eq!(stats().faults, 1);
        // Re-arm: a new window, caught again. The value written survives.
        arm(7, m.p, m.len).unwrap();
        let x = unsafe { std::ptr::read_volatile(m.p.add(100)) };
        assert_eq!(x, 42);
        let v = drained();
        assert_eq!(
            v.iter().map(|e| e.1).collect::<Vec<_>>(),
            vec![Access::Read]
        );
        disarm(7);
        println!("CHILD-OK");
    }

    #[test]
    fn untouched_rearm_skips_mprotect_and_still_catches() {
        if !in_child() {
            assert_child_ok("untouched_rearm_skips_mprotect_and_still_catches");
            return;
        }
        let m = Pages::new(4);
        arm(11, m.p, m.len).unwrap();
        // Three window boundaries with no access: the range is still PROT_NONE.
        for _ in 0..3 {
            arm(11, m.p, m.len).unwrap();
        }
        assert_eq!(stats().rearms_skipped, 3);
        unsafe { std::ptr::write_volatile(m.p.add(2 * page_size() + 5), 1u8) };
        let v = drained();
        assert_eq!(
            v.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
            vec![(11, Access::Write)]
        );
        // Opened by that write: the next arm protects for real, and catches again.
        arm(11, m.p, m.len).unwrap();
        assert_eq!(stats().rearms_skipped, 3);
        let _ = unsafe { std::ptr::read_volatile(m.p) };
        assert_eq!(drained().len(), 1);
        disarm(11);
        println!("CHILD-OK");
    }

    /// Accesses on shared pages are stepped (exact) where the platform allows it; elsewhere the
    /// guard falls back to recording the neighbours as read and written.
    fn steps() -> bool {
        cfg!(all(target_arch = "x86_64", target_os = "linux"))
    }

    fn kinds() -> Vec<(u64, Access)> {
        drained().iter().map(|e| (e.0, e.1)).collect()
    }

    #[test]
    fn page_opened_by_a_neighbour_is_protected_again() {
        if !in_child() {
            assert_child_ok("page_opened_by_a_neighbour_is_protected_again");
            return;
        }
        // A: [0, 1.5 pages), B: [1.5, 3 pages): they share page 1.
        let m = Pages::new(3);
        let half = page_size() + page_size() / 2;
        let b = unsafe { m.p.add(half) };
        arm(21, m.p, half).unwrap();
        arm(22, b, 3 * page_size() - half).unwrap();
        // B written on its own page: B's range opens, but for page 1, where A's bytes are still
        // unseen in this window.
        unsafe { std::ptr::write_volatile(b.add(page_size()), 1u8) };
        if steps() {
            assert_eq!(kinds(), vec![(22, Access::Write)]);
            // B's bytes on page 1: one stepped instruction; A is still not touched ...
            unsafe { std::ptr::write_volatile(b.add(8), 2u8) };
            assert!(kinds().is_empty());
            assert_eq!(stats().stepped, 1);
            assert_eq!(unsafe { std::ptr::read_volatile(b.add(8)) }, 2);
            // ... and a planted write to A's bytes on that page is caught.
            unsafe { std::ptr::write_volatile(m.p.add(page_size() + 8), 3u8) };
            assert_eq!(kinds(), vec![(21, Access::Write)]);
            assert_eq!(stats().shared_page, 0);
        } else {
            // No stepping: page 1 stays protected until B touches its bytes there; then it
            // opens for the rest of the window, and A counts as read and written.
            assert_eq!(kinds(), vec![(22, Access::Write)]);
            unsafe { std::ptr::write_volatile(b.add(8), 2u8) };
            assert_eq!(kinds(), vec![(21, Access::ReadWrite)]);
            assert_eq!(stats().shared_page, 1);
        }
        // A's re-arm protects page 1 again.
        arm(21, m.p, half).unwrap();
        assert_eq!(stats().rearms_skipped, 0);
        unsafe { std::ptr::write_volatile(m.p.add(page_size() + 8), 2u8) };
        assert_eq!(
            kinds(),
            vec![(21, Access::Write)],
            "A's access on the page B opened is caught"
        );
        disarm(21);
        disarm(22);
        println!("CHILD-OK");
    }

    #[test]
    fn planted_read_then_write_is_read_then_write() {
        if !in_child() {
            assert_child_ok("planted_read_then_write_is_read_then_write");
            return;
        }
        let m = Pages::new(2);
        unsafe { *m.p = 5 };
        arm(9, m.p, m.len).unwrap();
        let r = unsafe { std::ptr::read_volatile(m.p.add(page_size() + 1)) };
        assert_eq!(r, 0);
        let r2 = unsafe { std::ptr::read_volatile(m.p) }; // no second read fault
        assert_eq!(r2, 5);
        unsafe { std::ptr::write_volatile(m.p.add(8), 1u8) };
        unsafe { std::ptr::write_volatile(m.p.add(page_size()), 1u8) };
        let v = drained();
        let kinds: Vec<_> = v.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(kinds, vec![(9, Access::Read), (9, Access::Write)]);
        assert!(v[0].2 < v[1].2, "seq orders the accesses");
        assert_eq!(stats().faults, 2);
        disarm(9);
        println!("CHILD-OK");
    }

    #[test]
    fn unarmed_memory_is_untouched_and_disarm_opens() {
        if !in_child() {
            assert_child_ok("unarmed_memory_is_untouched_and_disarm_opens");
            return;
        }
        let m = Pages::new(3);
        let other = Pages::new(1);
        // Arm only the middle page.
        let mid = unsafe { m.p.add(page_size()) };
        arm(1, mid, page_size()).unwrap();
        unsafe {
            std::ptr::write_volatile(m.p, 1u8);
            std::ptr::write_volatile(m.p.add(2 * page_size()), 1u8);
            std::ptr::write_volatile(other.p, 1u8);
        }
        assert!(drained().is_empty());
        assert_eq!(stats().faults, 0);
        disarm(1);
        assert!(!is_armed(1));
        unsafe { std::ptr::write_volatile(mid, 3u8) };
        assert!(drained().is_empty());
        assert_eq!(stats().faults, 0);
        println!("CHILD-OK");
    }

    #[test]
    fn edge_page_shared_with_other_data_is_collateral() {
        if !in_child() {
            assert_child_ok("edge_page_shared_with_other_data_is_collateral");
            return;
        }
        let m = Pages::new(2);
        // Buffer covers bytes [100, page+100): both pages are protected.
        arm(3, unsafe { m.p.add(100) }, page_size()).unwrap();
        unsafe { std::ptr::write_volatile(m.p.add(page_size() + 50), 1u8) }; // inside
        let v = drained();
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].0, v[0].1), (3, Access::Write));
        arm(3, unsafe { m.p.add(100) }, page_size()).unwrap(); // a new window
        unsafe { std::ptr::write_volatile(m.p.add(10), 1u8) }; // outside the buffer
        assert_eq!(stats().collateral, 1);
        if steps() {
            // Stepped: the buffer's bytes on page 0 stay watched, and a planted write there
            // is caught.
            assert!(kinds().is_empty());
            assert_eq!((stats().stepped, stats().shared_page), (1, 0));
            unsafe { std::ptr::write_volatile(m.p.add(200), 1u8) };
            assert_eq!(kinds(), vec![(3, Access::Write)]);
        } else {
            // That opened page 0, where the buffer has bytes [100, page): its accesses there
            // are no longer seen in this window, so it counts as read and written.
            assert_eq!(kinds(), vec![(3, Access::ReadWrite)]);
            assert_eq!(stats().shared_page, 1);
        }
        assert_eq!(unsafe { std::ptr::read_volatile(m.p.add(10)) }, 1);
        disarm(3);
        println!("CHILD-OK");
    }

    #[test]
    fn sub_allocations_sharing_a_page_never_hide_an_access() {
        if !in_child() {
            assert_child_ok("sub_allocations_sharing_a_page_never_hide_an_access");
            return;
        }
        let m = Pages::new(3);
        let ps = page_size();
        let arm_both = || {
            // Staging A = [0, ps + 100), partner B = [ps + 100, 3 ps): page 1 holds both.
            arm(1, m.p, ps + 100).unwrap();
            arm(2, unsafe { m.p.add(ps + 100) }, 2 * ps - 100).unwrap();
        };
        arm_both();
        // The host writes A, far from B, then A's bytes on the shared page.
        unsafe { std::ptr::write_volatile(m.p.add(10), 1u8) };
        unsafe { std::ptr::write_volatile(m.p.add(ps + 50), 1u8) };
        if steps() {
            // B is not touched: exact.
            assert_eq!(kinds(), vec![(1, Access::Write)]);
            // A planted write to B's bytes on the shared page is caught, as B's.
            unsafe { std::ptr::write_volatile(m.p.add(ps + 200), 1u8) };
            assert_eq!(kinds(), vec![(2, Access::Write)]);
            // The other way round, with a read: B written on its own page, then a read of
            // A's bytes on the shared page is A's read.
            arm_both();
            unsafe { std::ptr::write_volatile(m.p.add(2 * ps + 10), 1u8) };
            unsafe { std::ptr::write_volatile(m.p.add(ps + 300), 1u8) };
            assert_eq!(kinds(), vec![(2, Access::Write)]);
            assert_eq!(unsafe { std::ptr::read_volatile(m.p.add(ps + 20)) }, 0);
            assert_eq!(kinds(), vec![(1, Access::Read)]);
            // ... and a write after the read is a write.
            unsafe { std::ptr::write_volatile(m.p.add(ps + 20), 5u8) };
            assert_eq!(kinds(), vec![(1, Access::Write)]);
            assert_eq!(stats().shared_page, 0);
        } else {
            // No stepping: opening page 1 for A hides B there, so B is recorded.
            let mut v = kinds();
            v.sort_by_key(|x| x.0);
            assert_eq!(v, vec![(1, Access::Write), (2, Access::ReadWrite)]);
            arm_both();
            unsafe { std::ptr::write_volatile(m.p.add(2 * ps + 10), 1u8) };
            unsafe { std::ptr::write_volatile(m.p.add(ps + 300), 1u8) };
            let mut v = kinds();
            v.sort_by_key(|x| x.0);
            assert_eq!(v, vec![(1, Access::ReadWrite), (2, Access::Write)]);
        }
        disarm(1);
        disarm(2);
        // Disarmed: every page open, the bytes written are there.
        unsafe { std::ptr::write_volatile(m.p.add(ps + 100), 9u8) };
        assert_eq!(unsafe { *m.p.add(ps + 50) }, 1);
        assert!(kinds().is_empty());
        println!("CHILD-OK");
    }

    #[test]
    fn one_instruction_on_two_shared_pages_is_stepped_once() {
        if !in_child() {
            assert_child_ok("one_instruction_on_two_shared_pages_is_stepped_once");
            return;
        }
        if !steps() {
            println!("CHILD-OK");
            return;
        }
        let m = Pages::new(4);
        let ps = page_size();
        // A = [0, ps + 100), B = [ps + 100, 2 ps + 100), C = [2 ps + 100, 4 ps): B shares
        // page 1 with A and page 2 with C.
        arm(1, m.p, ps + 100).unwrap();
        arm(2, unsafe { m.p.add(ps + 100) }, ps).unwrap();
        arm(3, unsafe { m.p.add(2 * ps + 100) }, 2 * ps - 100).unwrap();
        // B's first write, on page 1: recorded, and itself stepped (A is unseen there).
        unsafe { std::ptr::write_volatile(m.p.add(ps + 200), 1u8) };
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        assert_eq!(stats().stepped, 1);
        // One unaligned 8-byte write of B's bytes across the page 1 / page 2 boundary.
        unsafe { std::ptr::write_unaligned(m.p.add(2 * ps - 4) as *mut u64, u64::MAX) };
        assert!(kinds().is_empty(), "A and C untouched");
        assert_eq!(stats().stepped, 3, "two faults, one instruction");
        assert_eq!(
            unsafe { std::ptr::read_unaligned(m.p.add(2 * ps - 4) as *const u64) },
            u64::MAX
        );
        // Both pages are protected again: A and C are still watched.
        let _ = unsafe { std::ptr::read_volatile(m.p.add(ps + 10)) };
        unsafe { std::ptr::write_volatile(m.p.add(2 * ps + 150), 1u8) };
        assert_eq!(kinds(), vec![(1, Access::Read), (3, Access::Write)]);
        for id in 1..=3 {
            disarm(id);
        }
        println!("CHILD-OK");
    }

    #[test]
    fn a_second_host_thread_turns_stepping_off() {
        if !in_child() {
            assert_child_ok("a_second_host_thread_turns_stepping_off");
            return;
        }
        let m = Pages::new(3);
        let ps = page_size();
        let other = Pages::new(1);
        arm(7, other.p, ps).unwrap();
        // Another thread touches armed memory: a host access from two threads.
        let p = other.p as usize;
        std::thread::spawn(move || unsafe { std::ptr::write_volatile(p as *mut u8, 1u8) })
            .join()
            .unwrap();
        unsafe { std::ptr::write_volatile(other.p.add(1), 1u8) };
        assert_eq!(kinds(), vec![(7, Access::Write)]);
        arm(7, other.p, ps).unwrap();
        unsafe { std::ptr::write_volatile(other.p, 2u8) };
        assert_eq!(kinds(), vec![(7, Access::Write)]);
        // Now A and B sharing page 1: A's write there cannot be stepped (another thread could
        // slip into the opening unseen), so B is recorded as read and written: fail closed.
        arm(1, m.p, ps + 100).unwrap();
        arm(2, unsafe { m.p.add(ps + 100) }, 2 * ps - 100).unwrap();
        unsafe { std::ptr::write_volatile(m.p.add(10), 1u8) };
        unsafe { std::ptr::write_volatile(m.p.add(ps + 50), 1u8) };
        assert_eq!(kinds(), vec![(1, Access::Write), (2, Access::ReadWrite)]);
        assert_eq!((stats().stepped, stats().shared_page), (0, 1));
        for id in [1, 2, 7] {
            disarm(id);
        }
        println!("CHILD-OK");
    }

    static APP_TRAPS: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn app_trap(_: libc::c_int) {
        APP_TRAPS.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn app_sigtrap_handler_still_gets_its_traps() {
        if !in_child() {
            assert_child_ok("app_sigtrap_handler_still_gets_its_traps");
            return;
        }
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = app_trap as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut()), 0);
        }
        let m = Pages::new(2);
        let ps = page_size();
        arm(1, m.p, ps + 100).unwrap();
        arm(2, unsafe { m.p.add(ps + 100) }, ps - 100).unwrap();
        unsafe { libc::raise(libc::SIGTRAP) };
        assert_eq!(APP_TRAPS.load(Ordering::SeqCst), 1);
        // A step still works beside it, and the app's handler sees none of ours.
        unsafe { std::ptr::write_volatile(m.p.add(10), 1u8) };
        unsafe { std::ptr::write_volatile(m.p.add(ps + 10), 1u8) };
        if steps() {
            assert_eq!(kinds(), vec![(1, Access::Write)]);
            assert_eq!(stats().stepped, 1);
        }
        assert_eq!(APP_TRAPS.load(Ordering::SeqCst), 1);
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    static APP_FAULTS: AtomicUsize = AtomicUsize::new(0);
    static APP_PAGE: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn app_handler(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
        unsafe {
            let addr = (*info).si_addr() as usize;
            let p = APP_PAGE.load(Ordering::SeqCst);
            if addr >= p && addr < p + page_size() {
                APP_FAULTS.fetch_add(1, Ordering::SeqCst);
                libc::mprotect(
                    p as *mut c_void,
                    page_size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                );
            } else {
                libc::_exit(99);
            }
        }
    }

    #[test]
    fn app_handler_installed_before_still_gets_its_faults() {
        if !in_child() {
            assert_child_ok("app_handler_installed_before_still_gets_its_faults");
            return;
        }
        let app = Pages::new(1);
        APP_PAGE.store(app.p as usize, Ordering::SeqCst);
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = app_handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
            libc::mprotect(app.p as *mut c_void, page_size(), libc::PROT_NONE);
        }
        let ours = Pages::new(1);
        arm(5, ours.p, ours.len).unwrap();
        unsafe { std::ptr::write_volatile(app.p, 1u8) };
        assert_eq!(APP_FAULTS.load(Ordering::SeqCst), 1);
        unsafe { std::ptr::write_volatile(ours.p, 1u8) };
        assert_eq!(
            APP_FAULTS.load(Ordering::SeqCst),
            1,
            "our fault reached the app"
        );
        let v = drained();
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].0, v[0].1), (5, Access::Write));
        // The app protects again: still its own fault.
        unsafe {
            libc::mprotect(app.p as *mut c_void, page_size(), libc::PROT_NONE);
            let _ = std::ptr::read_volatile(app.p);
        }
        assert_eq!(APP_FAULTS.load(Ordering::SeqCst), 2);
        assert_eq!(stats().chained, 2);
        disarm(5);
        println!("CHILD-OK");
    }

    #[test]
    fn foreign_fault_with_default_disposition_still_kills() {
        if !in_child() {
            let out = child("foreign_fault_with_default_disposition_still_kills");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGSEGV),
                "{:?} {}",
                out.status,
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("ARMED"));
            return;
        }
        // libtest installs no SIGSEGV handler, but Rust's std does (stack-overflow detection)
        // in the main program; make sure the previous disposition is SIG_DFL for this test.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
        }
        let ours = Pages::new(1);
        arm(5, ours.p, ours.len).unwrap();
        println!("ARMED");
        let bad = Pages::new(1);
        unsafe {
            libc::mprotect(bad.p as *mut c_void, page_size(), libc::PROT_NONE);
            std::ptr::write_volatile(bad.p, 1u8);
        }
        println!("CHILD-OK (should have died)");
    }

    #[test]
    fn replaced_handler_refuses_to_arm() {
        if !in_child() {
            assert_child_ok("replaced_handler_refuses_to_arm");
            return;
        }
        let m = Pages::new(1);
        arm(1, m.p, m.len).unwrap();
        disarm(1);
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = app_handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
        }
        assert_eq!(arm(1, m.p, m.len), Err(GuardError::Replaced));
        unsafe { std::ptr::write_volatile(m.p, 1u8) }; // not protected
        println!("CHILD-OK");
    }

    #[test]
    fn many_threads_one_fault_each_window() {
        if !in_child() {
            assert_child_ok("many_threads_one_fault_each_window");
            return;
        }
        let m = Pages::new(64);
        let p = m.p as usize;
        for round in 0..20u64 {
            arm(round % 3, m.p, m.len).unwrap();
            std::thread::scope(|s| {
                for t in 0..4usize {
                    s.spawn(move || unsafe {
                        std::ptr::write_volatile((p + t * 16 * page_size()) as *mut u8, 1u8);
                    });
                }
            });
            let v = drained();
            assert_eq!(v.len(), 1, "round {round}: {v:?}");
            assert_eq!(v[0].1, Access::Write);
            disarm(round % 3);
        }
        println!("CHILD-OK");
    }

    #[test]
    fn fault_round_trip_cost() {
        if !in_child() {
            let so = assert_child_ok("fault_round_trip_cost");
            for l in so.lines().filter(|l| l.contains("COST")) {
                eprintln!("{l}");
            }
            return;
        }
        let m = Pages::new(16); // 64 KiB
                                // Minimum over batches: the machine may be shared.
        let (mut arm_us, mut both_us) = (f64::MAX, f64::MAX);
        let n = 200;
        for _ in 0..10 {
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                arm(1, m.p, m.len).unwrap();
            }
            arm_us = arm_us.min(t0.elapsed().as_secs_f64() * 1e6 / n as f64);
            let t0 = std::time::Instant::now();
            for i in 0..n {
                arm(1, m.p, m.len).unwrap();
                unsafe { std::ptr::write_volatile(m.p.add((i * 64) % m.len), 1u8) };
            }
            both_us = both_us.min(t0.elapsed().as_secs_f64() * 1e6 / n as f64);
            drained();
        }
        println!(
            "COST guard (min of 10 batches): arm (mprotect PROT_NONE, 64 KiB) {arm_us:.2} us; arm + fault round trip {both_us:.2} us; fault alone ~{:.2} us",
            both_us - arm_us
        );
        println!("CHILD-OK");
    }

    /// What one access on a shared page costs, emulated and stepped (printed, not asserted:
    /// timing is the benchmarks' business; `cargo test -p vk-layer-echo --release --lib
    /// shared_page_access_cost -- --nocapture`).
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn shared_page_access_cost() {
        if !in_child() {
            let so = assert_child_ok("shared_page_access_cost");
            for l in so.lines().filter(|l| l.contains("COST")) {
                eprintln!("{l}");
            }
            return;
        }
        let ps = page_size();
        let n = 2000;
        let time = |p: *mut u8| {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                for i in 0..n {
                    unsafe { std::ptr::write_volatile(p.add(i % 1024), i as u8) };
                }
                best = best.min(t0.elapsed().as_secs_f64() * 1e6 / n as f64);
            }
            best
        };
        let m = shared_pair();
        let emulated_us = time(unsafe { m.app_ptr().add(ps + 1024) });
        let st = stats();
        let direct = emulate::CODE_DIRECT.load(Ordering::Relaxed);
        assert_eq!(st.stepped, 0);
        disarm(1);
        disarm(2);
        let q = Pages::new(3);
        arm(1, q.p, ps + 256).unwrap();
        arm(2, unsafe { q.p.add(ps + 256) }, 2 * ps - 256).unwrap();
        let stepped_us = time(unsafe { q.p.add(ps + 1024) });
        disarm(1);
        disarm(2);
        println!(
            "COST access on a shared page (best of 5 x {n}): emulated {emulated_us:.2} us, stepped {stepped_us:.2} us; {} of {} instructions read directly",
            direct, st.emulated
        );
        println!("CHILD-OK");
    }

    // ------------------------------------------------------------------ parking

    fn accesses() -> Vec<(u64, Access)> {
        drained().into_iter().map(|e| (e.0, e.1)).collect()
    }

    /// A double mapping's range is armed by parking its page tables: every window's first read
    /// and first write are still recorded, a range parked writable comes back read-only after
    /// a read (so the write after it is recorded too), the bytes are the driver view's
    /// throughout, and disarm leaves it open.
    #[test]
    fn parked_ranges_are_watched_and_keep_their_bytes() {
        if !in_child() {
            assert_child_ok("parked_ranges_are_watched_and_keep_their_bytes");
            return;
        }
        let ps = page_size();
        let m = crate::hostmem::memfd::DoubleMap::new(8 * ps, ps).unwrap();
        let (app, drv) = (m.app_ptr(), m.driver_ptr());
        let len = 8 * ps;
        let arm = || arm_shadowed(21, app, len, Some(drv)).unwrap();
        let rd = |o: usize| unsafe { std::ptr::read_volatile(app.add(o)) };
        let wr = |o: usize, v: u8| unsafe { std::ptr::write_volatile(app.add(o), v) };
        // Window 1: a write first.
        arm();
        assert_eq!(stats().parked, 1, "a double mapping's range is parked");
        wr(100, 7);
        wr(5 * ps, 8);
        assert_eq!(accesses(), vec![(21, Access::Write)]);
        assert_eq!(stats().unparked, 1);
        assert_eq!(unsafe { *drv.add(100) }, 7, "the write reached the memory");
        // Window 2: the driver writes; the application reads, then writes.
        arm();
        unsafe { *drv.add(200) = 9 };
        assert_eq!(rd(200), 9, "a parked range shows the driver's bytes");
        assert_eq!(rd(5 * ps), 8);
        wr(300, 10);
        assert_eq!(
            accesses(),
            vec![(21, Access::Read), (21, Access::Write)],
            "parked writable, it came back read-only after the read"
        );
        // Window 3: a read then a write again (parked read+write this time).
        arm();
        assert_eq!(rd(300), 10);
        wr(7 * ps + 1, 11);
        assert_eq!(accesses(), vec![(21, Access::Read), (21, Access::Write)]);
        // Window 4: nothing; window 5: its re-arm is skipped, and a read is still seen.
        arm();
        arm();
        assert_eq!(rd(7 * ps + 1), 11);
        assert_eq!(accesses(), vec![(21, Access::Read)]);
        // Window 6: disarmed while parked; the range refills from the memfd.
        arm();
        assert_eq!(stats().parked, 5);
        unsafe { *drv.add(6 * ps) = 13 };
        disarm(21);
        assert_eq!(
            rd(6 * ps),
            13,
            "the driver's byte, through the refilled range"
        );
        wr(6 * ps, 12);
        assert_eq!(rd(100), 7);
        assert_eq!(unsafe { *drv.add(6 * ps) }, 12);
        assert!(accesses().is_empty(), "disarmed: nothing recorded");
        assert_eq!(stats().unparked, 4, "disarm moves nothing back");
        println!("CHILD-OK");
    }

    /// A buffer armed later over the last page of a parked range: when the parked one opens,
    /// its tables come back closed and only its own pages are opened, so the newcomer's first
    /// access on the shared page is still recorded. In the next window both are live: each
    /// parks all but the page they share, which is protected as before, and every first
    /// access on it is recorded.
    #[test]
    fn a_neighbour_armed_over_a_parked_range_keeps_its_protection() {
        if !in_child() {
            assert_child_ok("a_neighbour_armed_over_a_parked_range_keeps_its_protection");
            return;
        }
        let ps = page_size();
        let m = crate::hostmem::memfd::DoubleMap::new(6 * ps, ps).unwrap();
        let (app, drv) = (m.app_ptr(), m.driver_ptr());
        let at = |p: *mut u8| unsafe { p.add(4 * ps - 512) };
        let arm_x = || arm_shadowed(31, app, 4 * ps - 512, Some(drv)).unwrap();
        let arm_y = || arm_shadowed(32, at(app), 2 * ps + 512, Some(at(drv))).unwrap();
        let wr = |o: usize, v: u8| unsafe { std::ptr::write_volatile(app.add(o), v) };
        arm_x();
        assert_eq!(stats().parked, 1);
        arm_y();
        assert_eq!(
            stats().parked,
            2,
            "the newcomer parks all but the page it shares"
        );
        wr(10, 1);
        assert_eq!(accesses(), vec![(31, Access::Write)]);
        // The neighbour's byte on the shared page (page 3).
        wr(4 * ps - 100, 2);
        assert_eq!(accesses(), vec![(32, Access::Write)]);
        assert_eq!(unsafe { *drv.add(4 * ps - 100) }, 2);
        // Window 2: both live when armed.
        arm_x();
        arm_y();
        assert_eq!(stats().parked, 4);
        wr(4 * ps - 600, 3); // X's byte on the shared page, Y unseen
        let (first, then) = if cfg!(target_arch = "x86_64") {
            // Emulated: the page stays closed for Y.
            (vec![(31, Access::Write)], vec![(32, Access::Write)])
        } else {
            // No emulation or stepping: the page opens and Y is taken as touched (fail closed).
            (vec![(31, Access::Write), (32, Access::ReadWrite)], vec![])
        };
        assert_eq!(accesses(), first);
        wr(ps, 4);
        wr(5 * ps, 5);
        assert_eq!(accesses(), then);
        for (o, v) in [(4 * ps - 600, 3), (ps, 4), (5 * ps, 5), (4 * ps - 100, 2)] {
            assert_eq!(unsafe { *drv.add(o) }, v, "byte {o}");
        }
        disarm(31);
        disarm(32);
        println!("CHILD-OK");
    }

    /// Prints what arming and opening a 16 MiB range costs parked and with `mprotect` (no
    /// claim: bench/RESULTS.md has the figures).
    #[test]
    fn parking_cost() {
        if !in_child() {
            let so = assert_child_ok("parking_cost");
            for l in so.lines().filter(|l| l.contains("COST")) {
                eprintln!("{l}");
            }
            return;
        }
        let len = 16 << 20;
        let m = crate::hostmem::memfd::DoubleMap::new(len, 2 << 20).unwrap();
        let (app, drv) = (m.app_ptr(), m.driver_ptr());
        unsafe { std::ptr::write_bytes(app, 1, len) };
        let cycle = |parked: bool| {
            park::OFF.store(!parked, Ordering::SeqCst);
            let (mut arm_us, mut open_us) = (f64::MAX, f64::MAX);
            for _ in 0..20 {
                let t0 = std::time::Instant::now();
                arm_shadowed(41, app, len, Some(drv)).unwrap();
                let t1 = std::time::Instant::now();
                unsafe { std::ptr::write_volatile(app, 2u8) };
                let t2 = std::time::Instant::now();
                unsafe { std::ptr::write_bytes(app, 3, len) };
                arm_us = arm_us.min((t1 - t0).as_secs_f64() * 1e6);
                open_us = open_us.min((t2 - t1).as_secs_f64() * 1e6);
            }
            drained();
            disarm(41);
            (arm_us, open_us)
        };
        let (pa, po) = cycle(true);
        let (ma, mo) = cycle(false);
        println!(
            "COST 16 MiB range (best of 20): parked: arm {pa:.1} us, first access {po:.1} us; mprotect: arm {ma:.1} us, first access {mo:.1} us"
        );
        println!("CHILD-OK");
    }

    /// The instruction decoder (the aarch64 fallback when the signal frame has no
    /// `esr_context`), on encodings assembled with `.arch armv8.5-a` + sve, memtag, lse, rcpc,
    /// pauth (zig cc): every store, atomic and zeroing instruction is a write, every load and
    /// prefetch a read, and what is not a data access is unknown.
    #[test]
    fn a64_decoder_classifies_assembled_instructions() {
        let writes: &[(u32, &str)] = &[
            (0x39000001, "strb w1,[x0]"),
            (0x79000001, "strh w1,[x0]"),
            (0xb9000001, "str w1,[x0]"),
            (0xf9000001, "str x1,[x0]"),
            (0xf8008c01, "str x1,[x0,#8]!"),
            (0xf8008401, "str x1,[x0],#8"),
            (0xf81f8001, "stur x1,[x0,#-8]"),
            (0xf8226801, "str x1,[x0,x2]"),
            (0xf8000801, "sttr x1,[x0]"),
            (0x3d000000, "str b0,[x0]"),
            (0x7d000000, "str h0,[x0]"),
            (0xbd000000, "str s0,[x0]"),
            (0xfd000000, "str d0,[x0]"),
            (0x3d800000, "str q0,[x0]"),
            (0x3c801000, "stur q0,[x0,#1]"),
            (0xa9000801, "stp x1,x2,[x0]"),
            (0xad000400, "stp q0,q1,[x0]"),
            (0xa8000801, "stnp x1,x2,[x0]"),
            (0x29810801, "stp w1,w2,[x0,#8]!"),
            (0x4c007000, "st1 {v0.16b},[x0]"),
            (0x4c9f2000, "st1 {v0.16b-v3.16b},[x0],#64"),
            (0x0d009000, "st1 {v0.s}[1],[x0]"),
            (0x4c008800, "st2 {v0.4s,v1.4s},[x0]"),
            (0xc8037c01, "stxr w3,x1,[x0]"),
            (0x8803fc01, "stlxr w3,w1,[x0]"),
            (0xc8230801, "stxp w3,x1,x2,[x0]"),
            (0xc89ffc01, "stlr x1,[x0]"),
            (0x089ffc01, "stlrb w1,[x0]"),
            (0xf8210002, "ldadd x1,x2,[x0]"),
            (0xb8e10002, "ldaddal w1,w2,[x0]"),
            (0xf821001f, "stadd x1,[x0]"),
            (0xf8218002, "swp x1,x2,[x0]"),
            (0xf8211002, "ldclr x1,x2,[x0]"),
            (0xc8a17c02, "cas x1,x2,[x0]"),
            (0x88e1fc02, "casal w1,w2,[x0]"),
            (0x48227c04, "casp x2,x3,x4,x5,[x0]"),
            (0xd50b7420, "dc zva,x0"),
            (0xd9000001, "stlur x1,[x0]"),
            (0xe400e000, "st1b {z0.b},p0,[x0]"),
            (0xe5804000, "str z0,[x0]"),
            (0x69000801, "stgp x1,x2,[x0]"),
        ];
        let reads: &[(u32, &str)] = &[
            (0x39400001, "ldrb w1,[x0]"),
            (0x39800001, "ldrsb x1,[x0]"),
            (0x79c00001, "ldrsh w1,[x0]"),
            (0xb9400001, "ldr w1,[x0]"),
            (0xb9800001, "ldrsw x1,[x0]"),
            (0xf8408c01, "ldr x1,[x0,#8]!"),
            (0xf85f8001, "ldur x1,[x0,#-8]"),
            (0xf8627801, "ldr x1,[x0,x2,lsl #3]"),
            (0xf8400801, "ldtr x1,[x0]"),
            (0x3dc00000, "ldr q0,[x0]"),
            (0xfd400000, "ldr d0,[x0]"),
            (0x3d400400, "ldr b0,[x0,#1]"),
            (0xa9400801, "ldp x1,x2,[x0]"),
            (0xacc10400, "ldp q0,q1,[x0],#32"),
            (0xa8400801, "ldnp x1,x2,[x0]"),
            (0x69400801, "ldpsw x1,x2,[x0]"),
            (0x4c407000, "ld1 {v0.16b},[x0]"),
            (0x4c400800, "ld4 {v0.4s-v3.4s},[x0]"),
            (0x4d40c800, "ld1r {v0.4s},[x0]"),
            (0x0d409000, "ld1 {v0.s}[1],[x0]"),
            (0xc85f7c01, "ldxr x1,[x0]"),
            (0x885ffc01, "ldaxr w1,[x0]"),
            (0xc87f0801, "ldxp x1,x2,[x0]"),
            (0xc8dffc01, "ldar x1,[x0]"),
            (0xf8bfc001, "ldapr x1,[x0]"),
            (0xd9400001, "ldapur x1,[x0]"),
            (0x58fffcc1, "ldr x1,<literal>"),
            (0x9cfffca1, "ldr q1,<literal>"),
            (0xf9800000, "prfm pldl1keep,[x0]"),
            (0xa400a000, "ld1b {z0.b},p0/z,[x0]"),
            (0x85804000, "ldr z0,[x0]"),
            (0xc5c1c000, "ld1d {z0.d},p0/z,[x0,z1.d]"),
            (0xf8200401, "ldraa x1,[x0]"),
        ];
        for (i, text) in writes {
            assert_eq!(a64_access_is_write(*i), Some(true), "{text} ({i:#010x})");
        }
        for (i, text) in reads {
            assert_eq!(a64_access_is_write(*i), Some(false), "{text} ({i:#010x})");
        }
        for (i, text) in [
            (0xd503201fu32, "nop"),
            (0x8b020020, "add x0,x1,x2"),
            (0x14000000, "b ."),
            (0xd65f03c0, "ret"),
            (0xd50b7a20, "dc cvac,x0"),
        ] {
            assert_eq!(a64_access_is_write(i), None, "{text} ({i:#010x})");
        }
    }

    /// On aarch64 (the Jetson; qemu-user in the cross tests): real instructions of each kind
    /// fault on an armed page and are recorded with the right direction, by the signal frame's
    /// ESR where the kernel gives one and by decoding the instruction where it does not (qemu-user
    /// 7.2). Prints which path classified them.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn aarch64_real_instructions_are_classified() {
        if !in_child() {
            // The per-access lines first, so a run that fails still shows them.
            let out = child("aarch64_real_instructions_are_classified");
            let so = String::from_utf8_lossy(&out.stdout);
            for l in so.lines() {
                if l.contains("PATH aarch64") {
                    eprintln!("{l}");
                } else if let Some(i) = l.find("PATHCASE ") {
                    // Renamed, so the child's stdout repeated in a failure message is not
                    // counted twice by scripts/qemu-system.sh.
                    eprintln!("ACCESSPATH {}", &l[i + "PATHCASE ".len()..]);
                }
            }
            assert_child_ok("aarch64_real_instructions_are_classified");
            return;
        }
        use std::arch::asm;
        let m = Pages::new(1);
        let p = m.p as usize;
        let hwcap = unsafe { libc::getauxval(libc::AT_HWCAP) };
        let lse = hwcap & libc::HWCAP_ATOMICS != 0;
        let dczid: u64;
        unsafe { asm!("mrs {d}, dczid_el0", d = out(reg) dczid) };
        // qemu-user 7.2 (the cross tests' emulator) crashes the emulated process when a DC ZVA
        // faults and is retried after the handler opened the page (its helper leaves a stale
        // host return address behind: the next unrelated host fault becomes a guest SIGSEGV). A
        // real kernel retries it like any store; under qemu this case is left out, and said so.
        let qemu = std::env::var("ECHO_TEST_RUNNER").is_ok_and(|r| r.contains("qemu"));
        let zva = dczid & 0x10 == 0 && !qemu;
        type Op = Box<dyn Fn()>;
        let mut cases: Vec<(&str, bool, Op)> = vec![
            (
                "ldrb",
                false,
                Box::new(move || unsafe {
                    asm!("ldrb {t:w}, [{p}]", p = in(reg) p, t = out(reg) _)
                }),
            ),
            (
                "strb",
                true,
                Box::new(move || unsafe { asm!("strb wzr, [{p}]", p = in(reg) p) }),
            ),
            (
                "ldr x",
                false,
                Box::new(move || unsafe {
                    asm!("ldr {t}, [{p}, #8]", p = in(reg) p, t = out(reg) _)
                }),
            ),
            (
                "str x (pre-index)",
                true,
                Box::new(move || unsafe { asm!("str xzr, [{p}, #16]!", p = inout(reg) p => _) }),
            ),
            (
                "ldr q",
                false,
                Box::new(move || unsafe { asm!("ldr q0, [{p}]", p = in(reg) p, out("v0") _) }),
            ),
            (
                "str q",
                true,
                Box::new(move || unsafe {
                    asm!("movi v0.16b, #0", "str q0, [{p}]", p = in(reg) p, out("v0") _)
                }),
            ),
            (
                "ldp",
                false,
                Box::new(move || unsafe {
                    asm!("ldp {a}, {b}, [{p}]", p = in(reg) p, a = out(reg) _, b = out(reg) _)
                }),
            ),
            (
                "stp",
                true,
                Box::new(move || unsafe { asm!("stp xzr, xzr, [{p}]", p = in(reg) p) }),
            ),
            (
                "ld1",
                false,
                Box::new(move || unsafe {
                    asm!("ld1 {{v0.16b}}, [{p}]", p = in(reg) p, out("v0") _)
                }),
            ),
            (
                "st1",
                true,
                Box::new(move || unsafe {
                    asm!("movi v0.16b, #0", "st1 {{v0.16b}}, [{p}]", p = in(reg) p, out("v0") _)
                }),
            ),
            (
                "ldxr",
                false,
                Box::new(move || unsafe {
                    asm!("ldxr {t}, [{p}]", "clrex", p = in(reg) p, t = out(reg) _)
                }),
            ),
            (
                "ldar",
                false,
                Box::new(move || unsafe { asm!("ldar {t}, [{p}]", p = in(reg) p, t = out(reg) _) }),
            ),
            (
                "stlr",
                true,
                Box::new(move || unsafe { asm!("stlr xzr, [{p}]", p = in(reg) p) }),
            ),
            (
                "copy out (memcpy)",
                false,
                Box::new(move || unsafe {
                    let mut v = vec![1u8; 4096];
                    std::ptr::copy_nonoverlapping(p as *const u8, v.as_mut_ptr(), 4096);
                    std::hint::black_box(&v);
                }),
            ),
            (
                "fill (memset)",
                true,
                Box::new(move || unsafe {
                    std::ptr::write_bytes(std::hint::black_box(p as *mut u8), 0, 4096);
                }),
            ),
        ];
        if zva {
            cases.push((
                "dc zva",
                true,
                Box::new(move || unsafe { asm!("dc zva, {p}", p = in(reg) p) }),
            ));
        }
        if lse {
            cases.push(("ldadd", true, Box::new(move || unsafe {
                asm!(".arch_extension lse", "ldadd {a}, {t}, [{p}]", p = in(reg) p, a = in(reg) 1u64, t = out(reg) _)
            })));
            cases.push(("cas", true, Box::new(move || unsafe {
                asm!(".arch_extension lse", "cas {c}, {n}, [{p}]", p = in(reg) p, c = inout(reg) 0u64 => _, n = in(reg) 0u64)
            })));
        }
        // ECHO_TEST_REQUIRE_ESR=1 (scripts/qemu-system.sh, on a real kernel): every access must
        // have been classified from the signal frame's ESR, not by the decoder.
        let require_esr = std::env::var_os("ECHO_TEST_REQUIRE_ESR").is_some_and(|v| v == "1");
        let ps = page_size();
        let mut wrong = Vec::new();
        for (name, want_write, op) in &cases {
            let before = stats();
            arm(1, m.p, ps).unwrap();
            op();
            let v = drained();
            let after = stats();
            let want = if *want_write {
                Access::Write
            } else {
                Access::Read
            };
            let got = v.first().map(|e| e.1);
            // An LSE atomic (read-modify-write) on a page with no access: a real kernel's ESR
            // may report its read first (WnR = 0: seen under qemu-system -cpu max on Debian's
            // 6.1 kernel), then, with the page opened for reading, its write. Read then write is
            // right for it; what must not happen is a write never seen.
            let rmw = matches!(*name, "ldadd" | "cas");
            let dirs: Vec<Access> = v.iter().map(|e| e.1).collect();
            let right = if rmw {
                dirs == [Access::Write] || dirs == [Access::Read, Access::Write]
            } else {
                got == Some(want)
            };
            let path = match (
                after.by_context - before.by_context,
                after.by_instruction - before.by_instruction,
                after.unclassified - before.unclassified,
            ) {
                (_, _, u) if u > 0 => "unclassified",
                (_, d, _) if d > 0 => "decoder",
                (c, _, _) if c > 0 => "esr",
                _ => "none",
            };
            // One line per access (scripts/qemu-system.sh parses these).
            println!(
                "PATHCASE kind={} want={} got={} path={path} fault=\"{name}\"",
                kind_of(name),
                if *want_write { "write" } else { "read" },
                if dirs.is_empty() {
                    "none".to_string()
                } else {
                    dirs.iter()
                        .map(|d| match d {
                            Access::Write => "write",
                            Access::Read => "read",
                            Access::ReadWrite => "readwrite",
                        })
                        .collect::<Vec<_>>()
                        .join("+")
                },
            );
            if !right {
                wrong.push(format!("{name}: {v:?} (stats {after:?})"));
            } else if require_esr && path != "esr" {
                wrong.push(format!("{name}: classified by {path}, not the ESR"));
            }
            disarm(1);
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        let s = stats();
        println!(
            "\nPATH aarch64 guard: {} cases ({}lse, {}); direction from the signal frame's ESR: {}, from the decoded instruction: {}, unknown: {}",
            cases.len(),
            if lse { "" } else { "no " },
            match (zva, qemu) {
                (true, _) => "dc zva",
                (false, true) => "dc zva left out under qemu-user",
                (false, false) => "dc zva prohibited by DCZID_EL0",
            },
            s.by_context,
            s.by_instruction,
            s.unclassified
        );
        assert_eq!(s.unclassified, 0, "{s:?}");
        assert!(
            s.by_context + s.by_instruction >= cases.len() as u64,
            "{s:?}"
        );
        println!("CHILD-OK");
    }

    /// The access class of a case in `aarch64_real_instructions_are_classified`, for its report.
    #[cfg(target_arch = "aarch64")]
    fn kind_of(name: &str) -> &'static str {
        match name {
            "ldrb" | "ldr x" => "read",
            "strb" | "str x (pre-index)" => "write",
            "ldp" | "stp" => "pair",
            "ldr q" | "str q" | "ld1" | "st1" => "simd",
            "ldxr" | "ldar" | "stlr" => "exclusive/acq-rel",
            "ldadd" | "cas" => "atomic",
            "dc zva" => "dc-zva",
            _ => "libc",
        }
    }

    #[test]
    fn aarch64_esr_parser() {
        let mut buf = [0u8; 64];
        // An unrelated record (fpsimd-like, 16 bytes), then esr_context, then terminator.
        buf[0..4].copy_from_slice(&0x4650_8001u32.to_le_bytes());
        buf[4..8].copy_from_slice(&16u32.to_le_bytes());
        buf[16..20].copy_from_slice(&0x4553_5201u32.to_le_bytes());
        buf[20..24].copy_from_slice(&16u32.to_le_bytes());
        let esr_write: u64 = (0x25 << 26) | (1 << 6);
        buf[24..32].copy_from_slice(&esr_write.to_le_bytes());
        assert_eq!(
            unsafe { aarch64_esr_is_write(buf.as_ptr(), buf.len()) },
            Some(true)
        );
        let esr_read: u64 = 0x24 << 26;
        buf[24..32].copy_from_slice(&esr_read.to_le_bytes());
        assert_eq!(
            unsafe { aarch64_esr_is_write(buf.as_ptr(), buf.len()) },
            Some(false)
        );
        buf[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            unsafe { aarch64_esr_is_write(buf.as_ptr(), buf.len()) },
            None
        );
    }

    // ------------------------------------------------------------ emulation (x86_64)

    /// A double mapping with A = [0, ps + 256) (id 1) and B = [ps + 256, 3 ps) (id 2) armed
    /// in the application's view, the driver's view as their shadow: page 1 holds both.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn shared_pair() -> crate::hostmem::memfd::DoubleMap {
        let m = crate::hostmem::memfd::DoubleMap::new(3 * page_size(), page_size()).unwrap();
        arm_a(&m);
        arm_b(&m);
        m
    }

    /// (Re-)arm A or B of [`shared_pair`]'s mapping: a new window for it.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn arm_a(m: &crate::hostmem::memfd::DoubleMap) {
        arm_shadowed(1, m.app_ptr(), page_size() + 256, Some(m.driver_ptr())).unwrap();
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn arm_b(m: &crate::hostmem::memfd::DoubleMap) {
        let ps = page_size();
        let at = |p: *mut u8| unsafe { p.add(ps + 256) };
        arm_shadowed(2, at(m.app_ptr()), 2 * ps - 256, Some(at(m.driver_ptr()))).unwrap();
    }

    /// Run `forms` once on plain memory (aligned to `align`) and once on B's bytes of a fresh
    /// [`shared_pair`] at page 1 + 512 (A unseen, so every access there faults): their results,
    /// and the first `len` bytes each left (the shared ones read through the driver's view).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    unsafe fn on_plain_and_shared<R>(
        align: usize,
        len: usize,
        forms: impl Fn(*mut u8) -> R,
    ) -> (crate::hostmem::memfd::DoubleMap, [(R, Vec<u8>); 2]) {
        let mut plain = vec![0u8; len + 64 + align];
        let pp = plain.as_mut_ptr().add(plain.as_ptr().align_offset(align));
        let want = (forms(pp), std::slice::from_raw_parts(pp, len).to_vec());
        let m = shared_pair();
        let at = page_size() + 512;
        let got = forms(m.app_ptr().add(at));
        let got = (
            got,
            std::slice::from_raw_parts(m.driver_ptr().add(at), len).to_vec(),
        );
        (m, [want, got])
    }

    /// Every form `emulate` does, as real instructions: the stores, then the loads with the
    /// registers' values after each. Run once on plain memory and once on the shared page; the
    /// two must agree byte for byte and register for register.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    unsafe fn every_form(p: *mut u8) -> Vec<u64> {
        use std::arch::asm;
        use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_storeu_si128};
        let x1: __m128i = _mm_set_epi64x(0x0102_0304_0506_0708, -0x1122_3344_5566_7788);
        let x9: __m128i = _mm_set_epi64x(0x7766_5544_3322_1100, 0x0f0e_0d0c_0b0a_0908);
        asm!(
            "mov byte ptr [rdi], 0x5a",
            "mov word ptr [rdi + 2], 0x1234",
            "mov dword ptr [rdi + 4], 0x7bcdef01",
            "mov qword ptr [rdi + 8], -2",
            "mov byte ptr [rdi + 16], cl",
            "mov byte ptr [rdi + 17], ah",
            "mov word ptr [rdi + 18], cx",
            "mov dword ptr [rdi + 20], ecx",
            "mov qword ptr [rdi + 24], rcx",
            "mov qword ptr [rdi + rsi*8 + 16], r9",
            "movups xmmword ptr [rdi + 40], xmm1",
            "movdqu xmmword ptr [rdi + 56], xmm9",
            "movaps xmmword ptr [rdi + 80], xmm1",
            "movss dword ptr [rdi + 96], xmm1",
            "movsd qword ptr [rdi + 100], xmm9",
            "movd dword ptr [rdi + 108], xmm1",
            "movq qword ptr [rdi + 112], xmm9",
            "movq qword ptr [rdi + 120], xmm1",
            in("rdi") p,
            in("rsi") 2u64,
            in("rax") 0x1122_3344_5566_7788u64,
            in("rcx") 0x99aa_bbcc_ddee_ff01u64,
            in("r9") 0x0123_4567_89ab_cdefu64,
            in("xmm1") x1,
            in("xmm9") x9,
            options(nostack)
        );
        let mut v = Vec::new();
        macro_rules! gpr {
            ($($insn:literal),*) => {$({
                let mut r = 0xa5a5_a5a5_a5a5_a5a5u64;
                asm!($insn, in("rdi") p, in("rsi") 1u64, inout("rax") r, options(nostack));
                v.push(r);
            })*};
        }
        gpr!(
            "mov al, byte ptr [rdi + 3]",
            "mov ah, byte ptr [rdi + 17]",
            "mov ax, word ptr [rdi + 18]",
            "mov eax, dword ptr [rdi + 4]",
            "mov rax, qword ptr [rdi + 8]",
            "mov rax, qword ptr [rdi + rsi*4 + 20]",
            "movzx ax, byte ptr [rdi + 9]",
            "movzx eax, byte ptr [rdi + 23]",
            "movzx rax, word ptr [rdi + 6]",
            "movsx ax, byte ptr [rdi + 31]",
            "movsx eax, word ptr [rdi + 30]",
            "movsx rax, byte ptr [rdi + 27]",
            "movsxd rax, dword ptr [rdi + 28]"
        );
        macro_rules! xmm {
            ($($insn:literal),*) => {$({
                let mut r: __m128i = _mm_set_epi64x(-1, -1);
                asm!($insn, in("rdi") p, inout("xmm9") r, options(nostack));
                let mut b = [0u64; 2];
                _mm_storeu_si128(b.as_mut_ptr() as *mut __m128i, r);
                v.extend(b);
            })*};
        }
        xmm!(
            "movups xmm9, xmmword ptr [rdi + 40]",
            "movdqu xmm9, xmmword ptr [rdi + 44]",
            "movaps xmm9, xmmword ptr [rdi + 64]",
            "movdqa xmm9, xmmword ptr [rdi + 48]",
            "movss xmm9, dword ptr [rdi + 100]",
            "movsd xmm9, qword ptr [rdi + 56]",
            "movd xmm9, dword ptr [rdi + 12]",
            "movq xmm9, qword ptr [rdi + 104]"
        );
        v
    }

    /// The VEX moves `emulate` does, as real instructions: each leaves its vector register
    /// (all 256 bits, and all 512 where AVX-512 is) or the memory after it; the upper bits a
    /// VEX load clears were set first.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    unsafe fn every_vex_form(p: *mut u8, zmm: bool) -> Vec<u8> {
        use std::arch::asm;
        let init: [u8; 64] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        let mut out = Vec::new();
        macro_rules! op {
            ($($insn:literal),*) => {$({
                let mut r = [0u8; 64];
                if zmm {
                    asm!(
                        "vmovdqu ymm1, ymmword ptr [{init}]",
                        "vpternlogd zmm9, zmm9, zmm9, 0xff",
                        $insn,
                        "vmovdqu64 zmmword ptr [{out}], zmm9",
                        "vzeroupper",
                        init = in(reg) init.as_ptr(), out = in(reg) r.as_mut_ptr(),
                        in("rdi") p, out("xmm1") _, out("xmm9") _, options(nostack)
                    );
                } else {
                    asm!(
                        "vmovdqu ymm1, ymmword ptr [{init}]",
                        "vpcmpeqd ymm9, ymm9, ymm9",
                        $insn,
                        "vmovdqu ymmword ptr [{out}], ymm9",
                        "vzeroupper",
                        init = in(reg) init.as_ptr(), out = in(reg) r.as_mut_ptr(),
                        in("rdi") p, out("xmm1") _, out("xmm9") _, options(nostack)
                    );
                }
                out.extend_from_slice(&r[..if zmm { 64 } else { 32 }]);
            })*};
        }
        // Stores first (from ymm1), then loads into ymm9 of what they wrote.
        op!(
            "vmovdqu ymmword ptr [rdi], ymm1",
            "vmovups xmmword ptr [rdi + 32], xmm1",
            "vmovdqa ymmword ptr [rdi + 64], ymm1",
            "vmovaps xmmword ptr [rdi + 96], xmm1",
            "vmovntdq ymmword ptr [rdi + 128], ymm1",
            "vmovss dword ptr [rdi + 160], xmm1",
            "vmovsd qword ptr [rdi + 164], xmm1",
            "vmovd dword ptr [rdi + 172], xmm1",
            "vmovq qword ptr [rdi + 176], xmm1",
            "vmovdqu ymm9, ymmword ptr [rdi + 4]",
            "vzeroupper\n vmovdqu ymm9, ymmword ptr [rdi + 4]",
            "vmovdqa ymm9, ymmword ptr [rdi + 64]",
            "vmovups xmm9, xmmword ptr [rdi + 20]",
            "vmovapd xmm9, xmmword ptr [rdi + 96]",
            "vmovss xmm9, dword ptr [rdi + 8]",
            "vmovsd xmm9, qword ptr [rdi + 12]",
            "vmovd xmm9, dword ptr [rdi + 36]",
            "vmovq xmm9, qword ptr [rdi + 40]"
        );
        out
    }

    /// The EVEX moves (AVX-512F, unmasked), with registers below and above 16: each leaves
    /// zmm9 and zmm25 (all 512 bits, set to ones first) or the memory after it.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    unsafe fn every_evex_form(p: *mut u8) -> Vec<u8> {
        use std::arch::asm;
        let init: [u8; 64] = std::array::from_fn(|i| (i as u8).wrapping_mul(29).wrapping_add(5));
        let mut out = Vec::new();
        macro_rules! op {
            ($($insn:literal),*) => {$({
                let mut r = [0u8; 128];
                asm!(
                    "vmovdqu64 zmm17, zmmword ptr [{init}]",
                    "vmovdqu64 zmm1, zmmword ptr [{init}]",
                    "vpternlogd zmm9, zmm9, zmm9, 0xff",
                    "vpternlogd zmm25, zmm25, zmm25, 0xff",
                    $insn,
                    "vmovdqu64 zmmword ptr [{out}], zmm9",
                    "vmovdqu64 zmmword ptr [{out} + 64], zmm25",
                    "vzeroupper",
                    init = in(reg) init.as_ptr(), out = in(reg) r.as_mut_ptr(),
                    in("rdi") p, out("xmm1") _, out("xmm9") _, out("xmm17") _, out("xmm25") _,
                    options(nostack)
                );
                out.extend_from_slice(&r);
            })*};
        }
        op!(
            "vmovdqu64 zmmword ptr [rdi], zmm17",
            "vmovdqu32 ymmword ptr [rdi + 64], ymm17",
            "vmovups xmmword ptr [rdi + 96], xmm17",
            "vmovdqa64 zmmword ptr [rdi + 128], zmm1",
            "vmovntdq zmmword ptr [rdi + 192], zmm17",
            "vmovq qword ptr [rdi + 256], xmm17",
            "vmovd dword ptr [rdi + 264], xmm17",
            "vmovss dword ptr [rdi + 268], xmm17",
            "vmovdqu64 zmm25, zmmword ptr [rdi + 4]",
            "vmovdqu32 ymm25, ymmword ptr [rdi + 8]",
            "vmovdqu64 xmm25, xmmword ptr [rdi + 12]",
            "vmovdqa32 zmm9, zmmword ptr [rdi + 128]",
            "vmovups zmm9, zmmword ptr [rdi + 20]",
            "vmovapd ymm25, ymmword ptr [rdi + 64]",
            "vmovq xmm25, qword ptr [rdi + 24]",
            "vmovd xmm25, dword ptr [rdi + 28]",
            "vmovss xmm25, dword ptr [rdi + 32]",
            "vmovsd xmm9, qword ptr [rdi + 36]"
        );
        out
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn evex_moves_on_a_shared_page_match_the_cpu() {
        if !in_child() {
            assert_child_ok("evex_moves_on_a_shared_page_match_the_cpu");
            return;
        }
        if !std::is_x86_feature_detected!("avx512f") {
            println!("CHILD-OK (no AVX-512: nothing to compare)");
            return;
        }
        let (_m, [want, got]) = unsafe { on_plain_and_shared(64, 272, |p| every_evex_form(p)) };
        assert_eq!(got.1, want.1, "memory after the stores");
        assert_eq!(got.0, want.0, "zmm9 and zmm25 after each");
        let st = stats();
        assert_eq!((st.emulated, st.stepped), (18, 0), "{st:?}");
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn vex_moves_on_a_shared_page_match_the_cpu() {
        if !in_child() {
            assert_child_ok("vex_moves_on_a_shared_page_match_the_cpu");
            return;
        }
        if !std::is_x86_feature_detected!("avx") {
            println!("CHILD-OK (no AVX: nothing to compare)");
            return;
        }
        let zmm = std::is_x86_feature_detected!("avx512f");
        let (_m, [want, got]) = unsafe { on_plain_and_shared(32, 192, |p| every_vex_form(p, zmm)) };
        assert_eq!(got.1, want.1, "memory after the stores");
        assert_eq!(got.0, want.0, "registers after each (zmm compared: {zmm})");
        let st = stats();
        assert_eq!((st.emulated, st.stepped), (18, 0), "{st:?}");
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn shared_page_accesses_are_done_through_the_other_view() {
        if !in_child() {
            assert_child_ok("shared_page_accesses_are_done_through_the_other_view");
            return;
        }
        let ps = page_size();
        let at = ps + 512;
        // The control on plain memory; then on B's bytes of the shared page, A unseen: every
        // access faults and is emulated.
        let (m, [want, got]) = unsafe { on_plain_and_shared(16, 128, |p| every_form(p)) };
        assert_eq!(got.1, want.1, "memory after the stores");
        assert_eq!(got.0, want.0, "registers after the loads");
        let n = 18 + 13 + 8;
        let st = stats();
        assert_eq!((st.emulated, st.stepped), (n, 0), "{st:?}");
        // B was written and read; A, whose page it was, untouched.
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        // Re-armed: B's first read on the shared page is B's read, emulated too.
        arm_b(&m);
        assert_eq!(
            unsafe { std::ptr::read_volatile(m.app_ptr().add(at)) },
            0x5a
        );
        assert_eq!(kinds(), vec![(2, Access::Read)]);
        assert_eq!(stats().emulated, n + 1);
        // A's own access is still seen.
        unsafe { std::ptr::write_volatile(m.app_ptr().add(ps + 8), 3u8) };
        assert_eq!(kinds(), vec![(1, Access::Write)]);
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    /// `rep movsb` / `rep stosb` (glibc's `memcpy`/`memset` for mid sizes) on the shared page:
    /// done a page at a time through the other view, the rest left to the CPU, bytes as the CPU
    /// would write them; a move whose other side is watched too is stepped.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn string_moves_on_a_shared_page_are_done_a_page_at_a_time() {
        if !in_child() {
            assert_child_ok("string_moves_on_a_shared_page_are_done_a_page_at_a_time");
            return;
        }
        unsafe fn movsb(dst: *mut u8, src: *const u8, n: usize) {
            std::arch::asm!("rep movsb", inout("rdi") dst => _, inout("rsi") src => _,
                inout("rcx") n => _, options(nostack));
        }
        unsafe fn stosb(dst: *mut u8, v: u8, n: usize) {
            std::arch::asm!("rep stosb", inout("rdi") dst => _, inout("rcx") n => _,
                in("al") v, options(nostack));
        }
        let ps = page_size();
        let m = shared_pair();
        let (app, drv) = (m.app_ptr(), m.driver_ptr());
        let src: Vec<u8> = (0..6000u32).map(|i| (i * 7 + 3) as u8).collect();
        // Into B from its first byte on the shared page, 6000 bytes: 3,840 there (emulated),
        // the rest on B's own page (open once B is recorded; the CPU does it).
        unsafe { movsb(app.add(ps + 256), src.as_ptr(), src.len()) };
        assert_eq!(
            unsafe { std::slice::from_raw_parts(drv.add(ps + 256), 6000) },
            &src[..]
        );
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        // One piece, or two where the source crosses a page.
        let e1 = stats().emulated;
        assert!(
            (1..=2).contains(&e1) && stats().stepped == 0,
            "{:?}",
            stats()
        );
        // Out of B's bytes on the shared page into plain memory, in a new window.
        arm_b(&m);
        let mut back = vec![0u8; 3000];
        unsafe { movsb(back.as_mut_ptr(), app.add(ps + 300), back.len()) };
        assert_eq!(&back[..], &src[44..3044]);
        assert_eq!(kinds(), vec![(2, Access::Read)]);
        assert!(
            stats().emulated > e1 && stats().stepped == 0,
            "{:?}",
            stats()
        );
        // A fill that runs from B's bytes into A's: both recorded, the bytes filled.
        unsafe { stosb(app.add(ps + 200), 0xee, 100) };
        let mut k = kinds();
        k.sort_by_key(|e| e.0);
        assert_eq!(k, vec![(1, Access::Write), (2, Access::Write)]);
        assert!(
            unsafe { std::slice::from_raw_parts(drv.add(ps + 200), 100) }
                .iter()
                .all(|&b| b == 0xee)
        );
        // Both sides watched (A's own page to B's bytes on the shared page): stepped.
        arm_a(&m);
        arm_b(&m);
        unsafe { std::ptr::write_volatile(app.add(2 * ps), 1u8) }; // B written on its own page
        let before = stats();
        unsafe { movsb(app.add(ps + 1024), app.add(64), 64) };
        let mut k = kinds();
        k.sort_by_key(|e| e.0);
        assert_eq!(k, vec![(1, Access::Read), (2, Access::Write)]);
        assert!(stats().stepped > before.stepped);
        assert_eq!(
            unsafe { std::slice::from_raw_parts(drv.add(ps + 1024), 64) },
            unsafe { std::slice::from_raw_parts(drv.add(64), 64) }
        );
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    /// A planted access that begins in B's bytes and ends in A's: A is recorded (stepping alone,
    /// which looks at the faulting byte only, would have let A's bytes change unseen).
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn an_access_reaching_into_a_neighbour_records_the_neighbour() {
        if !in_child() {
            assert_child_ok("an_access_reaching_into_a_neighbour_records_the_neighbour");
            return;
        }
        let ps = page_size();
        let m = crate::hostmem::memfd::DoubleMap::new(3 * ps, ps).unwrap();
        let (app, drv) = (m.app_ptr(), m.driver_ptr());
        // B = [0, ps + 256) first, A = [ps + 256, 3 ps) after it: page 1 holds both.
        unsafe {
            arm_shadowed(2, app, ps + 256, Some(drv)).unwrap();
            arm_shadowed(1, app.add(ps + 256), 2 * ps - 256, Some(drv.add(ps + 256))).unwrap();
        }
        // B written on its own page, then 8 bytes from B's last 4 into A's first 4.
        unsafe { std::ptr::write_volatile(app.add(8), 1u8) };
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        unsafe { std::ptr::write_unaligned(app.add(ps + 252) as *mut u64, u64::MAX) };
        assert_eq!(kinds(), vec![(1, Access::Write)], "A's bytes were written");
        assert_eq!(stats().reached, 1);
        assert_eq!(
            unsafe { std::ptr::read_unaligned(drv.add(ps + 252) as *const u64) },
            u64::MAX
        );
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    /// What is not emulated (a read-modify-write) is stepped as before; without a shadow,
    /// every access is stepped.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn what_is_not_emulated_is_stepped() {
        if !in_child() {
            assert_child_ok("what_is_not_emulated_is_stepped");
            return;
        }
        let ps = page_size();
        let m = shared_pair();
        let p = unsafe { m.app_ptr().add(ps + 512) } as *mut u32;
        unsafe {
            std::ptr::write_volatile(p, 41);
            std::arch::asm!("add dword ptr [{p}], 1", p = in(reg) p, options(nostack));
        }
        assert_eq!(
            unsafe { std::ptr::read_volatile(m.driver_ptr().add(ps + 512) as *const u32) },
            42
        );
        let st = stats();
        assert_eq!((st.emulated, st.stepped), (1, 1), "{st:?}");
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        disarm(1);
        disarm(2);
        // Armed without a shadow: stepped.
        let q = Pages::new(3);
        arm(1, q.p, ps + 256).unwrap();
        arm(2, unsafe { q.p.add(ps + 256) }, 2 * ps - 256).unwrap();
        unsafe { std::ptr::write_volatile(q.p.add(ps + 512), 7u8) };
        let st = stats();
        assert_eq!((st.emulated, st.stepped), (1, 2), "{st:?}");
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }

    /// With a second host thread stepping is off (fail closed: a neighbour taken as touched);
    /// emulation never opens the page, so it stays exact.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn emulation_stays_exact_with_two_host_threads() {
        if !in_child() {
            assert_child_ok("emulation_stays_exact_with_two_host_threads");
            return;
        }
        let ps = page_size();
        let m = shared_pair();
        let b = unsafe { m.app_ptr().add(ps + 1024) } as usize;
        std::thread::spawn(move || unsafe { std::ptr::write_volatile(b as *mut u64, 5) })
            .join()
            .unwrap();
        unsafe { std::ptr::write_volatile((b + 8) as *mut u64, 6) };
        assert_eq!(kinds(), vec![(2, Access::Write)]);
        let st = stats();
        assert_eq!(
            (st.emulated, st.stepped, st.shared_page),
            (2, 0, 0),
            "{st:?}"
        );
        let d = unsafe { m.driver_ptr().add(ps + 1024) } as *const u64;
        assert_eq!(
            unsafe { (d.read_volatile(), d.add(1).read_volatile()) },
            (5, 6)
        );
        disarm(1);
        disarm(2);
        println!("CHILD-OK");
    }
}
