//! The guard's process-wide table of guarded views and its SIGSEGV handler (see the parent
//! module for what a window, a split and a merge are): a slot per guarded allocation's view B,
//! the handler that splits or opens it on a fault inside a window, and the slot operations normal
//! code performs (register, protect, unprotect, merge, release). Async-signal-safe: atomics, the
//! fixed table, `mmap`/`mprotect` and `sched_yield`; no allocation, no lock in the handler.

use crate::hostmem::signal::{segv_handler_is, Previous};
use crate::hostmem::slot_state::StateCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Guarded allocations at once (more are not guarded: their groups are refused).
pub const SLOTS: usize = 64;

crate::hostmem::slot_state::slot_states! {
    /// A guarded allocation's view B.
    pub(super) enum View {
        Free,
        /// Shared and writable.
        Open,
        /// Shared, `PROT_NONE` (a window is open).
        Prot,
        /// Private (split), writable.
        Split,
        /// Private, `PROT_NONE` (a window is open).
        SplitProt,
        /// A transition is in progress (normal code or a handler); others wait.
        Busy,
        /// Shared, `PROT_READ`: the host read it inside the window (counted).
        ProtR,
        /// Private, `PROT_READ`: the host read it inside the window (counted).
        SplitProtR,
    }
}

pub(super) struct Slot {
    pub(super) state: StateCell<View>,
    /// View B: [start, start + len), the memfd mapped from offset 0.
    pub(super) start: AtomicUsize,
    pub(super) len: AtomicUsize,
    pub(super) fd: AtomicI32,
    pub(super) splits: AtomicU64,
    /// Re-maps that failed in the handler (the write then reached the shared view).
    pub(super) failed: AtomicU64,
    /// Host reads inside a window.
    pub(super) reads: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const SLOT_INIT: Slot = Slot {
    state: StateCell::new(View::Free as u8),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    fd: AtomicI32::new(-1),
    splits: AtomicU64::new(0),
    failed: AtomicU64::new(0),
    reads: AtomicU64::new(0),
};

pub(super) static TABLE: [Slot; SLOTS] = [SLOT_INIT; SLOTS];
/// Some host read inside a window was counted in this process (normal code looks further only
/// then: one relaxed load per submission and completion).
pub(super) static ANY_READ: AtomicBool = AtomicBool::new(false);
/// Normal code claims a FREE slot under this lock (the handler never takes it).
static CLAIM: Mutex<()> = Mutex::new(());

// ---------------------------------------------------------------- handler

static INSTALLED: AtomicBool = AtomicBool::new(false);
static INSTALL: Mutex<()> = Mutex::new(());
/// The handler that was installed before this one.
static PREV: Previous = Previous::new();

fn errno_ptr() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno location.
    unsafe { libc::__errno_location() }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: called by the kernel with a valid siginfo for SIGSEGV.
    unsafe {
        let saved = *errno_ptr();
        let addr = if info.is_null() {
            0
        } else {
            (*info).si_addr() as usize
        };
        let user_sent = !info.is_null() && (*info).si_code <= 0;
        if !user_sent && addr != 0 {
            for s in TABLE.iter() {
                if s.state.load(Ordering::Acquire) == View::Free {
                    continue;
                }
                let start = s.start.load(Ordering::Acquire);
                let len = s.len.load(Ordering::Acquire);
                if addr >= start && addr < start + len {
                    on_fault(s, crate::hostmem::fault::fault_is_write(ctx));
                    *errno_ptr() = saved;
                    return;
                }
            }
        }
        chain(sig, info, ctx);
        *errno_ptr() = saved;
    }
}

/// A fault inside a guarded view (`write`: its direction, `None` when the context does not
/// say): a read is counted and the view opened read-only; a write splits the view (or re-opens a
/// split one). Then return, so the access retries.
unsafe fn on_fault(s: &Slot, write: Option<bool>) {
    let read = write != Some(true);
    loop {
        let st = s.state.load(Ordering::Acquire);
        let (start, len) = (
            s.start.load(Ordering::Relaxed),
            s.len.load(Ordering::Relaxed),
        );
        match st {
            View::Prot | View::SplitProt if read => {
                if s.state
                    .compare_exchange(st, View::Busy, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
                s.reads.fetch_add(1, Ordering::Relaxed);
                ANY_READ.store(true, Ordering::Relaxed);
                libc::mprotect(start as *mut c_void, len, libc::PROT_READ);
                s.state.store(
                    if st == View::Prot {
                        View::ProtR
                    } else {
                        View::SplitProtR
                    },
                    Ordering::Release,
                );
                return;
            }
            View::Prot | View::ProtR => {
                if s.state
                    .compare_exchange(st, View::Busy, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
                let (start, len, fd) = (
                    s.start.load(Ordering::Relaxed),
                    s.len.load(Ordering::Relaxed),
                    s.fd.load(Ordering::Relaxed),
                );
                let p = libc::mmap(
                    start as *mut c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    fd,
                    0,
                );
                if p == libc::MAP_FAILED {
                    // Never leave the app faulting forever: open the shared view (the write
                    // then reaches the GPU's bytes; counted, reported as an error).
                    libc::mprotect(
                        start as *mut c_void,
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                    );
                    s.failed.fetch_add(1, Ordering::Relaxed);
                    s.state.store(View::Open, Ordering::Release);
                } else {
                    s.splits.fetch_add(1, Ordering::Relaxed);
                    s.state.store(View::Split, Ordering::Release);
                }
                return;
            }
            View::SplitProt | View::SplitProtR => {
                if s.state
                    .compare_exchange(st, View::Busy, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
                libc::mprotect(
                    start as *mut c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                );
                s.state.store(View::Split, Ordering::Release);
                return;
            }
            View::Busy => {
                libc::sched_yield();
            }
            // Writable already (another thread's fault raced ours), or freed: retry the access.
            _ => return,
        }
    }
}

/// Hand a fault that is not ours to the previous disposition.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    PREV.chain_segv(sig, info, ctx);
}

/// Installs the handler once per process (chained to whatever was installed before), and checks
/// that it is still the current one.
pub fn install() -> Result<(), String> {
    let _l = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if INSTALLED.load(Ordering::Acquire) {
        if !segv_handler_is(handler as *const () as usize) {
            return Err("another SIGSEGV handler replaced echo's guard handler".into());
        }
        return Ok(());
    }
    // The direction of a fault where the signal frame has no ESR (aarch64 under qemu-user):
    // without it every write would count as a read first.
    crate::hostmem::fault::setup();
    // SAFETY: once (INSTALLED, under INSTALL), from normal code, before any fault of ours.
    unsafe { PREV.install_segv(handler as *const () as usize) }?;
    INSTALLED.store(true, Ordering::Release);
    Ok(())
}

// ---------------------------------------------------------------- slot operations (normal code)

/// Takes the slot out of `from` states into BUSY (waiting out a handler's BUSY); the state it
/// was in, or `None` when it is in none of `from`.
fn take(s: &Slot, from: &[View]) -> Option<View> {
    loop {
        let st = s.state.load(Ordering::Acquire);
        if st == View::Busy {
            std::thread::yield_now();
            continue;
        }
        if !from.contains(&st) {
            return None;
        }
        if s.state
            .compare_exchange(st, View::Busy, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Some(st);
        }
    }
}

fn span(s: &Slot) -> (*mut c_void, usize) {
    (
        s.start.load(Ordering::Relaxed) as *mut c_void,
        s.len.load(Ordering::Relaxed),
    )
}

/// Claims a slot for view B `[start, start + len)` of memfd `fd` (open).
pub fn register(start: usize, len: usize, fd: i32) -> Option<usize> {
    let _l = CLAIM.lock().unwrap_or_else(|p| p.into_inner());
    let (i, s) = TABLE
        .iter()
        .enumerate()
        .find(|(_, s)| s.state.load(Ordering::Acquire) == View::Free)?;
    s.start.store(start, Ordering::Relaxed);
    s.len.store(len, Ordering::Relaxed);
    s.fd.store(fd, Ordering::Relaxed);
    s.splits.store(0, Ordering::Relaxed);
    s.failed.store(0, Ordering::Relaxed);
    s.reads.store(0, Ordering::Relaxed);
    s.state.store(View::Open, Ordering::Release);
    Some(i)
}

/// Frees a slot (its view opened first); its (splits, failed re-maps, reads in a window).
pub fn release(i: usize) -> (u64, u64, u64) {
    let s = &TABLE[i];
    if let Some(st) = take(
        s,
        &[
            View::Open,
            View::Prot,
            View::Split,
            View::SplitProt,
            View::ProtR,
            View::SplitProtR,
        ],
    ) {
        if st != View::Open && st != View::Split {
            let (p, n) = span(s);
            // SAFETY: view B is echo's mapping, still mapped.
            unsafe { libc::mprotect(p, n, libc::PROT_READ | libc::PROT_WRITE) };
        }
    }
    let r = (
        s.splits.load(Ordering::Relaxed),
        s.failed.load(Ordering::Relaxed),
        s.reads.load(Ordering::Relaxed),
    );
    s.state.store(View::Free, Ordering::Release);
    r
}

/// Takes every access from view B (a window opens); `false` when it already was (no syscall).
pub fn protect(i: usize) -> bool {
    let s = &TABLE[i];
    let Some(st) = take(s, &[View::Open, View::Split]) else {
        return false;
    };
    let (p, n) = span(s);
    // SAFETY: view B is echo's mapping.
    let ok = unsafe { libc::mprotect(p, n, libc::PROT_NONE) } == 0;
    let to = match (st, ok) {
        (View::Open, true) => View::Prot,
        (View::Split, true) => View::SplitProt,
        (st, false) => st,
        _ => unreachable!(),
    };
    s.state.store(to, Ordering::Release);
    ok
}

/// Makes view B readable and writable again (the window ended).
pub fn unprotect(i: usize) {
    let s = &TABLE[i];
    let Some(st) = take(
        s,
        &[View::Prot, View::SplitProt, View::ProtR, View::SplitProtR],
    ) else {
        return;
    };
    let (p, n) = span(s);
    // SAFETY: view B is echo's mapping.
    unsafe { libc::mprotect(p, n, libc::PROT_READ | libc::PROT_WRITE) };
    s.state.store(
        if st == View::Prot || st == View::ProtR {
            View::Open
        } else {
            View::Split
        },
        Ordering::Release,
    );
}

pub fn is_split(i: usize) -> bool {
    matches!(
        TABLE[i].state.load(Ordering::Acquire),
        View::Split | View::SplitProt | View::SplitProtR
    )
}

/// Merges a split view: copies `ranges` (offsets into the views) from view B into view A
/// (`a`), then maps view B shared again (writable). `false` when the view was not split or the
/// shared re-map failed (the view then stays split: nothing is lost).
pub fn merge(i: usize, a: *mut u8, ranges: &[(u64, u64)]) -> bool {
    let s = &TABLE[i];
    let Some(st) = take(s, &[View::Split, View::SplitProt, View::SplitProtR]) else {
        return false;
    };
    let (p, n) = span(s);
    if st == View::SplitProt {
        // SAFETY: view B is echo's mapping; readable for the copy below (echo's own read).
        unsafe { libc::mprotect(p, n, libc::PROT_READ) };
    }
    for &(off, len) in ranges {
        let off = off.min(n as u64) as usize;
        let len = (len as usize).min(n - off);
        // SAFETY: both views are `n` bytes long; view B is readable now.
        unsafe { std::ptr::copy_nonoverlapping((p as *const u8).add(off), a.add(off), len) };
    }
    // SAFETY: view B is echo's mapping of this memfd; MAP_FIXED replaces it in place.
    let q = unsafe {
        libc::mmap(
            p,
            n,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            s.fd.load(Ordering::Relaxed),
            0,
        )
    };
    if q == libc::MAP_FAILED {
        // Still split; made readable above when it was protected.
        s.state.store(
            if st == View::SplitProt {
                View::SplitProtR
            } else {
                st
            },
            Ordering::Release,
        );
        return false;
    }
    s.state.store(View::Open, Ordering::Release);
    true
}
