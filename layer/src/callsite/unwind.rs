//! Echo's own unwinder for call-site identity (issue 35): the return addresses of the current
//! call, read with the modules' `.eh_frame` unwind tables, in a few dozen instructions a frame
//! where libgcc's `_Unwind_Backtrace` (glibc's `backtrace()`) takes thousands.
//!
//! - **Tables, once per module.** When the module cache is filled, each module's
//!   `.eh_frame_hdr` (its `PT_GNU_EH_FRAME` segment: the sorted table of FDEs) is parsed with
//!   gimli and kept with its `.eh_frame`; they go when the module cache is refilled, i.e. when
//!   the loader's add/remove counters move (`dlopen`/`dlclose`).
//! - **Rows, once per address and thread.** The unwind row of an address (how to find the
//!   caller's CFA, return address and frame pointer) is computed with gimli on first sight and
//!   kept in a per-thread two-way cache of [`ROWS`] slots, tagged with the module cache's
//!   generation. A steady capture reads only that cache and the stack.
//! - **Registers** (pc, sp, frame pointer, and on aarch64 the link register) come from inline
//!   assembly in the capturing function ([`Regs::here`]); x86_64 and aarch64 only. Other
//!   architectures, and every failure below, use libgcc's unwinder as before.
//! - **Every stack read is bounds-checked** against the calling thread's stack
//!   (`pthread_getattr_np`, once per thread) and must be aligned; the CFA must grow from frame
//!   to frame.
//! - **Anything not followed exactly fails the walk**, and the caller falls back to the
//!   reference (libgcc) path for the whole capture, so the identity is the same either way: an
//!   address in no module or with no FDE, a signal frame, a CFA that is not the stack or frame
//!   pointer plus an offset, a return-address or frame-pointer rule other than "saved at CFA +
//!   N" (or unchanged), a signed return address (aarch64 pointer authentication).
//!
//! No frame-pointer walk: frame pointers are not known to be kept by the modules an
//! application's call passes through (Debian builds without them), and a guess would change
//! identities silently.
//!
//! The tables are read from loaded modules' memory. Rows are only ever computed for addresses
//! of frames on the current thread's stack, whose modules cannot be unloaded while their code
//! is on that stack.

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, NativeEndian, ParsedEhFrameHdr,
    Pointer, RegisterRule, UnwindContext, UnwindSection,
};
use std::cell::RefCell;

/// Most frames a capture ever keeps (the `stack_depth` setting accepts 1..64); the per-thread
/// cache of the last walk holds as many.
pub const MAX_DEPTH: usize = 64;

type Slice = EndianSlice<'static, NativeEndian>;

/// Slots of the per-thread row cache (two-way set-associative: addresses are randomised per
/// run, and two rows a walk needs that shared one slot would be recomputed on every capture).
pub const ROWS: usize = 1024;
/// Slots of the per-thread memo of site hashes (see [`Thread::memo`]), in sets of [`WAYS`].
const MEMO: usize = 32;
const WAYS: usize = 4;

#[cfg(target_arch = "x86_64")]
mod arch {
    use gimli::Register;
    pub const SP: Register = gimli::X86_64::RSP;
    pub const FP: Register = gimli::X86_64::RBP;
    pub const RA: Register = gimli::X86_64::RA;
}
#[cfg(target_arch = "aarch64")]
mod arch {
    use gimli::Register;
    pub const SP: Register = gimli::AArch64::SP;
    pub const FP: Register = gimli::AArch64::X29;
    pub const RA: Register = gimli::AArch64::X30;
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    use gimli::Register;
    pub const SP: Register = Register(u16::MAX);
    pub const FP: Register = Register(u16::MAX);
    pub const RA: Register = Register(u16::MAX);
}

/// A module's unwind tables: `.eh_frame_hdr`, parsed once (its binary-search table of FDEs),
/// and `.eh_frame`.
pub struct Tables {
    hdr: ParsedEhFrameHdr<Slice>,
    eh_frame: EhFrame<Slice>,
    bases: BaseAddresses,
}

impl Tables {
    /// The tables of a loaded module from its `PT_GNU_EH_FRAME` segment `hdr` (start, end) and
    /// its `PT_LOAD` ranges: `.eh_frame` is where the header's `eh_frame_ptr` says, read up to
    /// the end of the loaded segment that holds it. `None` when the header is not inside a
    /// loaded segment, cannot be parsed or has no search table.
    ///
    /// # Safety
    /// The ranges must be those of a module loaded now; the tables must be dropped before it
    /// is unloaded (the module cache is refilled when the loader's counters move).
    pub unsafe fn from_segments(hdr: (usize, usize), loads: &[(usize, usize)]) -> Option<Tables> {
        if hdr.0 >= hdr.1 || !loads.iter().any(|r| r.0 <= hdr.0 && hdr.1 <= r.1) {
            return None;
        }
        // SAFETY: inside a loaded segment of a loaded module (the caller's promise).
        let bytes: &'static [u8] = std::slice::from_raw_parts(hdr.0 as *const u8, hdr.1 - hdr.0);
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr.0 as u64);
        let parsed = EhFrameHdr::new(bytes, NativeEndian)
            .parse(&bases, std::mem::size_of::<usize>() as u8)
            .ok()?;
        parsed.table()?;
        let eh = match parsed.eh_frame_ptr() {
            Pointer::Direct(a) => usize::try_from(a).ok()?,
            Pointer::Indirect(_) => return None,
        };
        let seg = loads.iter().find(|r| r.0 <= eh && eh < r.1)?;
        // SAFETY: as above; up to the end of the segment that holds it.
        let eh_bytes: &'static [u8] = std::slice::from_raw_parts(eh as *const u8, seg.1 - eh);
        #[allow(unused_mut)]
        let mut eh_frame = EhFrame::new(eh_bytes, NativeEndian);
        #[cfg(target_arch = "aarch64")]
        eh_frame.set_vendor(gimli::Vendor::AArch64);
        Some(Tables {
            hdr: parsed,
            eh_frame,
            bases: bases.set_eh_frame(eh as u64),
        })
    }

    /// The row for `addr`: (CFA from the frame pointer, CFA offset, return-address rule,
    /// frame-pointer rule), or `None` for anything [`walk`] does not follow.
    fn row(&self, ctx: &mut UnwindContext<usize>, addr: usize) -> Option<(bool, i32, i32, i32)> {
        let table = self.hdr.table()?;
        let fde = table
            .fde_for_address(
                &self.eh_frame,
                &self.bases,
                addr as u64,
                EhFrame::cie_from_offset,
            )
            .ok()?;
        if fde.cie().is_signal_trampoline() {
            return None;
        }
        let row = fde
            .unwind_info_for_address(&self.eh_frame, &self.bases, ctx, addr as u64)
            .ok()?;
        let (cfa_fp, off) = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } if *register == arch::SP => {
                (false, *offset)
            }
            CfaRule::RegisterAndOffset { register, offset } if *register == arch::FP => {
                (true, *offset)
            }
            _ => return None,
        };
        let off = i32::try_from(off).ok()?;
        let offset = |o: i64| i32::try_from(o).ok().filter(|o| *o != SAME && *o != END);
        let ra = match row.register(arch::RA) {
            RegisterRule::Offset(o) => offset(o)?,
            // x86_64's CIEs always say where the return address is: "undefined" is the
            // outermost frame (`_start`, `clone3`).
            #[cfg(target_arch = "x86_64")]
            RegisterRule::Undefined => END,
            // aarch64: the link register still holds it (a leaf, or before the prologue); in a
            // caller's frame [`walk`] takes it as the outermost frame (`_start` says
            // "undefined", which gimli does not tell from "unspecified").
            #[cfg(target_arch = "aarch64")]
            RegisterRule::Undefined | RegisterRule::SameValue => SAME,
            _ => return None,
        };
        let fp = match row.register(arch::FP) {
            RegisterRule::Offset(o) => offset(o)?,
            RegisterRule::Undefined | RegisterRule::SameValue => SAME,
            _ => return None,
        };
        #[cfg(target_arch = "aarch64")]
        match row.register(gimli::AArch64::RA_SIGN_STATE) {
            RegisterRule::Undefined | RegisterRule::Constant(0) => {}
            _ => return None, // a signed return address
        }
        Some((cfa_fp, off, ra, fp))
    }
}

/// A rule "the register is unchanged" (frame pointer, aarch64 link register).
const SAME: i32 = i32::MIN;
/// A return-address rule "undefined": the outermost frame.
const END: i32 = i32::MIN + 1;

/// One cached unwind row: for the instruction at `key` (a return address − 1, or the
/// capturing function's own pc) in the module of serial `serial`, index `module` in the module
/// cache of generation `gen`.
#[derive(Clone, Copy)]
struct Row {
    key: usize,
    gen: u64,
    module: u32,
    serial: u32,
    cfa_fp: bool,
    cfa_off: i32,
    ra: i32,
    fp: i32,
}

const EMPTY: Row = Row {
    key: 0,
    gen: 0,
    module: 0,
    serial: 0,
    cfa_fp: false,
    cfa_off: 0,
    ra: END,
    fp: SAME,
};

/// One memoised site hash: the hash of the frames `pcs[..n]` in the modules of serials
/// `serials[..n]` (the same addresses in the same loaded modules: the same names and offsets).
#[derive(Clone, Copy)]
struct Memo {
    /// A hash of `pcs[..n]`, to compare first.
    key: u64,
    /// The module cache's generation when it was last confirmed.
    gen: u64,
    n: usize,
    hash: u64,
    pcs: [usize; MAX_DEPTH],
    serials: [u32; MAX_DEPTH],
}

/// What a thread keeps for its captures.
pub struct Thread {
    /// The thread's stack, `[lo, hi)`; empty when unknown (every walk then fails).
    lo: usize,
    hi: usize,
    rows: Box<[Row]>,
    memo: Box<[Memo]>,
    /// Per memo set, the way the next miss replaces (round robin).
    memo_next: [u8; MEMO / WAYS],
    ctx: Box<UnwindContext<usize>>,
}

thread_local! {
    static THREAD: RefCell<Option<Box<Thread>>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's state (made on first use); `None` while the thread is exiting or
/// when called again from inside `f`.
pub fn with_thread<R>(f: impl FnOnce(&mut Thread) -> R) -> Option<R> {
    THREAD
        .try_with(|t| {
            let mut t = t.try_borrow_mut().ok()?;
            Some(f(t.get_or_insert_with(|| Box::new(Thread::new()))))
        })
        .ok()
        .flatten()
}

impl Thread {
    fn new() -> Thread {
        let (lo, hi) = stack_bounds().unwrap_or((0, 0));
        Thread {
            lo,
            hi,
            rows: vec![EMPTY; ROWS].into_boxed_slice(),
            memo: vec![
                Memo {
                    key: 0,
                    gen: 0,
                    n: 0,
                    hash: 0,
                    pcs: [0; MAX_DEPTH],
                    serials: [0; MAX_DEPTH],
                };
                MEMO
            ]
            .into_boxed_slice(),
            memo_next: [0; MEMO / WAYS],
            ctx: Box::new(UnwindContext::new()),
        }
    }

    /// The word at `cfa + off`, if it lies inside this thread's stack and is aligned.
    #[inline(always)]
    fn read(&self, cfa: usize, off: i32) -> Option<usize> {
        let a = cfa.wrapping_add(off as isize as usize);
        if a < self.lo || a > self.hi.wrapping_sub(8) || a % 8 != 0 || self.hi < 8 {
            return None;
        }
        // SAFETY: aligned, inside the current thread's stack, below its live frames' top.
        Some(unsafe { std::ptr::read(a as *const usize) })
    }

    /// The row for `key` from the cache, or computed from its module's tables. A row of an
    /// earlier module cache stands while its module is still loaded (its serial is found).
    #[inline(always)]
    fn row<'t, L, I>(&mut self, key: usize, m: &Modules<L, I>) -> Option<Row>
    where
        L: Fn(usize) -> Option<(u32, u32, Option<&'t Tables>)>,
        I: Fn(u32) -> Option<u32>,
    {
        let set = 2 * ((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (usize::BITS - 9)) % (ROWS / 2));
        let r = self.rows[set];
        if r.key == key && r.gen == m.gen {
            return Some(r);
        }
        self.row_slow(set, key, m)
    }

    /// [`Self::row`] past way 0's current row: a row of an earlier module cache (revalidated),
    /// way 1 (which then moves to way 0), or a new row.
    #[inline(never)]
    fn row_slow<'t, L, I>(&mut self, set: usize, key: usize, m: &Modules<L, I>) -> Option<Row>
    where
        L: Fn(usize) -> Option<(u32, u32, Option<&'t Tables>)>,
        I: Fn(u32) -> Option<u32>,
    {
        for way in [set, set + 1] {
            let r = &mut self.rows[way];
            if r.key != key {
                continue;
            }
            if r.gen != m.gen {
                // Its module unloaded: the address may be another module's now.
                let Some(i) = (m.index)(r.serial) else { break };
                r.module = i;
                r.gen = m.gen;
            }
            let r = *r;
            self.rows.swap(set, way);
            return Some(r);
        }
        self.fill(set, key, m)
    }

    /// Computes the row for `key` into way 0 of `set`; way 0's row moves to way 1.
    #[inline(never)]
    fn fill<'t, L, I>(&mut self, set: usize, key: usize, m: &Modules<L, I>) -> Option<Row>
    where
        L: Fn(usize) -> Option<(u32, u32, Option<&'t Tables>)>,
        I: Fn(u32) -> Option<u32>,
    {
        let (module, serial, tables) = (m.lookup)(key)?;
        let (cfa_fp, cfa_off, ra, fp) = tables?.row(&mut self.ctx, key)?;
        let r = Row {
            key,
            gen: m.gen,
            module,
            serial,
            cfa_fp,
            cfa_off,
            ra,
            fp,
        };
        self.rows[set + 1] = self.rows[set];
        self.rows[set] = r;
        Some(r)
    }

    /// The site hash of the frames `pcs`, whose modules have the serials `serial(i)`, in the
    /// module cache of generation `gen`: memoised per thread (the same addresses in the same
    /// loaded modules give the same hash), `compute`d on a miss. The hash reads every frame's
    /// module name byte by byte; the memo compares addresses (and the modules' serials, once
    /// after the module cache was refilled).
    #[inline(always)]
    pub fn memo(
        &mut self,
        gen: u64,
        pcs: &[usize],
        serial: impl Fn(usize) -> u32,
        compute: impl FnOnce() -> u64,
    ) -> u64 {
        let mut k = pcs.len() as u64;
        for &p in pcs {
            k = (k ^ p as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        let set = (k >> 61) as usize % (MEMO / WAYS);
        for m in &mut self.memo[set * WAYS..(set + 1) * WAYS] {
            if m.key == k && m.n == pcs.len() && m.pcs[..m.n] == *pcs {
                if m.gen == gen {
                    return m.hash;
                }
                if (0..m.n).all(|i| m.serials[i] == serial(i)) {
                    m.gen = gen;
                    return m.hash;
                }
            }
        }
        let hash = compute();
        let way = self.memo_next[set] as usize % WAYS;
        self.memo_next[set] = (way + 1) as u8;
        let m = &mut self.memo[set * WAYS + way];
        m.key = k;
        m.gen = gen;
        m.n = pcs.len();
        m.pcs[..pcs.len()].copy_from_slice(pcs);
        for (i, s) in m.serials[..pcs.len()].iter_mut().enumerate() {
            *s = serial(i);
        }
        m.hash = hash;
        hash
    }
}

/// The calling thread's stack, `[lo, hi)`.
fn stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: pthread_getattr_np fills `attr`, which is destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0 && !addr.is_null()).then(|| (addr as usize, (addr as usize).wrapping_add(size)))
    }
}

/// The registers a walk starts from: those of the function that called [`Regs::here`].
#[derive(Clone, Copy, Debug)]
pub struct Regs {
    pc: usize,
    sp: usize,
    fp: usize,
    lr: usize,
}

impl Regs {
    /// This function's registers, here (inlined into the capturing function, whose frame must
    /// stay live while [`walk`] runs: call `walk` from it). `None` on other architectures.
    #[inline(always)]
    pub fn here() -> Option<Regs> {
        #[cfg(target_arch = "x86_64")]
        {
            let (pc, sp, fp): (usize, usize, usize);
            // SAFETY: reads registers only.
            unsafe {
                std::arch::asm!(
                    "lea {pc}, [rip]",
                    "mov {sp}, rsp",
                    "mov {fp}, rbp",
                    pc = out(reg) pc,
                    sp = out(reg) sp,
                    fp = out(reg) fp,
                    options(nomem, nostack, preserves_flags)
                );
            }
            Some(Regs { pc, sp, fp, lr: 0 })
        }
        #[cfg(target_arch = "aarch64")]
        {
            let (pc, sp, fp, lr): (usize, usize, usize, usize);
            // SAFETY: reads registers only. The link register first: no output is x29 (the
            // frame pointer is reserved), but one could be x30.
            unsafe {
                std::arch::asm!(
                    "mov {lr}, x30",
                    "mov {fp}, x29",
                    "mov {sp}, sp",
                    "adr {pc}, .",
                    lr = out(reg) lr,
                    fp = out(reg) fp,
                    sp = out(reg) sp,
                    pc = out(reg) pc,
                    options(nomem, nostack, preserves_flags)
                );
            }
            Some(Regs { pc, sp, fp, lr })
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            None
        }
    }
}

/// The module cache as [`walk`] sees it.
pub struct Modules<L, I> {
    /// Its generation (how many times it was filled).
    pub gen: u64,
    /// An address's module: (index, serial, unwind tables).
    pub lookup: L,
    /// The index of the module of a serial, while that module is loaded.
    pub index: I,
}

/// Walks the frames from `regs` on: `step(pc, module index)` for each (first `regs.pc` itself,
/// then each caller's return address) until `step` returns `false` or the outermost frame was
/// stepped. `None` when a frame cannot be unwound exactly: then what `step` saw must be thrown
/// away.
#[inline(always)]
pub fn walk<'t, L, I>(
    t: &mut Thread,
    modules: &Modules<L, I>,
    regs: Regs,
    mut step: impl FnMut(usize, u32) -> bool,
) -> Option<()>
where
    L: Fn(usize) -> Option<(u32, u32, Option<&'t Tables>)>,
    I: Fn(u32) -> Option<u32>,
{
    let (mut pc, mut sp, mut fp, mut lr) = (regs.pc, regs.sp, regs.fp, regs.lr);
    let mut first = true;
    loop {
        // A return address may be one past its function's end (a call to a noreturn
        // function): look its call instruction up, as libgcc does.
        let key = if first { pc } else { pc.wrapping_sub(1) };
        let row = t.row(key, modules)?;
        if !step(pc, row.module) {
            return Some(());
        }
        let ra_rule = if row.ra == SAME && !first {
            END
        } else {
            row.ra
        };
        if ra_rule == END {
            return Some(());
        }
        let base = if row.cfa_fp { fp } else { sp };
        let cfa = base.wrapping_add(row.cfa_off as isize as usize);
        if cfa <= sp || cfa > t.hi {
            return None;
        }
        let ra = if ra_rule == SAME {
            lr
        } else {
            t.read(cfa, ra_rule)?
        };
        if row.fp != SAME {
            fp = t.read(cfa, row.fp)?;
        }
        lr = ra;
        sp = cfa;
        pc = ra;
        first = false;
        // libgcc reports a null return address as the end of the stack (glibc's backtrace()
        // drops it).
        if pc == 0 {
            return Some(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo answers the same frames in the same modules with the hash computed the first
    /// time; other frames, or the same addresses in other modules, are computed.
    #[test]
    fn memo_keeps_hashes_per_frames_and_modules() {
        let mut t = Thread::new();
        let lists: Vec<Vec<usize>> = (1..=40usize).map(|i| vec![i * 16, i * 16 + 8, 7]).collect();
        let one = |_| 1u32;
        for (i, l) in lists.iter().enumerate() {
            assert_eq!(t.memo(1, l, one, || i as u64), i as u64);
        }
        // A recent one is a hit.
        let last = lists.len() - 1;
        assert_eq!(t.memo(1, &lists[last], one, || unreachable!()), last as u64);
        assert_eq!(
            t.memo(1, &lists[last][..2], one, || 99),
            99,
            "a prefix is other frames"
        );
        // A refilled module cache: the same modules still hit, another one recomputes.
        assert_eq!(t.memo(2, &lists[last], one, || unreachable!()), last as u64);
        let other = |i| if i == 1 { 2 } else { 1 };
        assert_eq!(
            t.memo(3, &lists[last], other, || 7),
            7,
            "another module recomputes"
        );
        assert_eq!(t.memo(3, &lists[last], other, || unreachable!()), 7);
    }
}
