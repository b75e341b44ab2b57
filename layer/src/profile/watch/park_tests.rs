//! Parking's tests: a double mapping's range armed by moving its page tables aside is watched as
//! before, keeps its bytes, and meets neighbours armed over it; what it saves.

use super::prot::page_size;
use super::tests::{assert_child_ok_in, drained, in_child};
use super::*;
use echo_analyzer::trace::Access;

fn assert_child_ok(name: &str) -> String {
    assert_child_ok_in("park_tests", name)
}

fn accesses() -> Vec<(u64, Access)> {
    drained().into_iter().map(|e| (e.0, e.1)).collect()
}

/// A double mapping's range is armed by parking its page tables: every window's first read
/// and first write are still recorded, a range parked writable comes back read-only after
/// a read (so the write after it is recorded too), the bytes are the driver view's
/// throughout, and disarm leaves it open.
#[test]
fn parked_ranges_are_watched_and_keep_their_bytes() {
    if !in_child() {
        assert_child_ok("parked_ranges_are_watched_and_keep_their_bytes");
        return;
    }
    let ps = page_size();
    let m = crate::hostmem::memfd::DoubleMap::new(8 * ps, ps).unwrap();
    let (app, drv) = (m.app_ptr(), m.driver_ptr());
    let len = 8 * ps;
    let arm = || arm_shadowed(21, app, len, Some(drv)).unwrap();
    let rd = |o: usize| unsafe { std::ptr::read_volatile(app.add(o)) };
    let wr = |o: usize, v: u8| unsafe { std::ptr::write_volatile(app.add(o), v) };
    // Window 1: a write first.
    arm();
    assert_eq!(stats().parked, 1, "a double mapping's range is parked");
    wr(100, 7);
    wr(5 * ps, 8);
    assert_eq!(accesses(), vec![(21, Access::Write)]);
    assert_eq!(stats().unparked, 1);
    assert_eq!(unsafe { *drv.add(100) }, 7, "the write reached the memory");
    // Window 2: the driver writes; the application reads, then writes.
    arm();
    unsafe { *drv.add(200) = 9 };
    assert_eq!(rd(200), 9, "a parked range shows the driver's bytes");
    assert_eq!(rd(5 * ps), 8);
    wr(300, 10);
    assert_eq!(
        accesses(),
        vec![(21, Access::Read), (21, Access::Write)],
        "parked writable, it came back read-only after the read"
    );
    // Window 3: a read then a write again (parked read+write this time).
    arm();
    assert_eq!(rd(300), 10);
    wr(7 * ps + 1, 11);
    assert_eq!(accesses(), vec![(21, Access::Read), (21, Access::Write)]);
    // Window 4: nothing; window 5: its re-arm is skipped, and a read is still seen.
    arm();
    arm();
    assert_eq!(rd(7 * ps + 1), 11);
    assert_eq!(accesses(), vec![(21, Access::Read)]);
    // Window 6: disarmed while parked; the range refills from the memfd.
    arm();
    assert_eq!(stats().parked, 5);
    unsafe { *drv.add(6 * ps) = 13 };
    disarm(21);
    assert_eq!(
        rd(6 * ps),
        13,
        "the driver's byte, through the refilled range"
    );
    wr(6 * ps, 12);
    assert_eq!(rd(100), 7);
    assert_eq!(unsafe { *drv.add(6 * ps) }, 12);
    assert!(accesses().is_empty(), "disarmed: nothing recorded");
    assert_eq!(stats().unparked, 4, "disarm moves nothing back");
    println!("CHILD-OK");
}

/// A buffer armed later over the last page of a parked range: when the parked one opens,
/// its tables come back closed and only its own pages are opened, so the newcomer's first
/// access on the shared page is still recorded. In the next window both are live: each
/// parks all but the page they share, which is protected as before, and every first
/// access on it is recorded.
#[test]
fn a_neighbour_armed_over_a_parked_range_keeps_its_protection() {
    if !in_child() {
        assert_child_ok("a_neighbour_armed_over_a_parked_range_keeps_its_protection");
        return;
    }
    let ps = page_size();
    let m = crate::hostmem::memfd::DoubleMap::new(6 * ps, ps).unwrap();
    let (app, drv) = (m.app_ptr(), m.driver_ptr());
    let at = |p: *mut u8| unsafe { p.add(4 * ps - 512) };
    let arm_x = || arm_shadowed(31, app, 4 * ps - 512, Some(drv)).unwrap();
    let arm_y = || arm_shadowed(32, at(app), 2 * ps + 512, Some(at(drv))).unwrap();
    let wr = |o: usize, v: u8| unsafe { std::ptr::write_volatile(app.add(o), v) };
    arm_x();
    assert_eq!(stats().parked, 1);
    arm_y();
    assert_eq!(
        stats().parked,
        2,
        "the newcomer parks all but the page it shares"
    );
    wr(10, 1);
    assert_eq!(accesses(), vec![(31, Access::Write)]);
    // The neighbour's byte on the shared page (page 3).
    wr(4 * ps - 100, 2);
    assert_eq!(accesses(), vec![(32, Access::Write)]);
    assert_eq!(unsafe { *drv.add(4 * ps - 100) }, 2);
    // Window 2: both live when armed.
    arm_x();
    arm_y();
    assert_eq!(stats().parked, 4);
    wr(4 * ps - 600, 3); // X's byte on the shared page, Y unseen
    let (first, then) = if cfg!(target_arch = "x86_64") {
        // Emulated: the page stays closed for Y.
        (vec![(31, Access::Write)], vec![(32, Access::Write)])
    } else {
        // No emulation or stepping: the page opens and Y is taken as touched (fail closed).
        (vec![(31, Access::Write), (32, Access::ReadWrite)], vec![])
    };
    assert_eq!(accesses(), first);
    wr(ps, 4);
    wr(5 * ps, 5);
    assert_eq!(accesses(), then);
    for (o, v) in [(4 * ps - 600, 3), (ps, 4), (5 * ps, 5), (4 * ps - 100, 2)] {
        assert_eq!(unsafe { *drv.add(o) }, v, "byte {o}");
    }
    disarm(31);
    disarm(32);
    println!("CHILD-OK");
}

/// Prints what arming and opening a 16 MiB range costs parked and with `mprotect` (no
/// claim: bench/RESULTS.md has the figures).
#[test]
fn parking_cost() {
    if !in_child() {
        let so = assert_child_ok("parking_cost");
        for l in so.lines().filter(|l| l.contains("COST")) {
            eprintln!("{l}");
        }
        return;
    }
    let len = 16 << 20;
    let m = crate::hostmem::memfd::DoubleMap::new(len, 2 << 20).unwrap();
    let (app, drv) = (m.app_ptr(), m.driver_ptr());
    unsafe { std::ptr::write_bytes(app, 1, len) };
    let cycle = |parked: bool| {
        park::OFF.store(!parked, Ordering::SeqCst);
        let (mut arm_us, mut open_us) = (f64::MAX, f64::MAX);
        for _ in 0..20 {
            let t0 = std::time::Instant::now();
            arm_shadowed(41, app, len, Some(drv)).unwrap();
            let t1 = std::time::Instant::now();
            unsafe { std::ptr::write_volatile(app, 2u8) };
            let t2 = std::time::Instant::now();
            unsafe { std::ptr::write_bytes(app, 3, len) };
            arm_us = arm_us.min((t1 - t0).as_secs_f64() * 1e6);
            open_us = open_us.min((t2 - t1).as_secs_f64() * 1e6);
        }
        drained();
        disarm(41);
        (arm_us, open_us)
    };
    let (pa, po) = cycle(true);
    let (ma, mo) = cycle(false);
    println!(
        "COST 16 MiB range (best of 20): parked: arm {pa:.1} us, first access {po:.1} us; mprotect: arm {ma:.1} us, first access {mo:.1} us"
    );
    println!("CHILD-OK");
}
