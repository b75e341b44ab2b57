//! The SIGSEGV plumbing both of echo's fault handlers share (profile's host-access watch and
//! enforce's runtime guard): install a handler once, keeping the disposition that was there
//! before, and hand a fault that is not ours to it as the kernel would have. Async-signal-safe
//! where it runs in a handler: `sigaction`, `raise`, a call.
// Reached from the SIGSEGV handler: nothing here may panic (issue 44).
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

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{fence, Ordering};

/// The disposition that was installed before one of echo's handlers. Written while installing
/// (normal code, under the installer's lock), read by the handler.
pub struct Previous(UnsafeCell<MaybeUninit<libc::sigaction>>);

// SAFETY: written only by `install_segv` before the handler that reads it can run (with fences),
// then only read.
unsafe impl Sync for Previous {}

impl Previous {
    pub const fn new() -> Previous {
        Previous(UnsafeCell::new(MaybeUninit::zeroed()))
    }

    /// The previous disposition (zeroed: `SIG_DFL`, before [`Previous::install_segv`]).
    ///
    /// # Safety
    /// Not while `install_segv` runs.
    pub unsafe fn get(&self) -> &libc::sigaction {
        (*self.0.get()).assume_init_ref()
    }

    /// Installs `handler` (an `SA_SIGINFO` handler's address) for SIGSEGV with `SA_ONSTACK |
    /// SA_RESTART`, keeping what was current at the swap (a racing installer wins over the first
    /// snapshot). `SA_ONSTACK`: the thread's alternate stack if it has one (a stack overflow is
    /// not ours, and a handler chained to may need that stack). No `SA_NODEFER`: SIGSEGV stays
    /// blocked while it runs, as a chained application handler expects, and a fault inside it
    /// kills the process instead of recursing.
    ///
    /// # Safety
    /// Once per `Previous`, from normal code, before any fault it must chain.
    pub unsafe fn install_segv(&self, handler: usize) -> Result<(), String> {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut prev: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut prev) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        (*self.0.get()).write(prev);
        fence(Ordering::SeqCst);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, &sa, &mut old) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        (*self.0.get()).write(old);
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Hands a SIGSEGV that is not ours to the previous disposition: its handler is called; for
    /// `SIG_DFL`/`SIG_IGN` the default is restored and the fault happens again (a hardware fault
    /// re-executes; a sent signal is raised again, pending until the handler returns since
    /// SIGSEGV is blocked), except an ignored `kill(SIGSEGV)`, which stays ignored.
    ///
    /// # Safety
    /// In a SIGSEGV handler, with the kernel's arguments.
    pub unsafe fn chain_segv(
        &self,
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        ctx: *mut c_void,
    ) {
        let prev = self.get();
        let h = prev.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            let user_sent = !info.is_null() && (*info).si_code <= 0;
            if h == libc::SIG_IGN && user_sent {
                return;
            }
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut dfl.sa_mask);
            libc::sigaction(libc::SIGSEGV, &dfl, std::ptr::null_mut());
            if user_sent {
                libc::raise(libc::SIGSEGV);
            }
            return;
        }
        call_handler(prev, sig, info, ctx);
    }
}

/// Whether SIGSEGV's current handler is `handler` (an application may install its own later).
pub fn segv_handler_is(handler: usize) -> bool {
    // SAFETY: a query into a zeroed struct.
    let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut cur) } == 0;
    !ok || cur.sa_sigaction == handler
}

/// Calls an installed handler (`SA_SIGINFO` or plain) as the kernel would have.
///
/// # Safety
/// `prev` is a real handler's disposition (not `SIG_DFL`/`SIG_IGN`); in a signal handler.
pub unsafe fn call_handler(
    prev: &libc::sigaction,
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut c_void,
) {
    let h = prev.sa_sigaction;
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
            std::mem::transmute(h);
        f(sig, info, ctx);
    } else {
        let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
        f(sig);
    }
}
