//! Sampled host-access validation: the windows a staging buffer was not watched in.
//!
//! With `validate_sample_every` above 1 the layer protects a candidate staging buffer in every
//! window until the host was seen touching it in `validate_full_windows` windows, then in one window in N (picked
//! by a hash of the window number). The trace says so explicitly: [`Event::Window`] at every window boundary
//! of the device names the candidates *not* protected in the window that begins there, and
//! [`Event::Watch`] says from when a buffer was watched at all. A window with no record of a
//! buffer's accesses is therefore either observed (nothing happened) or unobserved (unknown).
//!
//! S1 and S2 need every host access, so the unobserved windows are filled in here, or the buffer
//! is refused (fail closed). A buffer's windows are the boundaries that submitted or completed
//! work on its *family* (the buffers linked to it by copies, transitively: every group it could
//! join lies inside it); a boundary made by other work — another thread's loop, a wait on work
//! already seen complete — changes nothing in flight for it and continues the window before it.
//! A window's *signature* is what opened it: those submissions and completion observations, each
//! with the family buffers its commands touch. For a buffer with unobserved windows, the first
//! unobserved window `f` and the buffer's last window `e`, the smallest period `P` (≤ [`MAX_PERIOD`], with the `P`
//! windows before `f` observed) is looked for such that over `[f − P, e]`:
//!
//! - the signatures repeat with period `P` (window `i` opened like window `i − P`);
//! - every observed window saw the same accesses (none, read, write, read then write) as every
//!   other observed window of its phase (`i mod P`) — so a sampled window that differs from the
//!   pattern refuses the buffer — except the last window `e`, which nothing closes (the host's
//!   final reads) and is taken as it was seen;
//! - an unobserved window's own records (a fault on a protection left from an earlier window)
//!   are among its phase's accesses.
//!
//! Then every unobserved window gets its phase's accesses at its start (the window's own
//! boundary), which is where S2 places them (in flight or not is constant inside a window);
//! among the family's other recorded host accesses in the window (S1's business) each comes
//! after as many of them as it came after in the phase's observed window — not at the same
//! distance in events, which other threads' events stretch.
//! No such period: the buffer's pairs are refused ([`Model::uninferable`]). What this cannot
//! see: a host access that happens *only* in an unobserved window and breaks no pattern the
//! observed ones show (a one-off race in one late iteration); docs/settings.md states it, and
//! `validate_sample_every = 1` watches every window.

use crate::model::{BufId, Model, OpKind, Step, SubId};
use crate::trace::Access;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The longest period of windows the analyzer looks for.
pub const MAX_PERIOD: usize = 16;

/// How much of a buffer's host access the trace saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Coverage {
    /// Windows from the buffer's first watched one to its last.
    pub windows: usize,
    /// Of those, windows it was protected in (its accesses recorded).
    pub observed: usize,
    /// The period the unobserved windows were filled in from (0: nothing to fill in).
    pub period: usize,
}

type Sig = Vec<(u8, Vec<BufId>)>;
type Obs = Vec<Access>;
/// Per buffer, per window start: its accesses with their places (`None`: not observed).
type Saw = HashMap<BufId, HashMap<u64, Option<Vec<(Access, u64)>>>>;

/// Fill in `m`'s unobserved windows (see the module text). `marks`: `(seq, unobserved)` of each
/// `Window` record; `watch`: each buffer's `Watch` record.
pub fn infer(m: &mut Model, marks: &[(u64, Vec<BufId>)], watch: &HashMap<BufId, u64>) {
    if marks.is_empty() {
        return;
    }
    let mark_of = |seq: u64| -> Option<usize> {
        let i = marks.partition_point(|(s, _)| *s <= seq);
        i.checked_sub(1)
    };
    // The submissions/completions in (marks[i-1], marks[i]]: what opened window i.
    let mut mark_steps: Vec<Vec<(u8, SubId, u64)>> = vec![Vec::new(); marks.len()];
    // Each buffer's recorded host accesses.
    let mut host: HashMap<BufId, Vec<(u64, Access)>> = HashMap::new();
    for (seq, step) in &m.timeline {
        let (kind, s) = match step {
            Step::Submit(s) => (0u8, *s),
            Step::Complete(s) => (1u8, *s),
            Step::Host { buffer, access } => {
                host.entry(*buffer).or_default().push((*seq, *access));
                continue;
            }
        };
        // The boundary event precedes its window's mark: it belongs to the next mark.
        let i = marks.partition_point(|(ms, _)| *ms < *seq);
        if i < marks.len() {
            mark_steps[i].push((kind, s, *seq));
        }
    }
    // Buffers linked by copies, transitively: a staging buffer's group lives inside its set, so
    // submissions that touch none of it (another thread's work, another pipeline) change
    // nothing a check of it needs, and the boundaries they make are not its windows.
    let family = copy_families(m);
    let mut sampled: BTreeSet<BufId> = BTreeSet::new();
    for (_, u) in marks {
        sampled.extend(u.iter().copied());
    }
    let mut pending: Vec<Pending> = Vec::new();
    // Per family: its windows (start, signature); per buffer: what each of its windows saw.
    let mut fam_wins: HashMap<BufId, Vec<(u64, Sig)>> = HashMap::new();
    let mut saw: Saw = HashMap::new();
    for b in sampled {
        let name = format!("staging buffer #{}", m.buffers[b].number);
        let refuse = |m: &mut Model, seq: u64, why: String| {
            m.uninferable.insert(b, (seq, why));
        };
        let Some(&from) = watch.get(&b) else {
            refuse(
                m,
                marks[0].0,
                format!("evidence: {name} was left unprotected in some windows, but the trace does not say from when its host accesses were watched"),
            );
            continue;
        };
        // The buffer's windows: a boundary that submitted or completed no work on its family (a
        // wait on work already seen complete, another thread's submission) does not change what
        // is in flight for it; it continues the window before it.
        let fam = family[b];
        let mut win_of_mark: Vec<usize> = Vec::with_capacity(marks.len());
        let mut wins: Vec<Win> = Vec::new();
        for (i, (seq, _)) in marks.iter().enumerate() {
            let sig: Sig = mark_steps[i]
                .iter()
                .filter_map(|&(kind, s, _)| {
                    let t: Vec<BufId> = m.touched[s]
                        .iter()
                        .copied()
                        .filter(|x| family[*x] == fam)
                        .collect();
                    (!t.is_empty()).then_some((kind, t))
                })
                .collect();
            if sig.is_empty() && !wins.is_empty() {
                wins.last_mut().expect("not empty").marks.push(i);
            } else {
                wins.push(Win {
                    seq: *seq,
                    sig,
                    marks: vec![i],
                });
            }
            win_of_mark.push(wins.len() - 1);
        }
        let win_of = |seq: u64| mark_of(seq).map(|i| win_of_mark[i]);
        // Recorded accesses per window (a repeat of the same access folded), each with how far
        // into its window it came (in events), to order filled-in accesses of several buffers
        // as they came in the observed windows.
        let mut seen_b: HashMap<usize, Vec<(Access, u64)>> = HashMap::new();
        for &(seq, access) in host.get(&b).map(Vec::as_slice).unwrap_or_default() {
            if let Some(w) = win_of(seq) {
                let o = seen_b.entry(w).or_default();
                if o.last().map(|x| x.0) != Some(access) {
                    o.push((access, seq - wins[w].seq));
                }
            }
        }
        // First window after the Watch record (the arm that began watching follows it).
        let first_mark = marks.partition_point(|(s, _)| *s < from);
        if first_mark >= marks.len() {
            continue;
        }
        let ws = win_of_mark[first_mark];
        let we = match m.buffers[b].destroyed {
            Some(d) => win_of(d).unwrap_or(0),
            None => wins.len() - 1,
        };
        if we < ws {
            continue;
        }
        let is_unobs = |i: usize| wins[i].marks.iter().any(|&k| marks[k].1.contains(&b));
        let unobs: Vec<usize> = (ws..=we).filter(|&i| is_unobs(i)).collect();
        let Some(&f) = unobs.first() else { continue };
        let obs = |i: usize| -> Obs {
            seen_b
                .get(&i)
                .map(|v| v.iter().map(|x| x.0).collect())
                .unwrap_or_default()
        };
        let subset = |a: &Obs, of: &Obs| a.iter().all(|x| of.contains(x));
        let describe = |o: &Obs| -> String {
            if o.is_empty() {
                "no access".into()
            } else {
                o.iter()
                    .map(|a| if a.writes() { "a write" } else { "a read" })
                    .collect::<Vec<_>>()
                    .join(" then ")
            }
        };
        // Try each period; keep the first failure for the message.
        let mut found: Option<(usize, Vec<Obs>)> = None;
        let mut first_failure: Option<(u64, String)> = None;
        for p in 1..=MAX_PERIOD {
            if f < ws + p {
                break; // fewer than P observed windows before the first unobserved one
            }
            let lo = f - p;
            if !(f..=we).all(|i| wins[i].sig == wins[i - p].sig) {
                continue;
            }
            // Each phase's accesses: the first observed window of the phase in [lo, we).
            let mut phase: Vec<Option<Obs>> = vec![None; p];
            let mut fail: Option<(u64, String)> = None;
            for i in lo..we {
                if is_unobs(i) {
                    continue;
                }
                let o = obs(i);
                match &phase[(i - lo) % p] {
                    None => phase[(i - lo) % p] = Some(o),
                    Some(want) if *want != o => {
                        fail = Some((
                            wins[i].seq,
                            format!(
                                "the window at event {} saw {} where the windows a period of {p} before it saw {}",
                                wins[i].seq,
                                describe(&o),
                                describe(want)
                            ),
                        ));
                        break;
                    }
                    _ => {}
                }
            }
            if fail.is_none() {
                for &u in &unobs {
                    let want = phase[(u - lo) % p].clone().unwrap_or_default();
                    let o = obs(u);
                    if !subset(&o, &want) {
                        fail = Some((
                            wins[u].seq,
                            format!(
                                "the unprotected window at event {} still recorded {} where the windows a period of {p} before it saw {}",
                                wins[u].seq,
                                describe(&o),
                                describe(&want)
                            ),
                        ));
                        break;
                    }
                }
            }
            match fail {
                None => {
                    let phases = phase.into_iter().map(Option::unwrap_or_default).collect();
                    found = Some((p, phases));
                    break;
                }
                Some(x) => {
                    first_failure.get_or_insert(x);
                }
            }
        }
        let windows = we - ws + 1;
        let Some((p, phases)) = found else {
            let (seq, why) = first_failure.unwrap_or((
                wins[f].seq,
                format!(
                    "the windows from the first unprotected one (event {}) on do not open like the windows a period of at most {MAX_PERIOD} before them",
                    wins[f].seq
                ),
            ));
            refuse(
                m,
                seq,
                format!(
                    "evidence: {name} was protected in {} of its {windows} host-access windows, and the others cannot be filled in from the observed ones: {why}; re-profile with validate_sample_every=1 to watch every window",
                    windows - unobs.len()
                ),
            );
            continue;
        };
        let lo = f - p;
        // The first step of the family after window `i` began: what closes it.
        let limit = |i: usize| -> u64 {
            wins.get(i + 1)
                .and_then(|w| {
                    mark_steps[w.marks[0]]
                        .iter()
                        .filter(|&&(_, s, _)| m.touched[s].iter().any(|x| family[*x] == fam))
                        .map(|x| x.2)
                        .min()
                })
                .unwrap_or(u64::MAX)
        };
        for &u in &unobs {
            let have = obs(u);
            // The phase's latest observed window before `u`: where in it each access came.
            let reference = (1..)
                .map_while(|j| u.checked_sub(j * p).filter(|&i| i >= lo))
                .find(|&i| !is_unobs(i));
            let at = |a: Access| {
                reference
                    .and_then(|r| seen_b.get(&r))
                    .and_then(|v| v.iter().find(|x| x.0 == a))
                    .map_or(0, |x| x.1)
            };
            for a in &phases[(u - lo) % p] {
                if !have.contains(a) {
                    pending.push(Pending {
                        fam,
                        start: wins[u].seq,
                        limit: limit(u),
                        reference: reference.map(|r| wins[r].seq),
                        offset: at(*a),
                        own_order: true,
                        buffer: b,
                        access: *a,
                    });
                }
            }
        }
        fam_wins
            .entry(fam)
            .or_insert_with(|| wins.iter().map(|w| (w.seq, w.sig.clone())).collect());
        saw.insert(
            b,
            (ws..=we)
                .map(|i| {
                    let o = (!is_unobs(i)).then(|| seen_b.get(&i).cloned().unwrap_or_default());
                    (wins[i].seq, o)
                })
                .collect(),
        );
        m.coverage.insert(
            b,
            Coverage {
                windows,
                observed: windows - unobs.len(),
                period: p,
            },
        );
    }
    if pending.is_empty() {
        return;
    }
    // Several buffers of one family filled in in the same window: their order is S1's business
    // (a host read of one member after a write of another reads that write once they share
    // memory). Take it from one window where all of them were observed: their own references if
    // those are one window, else the latest earlier window that opened the same way and saw them
    // all with these accesses; with none, writes first (the order S1 is strictest with).
    let mut by_window: BTreeMap<(BufId, u64), Vec<usize>> = BTreeMap::new();
    for (k, x) in pending.iter().enumerate() {
        by_window.entry((x.fam, x.start)).or_default().push(k);
    }
    for ((fam, start), ks) in by_window {
        let bufs: BTreeSet<BufId> = ks.iter().map(|&k| pending[k].buffer).collect();
        let refs: BTreeSet<Option<u64>> = ks.iter().map(|&k| pending[k].reference).collect();
        if bufs.len() < 2 || (refs.len() == 1 && refs.iter().all(Option::is_some)) {
            continue;
        }
        let wins = &fam_wins[&fam];
        let at = wins.partition_point(|(s0, _)| *s0 < start);
        let sig = wins.get(at).map(|w| &w.1);
        let common = (0..at).rev().find(|&i| {
            Some(&wins[i].1) == sig
                && ks.iter().all(|&k| {
                    let x = &pending[k];
                    saw.get(&x.buffer)
                        .and_then(|w| w.get(&wins[i].0))
                        .and_then(|v| v.as_ref())
                        .is_some_and(|v| v.iter().any(|y| y.0 == x.access))
                })
        });
        for &k in &ks {
            let (buffer, access) = (pending[k].buffer, pending[k].access);
            pending[k].own_order = false;
            pending[k].offset = match common {
                Some(i) => saw[&buffer][&wins[i].0]
                    .as_ref()
                    .and_then(|v| v.iter().find(|y| y.0 == access))
                    .map_or(0, |y| y.1),
                None => u64::from(!access.writes()),
            };
        }
    }
    // The recorded host accesses of a family's other buffers in `[from, to)`, in order.
    let others = |fam: BufId, own: BufId, from: u64, to: u64| -> Vec<u64> {
        let mut v: Vec<u64> = host
            .iter()
            .filter(|(x, _)| **x != own && family[**x] == fam)
            .flat_map(|(_, acc)| acc.iter().map(|a| a.0))
            .filter(|&q| q >= from && q < to)
            .collect();
        v.sort_unstable();
        v
    };
    let mut added: Vec<(u64, u64, Step)> = pending
        .into_iter()
        .map(|x| {
            // Inside its window, before the step that closes it.
            let mut seq = x
                .start
                .saturating_add(x.offset)
                .min(x.limit.saturating_sub(1))
                .max(x.start);
            // Among the family's other recorded host accesses in the window, as in the
            // reference window: after as many of them as came before it there. (Counting events
            // alone misplaces it when other threads' events fill the window: a read of a
            // partner then looks as if it came after this buffer's write.)
            if let (true, Some(r)) = (x.own_order, x.reference) {
                let rank = others(x.fam, x.buffer, r, r.saturating_add(x.offset)).len();
                let here = others(x.fam, x.buffer, x.start, x.limit);
                seq = match rank {
                    0 => here.first().map_or(seq, |&q| seq.min(q.saturating_sub(1))),
                    k => here
                        .get(k - 1)
                        .or(here.last())
                        .map_or(seq, |&q| q.max(x.start)),
                }
                .max(x.start);
            }
            (
                seq,
                x.offset,
                Step::Host {
                    buffer: x.buffer,
                    access: x.access,
                },
            )
        })
        .collect();
    added.sort_by_key(|x| (x.0, x.1));
    m.timeline
        .extend(added.into_iter().map(|(seq, _, step)| (seq, step)));
    m.timeline.sort_by_key(|(seq, _)| *seq);
}

/// An access filled in: where, and how it is ordered against others in its window.
struct Pending {
    fam: BufId,
    /// The window's start (its `Window` record) and the first family step after it.
    start: u64,
    limit: u64,
    /// The observed window of the same phase it was taken from, and where in it it came.
    reference: Option<u64>,
    offset: u64,
    /// Ordered by its own reference window (not by a window several filled-in buffers share).
    own_order: bool,
    buffer: BufId,
    access: Access,
}

/// Per buffer, the smallest buffer id of the set of buffers linked to it by copies (union-find
/// over every recorded copy).
fn copy_families(m: &Model) -> Vec<BufId> {
    let mut parent: Vec<BufId> = (0..m.buffers.len()).collect();
    fn root(p: &mut [BufId], mut x: BufId) -> BufId {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for rec in &m.recordings {
        for op in rec {
            if let OpKind::Copy { src, dst, .. } = &op.kind {
                let (a, b) = (root(&mut parent, *src), root(&mut parent, *dst));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    (0..m.buffers.len()).map(|x| root(&mut parent, x)).collect()
}

struct Win {
    /// The `Window` record that opened it.
    seq: u64,
    sig: Sig,
    /// Indices of its `Window` records (the first, then boundaries that changed nothing).
    marks: Vec<usize>,
}
