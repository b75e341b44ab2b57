//! The analyzer on synthetic traces: one test per rule, including the four hazards Echo motivates
//! its conditions with (DESIGN §5).
//!
//! Over 1,000 lines: one test per rule of the analysis, with the synthetic trace it needs
//! written out in the test (the helpers are in `common/`).

mod common;
use common::*;
use echo_analyzer::analysis::Decision;
use echo_analyzer::plan::{Condition, Direction, Role, Thresholds};
use echo_analyzer::trace::{Access, BufferUse, Event, SubmitBatch, UseKind};

/// host writes h; copy h→d; dispatch on d; wait — three times.
fn upload_loop(t: &mut T, h: Buf, d: Buf, iters: usize) {
    for _ in 0..iters {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
}

#[test]
fn upload_loop_is_accepted_staging_into_device() {
    let mut t = T::new();
    let h = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h.mem);
    upload_loop(&mut t, h, d, 3);
    let a = t.analyze();
    let (g, dir, one) = accepted(decision(&a, 1, 2));
    assert_eq!((g, dir, one), (1, Direction::StagingIntoDevice, false));
    let grp = &a.plan.groups[0];
    assert_eq!(grp.members.len(), 1);
    assert_eq!(grp.members[0].role, Role::Upload);
    assert_eq!(grp.members[0].delta, 0);
    assert_eq!(grp.copies_total, 3);
    assert_eq!(grp.bytes_saved_per_iter, MIB);
    assert_eq!(a.candidates[0].copies_per_iter, 1.0);
    assert!(a.plan.rejected.is_empty());
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
}

#[test]
fn upload_and_readback_make_one_group_with_two_members() {
    let mut t = T::new();
    let h_in = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h_in.mem);
    let h_out = t.staging(MIB);
    for _ in 0..4 {
        t.host_write(h_in.buf);
        t.run(&[
            Cmd::Copy(h_in.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h_out.buf, MIB),
        ]);
        t.host_read(h_out.buf);
    }
    let a = t.analyze();
    assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.candidates);
    let g = &a.plan.groups[0];
    assert_eq!(g.direction, Direction::StagingIntoDevice);
    assert_eq!(g.members.len(), 2);
    let roles: Vec<Role> = g.members.iter().map(|m| m.role).collect();
    assert!(roles.contains(&Role::Upload) && roles.contains(&Role::Readback));
    assert_eq!(g.bytes_saved_per_iter, 2 * MIB);
    assert_eq!(g.memory_saved, 2 * MIB);
}

#[test]
fn group_member_whose_bytes_the_host_expects_to_differ_is_dropped_s1() {
    // The host writes the next input before reading the previous result: alone each pair is
    // fine, but h_in and h_out would share bytes in the group.
    let mut t = T::new();
    let h_in = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h_in.mem);
    let h_out = t.staging(MIB);
    t.host_write(h_in.buf);
    for _ in 0..3 {
        t.run(&[
            Cmd::Copy(h_in.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h_out.buf, MIB),
        ]);
        t.host_write(h_in.buf);
        t.host_read(h_out.buf);
    }
    let a = t.analyze();
    accepted(decision(&a, 1, 2));
    let (c, ev, msg) = rejected(decision(&a, 3, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(ev.is_some());
    assert!(
        msg.contains("as a member of the group of device buffer #2"),
        "{msg}"
    );
    assert!(msg.contains("staging buffer #3"), "{msg}");
}

/// Issue 36: the upload buffer's allocation is mapped before the device buffer is bound (`how`:
/// `"held"` keeps that mapping; `"unmapped"` unmaps it before the device buffer's bind and maps it
/// again after; `"late"` binds the upload buffer only after the device buffer, still holding the
/// early map), then h_in → d → h_out.
fn mapped_early(how: &str) -> T {
    let mut t = T::new();
    let h_in = if how == "late" {
        let buf = t.create(MIB, SRC | DST, 0);
        let mem = t.alloc(MIB, 0, Some(buf));
        Buf { buf, mem }
    } else {
        t.staging_unmapped(MIB)
    };
    t.map(h_in.mem);
    if how == "unmapped" {
        t.push(Event::UnmapMemory { memory: h_in.mem });
    }
    let d = t.device(MIB);
    if how == "late" {
        t.bind(h_in.buf, h_in.mem, 0);
    }
    if how == "unmapped" {
        t.map(h_in.mem);
    }
    let h_out = t.staging_unmapped(MIB);
    t.map(h_out.mem);
    for _ in 0..3 {
        t.host_write(h_in.buf);
        t.run(&[
            Cmd::Copy(h_in.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h_out.buf, MIB),
        ]);
        t.host_read(h_out.buf);
    }
    t
}

#[test]
fn an_upload_mapped_before_the_device_buffer_is_bound_is_refused_alone() {
    for how in ["held", "late"] {
        let a = mapped_early(how).analyze();
        assert_causes_agree(&a, Thresholds::default());
        // The upload member is refused, in enforce's words (apply::check_staging_mapping) ...
        let (c, ev, msg) = rejected(decision(&a, 1, 2));
        assert_eq!(c, Condition::Compat, "{how}: {msg}");
        assert!(ev.is_some());
        assert!(
            msg.contains(echo_analyzer::apply::MAPPED_BY_APPLICATION),
            "{how}: {msg}"
        );
        let row = a.candidates.iter().find(|c| c.staging.number == 1).unwrap();
        let Decision::Rejected { plain, reason, .. } = &row.decision else {
            unreachable!()
        };
        assert_eq!(reason, "compat_mapped");
        assert!(
            plain.contains(echo_analyzer::apply::MAPPED_BY_APPLICATION),
            "{plain}"
        );
        // ... and the readback member keeps its gain: a group of one, staging into device.
        let (g, dir, _) = accepted(decision(&a, 3, 2));
        assert_eq!((g, dir), (1, Direction::StagingIntoDevice), "{how}");
        assert_eq!(a.plan.groups.len(), 1);
        assert_eq!(a.plan.groups[0].members.len(), 1);
        assert_eq!(a.plan.groups[0].members[0].role, Role::Readback);
        // Member by member, as enforce's statistics say it.
        let st = a.member_statuses();
        assert_eq!(st.len(), 2, "{st:#?}");
        assert!(st[0].applied && st[0].member == Some(0) && st[0].role == "readback");
        assert!(!st[1].applied && st[1].member.is_none() && st[1].role == "upload");
        assert!(st[1]
            .reason
            .contains(echo_analyzer::apply::MAPPED_BY_APPLICATION));
        let text = echo_analyzer::report::table(&a, "x");
        assert!(
            text.contains("member 0: staging #3 (readback) applied")
                && text.contains("not a member: staging #1 (upload): "),
            "{text}"
        );
    }
    // Unmapped before the device buffer is bound and mapped again after: both members.
    let a = mapped_early("unmapped").analyze();
    assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.candidates);
    assert_eq!(a.plan.groups[0].members.len(), 2);
    assert!(a.member_statuses().iter().all(|m| m.applied));
}

// Hazard 1: a device value still live when the host overwrites the staging buffer.
#[test]
fn device_value_still_live_when_host_overwrites_staging_is_s1() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
        // The next input is written while d's value is still needed by a second pass.
        t.host_write(h.buf);
        let second = t.run(&[Cmd::Read(d.buf)]);
        let _ = second;
    }
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    // The event is the submission of the second pass of the first iteration.
    let second_pass = t
        .recs
        .iter()
        .filter(|r| matches!(r.event, Event::QueueSubmit { .. }))
        .nth(1)
        .unwrap()
        .seq;
    assert_eq!(ev, Some(second_pass));
    assert!(msg.contains("reads device buffer #2"), "{msg}");
    assert!(
        msg.contains("the host's write to staging buffer #1"),
        "{msg}"
    );
}

#[test]
fn host_write_then_dispatch_without_copy_is_s1() {
    // DESIGN §5's example: host writes h, then a dispatch reads d with no h→d copy between.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 2);
    t.host_write(h.buf);
    t.run(&[Cmd::Read(d.buf)]);
    let a = t.analyze();
    assert_eq!(rejected(decision(&a, 1, 2)).0, Condition::S1);
}

// Hazard 2: a readback whose copy was also the host's wait.
#[test]
fn readback_read_after_the_fence_is_accepted() {
    let mut t = T::new();
    let d = t.device(MIB);
    let h = t.staging(MIB);
    for _ in 0..3 {
        t.run(&[Cmd::Write(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
        t.host_read(h.buf);
    }
    let a = t.analyze();
    let (_, dir, _) = accepted(decision(&a, 2, 1));
    assert_eq!(dir, Direction::StagingIntoDevice);
    assert_eq!(a.plan.groups[0].members[0].role, Role::Readback);
}

/// A device-local allocation that is not host-visible (a non-strict memory table), `dedicated`
/// to a buffer or a block the app sub-allocates from.
fn device_only_memory(t: &mut T, size: u64, dedicated: Option<u64>) -> u64 {
    let memory = t.handle();
    t.push(Event::MemoryAlloc {
        memory,
        key: echo_analyzer::trace::ObjectKey {
            site: format!("{memory:016x}"),
            size,
            usage: 1,
            flags: 0,
            ordinal: 0,
        },
        type_index: 1,
        size,
        dedicated_buffer: dedicated,
        host_visible: false,
        external: false,
        host_import: false,
    });
    memory
}

// wgpu on an integrated table (tests/tests/wgpu.rs): the device buffer lives in a block of
// device-only memory shared with other buffers, the readback buffer has a host-visible block to
// itself. The layer cannot give a shared block a host-visible type, so the staging maps could
// not be served from it: the device buffer goes into the staging range instead.
#[test]
fn device_buffer_in_shared_device_only_block_goes_device_into_staging() {
    for dedicated in [false, true] {
        let mut t = T::new();
        let d = t.create(MIB, STORAGE | SRC | DST, 0);
        let block = device_only_memory(&mut t, 8 * MIB, dedicated.then_some(d));
        if !dedicated {
            let other = t.create(MIB, STORAGE, 0);
            t.bind(other, block, 0);
        }
        t.bind(d, block, if dedicated { 0 } else { MIB });
        let h = t.staging(MIB);
        for _ in 0..3 {
            t.run(&[Cmd::Write(d), Cmd::Copy(d, h.buf, MIB)]);
            t.host_read(h.buf);
        }
        let a = t.analyze();
        let hno = if dedicated { 2 } else { 3 };
        let (_, dir, _) = accepted(decision(&a, hno, 1));
        let want = if dedicated {
            // A dedicated allocation is switched to a host-visible type by enforce.
            Direction::StagingIntoDevice
        } else {
            Direction::DeviceIntoStaging
        };
        assert_eq!(dir, want, "dedicated device memory: {dedicated}");
    }
}

#[test]
fn readback_read_before_the_fence_is_s2() {
    let mut t = T::new();
    let d = t.device(MIB);
    let h = t.staging(MIB);
    let mut reads = Vec::new();
    let mut subs = Vec::new();
    for _ in 0..3 {
        let (s, f) = t.submit(&[Cmd::Write(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
        subs.push(s);
        reads.push(t.host_read(h.buf));
        t.wait(f);
    }
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 2, 1));
    assert_eq!(c, Condition::S2, "{msg}");
    assert_eq!(ev, Some(reads[0]));
    assert!(
        msg.contains("host read staging buffer #2 (created at app+0x"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "at event {} while submission {} using its device buffer #1 was in flight",
            reads[0], subs[0]
        )),
        "{msg}"
    );
}

#[test]
fn host_write_while_upload_in_flight_is_s2() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        t.host_write(h.buf); // next input while the GPU still runs on d
        t.wait(f);
    }
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S2, "{msg}");
    assert!(msg.contains("host wrote staging buffer #1"), "{msg}");
}

#[test]
fn later_fence_on_the_same_queue_completes_earlier_work() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.submit_with(
            &[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)],
            None,
            vec![],
        );
        let (_, f) = t.submit(&[]);
        t.wait(f);
    }
    accepted(decision(&t.analyze(), 1, 2));
}

#[test]
fn timeline_semaphore_value_and_queue_idle_complete_work() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for i in 1..=3u64 {
        t.host_write(h.buf);
        t.submit_with(
            &[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)],
            None,
            vec![(0x77, i)],
        );
        if i == 2 {
            let q = t.queue;
            t.push(Event::QueueWaitIdle { queue: q });
        } else {
            t.push(Event::SemaphoreReached {
                semaphores: vec![(0x77, i)],
            });
        }
    }
    accepted(decision(&t.analyze(), 1, 2));
}

// Hazard 3: code that can tell the two buffers apart.
#[test]
fn device_address_of_either_buffer_is_s3() {
    for which in [0, 1] {
        let mut t = T::new();
        let h = t.staging(MIB);
        let d = t.device(MIB);
        let addr = t.address(if which == 0 { d.buf } else { h.buf });
        upload_loop(&mut t, h, d, 3);
        let a = t.analyze();
        let (c, ev, msg) = rejected(decision(&a, 1, 2));
        assert_eq!(c, Condition::S3, "{msg}");
        assert_eq!(ev, Some(addr));
        assert!(msg.contains("device address"), "{msg}");
    }
}

#[test]
fn sparse_protected_and_external_are_s3() {
    for (flags, what) in [
        (0x1u32, "a sparse buffer"),
        (0x2, "a sparse buffer"),
        (0x4, "a sparse buffer"),
        (0x8, "a protected buffer"),
        (0x10, "a device-address capture-replay buffer"),
    ] {
        let mut t = T::new();
        let h = t.staging(MIB);
        let buf = t.create(MIB, STORAGE | DST, flags);
        let mem = t.alloc(MIB, 0, Some(buf));
        t.bind(buf, mem, 0);
        upload_loop(&mut t, h, Buf { buf, mem }, 3);
        let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
        assert_eq!(c, Condition::S3, "{msg}");
        assert!(msg.contains(what), "{flags:#x}: {msg}");
    }
    let mut t = T::new();
    let h = t.staging(MIB);
    let buf = t.create(MIB, STORAGE | DST, 0);
    let mem = t.handle();
    t.push(Event::MemoryAlloc {
        memory: mem,
        key: echo_analyzer::trace::ObjectKey {
            site: "x".into(),
            size: MIB,
            usage: 0,
            flags: 0,
            ordinal: 0,
        },
        type_index: 0,
        size: MIB,
        dedicated_buffer: None,
        host_visible: true,
        external: true,
        host_import: false,
    });
    t.bind(buf, mem, 0);
    upload_loop(&mut t, h, Buf { buf, mem }, 3);
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::S3);
    assert!(msg.contains("external"), "{msg}");
}

/// A sub-allocated staging buffer (pool shared with another buffer) paired with `d`.
fn pooled(t: &mut T) -> (u64, Buf, Buf) {
    let pool = t.pool(8 * MIB);
    let _other = t.sub_staging(pool, 4 * MIB, MIB);
    let h = t.sub_staging(pool, MIB, MIB);
    let d = t.device(MIB);
    (pool, h, d)
}

#[test]
fn sub_allocated_staging_goes_device_into_staging() {
    let mut t = T::new();
    let (pool, h, d) = pooled(&mut t);
    upload_loop(&mut t, h, d, 3);
    t.destroy(d.buf);
    t.destroy(h.buf);
    t.free(pool);
    let a = t.analyze();
    let (_, dir, _) = accepted(decision(&a, 2, 3));
    assert_eq!(dir, Direction::DeviceIntoStaging);
    assert_eq!(a.plan.groups[0].memory_saved, MIB);
}

// Hazard 4: a staging buffer freed before the device buffer's last use.
#[test]
fn staging_memory_freed_before_device_buffers_last_use_is_s4() {
    let mut t = T::new();
    let (pool, h, d) = pooled(&mut t);
    upload_loop(&mut t, h, d, 3);
    t.destroy(h.buf);
    let freed = t.free(pool);
    t.run(&[Cmd::ReadWrite(d.buf)]);
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 2, 3));
    assert_eq!(c, Condition::S4, "{msg}");
    assert_eq!(ev, Some(freed));
    assert!(msg.contains("was freed at event"), "{msg}");
}

#[test]
fn dedicated_device_memory_freed_early_is_deferred_for_staging_into_device() {
    // One-time upload then the *device* allocation is freed while... no: the guest is the
    // staging buffer; its owner (the device allocation) is dedicated, so the layer defers the free.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.destroy(d.buf);
    t.free(d.mem);
    t.host_write(h.buf);
    accepted(decision(&t.analyze(), 1, 2));
}

#[test]
fn sub_allocated_range_rebound_while_partner_lives_is_s4() {
    let mut t = T::new();
    let (pool, h, d) = pooled(&mut t);
    upload_loop(&mut t, h, d, 3);
    t.destroy(h.buf);
    // The sub-allocator hands h's range to a new buffer while d still lives.
    let y = t.create(MIB / 2, STORAGE, 0);
    let rebind = t.bind(y, pool, MIB + MIB / 4);
    t.run(&[Cmd::ReadWrite(d.buf)]);
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 2, 3));
    assert_eq!(c, Condition::S4, "{msg}");
    assert_eq!(ev, Some(rebind));
    assert!(msg.contains("bound to buffer #4"), "{msg}");
}

#[test]
fn copies_that_shift_offsets_are_rejected_offset() {
    let mut t = T::new();
    let h = t.staging(4 * MIB);
    let d = t.device(MIB);
    let mut shifted = 0;
    for i in 0..4u64 {
        t.host_write(h.buf);
        t.run(&[
            Cmd::CopyAt(h.buf, d.buf, (i % 2) * MIB, 0, MIB),
            Cmd::Read(d.buf),
        ]);
        if i == 1 {
            shifted = t
                .recs
                .iter()
                .rev()
                .find(|r| matches!(r.event, Event::CmdCopyBuffer { .. }))
                .unwrap()
                .seq;
        }
    }
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::Offset, "{msg}");
    assert_eq!(ev, Some(shifted));
}

#[test]
fn staging_shared_side_by_side_gives_one_pair_each() {
    let mut t = T::new();
    let h = t.staging(2 * MIB);
    let d1 = t.device(MIB);
    let d2 = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[
            Cmd::CopyAt(h.buf, d1.buf, 0, 0, MIB),
            Cmd::CopyAt(h.buf, d2.buf, MIB, 0, MIB),
            Cmd::ReadWrite(d1.buf),
            Cmd::ReadWrite(d2.buf),
        ]);
    }
    let a = t.analyze();
    assert_eq!(a.plan.groups.len(), 2, "{:#?}", a.plan.rejected);
    for g in &a.plan.groups {
        assert_eq!(g.direction, Direction::DeviceIntoStaging);
        assert_eq!(g.members.len(), 1);
    }
    let deltas: Vec<i64> = a.plan.groups.iter().map(|g| g.members[0].delta).collect();
    assert_eq!(deltas, vec![0, MIB as i64]);
}

#[test]
fn staging_reused_over_time_is_rejected_reuse_for_all() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d1 = t.device(MIB);
    let d2 = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d1.buf, MIB), Cmd::ReadWrite(d1.buf)]);
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d2.buf, MIB), Cmd::ReadWrite(d2.buf)]);
    }
    let a = t.analyze();
    assert!(a.plan.groups.is_empty());
    for d in [2, 3] {
        let (c, ev, msg) = rejected(decision(&a, 1, d));
        assert_eq!(c, Condition::Reuse, "{msg}");
        assert!(ev.is_some());
        assert!(msg.contains("more than one partner"), "{msg}");
    }
}

#[test]
fn thresholds_count_copies_and_bytes() {
    // Small copies.
    let mut t = T::new();
    let h = t.staging(4096);
    let d = t.device(4096);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, 4096), Cmd::Read(d.buf)]);
    }
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Threshold, "{msg}");
    assert!(msg.contains("min_copies"), "{msg}");
    // The same trace with a lower min_bytes is accepted.
    let a = t.analyze_with(Thresholds {
        min_bytes: 4096,
        min_copies: 2,
    });
    accepted(decision(&a, 1, 2));
    // One big copy, staging kept: not enough copies.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 1);
    t.run(&[Cmd::Read(d.buf)]);
    assert_eq!(
        rejected(decision(&t.analyze(), 1, 2)).0,
        Condition::Threshold
    );
    let a = t.analyze_with(Thresholds {
        min_bytes: MIB,
        min_copies: 1,
    });
    accepted(decision(&a, 1, 2));
}

#[test]
fn one_time_upload_is_accepted_staging_into_device() {
    let mut t = T::new();
    let w = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(w.mem);
    t.host_write(w.buf);
    t.run(&[Cmd::Copy(w.buf, d.buf, MIB)]);
    t.destroy(w.buf);
    t.free(w.mem);
    for _ in 0..5 {
        t.run(&[Cmd::Read(d.buf)]);
    }
    let a = t.analyze();
    let (_, dir, one) = accepted(decision(&a, 1, 2));
    assert_eq!(dir, Direction::StagingIntoDevice);
    assert!(one);
    assert!(a.plan.groups[0].members[0].one_time);
}

#[test]
fn one_time_upload_through_a_pool_is_refused() {
    let mut t = T::new();
    let (pool, h, d) = pooled(&mut t);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB)]);
    t.destroy(h.buf);
    for _ in 0..3 {
        t.run(&[Cmd::Read(d.buf)]);
    }
    let _ = pool;
    let (c, _, msg) = rejected(decision(&t.analyze(), 2, 3));
    assert_eq!(c, Condition::Threshold, "{msg}");
    assert!(msg.contains("raise the footprint"), "{msg}");
}

#[test]
fn compat_memory_type_alignment_and_untracked_use() {
    // Device buffer that does not allow the pool's memory type.
    let mut t = T::new();
    let pool = t.alloc(8 * MIB, 1, None);
    t.map(pool);
    let _other = t.sub_staging(pool, 0, MIB);
    let h = t.sub_staging(pool, MIB, MIB);
    let buf = t.create(MIB, STORAGE | DST, 0);
    let mem = t.alloc(MIB, 0, Some(buf));
    t.bind(buf, mem, 0);
    // Rewrite the device buffer's requirement: only type 0.
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer, req, .. } = &mut r.event {
            if *buffer == buf {
                req.type_bits = 0b1;
            }
        }
    }
    upload_loop(&mut t, h, Buf { buf, mem }, 3);
    let (c, _, msg) = rejected(decision(&t.analyze(), 2, 3));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(msg.contains("memoryTypeBits"), "{msg}");

    // Misaligned: the device buffer needs 64 KiB alignment, the staging range sits at 4 KiB.
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let _other = t.sub_staging(pool, 0, 4096);
    let h = t.sub_staging(pool, 4096, MIB);
    let d = t.device(MIB);
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer, req, .. } = &mut r.event {
            if *buffer == d.buf {
                req.alignment = 65536;
            }
        }
    }
    upload_loop(&mut t, h, d, 3);
    let (c, _, msg) = rejected(decision(&t.analyze(), 2, 3));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(msg.contains("alignment"), "{msg}");

    // Device buffer larger than the staging range (staging into device needs h to fit in d,
    // device into staging needs d to fit in h): a larger d with a smaller pooled h fails.
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let _other = t.sub_staging(pool, 2 * MIB, MIB);
    let h = t.sub_staging(pool, 0, MIB);
    let d = t.device(2 * MIB);
    upload_loop(&mut t, h, d, 3);
    let (c, _, msg) = rejected(decision(&t.analyze(), 2, 3));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(msg.contains("needs"), "{msg}");

    // Untracked use.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.run(&[Cmd::Untracked(d.buf)]);
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(msg.contains("cannot follow"), "{msg}");
}

#[test]
fn resubmitted_command_buffer_counts_every_execution() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    let cmd = t.handle();
    t.push(Event::CmdBegin {
        cmd,
        one_time: false,
    });
    t.push(Event::CmdCopyBuffer {
        cmd,
        src: h.buf,
        dst: d.buf,
        regions: vec![echo_analyzer::trace::CopyRegion {
            src_offset: 0,
            dst_offset: 0,
            size: MIB,
        }],
    });
    t.push(Event::CmdEnd { cmd });
    for _ in 0..5 {
        t.host_write(h.buf);
        let f = t.handle();
        let q = t.queue;
        t.push(Event::QueueSubmit {
            queue: q,
            batches: vec![echo_analyzer::trace::SubmitBatch {
                command_buffers: vec![cmd],
                waits: vec![],
                signals: vec![],
            }],
            fence: Some(f),
        });
        t.wait(f);
    }
    let a = t.analyze();
    assert_eq!(a.candidates[0].copies, 5);
    assert_eq!(a.candidates[0].iterations, 5);
    accepted(decision(&a, 1, 2));
}

#[test]
fn recycled_handles_are_distinct_buffers() {
    // A handle value reused after destroy names a new buffer (#3), not the old one.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.destroy(d.buf);
    let key = echo_analyzer::trace::ObjectKey {
        site: "re".into(),
        size: MIB,
        usage: STORAGE,
        flags: 0,
        ordinal: 0,
    };
    t.push(Event::BufferCreate {
        buffer: d.buf,
        key,
        usage: STORAGE | DST,
        flags: 0,
        size: MIB,
        req: echo_analyzer::trace::MemReq {
            size: MIB,
            alignment: 256,
            type_bits: 3,
        },
        stack: vec![],
        modules: vec![],
    });
    let mem = t.alloc(MIB, 0, Some(d.buf));
    t.bind(d.buf, mem, 0);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB)]);
    let a = t.analyze();
    // h now has two partners (#2 then #3) over the same bytes: reuse.
    assert_eq!(a.candidates.len(), 2);
    assert_eq!(rejected(decision(&a, 1, 3)).0, Condition::Reuse);
}

#[test]
fn nothing_to_pair_is_still_a_valid_plan() {
    let t = T::new();
    let a = t.analyze();
    assert!(a.plan.groups.is_empty() && a.plan.rejected.is_empty());
    let text = echo_analyzer::report::table(&a, "empty.jsonl");
    assert!(text.contains("no candidates"), "{text}");
}

#[test]
fn truncated_trace_refuses_every_candidate() {
    // Fail closed: what happened after the cut is unknown.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.push(Event::Truncated {
        dropped_after_bytes: 1 << 30,
    });
    let a = t.analyze();
    assert!(a.truncated);
    assert!(a.warnings[0].contains("truncated"), "{:?}", a.warnings);
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(msg.contains("trace_max_bytes"), "{msg}");
    assert!(a.plan.groups.is_empty());
}

#[test]
fn validation_off_or_unknown_refuses_instead_of_warning() {
    for v in ["off", "bogus"] {
        let mut t = T::with_validation(v);
        let h = t.staging(MIB);
        let d = t.device(MIB);
        upload_loop(&mut t, h, d, 3);
        let a = t.analyze();
        let (c, _, msg) = rejected(decision(&a, 1, 2));
        assert_eq!(c, Condition::Evidence, "{v}: {msg}");
        assert!(msg.contains("validate=true"), "{msg}");
        assert!(a.plan.groups.is_empty(), "{v}");
    }
    // The same traffic with validation on is accepted: the refusal is the evidence's doing.
    let mut t = T::with_validation("driver-map");
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    accepted(decision(&t.analyze(), 1, 2));
}

#[test]
fn validation_lost_during_the_run_refuses() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 1);
    let lost = t.push(Event::ValidationLost {
        reason: "the application replaced the SIGSEGV handler".into(),
    });
    upload_loop(&mut t, h, d, 2);
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!((c, ev), (Condition::Evidence, Some(lost)), "{msg}");
    assert!(msg.contains("SIGSEGV"), "{msg}");
}

#[test]
fn unvalidated_staging_buffer_refuses_its_own_pairs_only() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    let h2 = t.staging(MIB);
    let d2 = t.device(MIB);
    t.push(Event::Unvalidated {
        buffer: h2.buf,
        reason: "its allocation could not be double-mapped".into(),
    });
    upload_loop(&mut t, h, d, 3);
    upload_loop(&mut t, h2, d2, 3);
    let a = t.analyze();
    accepted(decision(&a, 1, 2));
    let (c, _, msg) = rejected(decision(&a, 3, 4));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(msg.contains("double-mapped"), "{msg}");
}

/// map → (host writes, unseen: the buffer is not bound yet) → unmap → bind, while the device
/// buffer it will share memory with is still in use by the GPU: the bytes carried at the bind
/// would land under running GPU work, so the pair is refused (S2).
#[test]
fn write_before_bind_is_a_host_write_at_the_bind() {
    let mut t = T::new();
    let d = t.device(MIB);
    let h = t.filled_unbound(MIB);
    let (_, fence) = t.submit(&[Cmd::ReadWrite(d.buf)]);
    let bind = t.bind(h.buf, h.mem, 0);
    t.wait(fence);
    for _ in 0..3 {
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let a = t.analyze();
    let (c, ev, msg) = rejected(decision(&a, 2, 1));
    assert_eq!((c, ev), (Condition::S2, Some(bind)), "{msg}");

    // The same order with the GPU idle at the bind: accepted (enforce carries the bytes).
    let mut t = T::new();
    let d = t.device(MIB);
    let h = t.filled_unbound(MIB);
    t.bind(h.buf, h.mem, 0);
    // (The staging bytes are uploaded again unchanged every iteration, as renderers do, so the
    // dispatch only reads the device buffer: writing it would change what the next copy
    // brings, and S1 refuses that.)
    for _ in 0..3 {
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    }
    accepted(decision(&t.analyze(), 2, 1));
}

/// Two devices in one process, with colliding handles: each device's traffic is analyzed on
/// its own and the plan says which device each group belongs to.
#[test]
fn devices_are_analyzed_apart() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.new_device(1, "double-map");
    let h1 = t.staging(2 * MIB);
    let d1 = t.device(2 * MIB);
    assert_eq!(
        (h1.buf, d1.buf),
        (h.buf, d.buf),
        "handles collide across devices"
    );
    // Device 1's host writes its staging buffer while the GPU still uses its partner: S2.
    for _ in 0..3 {
        let (_, f) = t.submit(&[Cmd::Copy(h1.buf, d1.buf, 2 * MIB), Cmd::ReadWrite(d1.buf)]);
        t.host_write(h1.buf);
        t.wait(f);
    }
    let a = t.analyze();
    assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.plan.groups);
    assert_eq!(a.plan.groups[0].device_index, 0);
    let rows: Vec<_> = a
        .candidates
        .iter()
        .map(|c| (c.device_index, &c.decision))
        .collect();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert!(
        matches!(rows[0], (0, Decision::Accepted { .. })),
        "{rows:#?}"
    );
    assert!(
        matches!(
            rows[1],
            (
                1,
                Decision::Rejected {
                    condition: Condition::S2,
                    ..
                }
            )
        ),
        "{rows:#?}"
    );
    assert_eq!(a.plan.rejected[0].device_index, 1);
    // A second accepted group on device 1 gets the next id, not a second "group 1".
    let mut t2 = T::new();
    let h = t2.staging(MIB);
    let d = t2.device(MIB);
    upload_loop(&mut t2, h, d, 3);
    t2.new_device(1, "double-map");
    let h = t2.staging(MIB);
    let d = t2.device(MIB);
    upload_loop(&mut t2, h, d, 3);
    let a = t2.analyze();
    let ids: Vec<(u32, u32)> = a
        .plan
        .groups
        .iter()
        .map(|g| (g.id, g.device_index))
        .collect();
    assert_eq!(ids, vec![(1, 0), (2, 1)]);
}

#[test]
fn report_table_and_json_show_every_candidate() {
    let mut t = T::new();
    let h = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h.mem);
    upload_loop(&mut t, h, d, 3);
    let h2 = t.staging(MIB);
    let d2 = t.device(MIB);
    t.address(d2.buf);
    upload_loop(&mut t, h2, d2, 3);
    let a = t.analyze();
    let text = echo_analyzer::report::table(&a, "x.jsonl");
    assert!(
        text.contains("accepted: group 1, staging into device"),
        "{text}"
    );
    assert!(text.contains("rejected: S3 at event"), "{text}");
    assert!(text.contains("created at app+0x"), "{text}");
    assert!(text.contains("why rejected:"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&echo_analyzer::report::json(&a)).unwrap();
    assert_eq!(v["candidates"].as_array().unwrap().len(), 2);
    assert_eq!(v["candidates"][1]["decision"], "rejected");
    assert_eq!(v["candidates"][1]["condition"], "S3");
    assert_eq!(v["plan"]["groups"].as_array().unwrap().len(), 1);
}

#[test]
fn completion_follows_semaphore_waits_across_queues() {
    // Upload on a transfer queue signals a semaphore; the compute queue waits on it and carries
    // the fence. Observing the fence completes the upload too.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for i in 0..3u64 {
        t.host_write(h.buf);
        t.queue = 0x901;
        t.submit_with(&[Cmd::Copy(h.buf, d.buf, MIB)], None, vec![(0x55, 0)]);
        t.queue = 0x900;
        let cmd = t.handle();
        t.push(Event::CmdBegin {
            cmd,
            one_time: true,
        });
        t.push(Event::CmdUse {
            cmd,
            command: "vkCmdDispatch".into(),
            uses: vec![echo_analyzer::trace::BufferUse {
                buffer: d.buf,
                offset: 0,
                size: u64::MAX,
                access: echo_analyzer::trace::Access::ReadWrite,
                kind: echo_analyzer::trace::UseKind::Descriptor,
            }],
            late: None,
        });
        let fence = 0x7000 + i;
        t.push(Event::QueueSubmit {
            queue: 0x900,
            batches: vec![echo_analyzer::trace::SubmitBatch {
                command_buffers: vec![cmd],
                waits: vec![(0x55, 0)],
                signals: vec![],
            }],
            fence: Some(fence),
        });
        t.wait(fence);
    }
    accepted(decision(&t.analyze(), 1, 2));

    // Without the wait edge, the upload queue's work is never observed complete: S2.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.queue = 0x901;
        t.submit_with(&[Cmd::Copy(h.buf, d.buf, MIB)], None, vec![]);
        t.queue = 0x900;
        t.run(&[Cmd::ReadWrite(d.buf)]);
    }
    assert_eq!(rejected(decision(&t.analyze(), 1, 2)).0, Condition::S2);
}

#[test]
fn device_memory_sub_allocated_and_recycled_under_staging_is_s4() {
    // Staging into device, but the device buffer lives in a shared block whose range is handed
    // to another buffer after the device buffer is destroyed, while the staging buffer lives on.
    let build = |d_type_bits: u32| {
        let mut t = T::new();
        let buf = t.create(MIB, SRC | DST, 0);
        let mem = t.alloc(MIB, 1, Some(buf));
        t.bind(buf, mem, 0);
        t.map(mem);
        let h = Buf { buf, mem };
        let block = t.alloc(8 * MIB, 0, None);
        let dbuf = t.create(MIB, STORAGE | DST, 0);
        for r in &mut t.recs {
            if let Event::BufferCreate { buffer, req, .. } = &mut r.event {
                if *buffer == dbuf {
                    req.type_bits = d_type_bits;
                }
            }
        }
        t.bind(dbuf, block, 0);
        let other = t.create(MIB, STORAGE, 0);
        t.bind(other, block, 2 * MIB);
        upload_loop(
            &mut t,
            h,
            Buf {
                buf: dbuf,
                mem: block,
            },
            3,
        );
        t.destroy(dbuf);
        let y = t.create(MIB, STORAGE, 0);
        let rebind = t.bind(y, block, 0);
        t.host_write(h.buf);
        (t.analyze(), rebind)
    };
    // The device buffer can still move into the staging allocation instead: accepted that way.
    let (a, _) = build(0b11);
    let (_, dir, _) = accepted(decision(&a, 1, 2));
    assert_eq!(dir, Direction::DeviceIntoStaging);
    // It cannot (the staging memory type is not allowed for it): S4, and both reasons are given.
    let (a, rebind) = build(0b01);
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S4, "{msg}");
    assert_eq!(ev, Some(rebind));
    assert!(
        msg.contains("device into staging fails too: compat"),
        "{msg}"
    );
}

/// A secondary command buffer that reads `d`, executed (or not) from a primary submitted after the
/// host wrote `h` again without a copy: the secondary's read happens in that submission.
fn secondary_read_trace(execute: bool) -> T {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 2);
    let sec = t.handle();
    t.push(Event::CmdBegin {
        cmd: sec,
        one_time: false,
    });
    t.push(Event::CmdUse {
        cmd: sec,
        command: "vkCmdDispatch".into(),
        uses: vec![BufferUse {
            buffer: d.buf,
            offset: 0,
            size: u64::MAX,
            access: Access::Read,
            kind: UseKind::Descriptor,
        }],
        late: None,
    });
    t.push(Event::CmdEnd { cmd: sec });
    t.host_write(h.buf);
    let prim = t.handle();
    t.push(Event::CmdBegin {
        cmd: prim,
        one_time: true,
    });
    if execute {
        t.push(Event::CmdExecute {
            cmd: prim,
            secondaries: vec![sec],
        });
    }
    t.push(Event::CmdEnd { cmd: prim });
    let fence = t.handle();
    let queue = t.queue;
    t.push(Event::QueueSubmit {
        queue,
        batches: vec![SubmitBatch {
            command_buffers: vec![prim],
            waits: vec![],
            signals: vec![],
        }],
        fence: Some(fence),
    });
    t.wait(fence);
    t
}

#[test]
fn a_secondarys_uses_happen_where_the_primary_executes_it() {
    // Control: without the execute, nothing reads d after the host's last write.
    let a = secondary_read_trace(false).analyze();
    accepted(decision(&a, 1, 2));
    // With it, the secondary's read of d sees a value the host overwrote through h: S1.
    let t = secondary_read_trace(true);
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("vkCmdDispatch"), "{msg}");
    // The model runs the secondary's op in the primary's submission, in place.
    let m = echo_analyzer::model::Model::build(&t.trace());
    let last = m.submissions.len() - 1;
    let names: Vec<String> = m.ops(last).map(|o| o.name()).collect();
    assert_eq!(names, ["vkCmdDispatch"]);
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
}

#[test]
fn executing_an_unrecorded_secondary_is_a_warning() {
    let mut t = T::new();
    let prim = t.handle();
    t.push(Event::CmdBegin {
        cmd: prim,
        one_time: true,
    });
    t.push(Event::CmdExecute {
        cmd: prim,
        secondaries: vec![0xdead],
    });
    let m = echo_analyzer::model::Model::build(&t.trace());
    assert!(
        m.warnings[0].contains("executed secondary command buffer 0xdead was never recorded"),
        "{:?}",
        m.warnings
    );
}

/// The host fills the staging buffer once, before its first copy (the layer cannot see that
/// write), and uploads it again every iteration while a dispatch rewrites the device buffer in
/// place: sharing memory, the second upload would copy the dispatch's result, not the input.
#[test]
fn input_written_before_the_first_copy_and_uploaded_again_is_s1() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("before its first copy (not traced)"), "{msg}");
}

/// Buffers below the profiling run's `min_bytes` carry an anonymous key (no call site was
/// taken). Analyzed with lower thresholds, their pairs pass the threshold but are refused: a
/// later run could not recognise them.
#[test]
fn buffers_without_identity_are_never_paired() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer, key, .. } = &mut r.event {
            if *buffer == h.buf {
                *key = echo_analyzer::trace::ObjectKey::anonymous(key.size, key.usage, key.flags);
            }
        }
    }
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::Compat, "{msg}");
    assert!(msg.contains("no identity"), "{msg}");
    assert!(a.plan.groups.is_empty());
}

/// A buffer the trace never saw created (bound before tracing, imported, from a layer below) is
/// explained once, with how often it was used, not warned per command.
#[test]
fn unknown_buffer_is_explained_once() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    for _ in 0..3 {
        t.run(&[Cmd::ReadWrite(0xdead)]);
    }
    t.run(&[Cmd::Copy(0xdead, d.buf, MIB)]);
    let a = t.analyze();
    let about: Vec<&String> = a.warnings.iter().filter(|w| w.contains("0xdead")).collect();
    assert_eq!(about.len(), 1, "{:#?}", a.warnings);
    assert!(
        about[0].contains("4 uses by vkCmdCopyBuffer, vkCmdDispatch"),
        "{}",
        about[0]
    );
    accepted(decision(&a, 1, 2));
}

/// h_in → d → h_out with the staging buffers made after d is bound.
fn round_trip(t: &mut T, h_in: Buf, d: Buf, h_out: Buf) {
    for _ in 0..3 {
        t.host_write(h_in.buf);
        t.run(&[
            Cmd::Copy(h_in.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h_out.buf, MIB),
        ]);
        t.host_read(h_out.buf);
    }
}

/// DESIGN §6 "Memory": a member's own allocation that holds only its bytes, made once the
/// device buffer is bound, need not be made at the driver.
#[test]
fn staging_allocations_holding_only_their_member_are_not_made() {
    let mut t = T::new();
    let d = t.device(MIB);
    let h_in = t.staging(MIB);
    let h_out = t.staging(MIB);
    round_trip(&mut t, h_in, d, h_out);
    let a = t.analyze();
    let g = &a.plan.groups[0];
    assert_eq!(g.members.len(), 2);
    for m in &g.members {
        assert!(m.skip_allocation, "{m:?}");
        assert!(m.allocation_note.is_empty());
    }
    // The plan says so in its JSON (read by the layer), and an older plan without it reads false.
    let json = a.plan.to_json();
    assert!(json.contains("\"skip_allocation\": true"), "{json}");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for m in v["groups"][0]["members"].as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("skip_allocation");
    }
    let p = echo_analyzer::plan::parse_plan(&v.to_string()).unwrap();
    assert!(p.groups[0].members.iter().all(|m| !m.skip_allocation));
}

#[test]
fn staging_allocation_is_made_when_the_plan_cannot_vouch_for_it() {
    // Allocated before the device buffer is bound: where its bytes will live is not known then.
    let mut t = T::new();
    let h_in = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h_in.mem);
    let h_out = t.staging(MIB);
    round_trip(&mut t, h_in, d, h_out);
    let a = t.analyze();
    let g = &a.plan.groups[0];
    let m_in = g
        .members
        .iter()
        .find(|m| m.role == Role::Upload)
        .expect("upload member");
    assert!(!m_in.skip_allocation);
    assert!(
        m_in.allocation_note
            .contains("before the device buffer was bound"),
        "{}",
        m_in.allocation_note
    );
    assert!(g.members.iter().any(|m| m.skip_allocation), "{g:?}");

    // A map of bytes outside the member's range: they are not the member's. (The device
    // allocation is 2 MiB too: the whole staging allocation's map is served from it.)
    let mut t = T::new();
    let dbuf = t.create(MIB, STORAGE | SRC | DST, 0);
    let dmem = t.alloc(2 * MIB, 0, Some(dbuf));
    t.bind(dbuf, dmem, 0);
    let d = Buf {
        buf: dbuf,
        mem: dmem,
    };
    let buf = t.create(MIB, SRC | DST, 0);
    let mem = t.alloc(2 * MIB, 0, None);
    t.bind(buf, mem, 0);
    t.map(mem); // the whole 2 MiB
    let h_in = Buf { buf, mem };
    let h_out = t.staging(MIB);
    round_trip(&mut t, h_in, d, h_out);
    let a = t.analyze();
    let g = &a.plan.groups[0];
    let m_in = g
        .members
        .iter()
        .find(|m| m.role == Role::Upload)
        .expect("the upload member is still aliased");
    assert!(!m_in.skip_allocation);
    assert!(
        m_in.allocation_note
            .contains("outside the staging buffer's range"),
        "{}",
        m_in.allocation_note
    );

    // Issue 23 (6): with the device buffer in a 1 MiB allocation, the 2 MiB staging allocation's
    // map cannot be served from it: enforce would refuse the member in every run
    // (apply::check_map_redirect), so the analysis refuses it, with that reason.
    let mut t = T::new();
    let d = t.device(MIB);
    let buf = t.create(MIB, SRC | DST, 0);
    let mem = t.alloc(2 * MIB, 0, None);
    t.bind(buf, mem, 0);
    t.map(mem);
    let h_in = Buf { buf, mem };
    let h_out = t.staging(MIB);
    round_trip(&mut t, h_in, d, h_out);
    let a = t.analyze();
    let r = a
        .plan
        .rejected
        .iter()
        .find(|r| r.message.contains("cannot be served from the memory of"))
        .unwrap_or_else(|| {
            panic!(
                "want the upload refused for its map: {:#?}",
                a.plan.rejected
            )
        });
    assert!(
        r.message.contains("2097152-byte allocation") && r.message.contains("1048576-byte device"),
        "{}",
        r.message
    );

    // Sub-allocated staging (device_into_staging): no allocation of its own to leave out.
    let mut t = T::new();
    let (_pool, h, d) = pooled(&mut t);
    upload_loop(&mut t, h, d, 3);
    let a = t.analyze();
    assert_eq!(a.plan.groups[0].direction, Direction::DeviceIntoStaging);
    assert!(!a.plan.groups[0].members[0].skip_allocation);
}

/// DESIGN §6 "Memory", plan `device_memory`: the device buffer of a `device_into_staging` group
/// lives in the staging range, so its own allocation need not be made — in full when it holds
/// nothing else, only the window holding the other buffers when it does (suballoc's parameter
/// buffer) — unless the host maps it.
#[test]
fn device_allocations_of_device_into_staging_groups_are_made_in_part() {
    // Other buffers at these offsets → the window planned (None: made whole).
    type Case<'a> = (&'a [u64], Option<(u64, u64)>);
    let cases: [Case; 4] = [
        (&[], Some((0, 0))),
        (&[256], Some((0, 512))),
        (
            &[3 * MIB],
            Some((3 * MIB - (3 * MIB) % (1 << 16), 3 * MIB + 256)),
        ),
        // Around the device buffer: the window would be all of it.
        (&[0, 4 * MIB - 256], None),
    ];
    for (others, want) in cases {
        let mut t = T::new();
        let pool = t.pool(8 * MIB);
        let _other = t.sub_staging(pool, 4 * MIB, MIB);
        let h = t.sub_staging(pool, MIB, MIB);
        let block = t.alloc(4 * MIB, 0, None);
        for &at in others {
            let p = t.create(256, STORAGE, 0);
            t.bind(p, block, at);
        }
        let d = t.create(MIB, STORAGE | SRC | DST, 0);
        t.bind(d, block, MIB);
        let d = Buf { buf: d, mem: block };
        upload_loop(&mut t, h, d, 3);
        let a = t.analyze();
        assert_eq!(a.plan.groups.len(), 1, "{others:?}: {:#?}", a.candidates);
        let g = &a.plan.groups[0];
        assert_eq!(g.direction, Direction::DeviceIntoStaging);
        let got = g.device_memory.as_ref().map(|m| (m.window_lo, m.window_hi));
        assert_eq!(got, want, "other buffers at {others:?}");
        if let Some(m) = &g.device_memory {
            assert_eq!(m.key.size, 4 * MIB);
            // The report says so, for people.
            let text = echo_analyzer::report::table(&a, "t.jsonl");
            let said = if m.window_hi > m.window_lo {
                format!(
                    "is made only in [{}, {}) at the driver",
                    m.window_lo, m.window_hi
                )
            } else {
                "is not made at the driver".into()
            };
            assert!(text.contains(&said), "{text}");
        }
    }
    // A device buffer's dedicated allocation: not made at all; an older plan without the
    // field reads None.
    let mut t = T::new();
    let (_pool, h, d) = pooled(&mut t);
    upload_loop(&mut t, h, d, 3);
    let json = t.analyze().plan.to_json();
    let p = echo_analyzer::plan::parse_plan(&json).unwrap();
    let m = p.groups[0].device_memory.as_ref().expect("planned");
    assert_eq!((m.window_lo, m.window_hi), (0, 0));
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["groups"][0]
        .as_object_mut()
        .unwrap()
        .remove("device_memory");
    let p = echo_analyzer::plan::parse_plan(&v.to_string()).unwrap();
    assert!(p.groups[0].device_memory.is_none());
}

/// Issue 23 (2): a device buffer named by a recorded command before the readback buffer it
/// would be bound into is bound (wgpu records the copy into its device buffer before it makes
/// the MAP_READ buffer): enforce would hold the device buffer's bind back past that command, so
/// the group is refused, with the command and both events; the twin that records it afterwards
/// keeps its group.
#[test]
fn device_buffer_named_before_its_partner_is_bound_is_refused() {
    for early in [true, false] {
        let mut t = T::new();
        let s = t.device(MIB);
        let d = t.device(MIB);
        if early {
            t.run(&[Cmd::Copy(s.buf, d.buf, MIB)]);
        }
        let pool = t.pool(2 * MIB);
        let r = t.sub_staging(pool, 0, MIB);
        let _x = t.sub_staging(pool, MIB, 64 * 1024); // r's memory is not r's alone
        for _ in 0..3 {
            t.run(&[Cmd::Copy(s.buf, d.buf, MIB), Cmd::Copy(d.buf, r.buf, MIB)]);
            t.host_read(r.buf);
        }
        let a = t.analyze();
        if early {
            assert!(a.plan.groups.is_empty(), "{:#?}", a.plan.groups);
            let r = &a.plan.rejected[0];
            assert_eq!(r.condition, Condition::Compat);
            assert!(
                r.message.contains("vkCmdCopyBuffer recorded at event")
                    && r.message.contains("enforce holds the bind back")
                    && r.message.contains("was created only at event"),
                "{}",
                r.message
            );
        } else {
            assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.plan.rejected);
            assert_eq!(a.plan.groups[0].direction, Direction::DeviceIntoStaging);
        }
    }
}
