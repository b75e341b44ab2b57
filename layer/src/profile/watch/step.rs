//! Single-stepping a host access on a page shared by sub-allocations (x86_64): the page is
//! opened for one instruction and the SIGTRAP after it restores the protection (see the
//! parent module).

use super::*;
use crate::hostmem::signal::call_handler;
use std::sync::atomic::AtomicI32;

const ENTRIES: usize = 64;
const PAGES: usize = 4;
/// The trap flag in RFLAGS.
pub(super) const TF: libc::greg_t = 0x100;

struct Entry {
    tid: AtomicI32,
    n: AtomicUsize,
    pages: [AtomicUsize; PAGES],
}
#[allow(clippy::declare_interior_mutable_const)]
const ENTRY_INIT: Entry = Entry {
    tid: AtomicI32::new(0),
    n: AtomicUsize::new(0),
    pages: [const { AtomicUsize::new(0) }; PAGES],
};
static STEPS: [Entry; ENTRIES] = [ENTRY_INIT; ENTRIES];
/// Steps begun and not yet ended (an arm waits for them: a step's restore computed before
/// the arm could otherwise open a page the arm just protected).
pub static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
static mut PREV_TRAP: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();

pub fn install() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = trap as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTRAP, std::ptr::null(), &mut old) != 0 {
            return;
        }
        std::ptr::addr_of_mut!(PREV_TRAP).write(std::mem::MaybeUninit::new(old));
        fence(Ordering::SeqCst);
        if libc::sigaction(libc::SIGTRAP, &sa, &mut old) != 0 {
            return;
        }
        std::ptr::addr_of_mut!(PREV_TRAP).write(std::mem::MaybeUninit::new(old));
        fence(Ordering::SeqCst);
    }
    INSTALLED.store(true, Ordering::Release);
}

/// Open `page` for the faulting instruction only. False when stepping is not possible.
pub unsafe fn begin(tid: i32, page: usize, need: libc::c_int, ctx: *mut c_void) -> bool {
    if ctx.is_null() || !INSTALLED.load(Ordering::Acquire) || MULTI.load(Ordering::SeqCst) {
        return false;
    }
    let uc = &mut *(ctx as *mut libc::ucontext_t);
    // A blocked SIGTRAP would kill the process at the trap; a replaced handler would get
    // a trap after every instruction.
    if libc::sigismember(&uc.uc_sigmask, libc::SIGTRAP) == 1 {
        return false;
    }
    let mut cur: libc::sigaction = std::mem::zeroed();
    if libc::sigaction(libc::SIGTRAP, std::ptr::null(), &mut cur) != 0
        || cur.sa_sigaction != trap as *const () as usize
    {
        return false;
    }
    // This thread's entry (an instruction faulting on a second page is already stepping).
    let e = match STEPS.iter().find(|e| e.tid.load(Ordering::Acquire) == tid) {
        Some(e) => e,
        None => {
            let Some(e) = STEPS.iter().find(|e| {
                e.tid
                    .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            }) else {
                return false;
            };
            e.n.store(0, Ordering::Relaxed);
            ACTIVE.fetch_add(1, Ordering::SeqCst);
            e
        }
    };
    let n = e.n.load(Ordering::Relaxed);
    let (Some(slot), Some(efl)) = (
        e.pages.get(n),
        uc.uc_mcontext.gregs.get_mut(libc::REG_EFL as usize),
    ) else {
        return false; // this instruction already touches PAGES pages
    };
    slot.store(page, Ordering::Relaxed);
    e.n.store(n + 1, Ordering::Release);
    protect(page, page_size(), need);
    *efl |= TF;
    true
}

extern "C" fn trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    unsafe {
        let errno = *libc::__errno_location();
        let tid = libc::syscall(libc::SYS_gettid) as i32;
        match STEPS.iter().find(|e| e.tid.load(Ordering::Acquire) == tid) {
            Some(e) if !ctx.is_null() => {
                let n = e.n.load(Ordering::Acquire).min(PAGES);
                for p in e.pages.iter().take(n) {
                    let page = p.load(Ordering::Relaxed);
                    protect(page, page_size(), page_prot(page));
                }
                e.n.store(0, Ordering::Relaxed);
                e.tid.store(0, Ordering::Release);
                ACTIVE.fetch_sub(1, Ordering::SeqCst);
                let uc = &mut *(ctx as *mut libc::ucontext_t);
                if let Some(efl) = uc.uc_mcontext.gregs.get_mut(libc::REG_EFL as usize) {
                    *efl &= !TF;
                }
            }
            _ => chain_trap(sig, info, ctx),
        }
        *libc::__errno_location() = errno;
    }
}

/// A SIGTRAP that is not ours: the previous handler, or the default action (a trap does not
/// re-execute, so it is raised again: pending until we return, then default).
unsafe fn chain_trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let prev = (*std::ptr::addr_of!(PREV_TRAP)).assume_init_ref();
    let h = prev.sa_sigaction;
    if h == libc::SIG_IGN {
        return;
    }
    if h == libc::SIG_DFL {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(libc::SIGTRAP, &dfl, std::ptr::null_mut());
        libc::raise(libc::SIGTRAP);
        return;
    }
    call_handler(prev, sig, info, ctx);
}

/// Wait (bounded) for steps in flight to end.
pub fn settle() -> bool {
    let mut waited = false;
    for _ in 0..10_000 {
        if ACTIVE.load(Ordering::SeqCst) == 0 {
            return waited;
        }
        waited = true;
        std::thread::yield_now();
    }
    waited
}
