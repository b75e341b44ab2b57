//! Whose code made a fault (issue 44): the program's, or not.
//!
//! The host accesses echo records are the program's: its own code, the libraries it calls (libc's
//! `memcpy`), the Vulkan loader and layers acting for it. A fault whose instruction lies in a
//! Vulkan driver's module (a module that exports `vk_icdGetInstanceProcAddr`) or in no module at
//! all (code a JIT compiled: SwiftShader's and llvmpipe's shaders and vertex fetch) is *not a
//! host access echo can explain*: on a CPU driver it is the "GPU" itself. Such a fault is never
//! fatal and never recorded as the program's access: the handler leaves the range open and the
//! buffers there lose their evidence (`watch::lose`).
//!
//! The executable segments of the program's modules are kept in one of two fixed tables, filled
//! in normal code ([`refresh`], at every arm, cheap when no module was loaded or unloaded since)
//! and read by the handler without locks or allocation ([`program_code`]). A module the table
//! has not seen yet counts as not the program's (fail closed: the buffers lose their evidence,
//! the program runs on).

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Executable ranges one table holds (the program's modules' executable segments).
const MAX: usize = 512;

struct Table {
    n: AtomicUsize,
    start: [AtomicUsize; MAX],
    end: [AtomicUsize; MAX],
}

#[allow(clippy::declare_interior_mutable_const)]
const TABLE_INIT: Table = Table {
    n: AtomicUsize::new(0),
    start: [const { AtomicUsize::new(0) }; MAX],
    end: [const { AtomicUsize::new(0) }; MAX],
};

/// Two tables: the handler reads `TABLES[ACTIVE]` while [`refresh`] fills the other one.
static TABLES: [Table; 2] = [TABLE_INIT; 2];
/// Which table is live, and how many handlers read a table now (a refresh waits for readers of
/// the table it is about to fill).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static READERS: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
/// `(dlpi_adds, dlpi_subs)` at the last refresh, packed; `u64::MAX`: never filled.
static SEEN: AtomicU64 = AtomicU64::new(u64::MAX);

/// Whether `pc` lies in the program's code (see the module doc). Async-signal-safe: atomics only.
pub fn program_code(pc: usize) -> bool {
    let i = ACTIVE.load(Ordering::Acquire) & 1;
    let (Some(t), Some(readers)) = (TABLES.get(i), READERS.get(i)) else {
        return false;
    };
    readers.fetch_add(1, Ordering::AcqRel);
    let n = t.n.load(Ordering::Acquire).min(MAX);
    // Sorted by start, not overlapping: binary search.
    let (mut lo, mut hi) = (0usize, n);
    let mut found = false;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (a, b) = match (t.start.get(mid), t.end.get(mid)) {
            (Some(a), Some(b)) => (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)),
            _ => break,
        };
        if pc < a {
            hi = mid;
        } else if pc >= b {
            lo = mid + 1;
        } else {
            found = true;
            break;
        }
    }
    readers.fetch_sub(1, Ordering::AcqRel);
    found
}

/// `(dlpi_adds, dlpi_subs)` packed: how many objects were ever loaded and unloaded.
fn loader_counters() -> u64 {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        if size >= std::mem::size_of::<libc::dl_phdr_info>() {
            *(data as *mut u64) = ((*info).dlpi_adds << 32) ^ (*info).dlpi_subs;
        }
        1
    }
    let mut v = 0u64;
    // SAFETY: the callback writes one u64 through `data`.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut v as *mut u64 as *mut c_void) };
    v
}

/// Whether the module loaded from `name` is a Vulkan driver (it exports the ICD entry point).
/// Never true for the main program (empty name).
fn is_driver(name: &CStr) -> bool {
    if name.to_bytes().is_empty() {
        return false;
    }
    // SAFETY: RTLD_NOLOAD only finds a module that is loaded; the reference it takes is dropped.
    unsafe {
        let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if h.is_null() {
            return false;
        }
        let icd = !libc::dlsym(h, c"vk_icdGetInstanceProcAddr".as_ptr()).is_null()
            || !libc::dlsym(h, c"vk_icdNegotiateLoaderICDInterfaceVersion".as_ptr()).is_null();
        libc::dlclose(h);
        icd
    }
}

/// Refill the table when modules were loaded or unloaded since the last call (normal code only;
/// callers serialize — the guard's control lock).
pub fn refresh() {
    let now = loader_counters();
    if SEEN.load(Ordering::Acquire) == now {
        return;
    }
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut names: Vec<(std::ffi::CString, Vec<(usize, usize)>)> = Vec::new();
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        let out = &mut *(data as *mut Vec<(std::ffi::CString, Vec<(usize, usize)>)>);
        let info = &*info;
        let bias = info.dlpi_addr as usize;
        let mut code = Vec::new();
        for i in 0..info.dlpi_phnum as usize {
            let ph = &*info.dlpi_phdr.add(i);
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let a = bias.wrapping_add(ph.p_vaddr as usize);
                code.push((a, a.wrapping_add(ph.p_memsz as usize)));
            }
        }
        let name = if info.dlpi_name.is_null() {
            std::ffi::CString::default()
        } else {
            CStr::from_ptr(info.dlpi_name).to_owned()
        };
        out.push((name, code));
        0
    }
    // SAFETY: the callback only reads the loader's records and pushes into `names`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut names as *mut _ as *mut c_void) };
    for (name, code) in names {
        if !is_driver(&name) {
            ranges.extend(code);
        }
    }
    ranges.sort_unstable();
    ranges.truncate(MAX);
    // Fill the table the handler does not read, once no handler reads it any more.
    let next = (ACTIVE.load(Ordering::Acquire) & 1) ^ 1;
    let (Some(t), Some(readers)) = (TABLES.get(next), READERS.get(next)) else {
        return;
    };
    for _ in 0..1_000_000 {
        if readers.load(Ordering::Acquire) == 0 {
            break;
        }
        std::hint::spin_loop();
    }
    t.n.store(0, Ordering::Release);
    for ((a, b), (sa, sb)) in ranges.iter().zip(t.start.iter().zip(t.end.iter())) {
        sa.store(*a, Ordering::Relaxed);
        sb.store(*b, Ordering::Relaxed);
    }
    t.n.store(ranges.len(), Ordering::Release);
    ACTIVE.store(next, Ordering::Release);
    SEEN.store(now, Ordering::Release);
}

/// The program counter of a signal context (0 when it cannot be read).
///
/// # Safety
/// `ctx` is the `ucontext_t` a signal handler received (or null).
pub unsafe fn pc_of(ctx: *mut c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    let uc = &*(ctx as *const libc::ucontext_t);
    #[cfg(target_arch = "x86_64")]
    {
        uc.uc_mcontext
            .gregs
            .get(libc::REG_RIP as usize)
            .map_or(0, |r| *r as usize)
    }
    #[cfg(target_arch = "aarch64")]
    {
        uc.uc_mcontext.pc as usize
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = uc;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_code_libc_and_jit_are_told_apart() {
        refresh();
        let own = own_code_libc_and_jit_are_told_apart as *const () as usize;
        assert!(program_code(own), "this test's own code");
        let libc_code = libc::memcpy as *const () as usize;
        assert!(program_code(libc_code), "libc's memcpy");
        // Anonymous executable memory (what a JIT writes code into) is no module's.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        assert!(!program_code(p as usize + 16), "JIT-like anonymous code");
        assert!(!program_code(0));
        unsafe { libc::munmap(p, 4096) };
    }
}
