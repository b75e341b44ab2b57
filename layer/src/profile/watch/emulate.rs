//! Emulating one host load or store on a page shared by sub-allocations (x86_64).
//!
//! A page that holds bytes of a buffer still unseen in the window stays closed, so every access
//! of its neighbour's bytes there faults. Stepping it (open the page, run one instruction under
//! the trap flag, close it: [`super::step`]) costs about 21 µs on a virtual machine, 16 of them the
//! single-step trap. Where the page is also reachable through the other view of a double mapping
//! (profile hands the application view B of a memfd and the driver view A, see
//! [`crate::hostmem::memfd`]), the handler can do the access itself instead: decode the faulting
//! instruction (`iced-x86`), and when it is a plain move between memory and a register or an
//! immediate, compute its address from the signal context, read or write the same bytes through
//! the other view, put the result in the saved registers and move the instruction pointer past
//! it. The page never opens, so the emulation is exact with any number of host threads.
//! The instruction's bytes are read through the guard's pipe (`hostmem::fault::code`), so an
//! unreadable page is an error, never a fault inside the handler; a code page read that way is
//! read directly for the rest of the window ([`forget_code_pages`]).
//!
//! Only the forms below are emulated (VEX and EVEX ones with the bits of the registers above the
//! legacy area's 128 in the signal frame's XSAVE area); anything else (a read-modify-write, a
//! string instruction other than `rep movsb`/`rep stosb`, a locked or segment-prefixed access, a
//! masked or broadcast EVEX form, an access that leaves the page, an aligned form at an
//! unaligned address, an instruction under the trap flag) is left to the stepping it had before. The decoder's tables are built on first use (with allocation), so
//! [`install`] builds them from normal code; after that decoding allocates nothing.

use iced_x86::{Code, Decoder, DecoderOptions, Instruction, OpKind, Register};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A decoded access the handler can do itself.
pub struct Access {
    /// Its first byte and its length on the faulting page (a string move: the part done now).
    pub ea: usize,
    pub size: usize,
    pub write: bool,
    /// A string move's other side (`rep movsb`: the source of a write, the destination of a
    /// read), outside every watched page; 0 for the others.
    pub other: usize,
    form: Form,
    insn: Instruction,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `mov m, r` (8/16/32/64).
    StoreGpr,
    /// `mov m, imm` (the 64-bit form's imm32 sign-extended).
    StoreImm,
    /// `mov r, m`; `movzx`/`movsx`/`movsxd` (`sign`: extend the sign).
    LoadGpr { extend: bool, sign: bool },
    /// SSE stores from an xmm register: `movups`/`movaps`/`movdqu`/`movss`/`movd`/... .
    StoreXmm { aligned: bool },
    /// SSE loads into an xmm register; `zero`: the bits above the loaded ones are cleared
    /// (`movss`/`movsd`/`movd`/`movq` from memory), else kept (the 128-bit loads write all).
    LoadXmm { aligned: bool, zero: bool },
    /// `rep movsb` (forward, 64-bit addresses): up to a page of it at a time, the rest left
    /// to the CPU (a string instruction restarts from its registers).
    RepMovsb,
    /// `rep stosb` (forward): likewise.
    RepStosb,
    /// VEX and EVEX (unmasked) stores from an xmm, ymm or zmm register (the bits above the
    /// legacy area's 128 from the signal frame's XSAVE area).
    StoreVec { aligned: bool },
    /// VEX and EVEX (unmasked) loads into an xmm, ymm or zmm register: every bit above those
    /// loaded is cleared, up to the widest vector register (VEX and EVEX zero them).
    LoadVec { aligned: bool },
}

/// Build the decoder's lazily built tables from normal code (never first in a signal handler),
/// and find where the XSAVE layout keeps the upper halves of the vector registers.
#[allow(unused_unsafe)] // __cpuid became safe to call after the workspace's Rust 1.85
pub fn install() {
    let mut d = Decoder::with_ip(64, &[0x8b, 0x07], 0, DecoderOptions::NONE);
    let _ = d.decode();
    // CPUID leaf 0xD, sub-leaf i: EAX the size, EBX the offset of state component i in the
    // standard (non-compacted) layout, which signal frames use.
    // SAFETY: cpuid is available on every x86_64; leaf 0xD where XSAVE is (else zeros).
    let max = unsafe { std::arch::x86_64::__cpuid(0) }.eax;
    if max >= 0xd {
        for (i, slot) in [2u32, 6, 7].into_iter().zip(&COMPONENTS) {
            let r = unsafe { std::arch::x86_64::__cpuid_count(0xd, i) };
            if r.eax as usize >= component(i).1 {
                slot.store(r.ebx as usize, Ordering::Relaxed);
            }
        }
    }
}

/// Offsets of XSAVE state components 2 (bits 255:128 of ymm0-15), 6 (bits 511:256 of
/// zmm0-15) and 7 (all of zmm16-31) in the standard layout; 0: not present.
static COMPONENTS: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];

/// XSAVE state component 2, 6 or 7: (its offset, 0 when absent; its length).
fn component(i: u32) -> (usize, usize) {
    let (slot, len) = match i {
        2 => (0, 256),
        6 => (1, 512),
        _ => (2, 1024),
    };
    (
        COMPONENTS
            .get(slot)
            .map_or(0, |c| c.load(Ordering::Relaxed)),
        len,
    )
}

/// Saved general register `r` of a signal context (`REG_*`; 0 for an index it does not have,
/// which the constants never are).
fn reg(uc: &libc::ucontext_t, r: usize) -> libc::greg_t {
    uc.uc_mcontext.gregs.get(r).copied().unwrap_or(0)
}

/// Sets saved general register `r` (nothing for an index it does not have).
fn set_reg(uc: &mut libc::ucontext_t, r: usize, v: libc::greg_t) {
    if let Some(g) = uc.uc_mcontext.gregs.get_mut(r) {
        *g = v;
    }
}

/// `N` bytes of `b` from `at` (zeros past its end, which callers never reach).
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = b.get(at..at.saturating_add(N)) {
        out.copy_from_slice(src);
    }
    out
}

/// Copies `src` into `dst` from `at` (as much as fits).
fn put_at(dst: &mut [u8], at: usize, src: &[u8]) {
    if let Some(d) = dst.get_mut(at..at.saturating_add(src.len())) {
        d.copy_from_slice(src);
    }
}

/// The signal frame's XSAVE area, when it has one: (its base, its size, the components it
/// holds). The kernel writes `FP_XSTATE_MAGIC1` into the software-reserved bytes of the legacy
/// area and `FP_XSTATE_MAGIC2` right after the extended area.
unsafe fn xsave_area(fp: *mut libc::_libc_fpstate) -> Option<(*mut u8, usize, u64)> {
    const MAGIC1: u32 = 0x4650_5853;
    const MAGIC2: u32 = 0x4650_5845;
    let base = fp as *mut u8;
    if fp.is_null() || (base.add(464) as *const u32).read_unaligned() != MAGIC1 {
        return None;
    }
    let xfeatures = (base.add(472) as *const u64).read_unaligned();
    let size = (base.add(480) as *const u32).read_unaligned() as usize;
    if size < 576 || (base.add(size) as *const u32).read_unaligned() != MAGIC2 {
        return None;
    }
    Some((base, size, xfeatures))
}

/// A VEX or EVEX move between memory (`shadow`) and a vector register, the register read from
/// or written to the frame's legacy and XSAVE areas (all 512 bits: a load clears those above
/// it).
unsafe fn vector(a: &Access, uc: &mut libc::ucontext_t, shadow: usize) -> bool {
    let fp = uc.uc_mcontext.fpregs;
    let Some((base, size, xfeatures)) = xsave_area(fp) else {
        return false;
    };
    if a.insn.op_mask() != Register::None || a.insn.zeroing_masking() || a.insn.is_broadcast() {
        return false;
    }
    let (store, op) = match a.form {
        Form::StoreVec { .. } => (true, a.insn.op_register(1)),
        _ => (false, a.insn.op_register(0)),
    };
    let (v, x0, z31) = (op as u32, Register::XMM0 as u32, Register::ZMM31 as u32);
    if !(x0..=z31).contains(&v) {
        return false;
    }
    let x = ((v - x0) % 32) as usize;
    // Where each 16-byte lane of the register lives: (the XSAVE component holding it, None
    // for the legacy area, which is always live in a signal frame; the lane's bytes).
    let bv = base.add(512) as *mut u64;
    let lane = |l: usize| -> Option<(Option<u32>, *mut u8)> {
        let comp = |i: u32, at: usize| {
            let (off, len) = component(i);
            (off != 0 && xfeatures & (1 << i) != 0 && off + len <= size)
                .then(|| (Some(i), base.add(off + at)))
        };
        match (x < 16, l) {
            (true, 0) => (*fp)
                ._xmm
                .get_mut(x)
                .map(|r| (None, std::ptr::addr_of_mut!(*r) as *mut u8)),
            (true, 1) => comp(2, 16 * x),
            (true, _) => comp(6, 32 * x + 16 * (l - 2)),
            (false, _) => comp(7, 64 * (x - 16) + 16 * l),
        }
    };
    let live = |bit: Option<u32>| bit.is_none_or(|i| bv.read_unaligned() & (1 << i) != 0);
    let mut bytes = [0u8; 64];
    if store {
        for l in 0..a.size.div_ceil(16) {
            let Some((bit, p)) = lane(l) else {
                return false;
            };
            if live(bit) {
                std::ptr::copy_nonoverlapping(p, bytes.as_mut_ptr().add(16 * l), 16);
            }
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), shadow as *mut u8, a.size);
        return true;
    }
    std::ptr::copy_nonoverlapping(shadow as *const u8, bytes.as_mut_ptr(), a.size);
    // Every lane that must hold loaded bytes must exist; the lanes above are cleared where
    // the frame has them (a component the CPU lacks holds nothing to clear).
    if (0..a.size.div_ceil(16)).any(|l| lane(l).is_none()) {
        return false;
    }
    for l in 0..4 {
        let Some((bit, p)) = lane(l) else { continue };
        let src = bytes_at::<16>(&bytes, 16 * l);
        if !live(bit) {
            if src.iter().all(|&b| b == 0) {
                continue; // a component not live is all zeros already
            }
            // Making a component live means writing all of it: zeros but for this lane.
            let i = bit.unwrap_or(0);
            let (off, len) = component(i);
            std::ptr::write_bytes(base.add(off), 0, len);
            bv.write_unaligned(bv.read_unaligned() | (1 << i));
        }
        std::ptr::copy_nonoverlapping(src.as_ptr(), p, 16);
    }
    true
}

/// (size in bytes, form) of an instruction echo emulates.
fn form(code: Code) -> Option<(usize, Form)> {
    use Code::*;
    let load = |extend, sign| Form::LoadGpr { extend, sign };
    let sx = |aligned| Form::StoreXmm { aligned };
    let lx = |aligned, zero| Form::LoadXmm { aligned, zero };
    let vs = |aligned| Form::StoreVec { aligned };
    let vl = |aligned| Form::LoadVec { aligned };
    Some(match code {
        Mov_rm8_r8 => (1, Form::StoreGpr),
        Mov_rm16_r16 => (2, Form::StoreGpr),
        Mov_rm32_r32 => (4, Form::StoreGpr),
        Mov_rm64_r64 => (8, Form::StoreGpr),
        Mov_rm8_imm8 => (1, Form::StoreImm),
        Mov_rm16_imm16 => (2, Form::StoreImm),
        Mov_rm32_imm32 => (4, Form::StoreImm),
        Mov_rm64_imm32 => (8, Form::StoreImm),
        Mov_r8_rm8 => (1, load(false, false)),
        Mov_r16_rm16 => (2, load(false, false)),
        Mov_r32_rm32 => (4, load(false, false)),
        Mov_r64_rm64 => (8, load(false, false)),
        Movzx_r16_rm8 | Movzx_r32_rm8 | Movzx_r64_rm8 => (1, load(true, false)),
        Movzx_r16_rm16 | Movzx_r32_rm16 | Movzx_r64_rm16 => (2, load(true, false)),
        Movsx_r16_rm8 | Movsx_r32_rm8 | Movsx_r64_rm8 => (1, load(true, true)),
        Movsx_r16_rm16 | Movsx_r32_rm16 | Movsx_r64_rm16 => (2, load(true, true)),
        Movsxd_r64_rm32 => (4, load(true, true)),
        Movups_xmmm128_xmm | Movupd_xmmm128_xmm | Movdqu_xmmm128_xmm => (16, sx(false)),
        Movaps_xmmm128_xmm | Movapd_xmmm128_xmm | Movdqa_xmmm128_xmm => (16, sx(true)),
        Movss_xmmm32_xmm | Movd_rm32_xmm => (4, sx(false)),
        Movsd_xmmm64_xmm | Movq_rm64_xmm | Movq_xmmm64_xmm => (8, sx(false)),
        Movups_xmm_xmmm128 | Movupd_xmm_xmmm128 | Movdqu_xmm_xmmm128 => (16, lx(false, false)),
        Movaps_xmm_xmmm128 | Movapd_xmm_xmmm128 | Movdqa_xmm_xmmm128 => (16, lx(true, false)),
        Movss_xmm_xmmm32 | Movd_xmm_rm32 => (4, lx(false, true)),
        Movsd_xmm_xmmm64 | Movq_xmm_rm64 | Movq_xmm_xmmm64 => (8, lx(false, true)),
        VEX_Vmovups_xmmm128_xmm | VEX_Vmovupd_xmmm128_xmm | VEX_Vmovdqu_xmmm128_xmm => {
            (16, vs(false))
        }
        VEX_Vmovaps_xmmm128_xmm
        | VEX_Vmovapd_xmmm128_xmm
        | VEX_Vmovdqa_xmmm128_xmm
        | VEX_Vmovntps_m128_xmm
        | VEX_Vmovntpd_m128_xmm
        | VEX_Vmovntdq_m128_xmm => (16, vs(true)),
        VEX_Vmovups_ymmm256_ymm | VEX_Vmovupd_ymmm256_ymm | VEX_Vmovdqu_ymmm256_ymm => {
            (32, vs(false))
        }
        VEX_Vmovaps_ymmm256_ymm
        | VEX_Vmovapd_ymmm256_ymm
        | VEX_Vmovdqa_ymmm256_ymm
        | VEX_Vmovntps_m256_ymm
        | VEX_Vmovntpd_m256_ymm
        | VEX_Vmovntdq_m256_ymm => (32, vs(true)),
        VEX_Vmovss_m32_xmm | VEX_Vmovd_rm32_xmm => (4, vs(false)),
        VEX_Vmovsd_m64_xmm | VEX_Vmovq_rm64_xmm | VEX_Vmovq_xmmm64_xmm => (8, vs(false)),
        VEX_Vmovups_xmm_xmmm128 | VEX_Vmovupd_xmm_xmmm128 | VEX_Vmovdqu_xmm_xmmm128 => {
            (16, vl(false))
        }
        VEX_Vmovaps_xmm_xmmm128 | VEX_Vmovapd_xmm_xmmm128 | VEX_Vmovdqa_xmm_xmmm128 => {
            (16, vl(true))
        }
        VEX_Vmovups_ymm_ymmm256 | VEX_Vmovupd_ymm_ymmm256 | VEX_Vmovdqu_ymm_ymmm256 => {
            (32, vl(false))
        }
        VEX_Vmovaps_ymm_ymmm256 | VEX_Vmovapd_ymm_ymmm256 | VEX_Vmovdqa_ymm_ymmm256 => {
            (32, vl(true))
        }
        VEX_Vmovss_xmm_m32 | VEX_Vmovd_xmm_rm32 => (4, vl(false)),
        VEX_Vmovsd_xmm_m64 | VEX_Vmovq_xmm_rm64 | VEX_Vmovq_xmm_xmmm64 => (8, vl(false)),
        EVEX_Vmovss_m32_k1_xmm | EVEX_Vmovd_rm32_xmm => (4, vs(false)),
        EVEX_Vmovsd_m64_k1_xmm | EVEX_Vmovq_rm64_xmm | EVEX_Vmovq_xmmm64_xmm => (8, vs(false)),
        EVEX_Vmovups_xmmm128_k1z_xmm
        | EVEX_Vmovupd_xmmm128_k1z_xmm
        | EVEX_Vmovdqu32_xmmm128_k1z_xmm
        | EVEX_Vmovdqu64_xmmm128_k1z_xmm
        | EVEX_Vmovdqu8_xmmm128_k1z_xmm
        | EVEX_Vmovdqu16_xmmm128_k1z_xmm => (16, vs(false)),
        EVEX_Vmovaps_xmmm128_k1z_xmm
        | EVEX_Vmovapd_xmmm128_k1z_xmm
        | EVEX_Vmovntps_m128_xmm
        | EVEX_Vmovntpd_m128_xmm
        | EVEX_Vmovdqa32_xmmm128_k1z_xmm
        | EVEX_Vmovdqa64_xmmm128_k1z_xmm
        | EVEX_Vmovntdq_m128_xmm => (16, vs(true)),
        EVEX_Vmovups_ymmm256_k1z_ymm
        | EVEX_Vmovupd_ymmm256_k1z_ymm
        | EVEX_Vmovdqu32_ymmm256_k1z_ymm
        | EVEX_Vmovdqu64_ymmm256_k1z_ymm
        | EVEX_Vmovdqu8_ymmm256_k1z_ymm
        | EVEX_Vmovdqu16_ymmm256_k1z_ymm => (32, vs(false)),
        EVEX_Vmovaps_ymmm256_k1z_ymm
        | EVEX_Vmovapd_ymmm256_k1z_ymm
        | EVEX_Vmovntps_m256_ymm
        | EVEX_Vmovntpd_m256_ymm
        | EVEX_Vmovdqa32_ymmm256_k1z_ymm
        | EVEX_Vmovdqa64_ymmm256_k1z_ymm
        | EVEX_Vmovntdq_m256_ymm => (32, vs(true)),
        EVEX_Vmovups_zmmm512_k1z_zmm
        | EVEX_Vmovupd_zmmm512_k1z_zmm
        | EVEX_Vmovdqu32_zmmm512_k1z_zmm
        | EVEX_Vmovdqu64_zmmm512_k1z_zmm
        | EVEX_Vmovdqu8_zmmm512_k1z_zmm
        | EVEX_Vmovdqu16_zmmm512_k1z_zmm => (64, vs(false)),
        EVEX_Vmovaps_zmmm512_k1z_zmm
        | EVEX_Vmovapd_zmmm512_k1z_zmm
        | EVEX_Vmovntps_m512_zmm
        | EVEX_Vmovntpd_m512_zmm
        | EVEX_Vmovdqa32_zmmm512_k1z_zmm
        | EVEX_Vmovdqa64_zmmm512_k1z_zmm
        | EVEX_Vmovntdq_m512_zmm => (64, vs(true)),
        EVEX_Vmovss_xmm_k1z_m32 | EVEX_Vmovd_xmm_rm32 => (4, vl(false)),
        EVEX_Vmovsd_xmm_k1z_m64 | EVEX_Vmovq_xmm_rm64 | EVEX_Vmovq_xmm_xmmm64 => (8, vl(false)),
        EVEX_Vmovups_xmm_k1z_xmmm128
        | EVEX_Vmovupd_xmm_k1z_xmmm128
        | EVEX_Vmovdqu32_xmm_k1z_xmmm128
        | EVEX_Vmovdqu64_xmm_k1z_xmmm128
        | EVEX_Vmovdqu8_xmm_k1z_xmmm128
        | EVEX_Vmovdqu16_xmm_k1z_xmmm128 => (16, vl(false)),
        EVEX_Vmovaps_xmm_k1z_xmmm128
        | EVEX_Vmovapd_xmm_k1z_xmmm128
        | EVEX_Vmovdqa32_xmm_k1z_xmmm128
        | EVEX_Vmovdqa64_xmm_k1z_xmmm128 => (16, vl(true)),
        EVEX_Vmovups_ymm_k1z_ymmm256
        | EVEX_Vmovupd_ymm_k1z_ymmm256
        | EVEX_Vmovdqu32_ymm_k1z_ymmm256
        | EVEX_Vmovdqu64_ymm_k1z_ymmm256
        | EVEX_Vmovdqu8_ymm_k1z_ymmm256
        | EVEX_Vmovdqu16_ymm_k1z_ymmm256 => (32, vl(false)),
        EVEX_Vmovaps_ymm_k1z_ymmm256
        | EVEX_Vmovapd_ymm_k1z_ymmm256
        | EVEX_Vmovdqa32_ymm_k1z_ymmm256
        | EVEX_Vmovdqa64_ymm_k1z_ymmm256 => (32, vl(true)),
        EVEX_Vmovups_zmm_k1z_zmmm512
        | EVEX_Vmovupd_zmm_k1z_zmmm512
        | EVEX_Vmovdqu32_zmm_k1z_zmmm512
        | EVEX_Vmovdqu64_zmm_k1z_zmmm512
        | EVEX_Vmovdqu8_zmm_k1z_zmmm512
        | EVEX_Vmovdqu16_zmm_k1z_zmmm512 => (64, vl(false)),
        EVEX_Vmovaps_zmm_k1z_zmmm512
        | EVEX_Vmovapd_zmm_k1z_zmmm512
        | EVEX_Vmovdqa32_zmm_k1z_zmmm512
        | EVEX_Vmovdqa64_zmm_k1z_zmmm512 => (64, vl(true)),
        _ => return None,
    })
}

/// The `gregs` index of general-purpose register number `n` (0 = rax, 1 = rcx, ... 15 = r15,
/// the encoding's order).
fn greg(n: u32) -> usize {
    const G: [libc::c_int; 16] = [
        libc::REG_RAX,
        libc::REG_RCX,
        libc::REG_RDX,
        libc::REG_RBX,
        libc::REG_RSP,
        libc::REG_RBP,
        libc::REG_RSI,
        libc::REG_RDI,
        libc::REG_R8,
        libc::REG_R9,
        libc::REG_R10,
        libc::REG_R11,
        libc::REG_R12,
        libc::REG_R13,
        libc::REG_R14,
        libc::REG_R15,
    ];
    G.get(n as usize).copied().unwrap_or(libc::REG_RAX) as usize
}

/// A general-purpose register as (gregs index, bit shift, width in bytes): `AH` is bits 8..16
/// of rax.
fn gpr(r: Register) -> Option<(usize, u32, usize)> {
    let v = r as u32;
    let (al, ah, spl, ax, eax, rax) = (
        Register::AL as u32,
        Register::AH as u32,
        Register::SPL as u32,
        Register::AX as u32,
        Register::EAX as u32,
        Register::RAX as u32,
    );
    Some(if (al..ah).contains(&v) {
        (greg(v - al), 0, 1)
    } else if (ah..spl).contains(&v) {
        (greg(v - ah), 8, 1)
    } else if (spl..ax).contains(&v) {
        (greg(v - spl + 4), 0, 1)
    } else if (ax..eax).contains(&v) {
        (greg(v - ax), 0, 2)
    } else if (eax..rax).contains(&v) {
        (greg(v - eax), 0, 4)
    } else if (rax..rax + 16).contains(&v) {
        (greg(v - rax), 0, 8)
    } else {
        return None;
    })
}

fn xmm(r: Register) -> Option<usize> {
    let (v, x0) = (r as u32, Register::XMM0 as u32);
    (x0..x0 + 16).contains(&v).then(|| (v - x0) as usize)
}

fn mask(size: usize) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size)) - 1
    }
}

unsafe fn read_gpr(uc: &libc::ucontext_t, r: Register) -> Option<u64> {
    let (g, shift, size) = gpr(r)?;
    Some((reg(uc, g) as u64 >> shift) & mask(size))
}

/// Code pages read through the pipe in this window: the rest of the window reads them directly
/// (the pipe's five system calls were two thirds of an emulation's cost). Forgotten at every
/// window boundary ([`forget_code_pages`]), so each page is proven readable again in each window;
/// a page made unreadable within a window while code on it runs (execute-only, a protection key)
/// is the case this trusts not to happen.
static CODE_PAGES: [AtomicUsize; 16] = [const { AtomicUsize::new(0) }; 16];

/// Normal code, at a window boundary.
pub fn forget_code_pages() {
    for p in &CODE_PAGES {
        p.store(0, Ordering::Relaxed);
    }
}

/// The bytes at `rip`, as many of `buf` as can be read on its page and, for an instruction that
/// crosses into the next page, through the pipe.
unsafe fn code(rip: usize, buf: &mut [u8; 15]) -> usize {
    let page = rip & !4095;
    let on_page = (page + 4096 - rip).min(buf.len());
    let Some(slot) = CODE_PAGES.get((page >> 12) % CODE_PAGES.len()) else {
        return 0;
    };
    if on_page == buf.len() && slot.load(Ordering::Relaxed) == page {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = std::ptr::read_volatile((rip + i) as *const u8);
        }
        CODE_DIRECT.fetch_add(1, Ordering::Relaxed);
        return buf.len();
    }
    let n = crate::hostmem::fault::code::bytes_at(rip, buf);
    if n >= on_page {
        slot.store(page, Ordering::Relaxed);
    }
    n
}

/// Instructions read directly from a page proven readable in this window (for tests).
pub static CODE_DIRECT: AtomicUsize = AtomicUsize::new(0);

/// The access of the instruction at the faulting context's rip, when it is one echo emulates.
///
/// # Safety
/// `uc` is the context the kernel passed to a SIGSEGV handler.
pub unsafe fn decode(uc: &libc::ucontext_t, page: usize) -> Option<Access> {
    if reg(uc, libc::REG_EFL as usize) & super::step::TF != 0 {
        return None; // someone is stepping this thread: let the instruction run
    }
    let rip = reg(uc, libc::REG_RIP as usize) as usize;
    let mut buf = [0u8; 15];
    let n = code(rip, &mut buf);
    if n == 0 {
        return None;
    }
    let mut d = Decoder::with_ip(
        64,
        buf.get(..n).unwrap_or(&[]),
        rip as u64,
        DecoderOptions::NONE,
    );
    let insn = d.decode();
    if insn.is_invalid() || insn.has_lock_prefix() || insn.has_repne_prefix() {
        return None;
    }
    if insn.has_rep_prefix() {
        return string(uc, page, insn);
    }
    let (size, form) = form(insn.code())?;
    let mem = (0..insn.op_count()).find(|&i| insn.op_kind(i) == OpKind::Memory)?;
    let write = matches!(
        form,
        Form::StoreGpr | Form::StoreImm | Form::StoreXmm { .. } | Form::StoreVec { .. }
    );
    // A store's memory operand is the first, a load's the second.
    if mem != if write { 0 } else { 1 } {
        return None;
    }
    if !matches!(
        insn.memory_segment(),
        Register::DS | Register::SS | Register::ES | Register::CS
    ) {
        return None; // fs/gs: thread-local data, never a Vulkan mapping
    }
    let ea = insn.virtual_address(mem, 0, |r, _, _| match r {
        Register::DS | Register::SS | Register::ES | Register::CS => Some(0),
        _ => read_gpr(uc, r),
    })? as usize;
    if let Form::StoreXmm { aligned: true }
    | Form::LoadXmm { aligned: true, .. }
    | Form::StoreVec { aligned: true }
    | Form::LoadVec { aligned: true } = form
    {
        if ea % size.max(16) != 0 {
            return None; // the hardware raises #GP: let it
        }
    }
    Some(Access {
        ea,
        size,
        write,
        other: 0,
        form,
        insn,
    })
}

/// `rep movsb` / `rep stosb` with one side on `page`: the part of it that stays on that page
/// (and, for a move, on one page of the other side).
unsafe fn string(uc: &libc::ucontext_t, page: usize, insn: Instruction) -> Option<Access> {
    const DF: libc::greg_t = 0x400;
    let g = |r: libc::c_int| reg(uc, r as usize) as usize;
    let (rsi, rdi, rcx) = (g(libc::REG_RSI), g(libc::REG_RDI), g(libc::REG_RCX));
    if g(libc::REG_EFL) & DF as usize != 0 || rcx == 0 || insn.op0_kind() != OpKind::MemoryESRDI {
        return None;
    }
    let on = |a: usize| a & !4095 == page;
    let room = |a: usize| 4096 - (a & 4095);
    let (form, ea, other, write) = match insn.code() {
        Code::Movsb_m8_m8 => {
            if insn.op1_kind() != OpKind::MemorySegRSI
                || !matches!(
                    insn.memory_segment(),
                    Register::DS | Register::ES | Register::SS
                )
            {
                return None;
            }
            if on(rdi) {
                (Form::RepMovsb, rdi, rsi, true)
            } else if on(rsi) {
                (Form::RepMovsb, rsi, rdi, false)
            } else {
                return None;
            }
        }
        Code::Stosb_m8_AL if on(rdi) => (Form::RepStosb, rdi, 0, true),
        _ => return None,
    };
    let mut size = rcx.min(room(ea));
    if form == Form::RepMovsb {
        size = size.min(room(other));
        // Overlapping sides: a partial copy done twice would not be the same.
        if !(other + size <= ea || ea + size <= other) {
            return None;
        }
    }
    Some(Access {
        ea,
        size,
        write,
        other,
        form,
        insn,
    })
}

unsafe fn load(p: *const u8, size: usize, out: &mut [u8; 16]) {
    match size {
        1 => out[0] = std::ptr::read_volatile(p),
        2 if p as usize % 2 == 0 => {
            out[..2].copy_from_slice(&std::ptr::read_volatile(p as *const u16).to_ne_bytes())
        }
        4 if p as usize % 4 == 0 => {
            out[..4].copy_from_slice(&std::ptr::read_volatile(p as *const u32).to_ne_bytes())
        }
        8 if p as usize % 8 == 0 => {
            out[..8].copy_from_slice(&std::ptr::read_volatile(p as *const u64).to_ne_bytes())
        }
        _ => std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), size),
    }
}

unsafe fn store(p: *mut u8, size: usize, v: &[u8; 16]) {
    let word = |n: usize| {
        let mut b = [0u8; 8];
        put_at(&mut b, 0, v.get(..n).unwrap_or(&[]));
        u64::from_ne_bytes(b)
    };
    match size {
        1 => std::ptr::write_volatile(p, v[0]),
        2 if p as usize % 2 == 0 => std::ptr::write_volatile(p as *mut u16, word(2) as u16),
        4 if p as usize % 4 == 0 => std::ptr::write_volatile(p as *mut u32, word(4) as u32),
        8 if p as usize % 8 == 0 => std::ptr::write_volatile(p as *mut u64, word(8)),
        _ => std::ptr::copy_nonoverlapping(v.as_ptr(), p, size),
    }
}

/// Do access `a` with its bytes at `shadow` (the same bytes as `a.ea`, through the other view),
/// update the saved registers and step rip past the instruction. False (nothing done) when a
/// register it names is not one handled here.
///
/// # Safety
/// `uc` is the faulting context `a` was decoded from; `shadow .. shadow + a.size` is mapped,
/// readable and writable.
pub unsafe fn perform(a: &Access, uc: &mut libc::ucontext_t, shadow: usize) -> bool {
    let insn = &a.insn;
    let fp = uc.uc_mcontext.fpregs;
    let mut bytes = [0u8; 16];
    match a.form {
        Form::StoreGpr => {
            let Some(v) = read_gpr(uc, insn.op_register(1)) else {
                return false;
            };
            bytes[..8].copy_from_slice(&v.to_ne_bytes());
            store(shadow as *mut u8, a.size, &bytes);
        }
        Form::StoreImm => {
            bytes[..8].copy_from_slice(&insn.immediate(1).to_ne_bytes());
            store(shadow as *mut u8, a.size, &bytes);
        }
        Form::StoreXmm { .. } => {
            let Some(x) = xmm(insn.op_register(1)) else {
                return false;
            };
            if fp.is_null() {
                return false;
            }
            let Some(r) = (*fp)._xmm.get(x) else {
                return false;
            };
            for (i, e) in r.element.iter().enumerate() {
                put_at(&mut bytes, 4 * i, &e.to_ne_bytes());
            }
            store(shadow as *mut u8, a.size, &bytes);
        }
        Form::LoadGpr { extend, sign } => {
            let Some((g, shift, dsize)) = gpr(insn.op_register(0)) else {
                return false;
            };
            load(shadow as *const u8, a.size, &mut bytes);
            let mut v = u64::from_ne_bytes(bytes_at::<8>(&bytes, 0)) & mask(a.size);
            if extend && sign && a.size < 8 {
                let bits = 64 - 8 * a.size as u32;
                v = (((v << bits) as i64) >> bits) as u64;
            }
            let old = reg(uc, g) as u64;
            // A 32-bit destination clears the upper half; 8- and 16-bit ones keep the rest.
            let new = match dsize {
                8 => v,
                4 => v & mask(4),
                _ => (old & !(mask(dsize) << shift)) | ((v & mask(dsize)) << shift),
            };
            set_reg(uc, g, new as libc::greg_t);
        }
        Form::LoadXmm { zero, .. } => {
            let Some(x) = xmm(insn.op_register(0)) else {
                return false;
            };
            if fp.is_null() {
                return false;
            }
            let Some(r) = (*fp)._xmm.get_mut(x) else {
                return false;
            };
            let lanes = &mut r.element;
            if !zero {
                for (i, e) in lanes.iter().enumerate() {
                    put_at(&mut bytes, 4 * i, &e.to_ne_bytes());
                }
            }
            load(shadow as *const u8, a.size, &mut bytes);
            for (i, e) in lanes.iter_mut().enumerate() {
                *e = u32::from_ne_bytes(bytes_at::<4>(&bytes, 4 * i));
            }
        }
        Form::StoreVec { .. } | Form::LoadVec { .. } => {
            if !vector(a, uc, shadow) {
                return false;
            }
        }
        Form::RepMovsb | Form::RepStosb => {
            // The other side is the application's memory: through the pipe, so what it may
            // not touch is an error here, and the CPU's own fault when it runs the rest.
            let done = match (a.form, a.write) {
                (Form::RepStosb, _) => {
                    let al = reg(uc, libc::REG_RAX as usize) as u8;
                    std::ptr::write_bytes(shadow as *mut u8, al, a.size);
                    true
                }
                (_, true) => crate::hostmem::fault::code::copy(a.other, shadow, a.size),
                (_, false) => crate::hostmem::fault::code::copy(shadow, a.other, a.size),
            };
            if !done {
                return false;
            }
            let (rsi, rdi, rcx) = (
                libc::REG_RSI as usize,
                libc::REG_RDI as usize,
                libc::REG_RCX as usize,
            );
            if a.form == Form::RepMovsb {
                set_reg(uc, rsi, reg(uc, rsi).wrapping_add(a.size as i64));
            }
            set_reg(uc, rdi, reg(uc, rdi).wrapping_add(a.size as i64));
            let left = reg(uc, rcx).wrapping_sub(a.size as i64);
            set_reg(uc, rcx, left);
            if left != 0 {
                return true; // rip stays: the CPU does the rest (and faults again if need be)
            }
        }
    }
    set_reg(uc, libc::REG_RIP as usize, insn.next_ip() as libc::greg_t);
    true
}
