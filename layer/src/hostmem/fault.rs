//! Which way a page fault went (read or write), from the signal context: shared by profile's
//! host-access watch (`profile/watch/`) and enforce's runtime guard (`enforce/guard/`).
//! Async-signal-safe: atomics and reading the faulting instruction through a pipe ([`code`]: on
//! aarch64 without an `esr_context`, to know the direction; on x86_64, for profile's emulation
//! of accesses on shared pages).
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

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

/// How each fault's direction was known: from the fault context (x86_64: the page-fault error
/// code; aarch64: ESR_EL1 in the signal frame's `esr_context`), or by decoding the faulting
/// instruction (aarch64 without an `esr_context`, e.g. under qemu-user 7.2).
pub static BY_CONTEXT: AtomicU64 = AtomicU64::new(0);
pub static BY_INSTRUCTION: AtomicU64 = AtomicU64::new(0);

/// Normal code, before a handler that classifies faults is installed: on aarch64, the pipe the
/// instruction decoder reads through (elsewhere nothing).
pub fn setup() {
    #[cfg(all(
        any(target_arch = "aarch64", target_arch = "x86_64"),
        target_os = "linux"
    ))]
    code::setup();
    #[cfg(all(test, target_arch = "aarch64", target_os = "linux"))]
    IGNORE_ESR.store(
        std::env::var_os("ECHO_TEST_IGNORE_ESR").is_some_and(|v| v == "1"),
        Ordering::Relaxed,
    );
}

/// Test builds only: `ECHO_TEST_IGNORE_ESR=1` (read in `setup`, normal code) makes the aarch64
/// handler skip the signal frame's ESR and decode the instruction, so a run on a kernel that
/// does give an `esr_context` (scripts/qemu-system.sh) can show its per-access path check
/// catching a handler that ignores it.
#[cfg(all(test, target_arch = "aarch64", target_os = "linux"))]
static IGNORE_ESR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Did the faulting instruction write? `None` when the context does not say.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) unsafe fn fault_is_write(ctx: *mut c_void) -> Option<bool> {
    if ctx.is_null() {
        return None;
    }
    let uc = &*(ctx as *const libc::ucontext_t);
    // Page-fault error code: bit 1 = write access.
    let err = uc.uc_mcontext.gregs.get(libc::REG_ERR as usize)?;
    BY_CONTEXT.fetch_add(1, Ordering::Relaxed);
    Some(err & 2 != 0)
}

#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
pub(crate) unsafe fn fault_is_write(ctx: *mut c_void) -> Option<bool> {
    if ctx.is_null() {
        return None;
    }
    let uc = &*(ctx as *const libc::ucontext_t);
    // `__reserved` (private in the libc crate) follows `pstate`, 16-byte aligned.
    let after = std::ptr::addr_of!(uc.uc_mcontext.pstate) as usize + 8;
    let reserved = (after + 15) & !15;
    let end = (&uc.uc_mcontext as *const libc::mcontext_t as usize)
        + std::mem::size_of::<libc::mcontext_t>();
    #[cfg(test)]
    let use_esr = !IGNORE_ESR.load(Ordering::Relaxed);
    #[cfg(not(test))]
    let use_esr = true;
    let esr = if use_esr {
        aarch64_esr_is_write(reserved as *const u8, end.saturating_sub(reserved))
    } else {
        None
    };
    if let Some(w) = esr {
        BY_CONTEXT.fetch_add(1, Ordering::Relaxed);
        return Some(w);
    }
    // No esr_context (qemu-user 7.2 writes none): decode the instruction that faulted.
    let w = code::word_at(uc.uc_mcontext.pc as usize).and_then(a64_access_is_write);
    if w.is_some() {
        BY_INSTRUCTION.fetch_add(1, Ordering::Relaxed);
    }
    w
}

/// Reading the faulting instruction inside the SIGSEGV handler without faulting again (a fault
/// there, with SIGSEGV blocked, would kill the process): the word is passed through a pipe the
/// guard owns, so an unreadable address is an `EFAULT` from `write`, not a signal. Pipe set up
/// at install; a spin flag serialises handlers on several threads; before each use the fds are
/// checked (`fstat`) to still be that pipe, in case the application closed and reused them, and
/// the process to be the one that made it (a forked child shares the pipe but not the flag: it
/// gets no decoding, i.e. a write).
#[cfg(all(
    any(target_arch = "aarch64", target_arch = "x86_64"),
    target_os = "linux"
))]
pub(crate) mod code {
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

    static READ_FD: AtomicI32 = AtomicI32::new(-1);
    static WRITE_FD: AtomicI32 = AtomicI32::new(-1);
    static INODE: AtomicU64 = AtomicU64::new(0);
    static OWNER: AtomicI32 = AtomicI32::new(0);
    static BUSY: AtomicBool = AtomicBool::new(false);

    /// Create the pipe (normal code, once, before the handler is installed).
    pub fn setup() {
        if READ_FD.load(Ordering::Acquire) >= 0 {
            return;
        }
        let mut fds = [-1 as libc::c_int; 2];
        // SAFETY: a two-element array for pipe2.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return;
        }
        let Some(ino) = inode(fds[0]) else { return };
        INODE.store(ino, Ordering::Relaxed);
        // SAFETY: getpid has no preconditions.
        OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        WRITE_FD.store(fds[1], Ordering::Relaxed);
        READ_FD.store(fds[0], Ordering::Release);
    }

    fn inode(fd: libc::c_int) -> Option<u64> {
        // SAFETY: fstat into a zeroed struct; async-signal-safe.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFIFO {
            return None;
        }
        Some(st.st_ino as u64)
    }

    /// The 32-bit word at `pc`, if it can be read. Async-signal-safe.
    #[cfg(target_arch = "aarch64")]
    pub unsafe fn word_at(pc: usize) -> Option<u32> {
        if pc & 3 != 0 {
            return None;
        }
        let mut b = [0u8; 4];
        (bytes_at(pc, &mut b) == 4).then(|| u32::from_ne_bytes(b))
    }

    /// Up to `buf.len()` bytes from `pc` (x86_64: the faulting instruction, at most 15 bytes),
    /// as many as can be read: a page that cannot be read ends them. Async-signal-safe.
    pub unsafe fn bytes_at(pc: usize, buf: &mut [u8]) -> usize {
        let Some((r, w)) = take() else { return 0 };
        // Page by page: the bytes on a page that cannot be read are an EFAULT, and so only
        // what was written is read back.
        let mut got = 0usize;
        while got < buf.len() {
            let at = pc + got;
            let len = (4096 - (at & 4095)).min(buf.len() - got);
            let n = libc::write(w, at as *const libc::c_void, len);
            if n <= 0 {
                break;
            }
            let n = n as usize;
            let Some(rest) = buf.get_mut(got..) else {
                break;
            };
            if libc::read(r, rest.as_mut_ptr() as *mut libc::c_void, n) != n as isize {
                drain(r);
                break;
            }
            got += n;
            if n < len {
                break;
            }
        }
        BUSY.store(false, Ordering::Release);
        got
    }

    /// Copy `n` bytes (at most the pipe's 64 KiB) from `from` to `to` through the pipe, so that
    /// memory the application may not read or write is an `EFAULT`, not a fault inside the
    /// handler. True when all were copied; false leaves a prefix of them copied (or none).
    /// Async-signal-safe.
    #[cfg(target_arch = "x86_64")]
    pub unsafe fn copy(from: usize, to: usize, n: usize) -> bool {
        let Some((r, w)) = take() else { return false };
        let wrote = libc::write(w, from as *const libc::c_void, n);
        let ok = wrote == n as isize && libc::read(r, to as *mut libc::c_void, n) == n as isize;
        if !ok && wrote > 0 {
            drain(r);
        }
        BUSY.store(false, Ordering::Release);
        ok
    }

    /// Empty the pipe (after a read that failed): what is left would be read as the next bytes.
    unsafe fn drain(r: libc::c_int) {
        let mut sink = [0u8; 64];
        while libc::read(r, sink.as_mut_ptr() as *mut libc::c_void, sink.len()) > 0 {}
    }

    /// The pipe's fds, checked, with the flag taken (release it with `BUSY.store(false)`).
    unsafe fn take() -> Option<(libc::c_int, libc::c_int)> {
        let (r, w) = (
            READ_FD.load(Ordering::Acquire),
            WRITE_FD.load(Ordering::Relaxed),
        );
        if r < 0 || libc::getpid() != OWNER.load(Ordering::Relaxed) {
            return None;
        }
        let ino = INODE.load(Ordering::Relaxed);
        if inode(r) != Some(ino) || inode(w) != Some(ino) {
            return None; // not our pipe any more
        }
        let mut spins = 0u32;
        while BUSY
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins > 1 << 20 {
                return None;
            }
            std::hint::spin_loop();
        }
        Some((r, w))
    }
}

#[cfg(not(any(
    all(target_arch = "x86_64", target_os = "linux"),
    all(target_arch = "aarch64", target_os = "linux")
)))]
pub(crate) unsafe fn fault_is_write(_ctx: *mut c_void) -> Option<bool> {
    None
}

/// Walk the aarch64 signal-frame records in `__reserved` for `esr_context` (magic 0x45535201)
/// and read ESR_EL1: for a data abort (EC 0x24/0x25) bit 6 (WnR) says write. Pure, so it is
/// unit-tested on every architecture.
#[allow(dead_code)]
pub(crate) unsafe fn aarch64_esr_is_write(reserved: *const u8, len: usize) -> Option<bool> {
    const ESR_MAGIC: u32 = 0x4553_5201;
    let mut off = 0usize;
    while off + 8 <= len {
        let magic = std::ptr::read_unaligned(reserved.add(off) as *const u32);
        let size = std::ptr::read_unaligned(reserved.add(off + 4) as *const u32) as usize;
        if magic == 0 || size < 8 || off + size > len {
            return None;
        }
        if magic == ESR_MAGIC && size >= 16 {
            let esr = std::ptr::read_unaligned(reserved.add(off + 8) as *const u64);
            let ec = (esr >> 26) & 0x3f;
            if ec == 0x24 || ec == 0x25 {
                return Some(esr & (1 << 6) != 0);
            }
            return None;
        }
        off += size;
    }
    None
}

/// Does the A64 instruction `i` write memory? `Some(false)` for a load (or a prefetch), `None`
/// for anything that is not a plain data access this knows (the caller then takes a write).
/// Covers what touches a mapped buffer in practice: loads and stores of every size and addressing
/// mode (general and SIMD/FP registers, pairs, unprivileged, exclusive, acquire/release, RCpc),
/// SIMD structure loads/stores, LSE atomics and compare-and-swap (read-modify-write: a write),
/// `DC ZVA` (glibc's memset zeroes with it), and SVE contiguous/gather loads and stores. Pure, so
/// it is unit-tested on every architecture with assembled encodings.
#[allow(dead_code)]
pub(crate) fn a64_access_is_write(i: u32) -> Option<bool> {
    let bit = |n: u32| (i >> n) & 1;
    let bits = |hi: u32, lo: u32| (i >> lo) & ((1 << (hi - lo + 1)) - 1);
    // DC ZVA / DC GZVA: zeroing stores.
    if i & 0xFFFF_FFE0 == 0xD50B_7420 || i & 0xFFFF_FFE0 == 0xD50B_7480 {
        return Some(true);
    }
    // SVE memory (op0 = 0010): bits 31:29 = 111 are the stores.
    if bits(28, 25) == 0b0010 {
        return match bits(31, 29) {
            0b100..=0b110 => Some(false),
            0b111 => Some(true),
            _ => None,
        };
    }
    // Loads and stores: op0 = x1x0.
    if bit(27) != 1 || bit(25) != 0 {
        return None;
    }
    let load = bit(22) == 1; // L, where the class has one
    let simd = bit(26) == 1;
    // Size/opc classes: a general-register store is opc 00; a SIMD/FP store has opc<0> = 0.
    let sized = || {
        if simd {
            Some(bit(22) == 0)
        } else {
            Some(bits(23, 22) == 0b00)
        }
    };
    match bits(29, 27) {
        0b001 if simd => (bit(31) == 0).then_some(!load), // structures (LD1…/ST1…)
        0b001 => {
            if bit(24) != 0 {
                return None;
            }
            // CAS (o2 = 1, o1 = 1) and CASP (size 0x, o2 = 0, o1 = 1): read-modify-write.
            if bit(21) == 1 && (bit(23) == 1 || bit(31) == 0) {
                return Some(true);
            }
            Some(!load) // exclusive, acquire/release
        }
        0b011 => {
            if bit(24) == 0 {
                return Some(false); // load literal
            }
            if !simd && bit(21) == 0 && bits(11, 10) == 0 {
                return Some(bits(23, 22) == 0b00); // RCpc unscaled: STLUR / LDAPUR
            }
            None
        }
        0b101 => Some(!load), // pairs (LDP/STP, LDNP/STNP, LDPSW, STGP)
        0b111 => {
            if bit(24) == 1 || bit(21) == 0 {
                return sized(); // unsigned offset, unscaled, pre/post index, unprivileged
            }
            match bits(11, 10) {
                0b10 => sized(), // register offset
                0b00 if simd => None,
                // Atomics are read-modify-write, but LDAPR (o3 = 1, opc = 100) is a load.
                0b00 => Some(!(bit(15) == 1 && bits(14, 12) == 0b100)),
                _ if simd => None,
                _ => Some(false), // LDRAA / LDRAB
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
