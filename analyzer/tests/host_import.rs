//! Imported host memory (issue 24): an allocation the application imported from its own pointer
//! (VK_EXT_external_memory_host) is host memory whose accesses echo does not see. Its buffers are
//! called host buffers, and every candidate with one is refused with that reason.

mod common;
use common::*;
use echo_analyzer::plan::Condition;
use echo_analyzer::trace::Event;

/// Marks allocation `memory` as imported from a host pointer.
fn import(t: &mut T, memory: u64) {
    for r in &mut t.recs {
        if let Event::MemoryAlloc {
            memory: m,
            host_import,
            ..
        } = &mut r.event
        {
            if *m == memory {
                *host_import = true;
            }
        }
    }
}

/// An ML runtime's downloads: results computed into device buffers and copied into buffers in
/// one pool the application imported; the host reads the pool through its own pointer (echo sees
/// nothing). The copies run device → pool, several device buffers into one pool buffer in turn.
fn runtime(imported: bool) -> T {
    let mut t = T::new();
    let pool = t.pool(8 * MIB);
    let h = t.sub_watched(pool, 0, MIB, SRC | DST).buf;
    let ds: Vec<Buf> = (0..2).map(|_| t.device(MIB)).collect();
    for _ in 0..3 {
        for d in &ds {
            t.run(&[Cmd::Write(d.buf), Cmd::Copy(d.buf, h, MIB)]);
            t.host_read(h);
        }
    }
    if imported {
        import(&mut t, pool);
    }
    t
}

#[test]
fn imported_host_memory_is_named_host_and_refused_with_that_reason() {
    let a = runtime(true).analyze();
    assert!(a.plan.groups.is_empty(), "{:#?}", a.plan.groups);
    assert!(!a.plan.rejected.is_empty());
    for r in &a.plan.rejected {
        assert_eq!(r.condition, Condition::S3, "{r:#?}");
        assert!(
            r.message.contains("imported from its own pointer")
                && r.message.contains("host buffer #1"),
            "{}",
            r.message
        );
        assert!(
            !r.message.contains("device buffer #1") && !r.message.contains("staging buffer #1"),
            "the imported buffer is a host buffer: {}",
            r.message
        );
        assert!(r.plain.contains("Host buffer #1"), "{}", r.plain);
    }
    // The same program without the import is refused for something else (the pool buffer is
    // refilled for several device buffers): the reason above comes from the import.
    let b = runtime(false).analyze();
    assert!(
        b.plan
            .rejected
            .iter()
            .all(|r| !r.message.contains("imported")),
        "{:#?}",
        b.plan.rejected
    );
}

#[test]
fn host_import_is_read_from_the_trace_and_absent_in_older_traces() {
    let mut t = runtime(true);
    let text = t.text();
    assert!(text.contains("\"host_import\":true"), "{text}");
    // An older trace has no field: not imported.
    t = runtime(false);
    assert!(!t.text().contains("host_import"));
}
