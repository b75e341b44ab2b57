//! Sampled host-access validation on synthetic traces (`analyzer/src/sampling.rs`): the trace
//! marks the windows a staging buffer was not protected in; the analyzer fills them in from a
//! strictly periodic observed pattern or refuses the buffer, and never accepts a race it saw.

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
    /// Does not touch the staging buffer (reuses the previous input).
    Nothing,
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
fn a_periodic_loop_is_filled_in_and_accepted_like_a_fully_observed_one() {
    let sampled = sampled_loop(20, |_| Host::AfterWait, schedule(8, 4));
    let full = sampled_loop(20, |_| Host::AfterWait, |_| true);
    let a = sampled.analyze();
    let b = full.analyze();
    assert!(
        matches!(decision(&a, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&a, 1, 2)
    );
    assert_eq!(a.plan.groups, b.plan.groups, "sampling changed the plan");
    let cov = row(&a).host_coverage.expect("coverage stated");
    let unobserved = (0..40).filter(|&w| !schedule(8, 4)(w)).count();
    assert_eq!(
        cov,
        Coverage {
            windows: 40,
            observed: 40 - unobserved,
            period: 2
        }
    );
    assert!(
        unobserved > 20,
        "the test must leave most windows unobserved"
    );
    assert_eq!(row(&b).host_coverage, None);
    let text = echo_analyzer::report::table(&a, "synthetic");
    assert!(
        text.contains(&format!(
            "#1: observed in {} of 40 windows",
            40 - unobserved
        )),
        "{text}"
    );
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
fn a_sampled_window_that_breaks_the_pattern_refuses_the_pair() {
    // Nothing unsafe, but one observed late window differs from the pattern: the unobserved
    // windows cannot be trusted to follow it.
    let obs = schedule(8, 4);
    let odd = (5..19).find(|&i| obs(2 * i + 1)).unwrap();
    let t = sampled_loop(
        20,
        |i| {
            if i == odd {
                Host::Nothing
            } else {
                Host::AfterWait
            }
        },
        &obs,
    );
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(
        msg.contains("saw no access where the windows a period of 2 before it saw a write"),
        "{msg}"
    );
    assert!(msg.contains("validate_sample_every=1"), "{msg}");
}

#[test]
fn a_one_off_race_only_in_unobserved_windows_is_not_seen_and_coverage_says_so() {
    // The limit of sampling: the host writes during GPU work in one iteration only, and neither
    // that window nor the window after it (where the write is then missing) was protected.
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
    let sampled = sampled_loop(20, host, &obs);
    let a = sampled.analyze();
    // Accepted: the trace holds no trace of the race. What the analyzer does say is that it
    // filled windows in.
    assert!(matches!(decision(&a, 1, 2), Decision::Accepted { .. }));
    let cov = row(&a).host_coverage.expect("coverage stated");
    assert!(cov.observed < cov.windows);
    // Watching every window catches it (validate_sample_every = 1) …
    let full = sampled_loop(20, host, |_| true);
    let (c, _, _) = rejected(decision(&full.analyze(), 1, 2));
    assert_eq!(c, Condition::S2);
    // … and so does a sample of either of its two windows: the race itself (S2), or the write
    // missing after the fence (the pattern breaks).
    for extra in [2 * hidden, 2 * hidden + 1] {
        let t = sampled_loop(20, host, |w| w == extra || obs(w));
        let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
        assert!(
            c == Condition::S2 || c == Condition::Evidence,
            "window {extra}: {c:?} {msg}"
        );
    }
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
fn windows_that_do_not_repeat_are_refused() {
    // Every third iteration also runs a second submission on the device buffer: the windows'
    // openings repeat with period 8, but a period longer than the observed run before the first
    // unobserved window cannot be checked.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    let obs = schedule(4, 4);
    let mut w = 0;
    let mut mark = |t: &mut T| {
        let unobserved = if obs(w) { vec![] } else { vec![h.buf] };
        t.push(Event::Window { unobserved });
        w += 1;
    };
    for i in 0..12 {
        let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        if i == 0 {
            t.push(Event::Watch { buffer: h.buf });
        }
        mark(&mut t);
        t.wait(f);
        mark(&mut t);
        if i % 3 == 0 {
            let (_, f) = t.submit(&[Cmd::ReadWrite(d.buf)]);
            mark(&mut t);
            t.wait(f);
            mark(&mut t);
        }
    }
    let (c, _, msg) = rejected(decision(&t.analyze(), 1, 2));
    assert_eq!(c, Condition::Evidence, "{msg}");
    assert!(msg.contains("cannot be filled in"), "{msg}");
}

#[test]
fn another_threads_submissions_are_not_windows_of_this_buffer() {
    // Two independent loops interleaved on one device (two threads): each buffer's windows are
    // the boundaries of work on its own buffers, so the other loop's irregular submissions do
    // not break its pattern.
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    let e = t.device(MIB);
    let obs = schedule(8, 4);
    let w = std::cell::Cell::new(0usize);
    let mark = |t: &mut T| {
        let unobserved = if obs(w.get()) { vec![] } else { vec![h.buf] };
        t.push(Event::Window { unobserved });
        w.set(w.get() + 1);
    };
    t.host_write(h.buf);
    for i in 0..20 {
        let (_, f) = t.submit(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
        if i == 0 {
            t.push(Event::Watch { buffer: h.buf });
        }
        mark(&mut t);
        for _ in 0..(i % 3) {
            let (_, g) = t.submit(&[Cmd::ReadWrite(e.buf)]);
            mark(&mut t);
            t.wait(g);
            mark(&mut t);
        }
        t.wait(f);
        mark(&mut t);
        if i + 1 < 20 && obs(w.get() - 1) {
            t.host_write(h.buf);
        }
    }
    let a = t.analyze();
    assert!(
        matches!(decision(&a, 1, 2), Decision::Accepted { .. }),
        "{:?}",
        decision(&a, 1, 2)
    );
    assert_eq!(row(&a).host_coverage.map(|c| c.period), Some(2));
}

/// `h_in → d → h_out` (saxpy's y): in each window after the fence the host reads the result
/// from `h_out`, then writes the next input into `h_in`. Filled-in windows keep that order, so
/// the group keeps both members as with every window watched; the other order (the host
/// expects `h_out` to keep the result after writing `h_in`) is refused both ways (S1).
fn group_loop(read_first: bool, observed: impl Fn(usize) -> bool) -> T {
    let mut t = T::new();
    let h_in = t.staging(MIB);
    let d = t.device(MIB);
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
            if read_first {
                t.host_read(h_out.buf);
                t.host_write(h_in.buf);
            } else {
                t.host_write(h_in.buf);
                t.host_read(h_out.buf);
            }
        }
    }
    t
}

#[test]
fn a_group_keeps_the_order_of_its_members_accesses_in_filled_in_windows() {
    let members = |a: &Analysis| a.plan.groups.iter().map(|g| g.members.len()).sum::<usize>();
    let full = group_loop(true, |_| true).analyze();
    let sampled = group_loop(true, schedule(8, 4)).analyze();
    assert_eq!(members(&full), 2, "{:?}", full.candidates);
    assert_eq!(members(&sampled), 2, "{:?}", sampled.candidates);
    assert!(sampled.candidates.iter().all(|c| c.host_coverage.is_some()));
    // The other order is refused with every window watched and sampled alike.
    for a in [
        group_loop(false, |_| true).analyze(),
        group_loop(false, schedule(8, 4)).analyze(),
    ] {
        assert_eq!(members(&a), 1, "{:?}", a.candidates);
        assert!(a.candidates.iter().any(|c| matches!(
            &c.decision,
            Decision::Rejected {
                condition: Condition::S1,
                ..
            }
        )));
    }
}

/// As [`group_loop`] (the host reads the result from `h_out`, then writes the next input into
/// `h_in`), with only `h_in` sampled and, in the windows it is not watched in, another thread's
/// work on an unrelated buffer before the host's read: its events push the recorded read of
/// `h_out` far into the window. The filled-in write of `h_in` is placed after that read, as in
/// the observed windows, not at the same event distance from the window's start (which put it
/// before the read: a false S1 for the group, seen in the `threads` sample).
#[test]
fn a_filled_in_access_keeps_its_place_among_the_familys_recorded_accesses() {
    let run = |observed: &dyn Fn(usize) -> bool| {
        let mut t = T::new();
        let h_in = t.staging(MIB);
        let d = t.device(MIB);
        let h_out = t.staging(MIB);
        let other = t.device(MIB);
        t.host_write(h_in.buf);
        let mut w = 0;
        for i in 0..20 {
            let (_, f) = t.submit(&[
                Cmd::Copy(h_in.buf, d.buf, MIB),
                Cmd::ReadWrite(d.buf),
                Cmd::Copy(d.buf, h_out.buf, MIB),
            ]);
            if i == 0 {
                t.push(Event::Watch { buffer: h_in.buf });
            }
            let seen = observed(w);
            let unobserved = |seen: bool| if seen { vec![] } else { vec![h_in.buf] };
            t.push(Event::Window {
                unobserved: unobserved(seen),
            });
            t.wait(f);
            let seen = observed(w + 1);
            t.push(Event::Window {
                unobserved: unobserved(seen),
            });
            w += 2;
            if !seen {
                // Another thread's loop: its boundaries continue this window.
                for _ in 0..3 {
                    let (_, g) = t.submit(&[Cmd::ReadWrite(other.buf)]);
                    t.push(Event::Window {
                        unobserved: unobserved(false),
                    });
                    t.wait(g);
                    t.push(Event::Window {
                        unobserved: unobserved(false),
                    });
                }
            }
            t.host_read(h_out.buf);
            if seen {
                t.host_write(h_in.buf);
            }
        }
        t.analyze()
    };
    let members = |a: &Analysis| a.plan.groups.iter().map(|g| g.members.len()).sum::<usize>();
    let full = run(&|_| true);
    assert_eq!(members(&full), 2, "{:?}", full.candidates);
    let sampled = run(&schedule(8, 4));
    assert_eq!(members(&sampled), 2, "{:?}", sampled.candidates);
    assert!(sampled
        .candidates
        .iter()
        .any(|c| c.host_coverage.is_some_and(|v| v.observed < v.windows)));
}
