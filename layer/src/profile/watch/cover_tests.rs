//! Exact host writes (issue 54): the coverage map, and armed exact slots recording the bytes
//! real stores wrote — same-value rewrites included, every page touched but not every byte
//! not whole, string moves, stores echo does not emulate falling back to "any part".

use super::cover::{self, all_set, mark, runs, Cover};
use super::prot::page_size;
use super::tests::{assert_child_ok_in, in_child};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use super::tests::{kinds as watch_kinds, Pages};
use super::*;
use echo_analyzer::trace::Access;

#[test]
fn marks_and_runs_are_exact_at_word_edges() {
    let c = Cover::new(1000);
    assert!(c.bytes() >= 1000);
    assert!(runs(&c.words, 1000).is_empty());
    mark(&c.words, 3, 5);
    mark(&c.words, 60, 70); // across a word
    mark(&c.words, 128, 192); // one whole word
    mark(&c.words, 192, 200); // adjacent: one run
    mark(&c.words, 990, 1000);
    assert_eq!(
        runs(&c.words, 1000),
        vec![(3, 5), (60, 70), (128, 200), (990, 1000)]
    );
    assert!(all_set(&c.words, 128, 200));
    assert!(!all_set(&c.words, 127, 200));
    assert!(all_set(&c.words, 5, 5), "an empty range is covered");
    // Past the map: never claimed.
    mark(&c.words, 5000, 6000);
    assert!(!all_set(&c.words, 5000, 5001));
    c.clear();
    assert!(runs(&c.words, 1000).is_empty());
    // Everything.
    mark(&c.words, 0, 1000);
    assert_eq!(runs(&c.words, 1000), vec![(0, 1000)]);
}

#[test]
fn runs_stop_at_the_length() {
    let c = Cover::new(100);
    mark(&c.words, 0, 128); // the map's last word holds bits past the slot
    assert_eq!(runs(&c.words, 100), vec![(0, 100)]);
    let c = Cover::new(4096);
    for i in (0..4096).step_by(8) {
        mark(&c.words, i, i + 4); // every other 4 bytes: every page touched, not every byte
    }
    let r = runs(&c.words, 4096);
    assert_eq!(r.len(), 512);
    assert!(!all_set(&c.words, 0, 4096));
}

#[test]
fn why_round_trips() {
    for w in [
        cover::Why::Exact,
        cover::Why::Decode,
        cover::Why::NoShadow,
        cover::Why::Platform,
        cover::Why::Lost,
        cover::Why::Busy,
        cover::Why::Budget,
    ] {
        assert_eq!(cover::Why::from_u8(w as u8), w);
        assert!(!w.text().is_empty());
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod real {
    use super::*;

    fn assert_child_ok(name: &str) -> String {
        assert_child_ok_in("cover_tests::real", name)
    }

    /// A double mapping of `pages` pages, its application view armed exact as buffer `id`
    /// (whole range), the driver's view its shadow.
    fn exact(id: u64, pages: usize) -> crate::hostmem::memfd::DoubleMap {
        let m = crate::hostmem::memfd::DoubleMap::new(pages * page_size(), page_size()).unwrap();
        arm_exact(
            id,
            m.app_ptr(),
            pages * page_size(),
            Some(m.driver_ptr()),
            true,
        )
        .unwrap();
        m
    }

    fn kinds() -> Vec<(u64, Access)> {
        watch_kinds()
    }

    /// The run's store budget (`cover::MAX_STORES`): once exact stores reach it, the window
    /// falls back to "any part" and its range opens, so the rest of its stores cost no fault;
    /// windows within it stay exact. Fails if the budget is not counted, or the range stays
    /// closed.
    #[test]
    fn a_window_past_the_store_budget_falls_back_and_opens() {
        if !in_child() {
            assert_child_ok("a_window_past_the_store_budget_falls_back_and_opens");
            return;
        }
        let ps = page_size();
        cover::MAX_STORES.store(64, std::sync::atomic::Ordering::Relaxed);
        let m = exact(41, 2);
        let p = m.app_ptr() as *mut u32;
        // Window 1: 50 stores, within the budget: exact.
        for i in 0..50 {
            unsafe { std::ptr::write_volatile(p.add(i), 7) };
        }
        arm_exact(41, m.app_ptr(), 2 * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(41), Some(Ok(vec![(0, 200)])));
        assert!(!cover::spent());
        let before = stats().exact_stores;
        // Window 2: 1000 stores; the budget has 14 left.
        for i in 0..1000 {
            unsafe { std::ptr::write_volatile(p.add(i), i as u32) };
        }
        let spent = stats().exact_stores - before;
        assert!(
            (14..=20).contains(&spent),
            "{spent} stores emulated: the rest must run without a fault once the budget is spent"
        );
        assert!(cover::spent());
        // Every byte is where the driver reads it.
        for i in 0..1000 {
            assert_eq!(
                unsafe { std::ptr::read_volatile((m.driver_ptr() as *const u32).add(i)) },
                i as u32
            );
        }
        arm_exact(41, m.app_ptr(), 2 * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(41), Some(Err(cover::Why::Budget)));
        cover::MAX_STORES.store(
            cover::DEFAULT_MAX_STORES,
            std::sync::atomic::Ordering::Relaxed,
        );
        println!("CHILD-OK ({spent} stores emulated)");
    }

    #[test]
    fn every_store_is_recorded_and_same_value_rewrites_count() {
        if !in_child() {
            assert_child_ok("every_store_is_recorded_and_same_value_rewrites_count");
            return;
        }
        let ps = page_size();
        let m = exact(31, 4);
        let p = m.app_ptr() as *mut u32;
        // Window 1: the host writes words 0..100 with the value they hold (zeros): content
        // comparison would see nothing; the map sees 400 bytes.
        for i in 0..100 {
            unsafe { std::ptr::write_volatile(p.add(i), 0) };
        }
        assert_eq!(kinds(), vec![(31, Access::Write)]);
        // Reads of the window's own bytes run (the range is readable once written).
        assert_eq!(unsafe { std::ptr::read_volatile(p.add(5)) }, 0);
        // The bytes are where the driver reads them.
        unsafe { std::ptr::write_volatile(p.add(7), 0xdead_beef) };
        assert_eq!(
            unsafe { std::ptr::read_volatile((m.driver_ptr() as *const u32).add(7)) },
            0xdead_beef
        );
        // Window 2: the arm closes window 1 and keeps what it saw; every page touched, not
        // every byte.
        arm_exact(31, m.app_ptr(), 4 * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(31), Some(Ok(vec![(0, 400)])));
        assert_eq!(take_writes(31), None, "window 2 not written yet");
        for page in 0..4 {
            unsafe { std::ptr::write_volatile(p.add(page * ps / 4 + 1), 1) };
        }
        // Window 3: every byte, with 16-byte stores: each page opens once it is covered, so
        // the faults are those of its stores until then.
        arm_exact(31, m.app_ptr(), 4 * ps, Some(m.driver_ptr()), true).unwrap();
        let w = take_writes(31).unwrap().unwrap();
        assert_eq!(
            w,
            (0..4).map(|k| (k * ps + 4, k * ps + 8)).collect::<Vec<_>>()
        );
        let f0 = stats().faults;
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_set1_epi32, _mm_storeu_si128};
            let v = _mm_set1_epi32(0x3f80_0000);
            for i in (0..4 * ps).step_by(16) {
                _mm_storeu_si128(m.app_ptr().add(i) as *mut __m128i, v);
            }
            // A second pass over covered pages: no faults.
            let f1 = stats().faults;
            for i in (0..4 * ps).step_by(16) {
                _mm_storeu_si128(m.app_ptr().add(i) as *mut __m128i, v);
            }
            assert_eq!(stats().faults, f1, "covered pages are open");
        }
        // One fault per store until its page is covered (a debug build may split a 16-byte
        // store into two 8-byte ones).
        let n = stats().faults - f0;
        assert!(
            n >= (4 * ps / 16) as u64 && n <= (4 * ps / 8) as u64,
            "{n} faults"
        );
        assert_eq!(take_writes(31), Some(Ok(vec![(0, 4 * ps)])));
        let drv = unsafe { std::slice::from_raw_parts(m.driver_ptr() as *const u32, ps) };
        assert!(drv.iter().all(|&x| x == 0x3f80_0000));
        disarm(31);
        println!("CHILD-OK");
    }

    #[test]
    fn string_stores_are_recorded_a_page_at_a_time() {
        if !in_child() {
            assert_child_ok("string_stores_are_recorded_a_page_at_a_time");
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
        let m = exact(32, 8);
        let src: Vec<u8> = (0..8 * ps).map(|i| (i * 7) as u8).collect();
        unsafe { movsb(m.app_ptr().add(100), src.as_ptr(), 5 * ps) };
        let drv = unsafe { std::slice::from_raw_parts(m.driver_ptr().add(100), 5 * ps) };
        assert_eq!(drv, &src[..5 * ps]);
        arm_exact(32, m.app_ptr(), 8 * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(32), Some(Ok(vec![(100, 100 + 5 * ps)])));
        unsafe { stosb(m.app_ptr().add(3), 9, 2 * ps) };
        assert_eq!(take_writes(32), Some(Ok(vec![(3, 3 + 2 * ps)])));
        disarm(32);
        println!("CHILD-OK");
    }

    /// A window's cost is judged from its first stores (`cover::too_dear`): 4-byte stores over a
    /// range that would take more than an eighth of the run's budget give up after
    /// `PROBE_STORES` of them (the range opens, the window is "any part", the bytes all reach
    /// the driver's view); a `rep movsb` over the same range (a page a store) stays exact, and
    /// so do small stores over a small range. Fails if the rate is not judged, or judged wrong.
    #[test]
    fn a_window_too_dear_at_its_rate_gives_up_early() {
        if !in_child() {
            assert_child_ok("a_window_too_dear_at_its_rate_gives_up_early");
            return;
        }
        let ps = page_size();
        let pages = 16;
        // Cap: 1,000 stores a window; the range takes 16 × 1024 of 4 bytes.
        cover::MAX_STORES.store(8_000, std::sync::atomic::Ordering::Relaxed);
        let m = exact(43, pages);
        let p = m.app_ptr() as *mut u32;
        let words = pages * ps / 4;
        let before = stats().exact_stores;
        for i in 0..words {
            unsafe { std::ptr::write_volatile(p.add(i), i as u32 ^ 0x5a5a) };
        }
        let spent = stats().exact_stores - before;
        assert_eq!(
            spent,
            cover::PROBE_STORES,
            "the window must give up at its first judgement"
        );
        for i in 0..words {
            assert_eq!(
                unsafe { std::ptr::read_volatile((m.driver_ptr() as *const u32).add(i)) },
                i as u32 ^ 0x5a5a
            );
        }
        arm_exact(43, m.app_ptr(), pages * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(43), Some(Err(cover::Why::Budget)));
        // The same range by `rep movsb`: a few stores a page, exact.
        let src: Vec<u8> = (0..pages * ps).map(|i| (i * 3) as u8).collect();
        let before = stats().exact_stores;
        unsafe {
            std::arch::asm!("rep movsb", inout("rdi") m.app_ptr() => _,
                inout("rsi") src.as_ptr() => _, inout("rcx") pages * ps => _, options(nostack));
        }
        // A page a store (two where the source crosses a page inside it).
        let moved = stats().exact_stores - before;
        assert!(
            (pages as u64..=2 * pages as u64).contains(&moved),
            "{moved} stores"
        );
        arm_exact(43, m.app_ptr(), pages * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(43), Some(Ok(vec![(0, pages * ps)])));
        disarm(43);
        // 4-byte stores over a one-page range (1,024 of them; the cap 2,048): exact.
        cover::MAX_STORES.store(8 * 2048, std::sync::atomic::Ordering::Relaxed);
        let one = exact(44, 1);
        let q = one.app_ptr() as *mut u32;
        for i in 0..ps / 4 {
            unsafe { std::ptr::write_volatile(q.add(i), 1) };
        }
        arm_exact(44, one.app_ptr(), ps, Some(one.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(44), Some(Ok(vec![(0, ps)])));
        disarm(44);
        cover::MAX_STORES.store(
            cover::DEFAULT_MAX_STORES,
            std::sync::atomic::Ordering::Relaxed,
        );
        println!("CHILD-OK ({spent} stores before giving up)");
    }

    /// A host thread writes every word once while the main thread closes window after window
    /// (as another thread's submissions do): each store is in exactly one window's writes —
    /// none lost at a boundary, none in two.
    #[test]
    fn a_store_racing_a_window_boundary_is_in_exactly_one_window() {
        if !in_child() {
            assert_child_ok("a_store_racing_a_window_boundary_is_in_exactly_one_window");
            return;
        }
        let ps = page_size();
        let pages = 16;
        let m = exact(35, pages);
        let words = pages * ps / 4;
        let base = m.app_ptr() as usize;
        let writer = std::thread::spawn(move || {
            for i in 0..words {
                unsafe { std::ptr::write_volatile((base as *mut u32).add(i), i as u32) };
            }
        });
        let mut seen: Vec<(usize, usize)> = Vec::new();
        let mut windows = 0;
        loop {
            let done = writer.is_finished();
            arm_exact(35, m.app_ptr(), pages * ps, Some(m.driver_ptr()), true).unwrap();
            windows += 1;
            if let Some(w) = take_writes(35) {
                seen.extend(w.expect("every window exact"));
            }
            if done {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        writer.join().unwrap();
        seen.sort_unstable();
        let mut at = 0;
        for &(a, b) in &seen {
            assert_eq!(
                a, at,
                "a gap or an overlap at {a} ({windows} windows): {seen:?}"
            );
            at = b;
        }
        assert_eq!(at, pages * ps, "every byte in some window");
        let drv = unsafe { std::slice::from_raw_parts(m.driver_ptr() as *const u32, words) };
        assert!(drv.iter().enumerate().all(|(i, &v)| v == i as u32));
        println!("CHILD-OK ({windows} windows)");
        disarm(35);
    }

    #[test]
    fn a_store_echo_does_not_emulate_falls_back_to_any() {
        if !in_child() {
            assert_child_ok("a_store_echo_does_not_emulate_falls_back_to_any");
            return;
        }
        let ps = page_size();
        let m = exact(33, 2);
        unsafe { std::ptr::write_volatile(m.app_ptr().add(8), 1u8) };
        // A read-modify-write (`add [rdi], 1`): not a plain move.
        unsafe {
            std::arch::asm!("add dword ptr [rdi], 1", in("rdi") m.app_ptr().add(64),
                options(nostack))
        };
        assert_eq!(unsafe { std::ptr::read_volatile(m.app_ptr().add(64)) }, 1);
        // The next window is exact again.
        arm_exact(33, m.app_ptr(), 2 * ps, Some(m.driver_ptr()), true).unwrap();
        assert_eq!(take_writes(33), Some(Err(cover::Why::Decode)));
        unsafe { std::ptr::write_volatile(m.app_ptr().add(ps), 2u8) };
        assert_eq!(take_writes(33), Some(Ok(vec![(ps, ps + 1)])));
        // Without another view nothing can be emulated: "any part" from the arm on.
        let plain = Pages::new(2);
        arm_exact(34, plain.p, plain.len, None, true).unwrap();
        unsafe { std::ptr::write_volatile(plain.p.add(3), 1u8) };
        disarm(34);
        assert_eq!(
            take_writes(34),
            Some(Err(cover::Why::NoShadow)),
            "kept by the disarm"
        );
        disarm(33);
        println!("CHILD-OK");
    }
}
