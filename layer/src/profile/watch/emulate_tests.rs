//! Emulation's tests (x86_64): accesses on a page shared with a buffer still unseen are done by
//! the handler through the double mapping's other view, every form of move the decoder knows
//! matches the CPU, string moves a page at a time, a neighbour reached is recorded, what is not
//! emulated is stepped, and two host threads stay exact.

use super::prot::page_size;
use super::tests::{assert_child_ok_in, in_child, kinds, Pages};
use super::*;
use echo_analyzer::trace::Access;

fn assert_child_ok(name: &str) -> String {
    assert_child_ok_in("emulate_tests", name)
}

/// A double mapping with A = [0, ps + 256) (id 1) and B = [ps + 256, 3 ps) (id 2) armed
/// in the application's view, the driver's view as their shadow: page 1 holds both.
fn shared_pair() -> crate::hostmem::memfd::DoubleMap {
    let m = crate::hostmem::memfd::DoubleMap::new(3 * page_size(), page_size()).unwrap();
    arm_a(&m);
    arm_b(&m);
    m
}

/// (Re-)arm A or B of [`shared_pair`]'s mapping: a new window for it.
fn arm_a(m: &crate::hostmem::memfd::DoubleMap) {
    arm_shadowed(1, m.app_ptr(), page_size() + 256, Some(m.driver_ptr())).unwrap();
}
fn arm_b(m: &crate::hostmem::memfd::DoubleMap) {
    let ps = page_size();
    let at = |p: *mut u8| unsafe { p.add(ps + 256) };
    arm_shadowed(2, at(m.app_ptr()), 2 * ps - 256, Some(at(m.driver_ptr()))).unwrap();
}

/// Run `forms` once on plain memory (aligned to `align`) and once on B's bytes of a fresh
/// [`shared_pair`] at page 1 + 512 (A unseen, so every access there faults): their results,
/// and the first `len` bytes each left (the shared ones read through the driver's view).
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

/// What one access on a shared page costs, emulated and stepped (printed, not asserted:
/// timing is the benchmarks' business; `cargo test -p vk-layer-echo --release --lib
/// shared_page_access_cost -- --nocapture`).
#[test]
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
