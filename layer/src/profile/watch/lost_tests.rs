//! Planted faults for "a fault echo cannot explain or finish is never fatal" (issue 44): an access
//! from code that is not the program's (JIT-compiled code in anonymous memory, run on a thread of
//! its own, as a CPU driver's worker runs its shaders), a panic inside the handler, and accesses on
//! shared pages with emulation and stepping switched off. Each runs in a process of its own (the
//! handler is process-wide) and must finish with the memory's bytes right and the buffers lost
//! (or, for the switches, recorded as read and written), never with a signal.

use super::handler::{EMULATE_OFF, PANIC_NEXT, STEP_OFF};
use super::prot::page_size;
use super::*;
use crate::testutil::own_process;
use echo_analyzer::trace::Access;
use std::ffi::c_void;

const FLAG: &str = "ECHO_GUARD_LOST_CHILD";

/// `n` fresh anonymous pages.
fn pages(n: usize) -> *mut u8 {
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            n * page_size(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p as *mut u8
}

/// A function in anonymous executable memory, in no module, as a JIT writes it:
/// `u32 load(const u32 *p) { return *p; }`.
fn jit_load() -> unsafe extern "C" fn(*const u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    let code: &[u8] = &[0x8b, 0x07, 0xc3]; // mov eax, [rdi]; ret
    #[cfg(target_arch = "aarch64")]
    let code: &[u8] = &[0x00, 0x00, 0x40, 0xb9, 0xc0, 0x03, 0x5f, 0xd6]; // ldr w0, [x0]; ret
    let p = pages(1);
    unsafe {
        std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
        assert_eq!(
            libc::mprotect(
                p as *mut c_void,
                page_size(),
                libc::PROT_READ | libc::PROT_EXEC
            ),
            0
        );
        #[cfg(target_arch = "aarch64")]
        {
            extern "C" {
                fn __clear_cache(a: *mut libc::c_char, b: *mut libc::c_char);
            }
            __clear_cache(
                p as *mut libc::c_char,
                p.add(code.len()) as *mut libc::c_char,
            );
        }
        std::mem::transmute::<*mut u8, unsafe extern "C" fn(*const u32) -> u32>(p)
    }
}

fn seen() -> Vec<(u64, Seen)> {
    let mut v = Vec::new();
    drain(|id, s, _, _| v.push((id, s)));
    v
}

#[test]
fn an_access_from_jit_code_on_another_thread_is_never_fatal() {
    own_process!(
        an_access_from_jit_code_on_another_thread_is_never_fatal,
        FLAG
    );
    let ps = page_size();
    let m = pages(4);
    unsafe { std::ptr::write_volatile(m.add(ps + 8) as *mut u32, 0x5eed) };
    arm(5, m, 4 * ps).unwrap();
    // A neighbour sharing no page: untouched by the loss.
    let other = pages(1);
    arm(6, other, ps).unwrap();
    let load = jit_load();
    let at = m as usize + ps + 8;
    // A thread the program did not make itself run code no module holds: a driver's worker.
    let v = std::thread::spawn(move || unsafe { load(at as *const u32) })
        .join()
        .unwrap();
    assert_eq!(v, 0x5eed, "the access completes with the right bytes");
    assert_eq!(
        seen(),
        vec![(5, Seen::Lost)],
        "lost, not a host access of the program"
    );
    let st = stats();
    assert_eq!(st.lost, 1, "{st:?}");
    // The range stays open: the program's own accesses no longer fault, nor are recorded.
    unsafe { std::ptr::write_volatile(m.add(3 * ps), 1u8) };
    assert_eq!(seen(), vec![]);
    assert_eq!(
        stats().faults,
        st.faults,
        "no further fault on the lost range"
    );
    // The neighbour is still watched.
    unsafe { std::ptr::write_volatile(other, 1u8) };
    assert_eq!(seen(), vec![(6, Seen::Access(Access::Write))]);
    disarm(5);
    disarm(6);
    println!("CHILD-OK");
}

#[test]
fn a_panic_in_the_handler_is_contained() {
    own_process!(a_panic_in_the_handler_is_contained, FLAG);
    let ps = page_size();
    let m = pages(2);
    arm(9, m, 2 * ps).unwrap();
    PANIC_NEXT.store(true, Ordering::SeqCst);
    unsafe { std::ptr::write_volatile(m.add(10), 77u8) };
    assert_eq!(unsafe { std::ptr::read_volatile(m.add(10)) }, 77);
    let st = stats();
    assert_eq!((st.panics, st.lost), (1, 0), "{st:?}");
    assert_eq!(seen(), vec![(9, Seen::Lost)]);
    disarm(9);
    println!("CHILD-OK");
}

/// With emulation and stepping off (`VK_ECHO_EMULATE=0`, `VK_ECHO_STEP=0`), an access on a page
/// two armed buffers share opens the page for the window and records the neighbour as read and
/// written: fail closed, and the program runs on.
#[test]
fn emulation_and_stepping_switched_off_fail_closed() {
    own_process!(emulation_and_stepping_switched_off_fail_closed, FLAG);
    let ps = page_size();
    let m = crate::hostmem::memfd::DoubleMap::new(3 * ps, ps).unwrap();
    let app = m.app_ptr();
    arm_shadowed(1, app, ps + 256, Some(m.driver_ptr())).unwrap();
    let at = |p: *mut u8| unsafe { p.add(ps + 256) };
    arm_shadowed(2, at(app), 2 * ps - 256, Some(at(m.driver_ptr()))).unwrap();
    EMULATE_OFF.store(true, Ordering::SeqCst);
    STEP_OFF.store(true, Ordering::SeqCst);
    // Buffer 1's first access opens its range but for the shared page (buffer 2 is unseen).
    unsafe { std::ptr::write_volatile(app.add(16), 1u8) };
    // On the shared page, in buffer 1's bytes: neither emulated nor stepped.
    unsafe { std::ptr::write_volatile(app.add(ps + 8), 2u8) };
    assert_eq!(
        unsafe { std::ptr::read_volatile(m.driver_ptr().add(ps + 8)) },
        2
    );
    let st = stats();
    assert_eq!((st.emulated, st.stepped), (0, 0), "{st:?}");
    assert_eq!(
        seen(),
        vec![
            (1, Seen::Access(Access::Write)),
            (2, Seen::Access(Access::ReadWrite))
        ]
    );
    disarm(1);
    disarm(2);
    println!("CHILD-OK");
}

/// An instruction the emulator does not know (a read-modify-write) on a shared page, with
/// stepping off: fail closed, the right bytes, the program runs on.
#[cfg(target_arch = "x86_64")]
#[test]
fn an_instruction_the_emulator_lacks_fails_closed() {
    own_process!(an_instruction_the_emulator_lacks_fails_closed, FLAG);
    let ps = page_size();
    let m = crate::hostmem::memfd::DoubleMap::new(3 * ps, ps).unwrap();
    let app = m.app_ptr();
    arm_shadowed(1, app, ps + 256, Some(m.driver_ptr())).unwrap();
    let at = |p: *mut u8| unsafe { p.add(ps + 256) };
    arm_shadowed(2, at(app), 2 * ps - 256, Some(at(m.driver_ptr()))).unwrap();
    STEP_OFF.store(true, Ordering::SeqCst);
    unsafe { std::ptr::write_volatile(app.add(16), 1u8) };
    let p = unsafe { app.add(ps + 8) } as *mut u32;
    unsafe {
        std::ptr::write_volatile(m.driver_ptr().add(ps + 8) as *mut u32, 41);
        std::arch::asm!("add dword ptr [{p}], 1", p = in(reg) p, options(nostack));
    }
    assert_eq!(
        unsafe { std::ptr::read_volatile(m.driver_ptr().add(ps + 8) as *const u32) },
        42
    );
    let st = stats();
    assert_eq!((st.emulated, st.stepped, st.lost), (0, 0, 0), "{st:?}");
    assert_eq!(
        seen(),
        vec![
            (1, Seen::Access(Access::Write)),
            (2, Seen::Access(Access::ReadWrite))
        ]
    );
    disarm(1);
    disarm(2);
    println!("CHILD-OK");
}

/// The handler's deepest path (an emulated access on a shared page) fits in the alternate signal
/// stack every thread Rust's std starts has (8 KiB, or the kernel's minimum signal frame size
/// when larger): measured on a 1 MiB alternate stack filled with a pattern, the handler itself
/// (beyond the kernel's frame, `AT_MINSIGSTKSZ` or at least `MINSIGSTKSZ`) must use at most 4 KiB. Unoptimized it used
/// about 6 KiB and overflowed (hence the dev profile's opt-level for the layer in Cargo.toml).
#[test]
fn the_handler_fits_a_small_alternate_stack() {
    own_process!(the_handler_fits_a_small_alternate_stack, FLAG);
    let ps = page_size();
    const N: usize = 1 << 20;
    let alt = pages(N / ps);
    unsafe { std::ptr::write_bytes(alt, 0xaa, N) };
    let ss = libc::stack_t {
        ss_sp: alt as *mut c_void,
        ss_flags: 0,
        ss_size: N,
    };
    assert_eq!(unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) }, 0);
    let m = crate::hostmem::memfd::DoubleMap::new(3 * ps, ps).unwrap();
    let app = m.app_ptr();
    arm_shadowed(1, app, ps + 256, Some(m.driver_ptr())).unwrap();
    let at = |p: *mut u8| unsafe { p.add(ps + 256) };
    arm_shadowed(2, at(app), 2 * ps - 256, Some(at(m.driver_ptr()))).unwrap();
    unsafe { std::ptr::write_volatile(app.add(16), 1u8) };
    unsafe { std::ptr::write_volatile(app.add(ps + 8), 2u8) };
    #[cfg(target_arch = "x86_64")]
    assert_eq!(stats().emulated, 1, "{:?}", stats());
    let used = (0..N)
        .find(|i| unsafe { *alt.add(*i) } != 0xaa)
        .map_or(0, |i| N - i);
    // qemu-user answers 0 for AT_MINSIGSTKSZ: the libc constant is the floor (5 KiB on aarch64).
    let frame = (unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize).max(libc::MINSIGSTKSZ);
    println!("alternate stack used: {used} bytes (the kernel's frame: {frame})");
    assert!(used > 0 && used <= frame + 4096, "{used} bytes");
    let off = libc::stack_t {
        ss_sp: std::ptr::null_mut(),
        ss_flags: libc::SS_DISABLE,
        ss_size: 0,
    };
    unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) };
    disarm(1);
    disarm(2);
    println!("CHILD-OK");
}
