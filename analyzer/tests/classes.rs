//! Per-call pair classes (issue 24): a call site that makes a fresh download pair per call is
//! one class, formed only when every instance the trace holds was accepted alike, and matched
//! past the instances profiled.

mod common;
use common::*;
use echo_analyzer::apply::{PlanIndex, Role};
use echo_analyzer::trace::{Event, ObjectKey};

/// Gives the object created as `handle` the key `(site, …, ordinal)`, as a loop at one call
/// site makes them.
fn rekey(t: &mut T, handle: u64, site: &str, ordinal: u32) {
    for r in &mut t.recs {
        match &mut r.event {
            Event::BufferCreate { buffer, key, .. } if *buffer == handle => {
                key.site = site.into();
                key.ordinal = ordinal;
            }
            Event::MemoryAlloc { memory, key, .. } if *memory == handle => {
                key.site = site.into();
                key.ordinal = ordinal;
            }
            _ => {}
        }
    }
}

/// `calls` downloads, each from a device buffer a dispatch writes into a fresh staging buffer
/// destroyed after the host read it; in call `clear` (if any) the host writes the staging buffer
/// before the copy (refused for S1).
fn downloads(calls: u32, clear: Option<u32>) -> T {
    let mut t = T::new();
    for j in 0..calls {
        let d = t.device(MIB);
        rekey(&mut t, d.buf, "dev", j);
        rekey(&mut t, d.mem, "devmem", j);
        t.run(&[Cmd::Write(d.buf)]);
        let r = t.staging(MIB);
        rekey(&mut t, r.buf, "stg", j);
        rekey(&mut t, r.mem, "stgmem", j);
        if clear == Some(j) {
            t.host_write(r.buf);
        }
        t.run(&[Cmd::Copy(d.buf, r.buf, MIB)]);
        t.host_read(r.buf);
        t.destroy(r.buf);
        t.free(r.mem);
        t.destroy(d.buf);
        t.free(d.mem);
    }
    t
}

fn key(site: &str, usage: u32, ordinal: u32) -> ObjectKey {
    ObjectKey {
        site: site.into(),
        size: MIB,
        usage,
        flags: 0,
        ordinal,
    }
}

#[test]
fn fresh_downloads_per_call_are_one_class_matched_past_the_profiled() {
    let a = downloads(3, None).analyze();
    let plan = &a.plan;
    assert_eq!(plan.groups.len(), 3, "{:#?}", plan);
    assert!(plan.rejected.is_empty(), "{:#?}", plan.rejected);
    // Fresh one-time downloads may be applied to behaviour no profile saw (issue 22's rule).
    assert!(
        plan.groups.iter().all(|g| g.extrapolable),
        "{:#?}",
        plan.groups
    );
    assert_eq!(plan.classes.len(), 1, "{:#?}", plan.classes);
    let c = &plan.classes[0];
    assert_eq!(c.groups.len(), 3);
    assert!(c.beyond, "{c:?}");
    assert!(!c.guard_needed, "{c:?}");

    let (idx, conflicts) = PlanIndex::new(plan.clone());
    assert!(conflicts.is_empty());
    let dev_usage = STORAGE | SRC | DST;
    // A profiled instance is matched by its own group, not by the class.
    assert!(idx.role(&key("dev", dev_usage, 1)).is_some());
    assert!(idx.beyond_roles(&key("dev", dev_usage, 1)).is_empty());
    // Instance 4 (past the 3 profiled): device and staging buffer in one new group.
    let d = idx.beyond_roles(&key("dev", dev_usage, 4));
    let h = idx.beyond_roles(&key("stg", SRC | DST, 4));
    assert!(matches!(d[..], [Role::Device { .. }]), "{d:?}");
    assert!(matches!(h[..], [Role::Staging { member: 0, .. }]), "{h:?}");
    assert_eq!(d[0].group(), h[0].group());
    assert!(PlanIndex::is_beyond(d[0].group()));
    assert_ne!(
        d[0].group(),
        idx.beyond_roles(&key("dev", dev_usage, 5))[0].group(),
        "each instance is a group of its own"
    );
    let g = idx.beyond_group(d[0].group()).unwrap();
    assert_eq!(g.device.key, key("dev", dev_usage, 4));
    assert_eq!(g.members[0].staging.key, key("stg", SRC | DST, 4));
    assert_eq!(
        g.members[0].memory.as_ref().map(|k| k.ordinal),
        Some(4),
        "the member's own allocation moves along"
    );
    let m = g.members[0].memory.clone().unwrap();
    assert_eq!(idx.beyond_memory(&m), Some((d[0].group(), 0)));
    // Another call site, size or usage is not the class's.
    assert!(idx.beyond_roles(&key("other", dev_usage, 4)).is_empty());
    assert!(idx.beyond_roles(&key("dev", SRC, 4)).is_empty());
}

#[test]
fn a_class_whose_instances_were_not_all_accepted_alike_is_not_formed() {
    // Call 1 clears its staging buffer before the copy: refused for S1; calls 0 and 2 are
    // accepted, but the call site's instances were not all accepted alike.
    let a = downloads(3, Some(1)).analyze();
    assert_eq!(a.plan.groups.len(), 2, "{:#?}", a.plan);
    assert_eq!(a.plan.rejected.len(), 1, "{:#?}", a.plan.rejected);
    assert!(a.plan.classes.is_empty(), "{:#?}", a.plan.classes);
    let (idx, _) = PlanIndex::new(a.plan.clone());
    assert!(idx
        .beyond_roles(&key("dev", STORAGE | SRC | DST, 3))
        .is_empty());

    // The last call refused: the first two step by one, but the call site has a third
    // instance the plan does not hold, so a run's third call must not get the class either.
    let a = downloads(3, Some(2)).analyze();
    assert_eq!(a.plan.groups.len(), 2, "{:#?}", a.plan);
    assert!(a.plan.classes.is_empty(), "{:#?}", a.plan.classes);

    // One instance is not a class.
    let a = downloads(1, None).analyze();
    assert_eq!(a.plan.groups.len(), 1);
    assert!(a.plan.classes.is_empty());

    // Instances that differ (here the size of one call's pair) are not one class either.
    let mut t = downloads(3, None);
    for r in &mut t.recs {
        if let Event::BufferCreate { key, .. } = &mut r.event {
            if key.site == "stg" && key.ordinal == 2 {
                key.ordinal = 0;
                key.site = "stg-big".into();
            }
        }
    }
    let a = t.analyze();
    assert_eq!(a.plan.groups.len(), 3, "{:#?}", a.plan);
    assert!(a.plan.classes.is_empty(), "{:#?}", a.plan.classes);
}

#[test]
fn classes_go_past_the_profiled_only_where_extrapolable() {
    let mut plan = downloads(3, None).analyze().plan;
    // A class with an instance left out (context=program dropped it) stays at its groups.
    let mut p = plan.clone();
    p.groups.remove(1);
    let why = echo_analyzer::program::classes_beyond(&mut p, false);
    assert!(p.classes.is_empty());
    assert!(why[0].1.contains("not applied"), "{why:?}");
    // Needing the guard: only with it on.
    plan.classes[0].guard_needed = true;
    let mut p = plan.clone();
    assert_eq!(
        echo_analyzer::program::classes_beyond(&mut p, false).len(),
        1
    );
    assert!(p.classes.is_empty());
    let mut p = plan.clone();
    assert!(echo_analyzer::program::classes_beyond(&mut p, true).is_empty());
    assert_eq!(p.classes.len(), 1);
    // Not beyond: the index does not match past the profiled.
    plan.classes[0].beyond = false;
    let (idx, _) = PlanIndex::new(plan);
    assert!(idx
        .beyond_roles(&key("dev", STORAGE | SRC | DST, 3))
        .is_empty());
}
