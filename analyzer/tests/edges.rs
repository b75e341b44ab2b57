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
