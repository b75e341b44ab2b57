//! What a host write may be (issue 45). A `host_access` record says the host wrote a staging
//! buffer in a window, not which bytes. By default (`host_writes=any`) the analysis takes a write
//! as possibly partial: where the original program's staging bytes and the shared range already
//! differ (the GPU changed the device buffer since the two were last in step), bytes the host
//! did not write would differ once shared, so a later read of them refuses the pair (S1). With
//! `host_writes=whole` (the user vouches that every write rewrites the whole buffer) such a write
//! puts both in step again. And bytes the host wrote into a member's memory before its bind are
//! in both worlds from the bind on (enforce carries them there).
//!
//! Each case here was found by `echo-fuzzprog` as a wrong output under enforce
//! (tests/data/fuzzprog/).

mod common;
use common::*;
use echo_analyzer::analysis::{Analysis, Decision};
use echo_analyzer::plan::Condition;
use echo_analyzer::trace::Event;

/// Every iteration: the host writes the upload buffer, copies it into the device buffer, and a
/// dispatch rewrites the device buffer in place (saxpy's `y`).
fn in_place_reupload(t: &mut T, h: Buf, d: Buf) {
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
}

#[test]
fn an_in_place_reupload_is_refused_unless_writes_are_whole() {
    // Default: the second write may leave bytes of the first; shared, they would be the
    // dispatch's output, and the next copy (dropped) would feed them back.
    let mut t = T::new();
    t.partial_writes();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    in_place_reupload(&mut t, h, d);
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("where it did not write"), "{msg}");
    // The user vouches for whole writes: accepted.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    in_place_reupload(&mut t, h, d);
    let a = t.analyze();
    assert!(
        matches!(decision(&a, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&a, 1, 2)
    );
}

/// A kernel that only reads the device buffer keeps the two worlds in step: partial writes do
/// not matter, the pair is accepted by default.
#[test]
fn a_reupload_the_gpu_only_reads_is_accepted_by_default() {
    let mut t = T::new();
    t.partial_writes();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    }
    let a = t.analyze();
    assert!(
        matches!(decision(&a, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&a, 1, 2)
    );
}

/// `lavapipe-partial-readback-*`: the readback buffer holds bytes the host wrote before its
/// bind; the copy from the device buffer covers only part of it; the host reads the rest. Shared,
/// those bytes are the dispatch's output. Refused in both modes.
#[test]
fn bytes_written_before_bind_outside_a_partial_readback_are_s1() {
    for whole in [false, true] {
        let mut t = T::new();
        if !whole {
            t.partial_writes();
        }
        let d = t.device(MIB);
        let r = t.filled_unbound(MIB);
        t.bind(r.buf, r.mem, 0);
        t.map(r.mem);
        for _ in 0..2 {
            t.run(&[
                Cmd::ReadWrite(d.buf),
                Cmd::CopyAt(d.buf, r.buf, 4096, 4096, MIB / 2),
            ]);
            t.host_read(r.buf);
        }
        let a = t.analyze();
        let (c, _, msg) = rejected(decision(&a, 2, 1));
        assert_eq!(c, Condition::S1, "whole={whole}: {msg}");
        assert!(msg.contains("before its bind"), "whole={whole}: {msg}");
    }
}

/// `swiftshader-gpu-write-before-one-time-upload`: the host writes the upload buffer, a dispatch
/// writes the device buffer, the host writes part of the upload buffer again, then the one copy.
/// Shared, the bytes the second write left are the dispatch's. Refused by default.
#[test]
fn a_gpu_write_between_two_host_writes_of_an_upload_is_s1() {
    let mut t = T::new();
    t.partial_writes();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.host_write(h.buf);
    t.run(&[Cmd::ReadWrite(d.buf)]);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
}

/// `lavapipe-partial-shader-write-before-upload`: a dispatch writes the device buffer before the
/// upload copy overwrites it, and a later dispatch writes it again before the readback. A shader
/// writes what its invocations reach, not its whole binding range: the first write may survive
/// the second where the copy (dropped when shared) no longer covers it. Refused (S1); before,
/// the second write was taken to cover the whole buffer and the pair was accepted.
#[test]
fn a_shader_write_covers_no_more_than_it_may() {
    let run = |partial_gpu: bool| {
        let mut t = T::new();
        let h = t.staging(MIB);
        let d = t.device(MIB);
        let r = t.device(MIB);
        for _ in 0..3 {
            t.host_write(h.buf);
            let mut cmds = vec![Cmd::Write(d.buf), Cmd::Copy(h.buf, d.buf, MIB)];
            if partial_gpu {
                cmds.push(Cmd::Write(d.buf));
            }
            cmds.push(Cmd::Copy(d.buf, r.buf, MIB));
            t.run(&cmds);
        }
        t.analyze()
    };
    let a = run(true);
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("where it did not write"), "{msg}");
    // Without the second dispatch the copy's bytes reach the readback unchanged, and the first
    // dispatch's write is what sharing would expose: refused as well, by the plain S1 check.
    let a = run(false);
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
}

/// A staging buffer whose host writes the trace does not hold (written before the layer watched
/// it) and a kernel that writes the device buffer before the first upload: shared, the kernel's
/// output may be newer than the host's bytes in the shared range, and the first upload (dropped)
/// no longer puts them back. The unseen writes were once placed just before the first copy in
/// both worlds, and the pair was accepted.
#[test]
fn unseen_host_writes_are_not_newer_than_a_gpu_write_before_the_first_copy() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.run(&[Cmd::Write(d.buf)]);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    let a = t.analyze();
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("their time is unknown"), "{msg}");
}

/// Exact host writes (issue 54): the profiler recorded the bytes each write covered.
/// `cover(write)` gives the ranges of the write at each iteration (`None`: no record, "any").
fn exact_in_place(cover: impl Fn(usize) -> Option<Result<Vec<[u64; 2]>, String>>) -> Analysis {
    let mut t = T::new();
    t.partial_writes();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for i in 0..3 {
        let w = t.host_write(h.buf);
        match cover(i) {
            Some(Ok(ranges)) => {
                t.push(Event::HostWrites {
                    buffer: h.buf,
                    write: w,
                    ranges,
                    any: None,
                });
            }
            Some(Err(why)) => {
                t.push(Event::HostWrites {
                    buffer: h.buf,
                    write: w,
                    ranges: vec![],
                    any: Some(why),
                });
            }
            None => {}
        }
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    t.analyze()
}

#[test]
fn an_in_place_reupload_written_whole_is_accepted_by_default() {
    // Every window's stores covered every byte: as `host_writes=whole`, without the vouch.
    let a = exact_in_place(|_| Some(Ok(vec![[0, MIB]])));
    assert!(
        matches!(decision(&a, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&a, 1, 2)
    );
    // In several runs of stores (a fill in pieces): the same.
    let a = exact_in_place(|_| Some(Ok(vec![[0, 4096], [4096, MIB / 2], [MIB / 2, MIB]])));
    assert!(matches!(decision(&a, 1, 2), Decision::Accepted { .. }));
    // The first window (before the GPU changed anything) need not be exact.
    let a = exact_in_place(|i| (i > 0).then(|| Ok(vec![[0, MIB]])));
    assert!(matches!(decision(&a, 1, 2), Decision::Accepted { .. }));
}

#[test]
fn an_exact_write_with_a_gap_is_refused_naming_the_window_and_the_bytes() {
    // Half of the buffer in the later windows (the repro's `half`).
    let a = exact_in_place(|i| Some(Ok(vec![[0, if i == 0 { MIB } else { MIB / 2 }]])));
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(
        msg.contains(&format!("bytes {}..{}", MIB / 2, MIB)) && msg.contains("did not rewrite"),
        "{msg}"
    );
    // What the window's stores did cover, as recorded (issue 55: the words are checked too).
    assert!(
        msg.contains(&format!("of its window cover bytes 0..{})", MIB / 2)),
        "{msg}"
    );
    // Every page touched, not every byte: refused.
    let pages: Vec<[u64; 2]> = (0..MIB / 4096)
        .map(|p| [p * 4096, p * 4096 + 4092])
        .collect();
    let a = exact_in_place(|i| {
        Some(Ok(if i == 0 {
            vec![[0, MIB]]
        } else {
            pages.clone()
        }))
    });
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(msg.contains("4092..4096"), "{msg}");
    // 256 runs of stores: the first four, and how many more.
    assert!(
        msg.contains(
            "cover bytes 0..4092, 4096..8188, 8192..12284, 12288..16380, and 252 more ranges)"
        ),
        "{msg}"
    );
    // Four runs: all four, and nothing more.
    let four = vec![[0, 1000], [2000, 3000], [4000, 5000], [6000, MIB]];
    let a = exact_in_place(|i| Some(Ok(if i == 0 { vec![[0, MIB]] } else { four.clone() })));
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    assert!(
        msg.contains(&format!(
            "cover bytes 0..1000, 2000..3000, 4000..5000, 6000..{MIB}), so"
        )),
        "{msg}"
    );
}

#[test]
fn a_window_that_could_not_be_exact_is_any_part() {
    let a = exact_in_place(|i| {
        Some(if i == 2 {
            Err("a store echo does not emulate".into())
        } else {
            Ok(vec![[0, MIB]])
        })
    });
    let (c, _, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::S1, "{msg}");
    // A record naming a write that is not in the trace (its record dropped) claims nothing.
    let mut t = T::new();
    t.partial_writes();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        let w = t.host_write(h.buf);
        t.push(Event::HostWrites {
            buffer: h.buf,
            write: w + 1000,
            ranges: vec![[0, MIB]],
            any: None,
        });
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let (c, _, _) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::S1);
}
