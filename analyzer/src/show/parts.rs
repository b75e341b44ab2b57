//! The parts of a run view (below `view`, which builds them, and `lanes`, which fills the
//! timeline): lanes, spans, marks, pairs, totals.

use super::time;
use crate::stats::Stats;
use serde::Serialize;

/// A row of the timeline: one queue of one device, the host's waits, or the host's accesses to
/// one staging buffer.
#[derive(Clone, Debug, Serialize)]
pub struct Lane {
    pub name: String,
    /// `queue`, `host` (waits) or `staging` (host accesses to one buffer).
    pub kind: String,
    /// Rows the lane needs (submissions on one queue that overlap in the model stack).
    pub rows: u32,
}

/// Something with a start and an end on the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct Span {
    pub lane: u32,
    pub row: u32,
    pub start: f64,
    pub end: f64,
    /// `submit`, `copy` (kept), `elided`, `dispatch`, `draw`, `use` (other commands),
    /// `write`, `read`, `readwrite` (host accesses).
    pub kind: String,
    pub label: String,
    /// The record behind it (`seq`): the `QueueSubmit` of a submission and its commands, the
    /// `HostAccess` of a host access.
    pub seq: u64,
    /// Consecutive identical spans merged into this one.
    #[serde(skip_serializing_if = "is_one")]
    pub count: u64,
    /// Bytes moved (copies).
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes: u64,
    /// The staging buffer a host access touched (its number, `#n`); 0 for other spans.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub buffer: usize,
    /// Host time (ns since the trace began) of its start and end: absent in traces without
    /// time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t0: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1: Option<f64>,
    /// How a submission's or command's time was found (`gpu`, `gpu-aligned`, `host`:
    /// [`crate::timing::Source`]); empty for the host's own spans.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub timing: String,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

fn is_one(n: &u64) -> bool {
    *n == 1
}
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An instant: a fence, semaphore or idle observation by the host, a submission's semaphore
/// wait, or the event that decided a candidate pair.
#[derive(Clone, Debug, Serialize)]
pub struct Mark {
    pub lane: u32,
    pub seq: u64,
    /// Host time of the record (ns since the trace began), where the trace has times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    /// `fence`, `idle`, `semaphore` (host observed a value), `wait` (a submission waits on a
    /// semaphore), `signal` (the host signaled one), `decided`.
    pub kind: String,
    pub label: String,
}

/// One candidate pair as the page lists it: the row of `vkecho analyze`.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    /// 1-based, as `vkecho analyze` numbers its rows.
    pub number: usize,
    pub device_index: u32,
    pub staging: String,
    pub device: String,
    pub role: String,
    pub copies_per_iter: String,
    pub bytes_per_iter: String,
    /// `accepted: group 0, staging into device` / `rejected: S2 at event 71`.
    pub decision: String,
    pub accepted: bool,
    pub condition: String,
    /// The plain sentence (rejections), else the decision.
    pub headline: String,
    /// What `vkecho analyze` prints under "why rejected" for this pair (empty when accepted).
    pub why: String,
    pub event: Option<u64>,
    pub staging_site: String,
    pub device_site: String,
}

/// The figures the page sums up.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub copies: u64,
    pub copy_bytes: u64,
    pub elided_copies: u64,
    pub elided_bytes: u64,
    pub elided_bytes_per_iter: u64,
    pub elided_copies_per_iter: u64,
    /// The plan's groups: bytes saved per iteration, summed.
    pub plan_bytes_per_iter: u64,
    pub groups: usize,
    /// From the enforce run's statistics, when given.
    pub stats: Option<Stats>,
    /// From a benchmark result, when given: `(what, recovered fraction)`.
    pub recovered: Vec<(String, f64)>,
}

/// Everything the page and the Perfetto export show.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    pub source: String,
    pub exe: String,
    pub device_name: String,
    pub last_seq: u64,
    pub lanes: Vec<Lane>,
    pub spans: Vec<Span>,
    pub marks: Vec<Mark>,
    /// One steady iteration: `[from, to]` in seq, when the run repeats.
    pub iteration: Option<(u64, u64)>,
    /// The axis: seq `s` of a `QueueSubmit` is followed by `extra` more units, so that its
    /// commands have room ([`RunView::pos`]). Span positions are on this axis; marks and
    /// labels name seqs.
    pub stretch: Vec<(u64, f64)>,
    /// Where elided copies come from: `the plan P` or `the analysis of this trace`.
    pub plan_source: String,
    /// The trace has host times: the page opens on the time axis.
    pub timed: bool,
    /// The host time of the trace's last record (ns).
    pub last_t: f64,
    /// The steady iteration in host time (ns), when the run repeats and has times.
    pub iteration_t: Option<(f64, f64)>,
    /// Where that iteration's time goes.
    pub breakdown: Option<time::Breakdown>,
    /// What the timing facts were taken from (not for the page's data).
    #[serde(skip)]
    pub facts: time::Facts,
    pub pairs: Vec<Pair>,
    pub totals: Totals,
    pub notes: Vec<String>,
}
