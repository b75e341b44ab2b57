//! Roles from behaviour (DESIGN §5): on a `uma-strict` device allocators map every block, so a
//! staging buffer and its partner may both live in one mapped, sub-allocated allocation. The
//! staging buffer is the side of a copy the host touches; its partner the side it leaves alone;
//! mapping is neither required nor decisive. And: the summary that says why copies did not
//! become pairs, one reason at a time.

mod common;
use common::*;
use echo_analyzer::analysis::Analysis;
use echo_analyzer::plan::{Condition, Direction, Role, Thresholds};
use echo_analyzer::report;
use echo_analyzer::trace::{CopyRegion, Event};

/// One 8 MiB mapped block: staging at 0, the device buffer at 4 MiB, both watched from their
/// bind (what the layer records for mapped buffers ≥ min_bytes).
fn block(t: &mut T) -> (u64, Buf, Buf) {
    let pool = t.pool(8 * MIB);
    let h = t.sub_watched(pool, 0, MIB, SRC | DST);
    let d = t.sub_watched(pool, 4 * MIB, MIB, STORAGE | SRC | DST);
    (pool, h, d)
}

/// upload → dispatch → readback through one staging buffer, `iters` times.
fn round_trips(t: &mut T, h: Buf, d: Buf, iters: usize) {
    for _ in 0..iters {
        t.host_write(h.buf);
        t.run(&[
            Cmd::Copy(h.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h.buf, MIB),
        ]);
        t.host_read(h.buf);
    }
}

fn reason<'a>(a: &'a Analysis, r: &str) -> &'a echo_analyzer::analysis::ReasonSummary {
    a.copies
        .reasons
        .iter()
        .find(|x| x.reason == r)
        .unwrap_or_else(|| panic!("no reason {r}: {:#?}", a.copies))
}

#[test]
fn both_roles_in_one_mapped_block_pair_by_behaviour() {
    let mut t = T::new();
    let (_, h, d) = block(&mut t);
    round_trips(&mut t, h, d, 3);
    let a = t.analyze();
    let row = &a.candidates[0];
    assert_eq!((row.staging.number, row.device.number), (1, 2), "{a:#?}");
    assert_eq!(row.role, Role::Both);
    let (_, dir, one) = accepted(&row.decision);
    // Sub-allocated staging: its memory holds the partner too, so the partner moves into it.
    assert_eq!(dir, Direction::DeviceIntoStaging);
    assert!(!one);
    assert_eq!(a.copies.copies, 6);
    assert_eq!(a.copies.accepted_copies, 6);
    assert!(a.copies.reasons.is_empty(), "{:#?}", a.copies);
}

#[test]
fn the_side_the_host_touches_is_staging_whichever_way_the_buffers_were_made() {
    // The "device" buffer made first, the staging buffer second, the copies going both ways:
    // the host reads and writes only #2, so #2 is the staging buffer.
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let d = t.sub_watched(pool, 0, MIB, STORAGE | SRC | DST);
    let h = t.sub_watched(pool, 2 * MIB, MIB, SRC | DST);
    round_trips(&mut t, h, d, 3);
    let a = t.analyze();
    assert_eq!(a.candidates.len(), 1);
    assert_eq!(
        (
            a.candidates[0].staging.number,
            a.candidates[0].device.number
        ),
        (2, 1)
    );
    accepted(&a.candidates[0].decision);
}

#[test]
fn mapped_sides_without_observed_host_accesses_are_refused_for_evidence() {
    // The same program, traced by a layer that did not watch mapped partners: which side is
    // the staging buffer is not known (fail closed), and the summary says so and what to do.
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let h = t.sub_staging(pool, 0, MIB);
    let d = t.sub_staging(pool, 4 * MIB, MIB);
    round_trips(&mut t, h, d, 3);
    let a = t.analyze();
    assert!(a.candidates.is_empty());
    assert!(a.plan.groups.is_empty());
    let r = reason(&a, "no_evidence");
    assert_eq!((r.copies, r.bytes), (6, 6 * MIB));
    assert!(
        r.remedy.contains("min_bytes at most 1048576"),
        "{}",
        r.remedy
    );
    // Only one side watched: still refused.
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let h = t.sub_watched(pool, 0, MIB, SRC | DST);
    let d = t.sub_staging(pool, 4 * MIB, MIB);
    round_trips(&mut t, h, d, 3);
    let a = t.analyze();
    assert!(a.candidates.is_empty());
    assert_eq!(reason(&a, "no_evidence").copies, 6);
}

#[test]
fn host_touching_both_sides_is_no_pair() {
    let mut t = T::new();
    let (_, h, d) = block(&mut t);
    round_trips(&mut t, h, d, 2);
    t.host_write(d.buf);
    let a = t.analyze();
    assert!(a.candidates.is_empty(), "{:#?}", a.candidates);
    let r = reason(&a, "host_both");
    assert_eq!((r.pairs, r.copies), (1, 4));
    assert!(r.remedy.contains("only one side"), "{}", r.remedy);
}

#[test]
fn host_touching_neither_side_is_no_pair() {
    let mut t = T::new();
    let (_, h, d) = block(&mut t);
    for _ in 0..3 {
        t.run(&[
            Cmd::Write(h.buf),
            Cmd::Copy(h.buf, d.buf, MIB),
            Cmd::Read(d.buf),
        ]);
    }
    let a = t.analyze();
    assert!(a.candidates.is_empty());
    assert_eq!(reason(&a, "host_neither").copies, 3);
}

#[test]
fn host_write_to_staging_while_gpu_reads_the_mapped_partner_is_s2() {
    // The negative twin of the sub-allocating program: the host writes the staging range while
    // the dispatch reading the device side is still in flight.
    let mut t = T::new();
    let (_, h, d) = block(&mut t);
    round_trips(&mut t, h, d, 2);
    t.host_write(h.buf);
    let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    let racy = t.host_write(h.buf);
    t.wait(f);
    let a = t.analyze();
    let (c, ev, msg) = rejected(&a.candidates[0].decision);
    assert_eq!(c, Condition::S2, "{msg}");
    assert_eq!(ev, Some(racy));
    assert!(reason(&a, "S2").remedy.contains("fence"));
}

#[test]
fn mapped_partner_whose_accesses_were_not_seen_is_refused() {
    let mut t = T::new();
    let (_, h, d) = block(&mut t);
    t.push(Event::Unvalidated {
        buffer: d.buf,
        reason: "protecting it failed: test".into(),
    });
    round_trips(&mut t, h, d, 3);
    let (c, _, msg) = rejected(&t.analyze().candidates[0].decision);
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(msg.contains("device buffer #2"), "{msg}");
}

#[test]
fn unmapped_partner_needs_no_watch_record() {
    // Older traces (no `watched` records): a copy between a mapped and an unmapped buffer still
    // pairs; the unmapped side is one the host cannot touch.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    round_trips(&mut t, h, d, 3);
    accepted(decision(&t.analyze(), 1, 2));
}

#[test]
fn one_time_download_is_a_candidate_like_a_one_time_upload() {
    // A single readback of a large result, then the staging buffer is destroyed.
    let mut t = T::new();
    let h = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h.mem);
    for _ in 0..3 {
        t.run(&[Cmd::ReadWrite(d.buf)]);
    }
    t.run(&[Cmd::Copy(d.buf, h.buf, MIB)]);
    t.host_read(h.buf);
    t.destroy(h.buf);
    t.free(h.mem);
    let a = t.analyze();
    let row = &a.candidates[0];
    assert_eq!(row.role, Role::Readback);
    let (_, dir, one) = accepted(&row.decision);
    assert_eq!(dir, Direction::StagingIntoDevice);
    assert!(one);
    assert!(report::table(&a, "t").contains("one-time download"));
    // Kept alive after its single readback, it is not one-time: below min_copies.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.run(&[Cmd::ReadWrite(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
    t.host_read(h.buf);
    let (c, _, _) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Threshold);
}

#[test]
fn one_time_download_through_a_pool_is_explained_as_one_time() {
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let _other = t.sub_staging(pool, 4 * MIB, MIB);
    let h = t.sub_staging(pool, 0, MIB);
    let d = t.device(MIB);
    t.run(&[Cmd::ReadWrite(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
    t.host_read(h.buf);
    t.destroy(h.buf);
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 2, 3));
    assert_eq!(c, Condition::Threshold);
    assert!(msg.contains("download into"), "{msg}");
    let r = reason(&a, "one_time");
    assert!(r.remedy.contains("min_copies=1"), "{}", r.remedy);
    // The remedy holds: with min_copies=1 the pair is taken the other way.
    let a = t.analyze_with(Thresholds {
        min_bytes: 256 * 1024,
        min_copies: 1,
    });
    let (_, dir, _) = accepted(decision(&a, 2, 3));
    assert_eq!(dir, Direction::DeviceIntoStaging);
}

#[test]
fn below_thresholds_names_the_settings_that_would_admit_them() {
    let mut t = T::new();
    let h = t.staging(64 * 1024);
    let d = t.device(64 * 1024);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, 64 * 1024), Cmd::Read(d.buf)]);
    }
    let a = t.analyze();
    let r = reason(&a, "threshold");
    assert_eq!((r.pairs, r.copies, r.bytes), (1, 3, 3 * 64 * 1024));
    assert!(
        r.explanation.contains("min_bytes=262144"),
        "{}",
        r.explanation
    );
    assert!(r.remedy.contains("min_bytes=65536"), "{}", r.remedy);
    // The remedy holds.
    let a = t.analyze_with(Thresholds {
        min_bytes: 65536,
        min_copies: 2,
    });
    accepted(decision(&a, 1, 2));
    // Big but too few: min_copies is named.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    let a = t.analyze();
    let r = reason(&a, "threshold");
    assert!(r.remedy.contains("min_copies=1 admits 1"), "{}", r.remedy);
}

#[test]
fn shared_staging_ring_is_reuse_and_stays_refused() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d1 = t.device(MIB);
    let d2 = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d1.buf, MIB), Cmd::Read(d1.buf)]);
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d2.buf, MIB), Cmd::Read(d2.buf)]);
    }
    let a = t.analyze();
    let r = reason(&a, "reuse");
    assert_eq!((r.pairs, r.copies), (2, 6));
    assert!(r.remedy.contains("correct"), "{}", r.remedy);
    assert!(r.remedy.contains("sub-range"), "{}", r.remedy);
}

#[test]
fn shifting_offsets_are_explained() {
    let mut t = T::new();
    let h = t.staging(2 * MIB);
    let d = t.device(MIB);
    for i in 0..4u64 {
        t.host_write(h.buf);
        t.run(&[
            Cmd::CopyAt(h.buf, d.buf, (i % 2) * MIB, 0, MIB),
            Cmd::Read(d.buf),
        ]);
    }
    let a = t.analyze();
    assert_eq!(reason(&a, "offset").copies, 4);
}

#[test]
fn gpu_only_and_same_buffer_copies_are_counted() {
    let mut t = T::new();
    let a1 = t.device(MIB);
    let a2 = t.device(MIB);
    for _ in 0..2 {
        t.run(&[Cmd::Write(a1.buf), Cmd::Copy(a1.buf, a2.buf, MIB)]);
    }
    let cmd = t.handle();
    t.push(Event::CmdBegin {
        cmd,
        one_time: true,
    });
    t.push(Event::CmdCopyBuffer {
        cmd,
        src: a1.buf,
        dst: a1.buf,
        regions: vec![CopyRegion {
            src_offset: 0,
            dst_offset: MIB / 2,
            size: MIB / 2,
        }],
    });
    t.push(Event::CmdEnd { cmd });
    let q = t.queue;
    t.push(Event::QueueSubmit {
        queue: q,
        batches: vec![echo_analyzer::trace::SubmitBatch {
            command_buffers: vec![cmd],
            waits: vec![],
            signals: vec![],
        }],
        fence: None,
    });
    let a = t.analyze();
    assert_eq!(a.copies.copies, 3);
    assert_eq!(reason(&a, "gpu_only").copies, 2);
    assert_eq!(reason(&a, "same_buffer").copies, 1);
    let text = report::table(&a, "t");
    assert!(
        text.contains("the trace holds 3 executed buffer copies"),
        "{text}"
    );
    assert!(text.contains("gpu_only: 2 copies"), "{text}");
}

#[test]
fn a_buffer_the_trace_does_not_know_is_explained_once() {
    let mut t = T::new();
    let d = t.device(MIB);
    let ghost = 0xdead_0000u64;
    for _ in 0..5 {
        t.run(&[Cmd::Read(ghost), Cmd::Copy(ghost, d.buf, MIB)]);
    }
    let a = t.analyze();
    let about: Vec<&String> = a
        .warnings
        .iter()
        .filter(|w| w.contains("0xdead0000"))
        .collect();
    assert_eq!(about.len(), 1, "{:?}", a.warnings);
    assert!(about[0].contains("10 uses"), "{}", about[0]);
    assert_eq!(a.copies.unknown_copies, 5);
    let r = reason(&a, "unknown_buffer");
    assert_eq!((r.copies, r.bytes), (5, 5 * MIB));
    let text = report::table(&a, "t");
    assert_eq!(text.matches("0xdead0000").count(), 1, "{text}");
    // Its host accesses, device address and destruction join the same one explanation.
    let mut t = T::new();
    for _ in 0..3 {
        t.run(&[Cmd::Read(ghost)]);
        t.host_write(ghost);
    }
    t.address(ghost);
    t.destroy(ghost);
    let a = t.analyze();
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("8 uses"), "{}", a.warnings[0]);
    assert!(a.warnings[0].contains("host access"), "{}", a.warnings[0]);
}

#[test]
fn a_mapped_partner_read_before_the_gpu_writes_it_is_s1() {
    // The block was mapped before the device buffer was bound: the host may have written its
    // bytes before the bind (not watched then), and a dispatch reading them first would read
    // the staging range's bytes once the buffers share memory.
    let mut t = T::new();
    let (_, h, d) = block(&mut t);
    t.run(&[Cmd::Read(d.buf)]);
    round_trips(&mut t, h, d, 3);
    let (c, _, msg) = rejected(&t.analyze().candidates[0].decision);
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("before its bind"), "{msg}");
}

#[test]
fn a_partner_on_a_page_the_host_opened_is_touched_and_explained() {
    // Sub-allocations closer than a page: the host's write to the staging buffer opened a page
    // the partner shares; the layer records the partner as read and written (`readwrite`).
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let h = t.sub_watched(pool, 0, MIB, SRC | DST);
    let d = t.sub_watched(pool, MIB + 256, MIB, STORAGE | SRC | DST);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.push(Event::HostAccess {
            buffer: d.buf,
            access: echo_analyzer::trace::Access::ReadWrite,
        });
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    }
    let a = t.analyze();
    assert!(a.candidates.is_empty());
    let r = reason(&a, "host_both");
    assert!(
        r.explanation.contains("shares with other watched memory"),
        "{}",
        r.explanation
    );
    assert!(r.remedy.contains("page size"), "{}", r.remedy);
}

#[test]
fn small_unwatched_copies_name_min_bytes() {
    let mut t = T::new();
    let pool = t.pool(MIB);
    let a = t.sub_staging(pool, 0, 4096);
    let b = t.sub_staging(pool, 65536, 4096);
    for _ in 0..2 {
        t.run(&[Cmd::Copy(a.buf, b.buf, 16)]);
    }
    let an = t.analyze();
    let r = reason(&an, "small_unwatched");
    assert_eq!(r.copies, 2);
    assert!(r.remedy.contains("min_bytes at most 16"), "{}", r.remedy);
    assert!(an.copies.reasons.iter().all(|x| x.reason != "no_evidence"));
}
