//! Sampled host-access validation on synthetic traces (`analyzer/src/sampling.rs`): the trace
//! marks the windows a staging buffer was not protected in; a window that was not watched can
//! refuse a pair, never accept one (issue 22), and a race seen in a watched window is S2.

mod common;
use common::*;
use echo_analyzer::analysis::{Analysis, Decision};
use echo_analyzer::plan::Condition;
use echo_analyzer::sampling::Coverage;
use echo_analyzer::trace::Event;

/// One iteration of the loop as the host behaves in it.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Host {
    /// Writes the next input after the fence (the safe pattern).
    AfterWait,
    /// Writes the next input while the GPU still works on the device buffer (the race).
    WhileInFlight,
}

/// An upload loop `h → d` with a window record at every boundary, as the layer writes it with
/// sampling on: windows `2i` (after submission `i`) and `2i + 1` (after its fence wait).
/// `observed(w)` says whether window `w` was protected; an access in an unobserved window leaves
/// no record. Returns the trace builder.
fn sampled_loop(iters: usize, host: impl Fn(usize) -> Host, observed: impl Fn(usize) -> bool) -> T {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.host_write(h.buf); // before it was a candidate (the layer does not see it; S1 counts it)
    let mut watch_written = false;
    let mark = |t: &mut T, w: usize| {
        let unobserved = if observed(w) { vec![] } else { vec![h.buf] };
        t.push(Event::Window { unobserved });
    };
    for i in 0..iters {
        let what = host(i);
        let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        if !watch_written {
            t.push(Event::Watch { buffer: h.buf });
            watch_written = true;
        }
        mark(&mut t, 2 * i);
        if what == Host::WhileInFlight && observed(2 * i) {
            t.host_write(h.buf);
        }
        t.wait(f);
        mark(&mut t, 2 * i + 1);
        if what == Host::AfterWait && i + 1 < iters && observed(2 * i + 1) {
            t.host_write(h.buf);
        }
    }
    t
}

/// A schedule: every window below `full`, then one in `every`, rotating (the layer picks one in
/// N by a hash instead; the analyzer assumes no schedule, it reads the trace's marks).
fn schedule(full: usize, every: usize) -> impl Fn(usize) -> bool {
    move |n| {
        if n < full {
            return true;
        }
        let m = n - full;
        m % every == (m / every) % every
    }
}

fn row(a: &Analysis) -> &echo_analyzer::analysis::CandidateRow {
    a.candidates
        .iter()
        .find(|c| c.staging.number == 1 && c.device.number == 2)
        .expect("the pair is a candidate")
}

#[test]
fn a_periodic_loop_with_unwatched_windows_is_refused_and_the_fully_watched_one_accepted() {
    let sampled = sampled_loop(20, |_| Host::AfterWait, schedule(8, 4));
    let full = sampled_loop(20, |_| Host::AfterWait, |_| true);
    let a = sampled.analyze();
    let b = full.analyze();
    assert!(
        matches!(decision(&b, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&b, 1, 2)
    );
    let (c, ev, msg) = rejected(decision(&a, 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(ev.is_some());
    assert!(msg.contains("validate_sample_every=1"), "{msg}");
    assert!(
        a.plan.groups.is_empty(),
        "an unwatched window accepted a group"
    );
    let cov = row(&a).host_coverage.expect("coverage stated");
    let unobserved = (0..40).filter(|&w| !schedule(8, 4)(w)).count();
    assert_eq!(
        cov,
        Coverage {
            windows: 40,
            observed: 40 - unobserved,
        }
    );
    assert_eq!(row(&b).host_coverage, None);
    let text = echo_analyzer::report::table(&a, "synthetic");
    assert!(
        text.contains(&format!("#1: watched in {} of 40 windows", 40 - unobserved)),
        "{text}"
    );
}

#[test]
fn one_unwatched_window_is_enough_to_refuse() {
    let t = sampled_loop(20, |_| Host::AfterWait, |w| w != 31);
    let (c, ev, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(msg.contains("not watched in 1 of its 40"), "{msg}");
    assert!(ev.is_some());
}

#[test]
fn the_race_control_is_s2_with_sampling_on() {
    // The race in every iteration (the `race` sample): seen in the first K windows already.
    let t = sampled_loop(20, |_| Host::WhileInFlight, schedule(8, 4));
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::S2, "{msg}");
}

#[test]
fn a_late_race_in_a_sampled_window_is_s2() {
    let obs = schedule(8, 4);
    // The first iteration after the full windows whose in-flight window is watched.
    let late = (5..20).find(|&i| obs(2 * i)).unwrap();
    assert!(2 * late >= 8, "late means after the K full windows");
    let t = sampled_loop(
        20,
        |i| {
            if i >= late {
                Host::WhileInFlight
            } else {
                Host::AfterWait
            }
        },
        &obs,
    );
    let (c, ev, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::S2, "{msg}");
    assert!(ev.is_some());
}

#[test]
fn a_one_off_race_only_in_unobserved_windows_is_refused_for_evidence() {
    // What sampling cannot see: the host writes during GPU work in one iteration only, and
    // neither that window nor the window after it was protected. The trace holds no sign of the
    // race, and the pair is refused all the same: its windows were not all watched.
    let obs = schedule(8, 4);
    let hidden = (5..19)
        .find(|&i| !obs(2 * i) && !obs(2 * i + 1))
        .expect("some iteration falls wholly between samples");
    let host = move |i: usize| {
        if i == hidden {
            Host::WhileInFlight
        } else {
            Host::AfterWait
        }
    };
    let (c, _, msg) = rejected(decision(&sampled_loop(20, host, &obs).analyze(), 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    // Watching every window sees the race itself (S2).
    let (c, _, _) = rejected(decision(&sampled_loop(20, host, |_| true).analyze(), 1, 2));
    assert_eq!(c, Condition::S2);
}

#[test]
fn unobserved_windows_without_a_watch_record_are_refused() {
    let mut t = sampled_loop(20, |_| Host::AfterWait, schedule(8, 4));
    t.recs.retain(|r| !matches!(r.event, Event::Watch { .. }));
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(msg.contains("does not say from when"), "{msg}");
}

#[test]
fn windows_before_the_watch_record_or_after_destruction_do_not_count() {
    // Window records that name the buffer before it was watched (its first windows, before the
    // arm) are not its windows; with every later window watched the pair is accepted.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    t.host_write(h.buf);
    t.push(Event::Window {
        unobserved: vec![h.buf],
    });
    for i in 0..6 {
        let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        if i == 0 {
            t.push(Event::Watch { buffer: h.buf });
        }
        t.push(Event::Window { unobserved: vec![] });
        t.wait(f);
        t.push(Event::Window { unobserved: vec![] });
        if i < 5 {
            t.host_write(h.buf);
        }
    }
    let a = t.analyze();
    assert!(
        matches!(decision(&a, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&a, 1, 2)
    );
}

/// `h_in → d → h_out` (saxpy's y), members of one group sampled together: refused with sampling,
/// accepted with every window watched (the host reads `h_out`, then writes `h_in`).
fn group_loop(observed: impl Fn(usize) -> bool) -> T {
    let mut t = T::new();
    let h_in = t.staging_unmapped(MIB);
    let d = t.device(MIB);
    t.map(h_in.mem);
    let h_out = t.staging(MIB);
    t.host_write(h_in.buf);
    let mut w = 0;
    let mut mark = |t: &mut T| {
        let unobserved = if observed(w) {
            vec![]
        } else {
            vec![h_in.buf, h_out.buf]
        };
        t.push(Event::Window { unobserved });
        w += 1;
        observed(w - 1)
    };
    for i in 0..20 {
        let (_, f) = t.submit(&[
            Cmd::Copy(h_in.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h_out.buf, MIB),
        ]);
        if i == 0 {
            t.push(Event::Watch { buffer: h_in.buf });
            t.push(Event::Watch { buffer: h_out.buf });
        }
        mark(&mut t);
        t.wait(f);
        if mark(&mut t) {
            t.host_read(h_out.buf);
            t.host_write(h_in.buf);
        }
    }
    t
}

#[test]
fn a_sampled_group_is_refused_and_the_watched_one_kept() {
    let full = group_loop(|_| true).analyze();
    assert_eq!(full.plan.groups.len(), 1, "{:#?}", full.candidates);
    assert_eq!(full.plan.groups[0].members.len(), 2);
    let sampled = group_loop(schedule(8, 4)).analyze();
    assert!(sampled.plan.groups.is_empty(), "{:#?}", sampled.plan.groups);
    assert!(sampled.candidates.iter().all(|c| matches!(
        &c.decision,
        Decision::Rejected {
            condition: Condition::Evidence,
            ..
        }
    )));
}
