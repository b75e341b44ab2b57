//! Sampled host-access validation: the windows a staging buffer was not watched in.
//!
//! With `validate_sample_every` above 1 (an option; the default is 1, every window watched) the
//! layer protects a candidate staging buffer in every window until the host was seen touching it
//! in `validate_full_windows` windows, then in one window in N. The trace says so explicitly:
//! [`Event::Window`](crate::trace::Event::Window) at every window boundary of the device names
//! the candidates *not* protected in the window that begins there, and
//! [`Event::Watch`](crate::trace::Event::Watch) says from when a buffer was watched at all.
//!
//! S1 and S2 need every host access, and a window that was not watched holds accesses nobody
//! saw: a program that reads its readback buffer during GPU work once, in one iteration, is
//! legal (logging, an async read) and looks in every watched window like one that never does.
//! So a window that was not watched can make a candidate refused, never accepted (issue 22: fail
//! closed in time as well as in data). Every buffer with an unwatched window in its lifetime is
//! marked here ([`Model::unwatched`]); the analysis refuses its pairs with condition `evidence`
//! unless a race seen in the watched windows already refused them (S2).

// Defined beside the model that holds it, named here too (`echo_analyzer::sampling::Coverage`).
pub use crate::model::Coverage;
use crate::model::{BufId, Model};
use std::collections::HashMap;

/// Mark the buffers of `m` that were not watched in some window of their lifetime. `marks`:
/// `(seq, unwatched)` of each `Window` record, in order; `watch`: each buffer's `Watch` record.
pub fn mark_unwatched(m: &mut Model, marks: &[(u64, Vec<BufId>)], watch: &HashMap<BufId, u64>) {
    let mut sampled: Vec<BufId> = marks.iter().flat_map(|(_, u)| u.iter().copied()).collect();
    sampled.sort_unstable();
    sampled.dedup();
    for b in sampled {
        let name = format!("staging buffer #{}", m.buffers[b].number);
        let Some(&from) = watch.get(&b) else {
            m.unwatched.insert(
                b,
                (
                    marks[0].0,
                    format!("evidence: {name} was left unprotected in some host-access windows, and the trace does not say from when it was watched"),
                ),
            );
            continue;
        };
        let to = m.buffers[b].destroyed.unwrap_or(u64::MAX);
        // Its windows: from the first mark after the Watch record (the arm that began watching
        // follows it) up to its destruction.
        let lifetime: Vec<&(u64, Vec<BufId>)> = marks
            .iter()
            .filter(|(seq, _)| *seq >= from && *seq < to)
            .collect();
        let unwatched: Vec<u64> = lifetime
            .iter()
            .filter(|(_, u)| u.contains(&b))
            .map(|(seq, _)| *seq)
            .collect();
        let Some(&first) = unwatched.first() else {
            continue;
        };
        let (windows, missed) = (lifetime.len(), unwatched.len());
        m.coverage.insert(
            b,
            Coverage {
                windows,
                observed: windows - missed,
            },
        );
        m.unwatched.insert(
            b,
            (
                first,
                format!(
                    "evidence: {name} was not watched in {missed} of its {windows} host-access windows (sampled validation, the first at event {first}); a window that was not watched can refuse a pair, never accept one; profile with validate_sample_every=1 (the default) to watch every window"
                ),
            ),
        );
    }
}
