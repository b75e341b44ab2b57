//! One cause, one name (issue 24): for every cause a synthetic trace produces, the pair's
//! condition, its summary reason, the summary's explanation and remedy, the pair's remedy and the
//! report agree (`common::assert_causes_agree`, run on every synthetic trace of these tests); and
//! the seen disagreements stay fixed. docs/rejections.md shows the table of causes.

mod common;
use common::*;
use echo_analyzer::analysis::{Analysis, Decision};
use echo_analyzer::plan::{Condition, Thresholds};
use echo_analyzer::safety::Cause;
use echo_analyzer::trace::Event;
use std::collections::BTreeSet;

fn upload_loop(t: &mut T, h: Buf, d: Buf, iters: usize) {
    for _ in 0..iters {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
}

fn causes(a: &Analysis) -> Vec<(String, Condition)> {
    a.candidates
        .iter()
        .filter_map(|c| match &c.decision {
            Decision::Rejected {
                reason, condition, ..
            } => Some((reason.clone(), *condition)),
            _ => None,
        })
        .collect()
}

/// One trace per pair cause; each must produce it.
fn traces() -> Vec<(Cause, T)> {
    let mut out = Vec::new();

    let mut t = T::new();
    let h = t.staging(64 * 1024);
    let d = t.device(64 * 1024);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, 64 * 1024), Cmd::Read(d.buf)]);
    }
    out.push((Cause::Threshold, t));

    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let _other = t.sub_staging(pool, 4 * MIB, MIB);
    let h = t.sub_staging(pool, 0, MIB);
    let d = t.device(MIB);
    t.run(&[Cmd::ReadWrite(d.buf), Cmd::Copy(d.buf, h.buf, MIB)]);
    t.host_read(h.buf);
    t.destroy(h.buf);
    out.push((Cause::OneTime, t));

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
    out.push((Cause::Reuse, t));

    let mut t = T::new();
    let h = t.staging(4 * MIB);
    let d = t.device(MIB);
    for k in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::CopyAt(h.buf, d.buf, k * MIB, 0, MIB), Cmd::Read(d.buf)]);
    }
    out.push((Cause::Offset, t));

    // The host writes the staging buffer, then the GPU reads the device buffer with no copy in
    // between: sharing memory it would see the new bytes early.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 2);
    t.host_write(h.buf);
    t.run(&[Cmd::Read(d.buf)]);
    out.push((Cause::S1GpuRead, t));

    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        t.host_write(h.buf);
        t.wait(f);
    }
    out.push((Cause::S2, t));

    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.address(d.buf);
    upload_loop(&mut t, h, d, 3);
    out.push((Cause::S3Address, t));

    let mut t = T::new();
    let h = t.staging(MIB);
    let buf = t.create(MIB, STORAGE | DST, 0x1);
    let mem = t.alloc(MIB, 0, Some(buf));
    t.bind(buf, mem, 0);
    upload_loop(&mut t, h, Buf { buf, mem }, 3);
    out.push((Cause::S3Special, t));

    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let h = t.sub_watched(pool, 0, MIB, SRC | DST).buf;
    let d = t.device(MIB);
    for _ in 0..3 {
        t.run(&[Cmd::Write(d.buf), Cmd::Copy(d.buf, h, MIB)]);
        t.host_read(h);
    }
    for r in &mut t.recs {
        if let Event::MemoryAlloc {
            memory,
            host_import,
            ..
        } = &mut r.event
        {
            if *memory == pool {
                *host_import = true;
            }
        }
    }
    out.push((Cause::HostImport, t));

    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let _other = t.sub_staging(pool, 4 * MIB, MIB);
    let h = t.sub_staging(pool, MIB, MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.destroy(h.buf);
    t.free(pool);
    t.run(&[Cmd::ReadWrite(d.buf)]);
    out.push((Cause::S4, t));

    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    t.run(&[Cmd::Untracked(d.buf)]);
    out.push((Cause::CompatUntracked, t));

    // Buffers like the staging buffer created on two threads.
    let mut t = T::new();
    let h = t.staging(MIB);
    let _twin = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    let key = t
        .recs
        .iter()
        .find_map(|r| match &r.event {
            Event::BufferCreate { buffer, key, .. } if *buffer == h.buf => Some(key.clone()),
            _ => None,
        })
        .unwrap();
    for r in &mut t.recs {
        if let Event::BufferCreate { buffer, key: k, .. } = &mut r.event {
            if *buffer == _twin.buf {
                *k = key.clone();
                k.ordinal = 1;
                r.thread = 7;
            }
        }
    }
    out.push((Cause::CompatIdentity, t));

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
    out.push((Cause::CompatMemory, t));

    let mut t = T::with_validation("off");
    let h = t.staging(MIB);
    let d = t.device(MIB);
    upload_loop(&mut t, h, d, 3);
    out.push((Cause::Evidence, t));

    out
}

#[test]
fn every_cause_names_one_condition_one_reason_one_remedy() {
    let mut seen = BTreeSet::new();
    for (want, t) in traces() {
        // `analyze` runs `assert_causes_agree` on every trace.
        let a = t.analyze();
        let got = causes(&a);
        assert!(
            got.iter()
                .any(|(r, c)| r == want.key() && Some(*c) == want.condition()),
            "{want:?}: {got:?}\n{}",
            echo_analyzer::report::table(&a, "test")
        );
        seen.insert(want);
    }
    assert!(seen.len() >= 14);
}

/// Seen (issue 24): a one-time upload of 72 B through a staging buffer with its own allocation
/// was summarised as `one_time` ("sub-allocated or exchanges data with other buffers … give each
/// staging buffer its own allocation") while the pair's condition said `threshold`; the cause was
/// size. Now both say `threshold`, and the summary names the size that would admit it.
#[test]
fn a_small_one_time_upload_is_threshold_everywhere() {
    let mut t = T::new();
    let h = t.staging_unmapped(72);
    let d = t.device(72);
    t.map(h.mem);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, 72), Cmd::Read(d.buf)]);
    t.destroy(h.buf);
    let a = t.analyze();
    assert_eq!(causes(&a), vec![("threshold".into(), Condition::Threshold)]);
    let keys: Vec<&str> = a.copies.reasons.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(keys, ["threshold"], "{:#?}", a.copies);
    let r = &a.copies.reasons[0];
    assert!(
        !r.explanation.contains("sub-allocated"),
        "{}",
        r.explanation
    );
    assert!(r.remedy.contains("min_bytes=72 "), "{}", r.remedy);
    // The remedy holds.
    let a = t.analyze_with(Thresholds {
        min_bytes: 72,
        min_copies: 2,
    });
    assert!(a.plan.groups.len() == 1, "{:#?}", a.candidates);
}

/// A one-time upload through a staging buffer with its own allocation, refused staging into
/// device for its own reason: that reason is the cause, never `one_time` ("sub-allocated …").
#[test]
fn a_one_time_pair_refused_in_its_direction_keeps_that_cause() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::Read(d.buf)]);
    t.run(&[Cmd::Untracked(d.buf)]);
    t.destroy(h.buf);
    let a = t.analyze();
    assert!(
        causes(&a).iter().all(|(r, _)| r != "one_time"),
        "{:#?}",
        a.candidates
    );
}

/// Grammar: plurals where counts are printed; no "≥ 0 B"; "(reasons above)" only below reasons.
#[test]
fn counts_read_as_english() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.host_write(h.buf);
    t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    t.destroy(h.buf);
    let a = t.analyze_with(Thresholds {
        min_bytes: 0,
        min_copies: 1,
    });
    let table = echo_analyzer::report::table(&a, "test");
    assert!(table.contains("thresholds: 1 copy\n"), "{table}");
    assert!(table.contains("1 candidate pair,"), "{table}");
    assert!(table.contains("1 member, "), "{table}");
    assert!(table.contains("(1 copy, "), "{table}");
    let a = t.analyze_with(Thresholds {
        min_bytes: 0,
        min_copies: 2,
    });
    let table = echo_analyzer::report::table(&a, "test");
    assert!(table.contains("thresholds: 2 copies\n"), "{table}");

    // No copies at all: nothing "above".
    let mut t = T::new();
    let _h = t.staging(MIB);
    let table = echo_analyzer::report::table(&t.analyze(), "test");
    assert!(
        table.contains("no candidates: the trace holds no executed buffer copy"),
        "{table}"
    );
    assert!(!table.contains("reasons above"), "{table}");
}

/// docs/rejections.md shows the table of causes as the analyzer makes it.
#[test]
fn docs_show_the_causes_table() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/rejections.md"
    ))
    .expect("docs/rejections.md");
    let table = echo_analyzer::safety::cause::markdown_table();
    // A header, its rule and one row per cause (an empty table is in every file).
    assert_eq!(
        table.lines().count(),
        2 + echo_analyzer::safety::Cause::ALL.len(),
        "{table}"
    );
    assert!(
        doc.contains(&table),
        "docs/rejections.md is out of date; its table of causes must read:\n{table}"
    );
}
