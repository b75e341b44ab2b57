//! The edges of the safety rules (issue 55): each test here was written for mutants that
//! cargo-mutants made of the analysis (`scripts/mutants.sh`) and that no test failed on — a
//! comparison one byte off, a field left at its default — and asserts the decision the
//! unmutated rule makes at that edge.

mod common;
use common::*;
use echo_analyzer::analysis::Decision;
use echo_analyzer::plan::{Condition, Direction};
use echo_analyzer::trace::Event;

fn accepted(d: &Decision) -> Direction {
    match d {
        Decision::Accepted { direction, .. } => *direction,
        other => panic!("expected acceptance, got {other:?}"),
    }
}

/// Set `alignment` in the memory requirement of `buffer`.
fn align(t: &mut T, buffer: u64, alignment: u64) {
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer: b, req, .. } = &mut r.event {
            if *b == buffer {
                req.alignment = alignment;
            }
        }
    }
}

/// compat: the guest is checked where it would be bound — at the owner's offset plus the
/// pair's delta — not at the owner's offset (`compat::check`, the guest's `Target`).
#[test]
fn the_guest_is_checked_at_its_own_offset() {
    // A sub-allocated staging buffer at offset 0 of its pool (device into staging): the device
    // buffer would live at byte 256 of it, where its 64 KiB alignment does not hold.
    let build = |delta: u64| {
        let mut t = T::new();
        let pool = t.pool(8 * MIB);
        let _other = t.sub_staging(pool, 4 * MIB, MIB);
        let h = t.sub_staging(pool, 0, 2 * MIB);
        let d = t.device(MIB);
        align(&mut t, d.buf, 65536);
        for _ in 0..3 {
            t.host_write(h.buf);
            t.run(&[
                Cmd::CopyAt(h.buf, d.buf, delta, 0, MIB),
                Cmd::ReadWrite(d.buf),
            ]);
        }
        t.analyze()
    };
    let a = build(256);
    let (c, _, msg) = rejected(decision(&a, 2, 3));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(msg.contains("alignment"), "{msg}");
    // At a delta of 64 KiB the same pair is accepted, device into staging.
    let a = build(65536);
    assert_eq!(accepted(decision(&a, 2, 3)), Direction::DeviceIntoStaging);
}

/// S1 places a member at its delta: a readback copied into byte `MIB` of its staging buffer
/// shares the device buffer's bytes there, so a second GPU write of the device buffer before the
/// host reads the first result clobbers it (`s1_value`, `Sim::delta`).
#[test]
fn s1_places_a_member_at_its_delta() {
    let build = |dst_offset: u64| {
        let mut t = T::new();
        let h = t.staging(2 * MIB);
        let d = t.device(MIB);
        for _ in 0..3 {
            t.run(&[
                Cmd::Write(d.buf),
                Cmd::CopyAt(d.buf, h.buf, 0, dst_offset, MIB),
            ]);
            t.run(&[Cmd::Write(d.buf)]);
            t.host_read(h.buf);
        }
        t.analyze()
    };
    for off in [0, MIB] {
        let a = build(off);
        let (c, _, msg) = rejected(decision(&a, 1, 2));
        assert_eq!(c, Condition::S1, "at offset {off}: {msg}");
        assert!(msg.contains("the host read"), "{msg}");
    }
}

/// S4: a buffer the sub-allocator binds into the pool while the guest lives, right beside the
/// guest's range — ending where it starts, starting where it ends — shares no byte with it; one
/// byte into it, it does (`s4_lifetime::check`).
#[test]
fn s4_neighbours_touch_but_do_not_overlap() {
    // (offset, size) of the buffer bound after the staging buffer is destroyed.
    let build = |offset: u64, size: u64| {
        let mut t = T::new();
        let pool = t.pool(8 * MIB);
        let _other = t.sub_staging(pool, 4 * MIB, MIB);
        let h = t.sub_staging(pool, MIB, MIB);
        let d = t.device(MIB);
        for _ in 0..3 {
            t.host_write(h.buf);
            t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        }
        t.destroy(h.buf);
        let y = t.create(size, STORAGE, 0);
        let rebind = t.bind(y, pool, offset);
        t.run(&[Cmd::ReadWrite(d.buf)]);
        (t.analyze(), rebind)
    };
    // Beside it on either side: the device buffer still moves into the staging range.
    for (offset, size) in [(0, MIB), (2 * MIB, MIB)] {
        let (a, _) = build(offset, size);
        assert_eq!(
            accepted(decision(&a, 2, 3)),
            Direction::DeviceIntoStaging,
            "{offset} {size}"
        );
    }
    // One byte into it, from below or from above: S4 at the bind.
    for (offset, size) in [(0, MIB + 1), (2 * MIB - 1, MIB)] {
        let (a, rebind) = build(offset, size);
        let (c, ev, msg) = rejected(decision(&a, 2, 3));
        assert_eq!(c, Condition::S4, "{offset} {size}: {msg}");
        assert_eq!(ev, Some(rebind));
    }
}

/// Exact host writes (issue 54) name the bytes a window did not rewrite in the staging buffer's
/// own offsets, also when the device buffer sits at a delta in it (`Sim::exact_write`).
#[test]
fn an_exact_write_gap_is_named_in_the_staging_buffers_offsets() {
    let mut t = T::new();
    t.partial_writes();
    let h = t.staging(2 * MIB);
    let d = t.device(MIB);
    for i in 0..3 {
        let w = t.host_write(h.buf);
        let end = if i == 0 { 2 * MIB } else { MIB + MIB / 2 };
        t.push(Event::HostWrites {
            buffer: h.buf,
            write: w,
            ranges: vec![[0, end]],
            any: None,
        });
        t.run(&[
            Cmd::CopyAt(h.buf, d.buf, MIB, 0, MIB),
            Cmd::ReadWrite(d.buf),
        ]);
    }
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(
        msg.contains(&format!(
            "bytes {}..{} of staging buffer #1, which",
            MIB + MIB / 2,
            2 * MIB
        )),
        "{msg}"
    );
}

/// S1 counts unseen host writes into the *device* buffer only when its memory was mapped before
/// its bind; a staging member written before its own bind does not make the device buffer's
/// undefined bytes a value (`Sim::first_read`; roles.rs has the mapped-before-bind case).
#[test]
fn a_members_write_before_bind_is_not_the_device_buffers() {
    let build = |device_mapped_before_bind: bool| {
        let mut t = T::new();
        let pool = t.alloc(8 * MIB, 0, None);
        let dbuf = t.create(MIB, STORAGE | SRC | DST, 0);
        if device_mapped_before_bind {
            t.map(pool);
        }
        t.bind(dbuf, pool, 4 * MIB);
        if !device_mapped_before_bind {
            t.map(pool);
        }
        t.watch(dbuf);
        // The staging buffer is bound into the mapped block: written before its bind, maybe.
        let h = t.sub_watched(pool, 0, MIB, SRC | DST);
        // The GPU reads the device buffer before anything wrote it.
        t.run(&[Cmd::Read(dbuf)]);
        for _ in 0..3 {
            t.host_write(h.buf);
            t.run(&[
                Cmd::Copy(h.buf, dbuf, MIB),
                Cmd::ReadWrite(dbuf),
                Cmd::Copy(dbuf, h.buf, MIB),
            ]);
            t.host_read(h.buf);
        }
        t.analyze()
    };
    let a = build(false);
    assert_eq!(
        accepted(&a.candidates[0].decision),
        Direction::DeviceIntoStaging
    );
    let a = build(true);
    let (c, _, msg) = rejected(&a.candidates[0].decision);
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("before its bind (not traced)"), "{msg}");
}

/// S1's linking copies (the ones enforce drops): device → member at the member's delta, with
/// both offsets non-zero. A readback into byte `MIB + 4096` of a staging buffer from byte 4096
/// of the device buffer links them at delta `MIB`; the loop is accepted. Taken as an ordinary
/// copy, its bytes would overwrite the device buffer's in the shared range and the next
/// dispatch would read them (`s1_value::check`, the `linking` test).
#[test]
fn a_readback_at_a_delta_links_its_buffers() {
    let mut t = T::new();
    let h = t.staging(2 * MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.run(&[
            Cmd::ReadWrite(d.buf),
            Cmd::CopyAt(d.buf, h.buf, 4096, MIB + 4096, MIB - 4096),
        ]);
        t.host_read(h.buf);
    }
    let a = t.analyze();
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::DeviceIntoStaging);
    assert_eq!(a.plan.groups[0].members[0].delta, MIB as i64);
}

/// A copy between two members of one group is not a linking copy: sharing memory it copies
/// the range onto itself, so it reads its source like any GPU read and writes the shared range.
/// Each member alone is fine; in one group, the copy between them lands in the device buffer's
/// bytes before the dispatch reads them (`s1_value::check`, the `linking` test).
#[test]
fn a_copy_between_two_members_is_not_a_linking_copy() {
    let mut t = T::new();
    let up = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(up.mem);
    let down = t.staging(MIB);
    for _ in 0..3 {
        t.host_write(up.buf);
        t.run(&[
            Cmd::Copy(up.buf, down.buf, MIB),
            Cmd::Copy(up.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, down.buf, MIB),
        ]);
        t.host_read(down.buf);
    }
    let a = t.analyze();
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::StagingIntoDevice);
    let (c, _, msg) = rejected(decision(&a, 3, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(
        msg.contains("reads device buffer #2")
            && msg.contains("the copy into staging buffer #3")
            && msg.contains("[as a member of the group of device buffer #2 with staging #1]"),
        "{msg}"
    );
}

/// S4 places the guest at the owner's offset plus the delta (device into staging): a buffer the
/// sub-allocator binds where the device buffer would live at its delta, and only there, is a
/// recycled range (`s4_lifetime::check`, `start`).
#[test]
fn s4_places_the_guest_at_its_delta() {
    let build = |offset: u64| {
        let mut t = T::new();
        let pool = t.pool(8 * MIB);
        let _other = t.sub_staging(pool, 6 * MIB, MIB);
        let h = t.sub_staging(pool, MIB, 2 * MIB);
        let d = t.device(MIB);
        for _ in 0..3 {
            t.host_write(h.buf);
            t.run(&[
                Cmd::CopyAt(h.buf, d.buf, MIB / 2, 0, MIB),
                Cmd::ReadWrite(d.buf),
            ]);
        }
        t.destroy(h.buf);
        // The device buffer would live at [1.5 MiB, 2.5 MiB) of the pool.
        let y = t.create(MIB / 4, STORAGE, 0);
        let rebind = t.bind(y, pool, offset);
        t.run(&[Cmd::ReadWrite(d.buf)]);
        (t.analyze(), rebind)
    };
    let (a, rebind) = build(2 * MIB + MIB / 4);
    let (c, ev, msg) = rejected(decision(&a, 2, 3));
    assert_eq!((c, ev), (Condition::S4, Some(rebind)), "{msg}");
    // Where it would be at the opposite delta: nothing of the device buffer's.
    let (a, _) = build(MIB / 2);
    assert_eq!(accepted(decision(&a, 2, 3)), Direction::DeviceIntoStaging);
}

/// S4's last use is the guest's own: a host access to another buffer after the owner's memory
/// is freed is not a use of the guest (`s4_lifetime::last_use`).
#[test]
fn s4_last_use_is_the_guests_own() {
    let mut t = T::new();
    let other = t.staging(MIB);
    let pool = t.pool(8 * MIB);
    let _x = t.sub_staging(pool, 4 * MIB, MIB);
    let h = t.sub_staging(pool, MIB, MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    t.destroy(d.buf);
    t.destroy(h.buf);
    t.free(pool);
    t.host_write(other.buf);
    let a = t.analyze();
    assert_eq!(accepted(decision(&a, 3, 4)), Direction::DeviceIntoStaging);
}

/// S4 places the guest at the owner's offset less the delta (staging into device): a staging
/// buffer copied into byte `MIB / 2` of a device buffer at 2 MiB of a shared block would live at
/// [2.5 MiB, 3 MiB) of it; a buffer bound there after the device buffer is destroyed recycles
/// its range, one bound at [1.5 MiB, 2 MiB) does not (`s4_lifetime::check`, `start`).
#[test]
fn s4_places_a_staging_guest_in_its_owner_by_the_delta() {
    let build = |offset: u64| {
        let mut t = T::new();
        let buf = t.create(MIB / 2, SRC | DST, 0);
        let mem = t.alloc(MIB / 2, 1, Some(buf));
        t.bind(buf, mem, 0);
        let block = t.alloc(8 * MIB, 0, None);
        let dbuf = t.create(MIB, STORAGE | DST, 0);
        // Only the block's type: the device buffer cannot move into the staging allocation.
        for r in &mut t.recs {
            if let Event::BufferCreate { buffer, req, .. } = &mut r.event {
                if *buffer == dbuf {
                    req.type_bits = 0b01;
                }
            }
        }
        t.bind(dbuf, block, 2 * MIB);
        t.map(mem);
        let other = t.create(MIB, STORAGE, 0);
        t.bind(other, block, 6 * MIB);
        for _ in 0..3 {
            t.host_write(buf);
            t.run(&[
                Cmd::CopyAt(buf, dbuf, 0, MIB / 2, MIB / 2),
                Cmd::ReadWrite(dbuf),
            ]);
        }
        t.destroy(dbuf);
        let y = t.create(MIB / 2, STORAGE, 0);
        let rebind = t.bind(y, block, offset);
        t.host_write(buf);
        (t.analyze(), rebind)
    };
    let (a, rebind) = build(2 * MIB + MIB / 2);
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!((c, ev), (Condition::S4, Some(rebind)), "{msg}");
    let (a, _) = build(MIB + MIB / 2);
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::StagingIntoDevice);
}

/// S4, staging into device: the layer defers the free of an allocation the device buffer owns
/// alone, not of a block it shares: freeing that block while the staging buffer is still used
/// is S4; freeing the dedicated one is fine (`s4_lifetime::check`, `deferred`).
#[test]
fn s4_the_free_of_a_dedicated_device_allocation_is_deferred() {
    let build = |dedicated: bool| {
        let mut t = T::new();
        // The staging buffer in memory type 1, which the device buffer does not allow: staging
        // into device is the only way.
        let hbuf = t.create(MIB, SRC | DST, 0);
        let hmem = t.alloc(MIB, 1, Some(hbuf));
        t.bind(hbuf, hmem, 0);
        let dbuf = t.create(MIB, STORAGE | DST, 0);
        for r in &mut t.recs {
            if let Event::BufferCreate { buffer, req, .. } = &mut r.event {
                if *buffer == dbuf {
                    req.type_bits = 0b01;
                }
            }
        }
        let dmem = if dedicated {
            let m = t.alloc(MIB, 0, Some(dbuf));
            t.bind(dbuf, m, 0);
            m
        } else {
            let block = t.alloc(8 * MIB, 0, None);
            t.bind(dbuf, block, 2 * MIB);
            let other = t.create(MIB, STORAGE, 0);
            t.bind(other, block, 6 * MIB);
            block
        };
        t.map(hmem);
        for _ in 0..3 {
            t.host_write(hbuf);
            t.run(&[Cmd::Copy(hbuf, dbuf, MIB), Cmd::ReadWrite(dbuf)]);
        }
        t.destroy(dbuf);
        let freed = t.free(dmem);
        t.host_write(hbuf);
        (t.analyze(), freed)
    };
    let (a, _) = build(true);
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::StagingIntoDevice);
    let (a, freed) = build(false);
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!((c, ev), (Condition::S4, Some(freed)), "{msg}");
}

/// A one-time upload whose staging buffer cannot move into the device allocation is refused
/// with that reason, and the verdict says why the other direction was not tried
/// (`analysis::grouping::one_time`).
#[test]
fn a_one_time_transfer_refused_staging_into_device_says_why_not_the_other_way() {
    let mut t = T::new();
    // The staging buffer allows only memory type 1; the device allocation is type 0.
    let hbuf = t.create(MIB, SRC | DST, 0);
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer, req, .. } = &mut r.event {
            if *buffer == hbuf {
                req.type_bits = 0b10;
            }
        }
    }
    let hmem = t.alloc(MIB, 1, Some(hbuf));
    t.bind(hbuf, hmem, 0);
    let d = t.device(MIB);
    t.map(hmem);
    t.host_write(hbuf);
    t.run(&[Cmd::Copy(hbuf, d.buf, MIB)]);
    t.destroy(hbuf);
    for _ in 0..3 {
        t.run(&[Cmd::ReadWrite(d.buf)]);
    }
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(
        msg.contains("memoryTypeBits")
            && msg.ends_with("; device into staging is not tried for a single transfer: binding the device buffer into the staging allocation would keep that alive and raise the footprint"),
        "{msg}"
    );
}

/// S2 looks only at the group: GPU work on other buffers in flight while the host writes the
/// staging buffer, or the host writing another buffer while the group's work is in flight, is
/// no race on the group's bytes (`s2_order::check`, `GroupSpec::contains`, `is_member`).
#[test]
fn s2_is_about_the_groups_buffers_only() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    let u = t.staging(MIB);
    let e = t.device(MIB);
    for _ in 0..3 {
        let (_, other) = t.submit(&[Cmd::ReadWrite(e.buf)]);
        t.host_write(h.buf);
        let (_, group) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        t.host_write(u.buf);
        t.wait(group);
        t.wait(other);
    }
    let a = t.analyze();
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::DeviceIntoStaging);
    // The same host write of the staging buffer while the group's work is in flight: S2.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        let (_, group) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        t.host_write(h.buf);
        t.wait(group);
    }
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::S2, "{msg}");
}

/// compat: a use the layer cannot follow refuses the pair only when it names one of the pair's
/// buffers, not when it names another buffer in the same submission (`compat::untracked`).
#[test]
fn an_untracked_use_of_another_buffer_is_not_the_pairs() {
    let build = |untracked_on_pair: bool| {
        let mut t = T::new();
        let h = t.staging_unmapped(MIB);
        let d = t.device(MIB);
        t.map(h.mem);
        let e = t.device(MIB);
        let which = if untracked_on_pair { d.buf } else { e.buf };
        for _ in 0..3 {
            t.host_write(h.buf);
            t.run(&[
                Cmd::Copy(h.buf, d.buf, MIB),
                Cmd::ReadWrite(d.buf),
                Cmd::Untracked(which),
            ]);
        }
        t.analyze()
    };
    assert_eq!(
        accepted(decision(&build(false), 1, 2)),
        Direction::StagingIntoDevice
    );
    let a = build(true);
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(
        msg.contains("uses device buffer #2") && msg.contains("cannot follow"),
        "{msg}"
    );
}

/// Set the memory requirement's type bits of `buffer`.
fn type_bits(t: &mut T, buffer: u64, bits: u32) {
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer: b, req, .. } = &mut r.event {
            if *b == buffer {
                req.type_bits = bits;
            }
        }
    }
}

/// compat: staging into device shares the device allocation's memory type when it is
/// host-visible, and otherwise the type enforce switches it to (the device's alias type, 0 in
/// these traces); each buffer's type bits are checked against that type
/// (`compat::shared_type`).
#[test]
fn staging_into_device_shares_the_device_allocations_type_when_host_visible() {
    // (device memory host-visible, its type, staging type bits, device type bits)
    let build = |visible: bool, d_type: u32, h_bits: u32, d_bits: u32| {
        let mut t = T::new();
        let hbuf = t.create(MIB, SRC | DST, 0);
        type_bits(&mut t, hbuf, h_bits);
        let hmem = t.alloc(MIB, 1, Some(hbuf));
        t.bind(hbuf, hmem, 0);
        let d = t.device(MIB);
        type_bits(&mut t, d.buf, d_bits);
        for r in &mut t.recs {
            if let Event::MemoryAlloc {
                memory,
                host_visible,
                type_index,
                ..
            } = &mut r.event
            {
                if *memory == d.mem {
                    *host_visible = visible;
                    *type_index = d_type;
                }
            }
        }
        t.map(hmem);
        for _ in 0..3 {
            t.host_write(hbuf);
            t.run(&[Cmd::Copy(hbuf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        }
        t.analyze()
    };
    // Host-visible device memory of type 2, which the device buffer alone allows: type 2, not
    // the alias type 0 nor the staging allocation's 1.
    let a = build(true, 2, 0b111, 0b100);
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::StagingIntoDevice);
    // Not host-visible, of type 2: the alias type 0, which the staging buffer alone allows.
    let a = build(false, 2, 0b01, 0b111);
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::StagingIntoDevice);
    // The device buffer, which would hold the staging buffer, does not allow the alias type:
    // refused that way (its own type bits, checked first), accepted the other way.
    let a = build(false, 2, 0b111, 0b110);
    assert_eq!(accepted(decision(&a, 1, 2)), Direction::DeviceIntoStaging);
}

/// compat, held back (analyze.rs has the copy recorded before the readback buffer exists): a
/// command recorded after the readback buffer is created but before it is bound is refused as
/// recorded before the bind; a command recorded early that names another buffer refuses
/// nothing (`compat::held_back`).
#[test]
fn held_back_is_about_the_guest_and_says_created_or_bound() {
    // `guest_early`: the early command copies into the device buffer; else into another one.
    let build = |guest_early: bool| {
        let mut t = T::new();
        let s = t.device(MIB);
        let d = t.device(MIB);
        let e = t.device(MIB);
        let pool = t.pool(2 * MIB);
        let rbuf = t.create(MIB, SRC | DST, 0);
        t.run(&[Cmd::Copy(
            s.buf,
            if guest_early { d.buf } else { e.buf },
            MIB,
        )]);
        t.bind(rbuf, pool, 0);
        let _x = t.sub_staging(pool, MIB, 64 * 1024); // the readback buffer's memory is shared
        for _ in 0..3 {
            t.run(&[Cmd::Copy(s.buf, d.buf, MIB), Cmd::Copy(d.buf, rbuf, MIB)]);
            t.host_read(rbuf);
        }
        t.analyze()
    };
    let a = build(false);
    assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.plan.rejected);
    assert_eq!(a.plan.groups[0].direction, Direction::DeviceIntoStaging);
    let a = build(true);
    assert!(a.plan.groups.is_empty(), "{:#?}", a.plan.groups);
    let r = &a.plan.rejected[0];
    assert_eq!(r.condition, Condition::Compat);
    assert!(
        r.message.contains("enforce holds the bind back")
            && r.message.contains(", was bound only at event"),
        "{}",
        r.message
    );
}

/// compat, staging into device: a map of the staging allocation made right before the device
/// buffer's bind (the event just before it) is held at the bind, so that direction is refused
/// and the pair goes device into staging; mapped right after the bind, staging into device
/// (`compat::mapped_before_bind`, `Memory::mapped_at`).
#[test]
fn a_map_made_just_before_the_device_bind_is_held_at_it() {
    let build = |map_first: bool| {
        let mut t = T::new();
        let h = t.staging_unmapped(MIB);
        let dbuf = t.create(MIB, STORAGE | SRC | DST, 0);
        let dmem = t.alloc(MIB, 0, Some(dbuf));
        if map_first {
            t.map(h.mem);
        }
        t.bind(dbuf, dmem, 0);
        if !map_first {
            t.map(h.mem);
        }
        for _ in 0..3 {
            t.host_write(h.buf);
            t.run(&[Cmd::Copy(h.buf, dbuf, MIB), Cmd::ReadWrite(dbuf)]);
        }
        t.analyze()
    };
    assert_eq!(
        accepted(decision(&build(true), 1, 2)),
        Direction::DeviceIntoStaging
    );
    assert_eq!(
        accepted(decision(&build(false), 1, 2)),
        Direction::StagingIntoDevice
    );
}

/// compat, staging into device: the refusal of a map held at the device buffer's bind says when
/// the program unmapped it (`compat::mapped_before_bind`, `until`).
#[test]
fn a_held_map_says_when_it_was_unmapped() {
    let mut t = T::new();
    // The staging buffer in memory type 1, which the device buffer does not allow: device into
    // staging fails too, so the refusal shows.
    let hbuf = t.create(MIB, SRC | DST, 0);
    let hmem = t.alloc(MIB, 1, Some(hbuf));
    t.bind(hbuf, hmem, 0);
    let map = t.map(hmem);
    let d = t.device(MIB);
    type_bits(&mut t, d.buf, 0b01);
    let unmap = t.push(Event::UnmapMemory { memory: hmem });
    t.map(hmem);
    for _ in 0..3 {
        t.host_write(hbuf);
        t.run(&[Cmd::Copy(hbuf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!((c, ev), (Condition::Compat, Some(map)), "{msg}");
    assert!(
        msg.contains(&format!("and unmapped only at event {unmap}: ")),
        "{msg}"
    );
}
