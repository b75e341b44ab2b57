//! The lanes, spans and marks of one device for [`super::view`]: a lane per host thread (its
//! waits and observations), per queue (its submissions and their commands, on both axes) and per
//! device buffer whose staging buffers the host touched; and the steady iteration of the busiest
//! queue.

use super::parts::{Lane, Mark, RunView, Span};
use crate::analysis::Analysis;
use crate::model::{BufId, Model, OpKind, Step};
use crate::plan::{Direction, Plan};
use crate::trace::{Event, Trace, UseKind};
use crate::words::human_bytes;
use std::collections::{BTreeMap, HashMap};

/// The groups of `plan` on device `d` as model buffers: `(staging, device) → (delta, direction,
/// group index)`.
fn elided_pairs(
    m: &Model,
    plan: &Plan,
    d: u32,
) -> HashMap<(BufId, BufId), (i64, Direction, usize)> {
    let mut by_key: HashMap<&crate::trace::ObjectKey, Vec<BufId>> = HashMap::new();
    for (i, b) in m.buffers.iter().enumerate() {
        by_key.entry(&b.key).or_default().push(i);
    }
    let mut out = HashMap::new();
    for (gi, g) in plan
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.device_index == d)
    {
        let Some(devs) = by_key.get(&g.device.key) else {
            continue;
        };
        for mem in &g.members {
            let Some(stags) = by_key.get(&mem.staging.key) else {
                continue;
            };
            for &s in stags {
                for &dv in devs {
                    out.insert((s, dv), (mem.delta, g.direction, gi));
                }
            }
        }
    }
    out
}

/// Whether a copy between a planned pair is a self-copy once they share memory (byte `i` of the
/// device buffer is byte `i + delta` of the staging buffer): what enforce drops.
#[cfg(test)]
pub(super) fn is_self_copy(
    pairs: &HashMap<(BufId, BufId), (i64, Direction, usize)>,
    src: BufId,
    dst: BufId,
    regions: &[crate::trace::CopyRegion],
) -> bool {
    elided_by(pairs, src, dst, regions).is_some()
}

/// The group (index into the plan's groups) whose sharing makes this copy a self-copy, if any.
fn elided_by(
    pairs: &HashMap<(BufId, BufId), (i64, Direction, usize)>,
    src: BufId,
    dst: BufId,
    regions: &[crate::trace::CopyRegion],
) -> Option<usize> {
    let (delta, staging_is_src, group) = if let Some(&(d, _, g)) = pairs.get(&(src, dst)) {
        (d, true, g)
    } else if let Some(&(d, _, g)) = pairs.get(&(dst, src)) {
        (d, false, g)
    } else {
        return None;
    };
    let all = regions.iter().all(|r| {
        let (s_off, d_off) = if staging_is_src {
            (r.src_offset as i128, r.dst_offset as i128)
        } else {
            (r.dst_offset as i128, r.src_offset as i128)
        };
        s_off == d_off + delta as i128
    });
    all.then_some(group)
}

/// Lanes, spans and marks of one device; returns the steady iteration found on its busiest
/// queue, with that queue's submission count.
#[allow(clippy::too_many_arguments)]
pub(super) fn device_lanes(
    v: &mut RunView,
    t: &Trace,
    m: &Model,
    tm: &crate::timing::Timing,
    d: u32,
    multi: bool,
    plan: &Plan,
    a: &Analysis,
) -> Option<(usize, (u64, u64))> {
    let dev = if multi {
        format!(" (device {d})")
    } else {
        String::new()
    };
    let elide = elided_pairs(m, plan, d);
    // Queues in order of first submission.
    let mut queues: Vec<u64> = Vec::new();
    for s in &m.submissions {
        if !queues.contains(&s.queue) {
            queues.push(s.queue);
        }
    }
    // One lane per host thread that waited or observed something (in order of first record).
    let mut thread_lane: BTreeMap<u32, u32> = BTreeMap::new();
    let mut threads: Vec<u32> = Vec::new();
    for r in &t.records {
        if is_observation(&r.event) && !threads.contains(&r.thread) {
            threads.push(r.thread);
        }
    }
    if threads.is_empty() {
        threads.push(0);
    }
    for th in &threads {
        thread_lane.insert(*th, v.lanes.len() as u32);
        v.lanes.push(Lane {
            name: if *th == 0 {
                format!("host: waits{dev}")
            } else {
                format!("host thread {th}: waits{dev}")
            },
            kind: "host".into(),
            rows: 1,
        });
    }
    let mut lane_of: HashMap<u64, u32> = HashMap::new();
    for (i, q) in queues.iter().enumerate() {
        lane_of.insert(*q, v.lanes.len() as u32);
        v.lanes.push(Lane {
            name: format!("queue {}{dev}", i + 1),
            kind: "queue".into(),
            rows: 1,
        });
    }
    let at = |seq: u64| tm.at(seq);
    // Submissions, stacked in rows where they overlap on one queue.
    let mut row_ends: HashMap<u64, Vec<f64>> = HashMap::new();
    let mut signatures: HashMap<u64, Vec<(usize, String)>> = HashMap::new();
    for (si, s) in m.submissions.iter().enumerate() {
        let lane = lane_of[&s.queue];
        let start = s.seq as f64;
        let end = s.completed.unwrap_or(m.last_seq.max(s.seq + 1)) as f64;
        let span_t = tm.submission(s.seq, s.completed);
        let ends = row_ends.entry(s.queue).or_default();
        let row = match ends.iter().position(|&e| e <= start) {
            Some(r) => {
                ends[r] = end;
                r
            }
            None => {
                ends.push(end);
                ends.len() - 1
            }
        };
        let l = &mut v.lanes[lane as usize];
        l.rows = l.rows.max(row as u32 + 1);
        let ops: Vec<&crate::model::Op> = m.ops(si).collect();
        v.spans.push(Span {
            lane,
            row: row as u32,
            start,
            end,
            kind: "submit".into(),
            label: format!(
                "submission at event {}{}: {} command{}{}",
                s.seq,
                match s.completed {
                    Some(c) => format!(", observed complete at event {c}"),
                    None => ", never observed complete".into(),
                },
                ops.len(),
                if ops.len() == 1 { "" } else { "s" },
                match span_t {
                    Some(x) => format!(
                        "; {} ({})",
                        crate::timing::human_ns(x.len()),
                        x.source.words()
                    ),
                    None => String::new(),
                }
            ),
            seq: s.seq,
            count: 1,
            bytes: 0,
            buffer: 0,
            t0: span_t.map(|x| x.begin),
            t1: span_t.map(|x| x.end),
            timing: span_t.map_or(String::new(), |x| source_key(x.source)),
        });
        if let Some(x) = span_t {
            v.facts.submission(s.seq, x);
        }
        for w in &s.waits {
            v.marks.push(Mark {
                lane,
                seq: s.seq,
                t: span_t.map(|x| x.begin),
                kind: "wait".into(),
                label: format!(
                    "submission at event {} waits on semaphore {:#x}{}",
                    s.seq,
                    w.0,
                    if w.1 > 0 {
                        format!(" value {}", w.1)
                    } else {
                        String::new()
                    }
                ),
            });
        }
        // Its commands, in execution order, sharing the span; identical neighbours merged.
        let mut items: Vec<Item> = Vec::new();
        let mut sig = String::new();
        let mut prev_use: Option<u64> = None;
        for op in &ops {
            let (kind, label, bytes) = match &op.kind {
                OpKind::Copy { src, dst, regions } => {
                    let bytes: u64 = regions.iter().map(|r| r.size).sum();
                    let group = elided_by(&elide, *src, *dst, regions);
                    let elided = group.is_some();
                    if let Some(x) = tm.copies.get(&(s.seq, op.recorded)) {
                        v.facts.copy(s.seq, group, *x, bytes);
                    } else if span_t.is_some() {
                        v.facts.unmeasured_copy(s.seq, group);
                    }
                    let label = format!(
                        "{} copy #{} → #{} ({})",
                        if elided { "elided" } else { "kept" },
                        m.buffers[*src].number,
                        m.buffers[*dst].number,
                        human_bytes(bytes)
                    );
                    (if elided { "elided" } else { "copy" }, label, bytes)
                }
                OpKind::Use {
                    command,
                    kind,
                    buffer,
                    ..
                } => {
                    let k = if command.contains("Dispatch") {
                        "dispatch"
                    } else if command.contains("Draw") {
                        "draw"
                    } else {
                        "use"
                    };
                    let what = match kind {
                        UseKind::Descriptor => String::new(),
                        other => format!(" ({other:?})").to_lowercase(),
                    };
                    (
                        k,
                        format!("{command}{what} #{}", m.buffers[*buffer].number),
                        0,
                    )
                }
            };
            sig.push_str(kind);
            sig.push_str(&op.name());
            sig.push('|');
            // A dispatch or draw is one record that lists every buffer it binds: one command.
            if let (OpKind::Use { buffer, .. }, Some(prev)) = (&op.kind, prev_use) {
                if prev == op.recorded {
                    if let Some(last) = items.last_mut() {
                        last.label
                            .push_str(&format!(", #{}", m.buffers[*buffer].number));
                        continue;
                    }
                }
            }
            prev_use = matches!(op.kind, OpKind::Use { .. }).then_some(op.recorded);
            let time = matches!(op.kind, OpKind::Copy { .. })
                .then(|| tm.copies.get(&(s.seq, op.recorded)).copied())
                .flatten();
            match items.last_mut() {
                Some(it) if it.kind == kind && it.label == label => {
                    it.count += 1;
                    it.bytes += bytes;
                    it.time = match (it.time, time) {
                        (Some(p), Some(x)) => Some(crate::timing::TimeSpan {
                            begin: p.begin.min(x.begin),
                            end: p.end.max(x.end),
                            source: x.source,
                        }),
                        _ => None,
                    };
                }
                _ => items.push(Item {
                    kind: kind.into(),
                    label,
                    bytes,
                    count: 1,
                    time,
                }),
            }
        }
        signatures.entry(s.queue).or_default().push((si, sig));
        let times = place_in(span_t, &items);
        let n = items.len().max(1) as f64;
        let w = (end - start) / n;
        for (k, (it, tt)) in items.into_iter().zip(times).enumerate() {
            if it.kind == "elided" {
                v.totals.elided_copies += it.count;
                v.totals.elided_bytes += it.bytes;
            }
            v.spans.push(Span {
                lane,
                row: row as u32,
                start: start + w * k as f64,
                end: start + w * (k + 1) as f64,
                label: format!(
                    "{}{}{}",
                    it.label,
                    if it.count > 1 {
                        format!(" ×{}", it.count)
                    } else {
                        String::new()
                    },
                    match (&it.time, &tt) {
                        (Some(x), _) => format!(
                            "; {} ({})",
                            crate::timing::human_ns(x.len()),
                            x.source.words()
                        ),
                        (None, Some((b, e, _))) => format!(
                            "; about {} (not measured: a share of its submission's time)",
                            crate::timing::human_ns(e - b)
                        ),
                        _ => String::new(),
                    }
                ),
                kind: it.kind,
                seq: s.seq,
                count: it.count,
                bytes: it.bytes,
                buffer: 0,
                t0: tt.as_ref().map(|x| x.0),
                t1: tt.as_ref().map(|x| x.1),
                timing: tt.map_or(String::new(), |x| x.2),
            });
        }
    }
    // The host's observations, on the lane of the thread that made them; a wait also as a span
    // of the time it took.
    for r in &t.records {
        let (kind, label) = match &r.event {
            Event::FenceSignaled { fences } => (
                "fence",
                format!(
                    "host observed fence{} signaled",
                    if fences.len() == 1 { "" } else { "s" }
                ),
            ),
            Event::QueueWaitIdle { .. } => ("idle", "vkQueueWaitIdle".to_string()),
            Event::DeviceWaitIdle => ("idle", "vkDeviceWaitIdle".to_string()),
            Event::SemaphoreReached { semaphores } => (
                "semaphore",
                format!(
                    "host observed semaphore value{} reached: {}",
                    if semaphores.len() == 1 { "" } else { "s" },
                    semaphores
                        .iter()
                        .map(|(s, v)| format!("{s:#x}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Event::SemaphoreSignal { semaphore, value } => (
                "signal",
                format!("host signaled semaphore {semaphore:#x} to {value}"),
            ),
            _ => continue,
        };
        let lane = thread_lane
            .get(&r.thread)
            .or_else(|| thread_lane.values().next())
            .copied()
            .unwrap_or(0);
        let waited = tm.waits.get(&r.seq).copied();
        v.marks.push(Mark {
            lane,
            seq: r.seq,
            t: at(r.seq),
            kind: kind.into(),
            label: format!(
                "{label} (event {}{})",
                r.seq,
                match waited {
                    Some(w) => format!(", after waiting {}", crate::timing::human_ns(w as f64)),
                    None => String::new(),
                }
            ),
        });
        if let (Some(w), Some(end)) = (waited, at(r.seq)) {
            v.facts.wait(r.seq, end - w as f64, end);
            v.spans.push(Span {
                lane,
                row: 0,
                start: r.seq as f64 - 0.5,
                end: r.seq as f64,
                kind: "wait".into(),
                label: format!(
                    "the host waits {} in {} (event {})",
                    crate::timing::human_ns(w as f64),
                    match &r.event {
                        Event::FenceSignaled { .. } => "vkWaitForFences",
                        Event::SemaphoreReached { .. } => "vkWaitSemaphores",
                        _ => label.as_str(),
                    },
                    r.seq
                ),
                seq: r.seq,
                count: 1,
                bytes: 0,
                buffer: 0,
                t0: Some(end - w as f64),
                t1: Some(end),
                timing: String::new(),
            });
        }
    }
    // Host accesses to the staging buffers of candidate pairs and planned groups, each a span
    // to the next submission (the end of the host's window): one lane per device buffer they
    // exchange data with, its staging buffers stacked in rows where their spans overlap.
    let mut partner: BTreeMap<usize, (usize, BufId)> = BTreeMap::new();
    for c in a.candidates.iter().filter(|c| c.device_index == d) {
        if let Some(b) = m.buffers.iter().position(|b| b.number == c.staging.number) {
            let e = partner
                .entry(c.staging.number)
                .or_insert((c.device.number, b));
            e.0 = e.0.min(c.device.number);
        }
    }
    for &(s, dv) in elide.keys() {
        let e = partner
            .entry(m.buffers[s].number)
            .or_insert((m.buffers[dv].number, s));
        e.0 = e.0.min(m.buffers[dv].number);
    }
    let submits: Vec<u64> = m
        .timeline
        .iter()
        .filter_map(|(q, st)| matches!(st, Step::Submit(_)).then_some(*q))
        .collect();
    // Per device buffer: its staging buffers' spans.
    let mut lanes: BTreeMap<usize, Vec<Span>> = BTreeMap::new();
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (&number, &(dev_number, b)) in &partner {
        let spans = lanes.entry(dev_number).or_default();
        let first = spans.len();
        for (seq, st) in &m.timeline {
            let Step::Host { buffer, access } = st else {
                continue;
            };
            if *buffer != b {
                continue;
            }
            let end = match submits.binary_search(seq) {
                Ok(i) => submits.get(i + 1).copied(),
                Err(i) => submits.get(i).copied(),
            }
            .unwrap_or(m.last_seq.max(seq + 1));
            let kind = match access {
                crate::trace::Access::Read => "read",
                crate::trace::Access::Write => "write",
                crate::trace::Access::ReadWrite => "readwrite",
            };
            // The same access again in the same window: one span.
            if spans.len() > first {
                let p = spans.last_mut().unwrap();
                if p.kind == kind && p.end == end as f64 {
                    p.count += 1;
                    continue;
                }
            }
            let t_end = at(end).or(if end >= m.last_seq {
                Some(tm.last_t as f64)
            } else {
                None
            });
            spans.push(Span {
                lane: 0,
                row: 0,
                start: *seq as f64,
                end: end as f64,
                kind: kind.into(),
                label: format!(
                    "host {} #{number} (event {seq}); its window ends at the next submission (event {end})",
                    match access {
                        crate::trace::Access::Read => "reads",
                        crate::trace::Access::Write => "writes",
                        crate::trace::Access::ReadWrite => "reads and writes (shared page)",
                    }
                ),
                seq: *seq,
                count: 1,
                bytes: 0,
                buffer: number,
                t0: at(*seq),
                t1: t_end,
                timing: String::new(),
            });
        }
        if spans.len() > first {
            members.entry(dev_number).or_default().push(number);
        }
    }
    for (dev_number, mut spans) in lanes {
        let Some(stagings) = members.get(&dev_number) else {
            continue;
        };
        let lane = v.lanes.len() as u32;
        spans.sort_by(|x, y| x.start.total_cmp(&y.start));
        let mut ends: Vec<(usize, f64)> = Vec::new();
        for sp in &mut spans {
            // A buffer keeps its row while it has one; others take the first free row.
            let row = match ends.iter().position(|&(b, _)| b == sp.buffer) {
                Some(r) if ends[r].1 <= sp.start => r,
                _ => match ends.iter().position(|&(_, e)| e <= sp.start) {
                    Some(r) => r,
                    None => {
                        ends.push((0, 0.0));
                        ends.len() - 1
                    }
                },
            };
            ends[row] = (sp.buffer, ends[row].1.max(sp.end));
            sp.lane = lane;
            sp.row = row as u32;
        }
        let name = if stagings.len() == 1 {
            let b = &m.buffers[partner[&stagings[0]].1];
            format!(
                "host → #{} {} (to #{dev_number}){dev}",
                stagings[0],
                human_bytes(b.size)
            )
        } else {
            format!("host → {} staging of #{dev_number}{dev}", stagings.len())
        };
        v.lanes.push(Lane {
            name,
            kind: "staging".into(),
            rows: ends.len().max(1) as u32,
        });
        v.spans.extend(spans);
    }
    // One steady iteration on the busiest queue: the last period of its submissions'
    // command lists, from the completion before it to its last completion.
    let (_, subs) = signatures.iter().max_by_key(|(_, s)| s.len())?;
    steady(m, subs).map(|r| (subs.len(), r))
}

/// A host completion observation or host signal (drawn on its thread's lane).
fn is_observation(e: &Event) -> bool {
    matches!(
        e,
        Event::FenceSignaled { .. }
            | Event::QueueWaitIdle { .. }
            | Event::DeviceWaitIdle
            | Event::SemaphoreReached { .. }
            | Event::SemaphoreSignal { .. }
    )
}

/// One command (or run of identical neighbours) of a submission as drawn.
struct Item {
    kind: String,
    label: String,
    bytes: u64,
    count: u64,
    /// Its GPU time, when every command in it was measured.
    time: Option<crate::timing::TimeSpan>,
}

fn source_key(s: crate::timing::Source) -> String {
    match s {
        crate::timing::Source::Gpu => "gpu",
        crate::timing::Source::GpuAligned => "gpu-aligned",
        crate::timing::Source::Host => "host",
    }
    .into()
}

/// The time of each command of a submission spanning `sub`: a measured one its own GPU time;
/// the others, in order, share equally the time between the measured ones around them (the
/// submission's begin and end at the edges). `(begin, end, timing)`.
fn place_in(
    sub: Option<crate::timing::TimeSpan>,
    items: &[Item],
) -> Vec<Option<(f64, f64, String)>> {
    let Some(sub) = sub else {
        return items.iter().map(|_| None).collect();
    };
    let mut out: Vec<Option<(f64, f64, String)>> = items
        .iter()
        .map(|it| {
            it.time.map(|x| {
                (
                    x.begin.clamp(sub.begin, sub.end),
                    x.end.clamp(sub.begin, sub.end),
                    source_key(x.source),
                )
            })
        })
        .collect();
    let mut i = 0;
    while i < items.len() {
        if out[i].is_some() {
            i += 1;
            continue;
        }
        let j = (i..items.len())
            .find(|&k| out[k].is_some())
            .unwrap_or(items.len());
        let from = if i == 0 {
            sub.begin
        } else {
            out[i - 1].as_ref().map_or(sub.begin, |x| x.1)
        };
        let to = out
            .get(j)
            .and_then(|x| x.as_ref().map(|x| x.0))
            .unwrap_or(sub.end)
            .max(from);
        let n = (j - i) as f64;
        for (f, slot) in out[i..j].iter_mut().enumerate() {
            let f = f as f64;
            // Not measured itself: a share of the submission's time.
            *slot = Some((
                from + (to - from) * f / n,
                from + (to - from) * (f + 1.0) / n,
                "share".to_string(),
            ));
        }
        i = j;
    }
    out
}

/// The seq range of one steady iteration of a queue's submissions: the smallest period their
/// command lists repeat with over the second half of the run.
fn steady(m: &Model, subs: &[(usize, String)]) -> Option<(u64, u64)> {
    let n = subs.len();
    if n < 2 {
        return None;
    }
    // The smallest period that holds for nine in ten submissions of the middle of the run
    // (the first and last ones are often setup and teardown).
    let lo = n / 4;
    let period = (1..=(n / 2).max(1))
        .find(|&p| {
            let range = lo..n.saturating_sub(p);
            let total = range.len();
            let same = range.filter(|&i| subs[i].1 == subs[i + p].1).count();
            total > 0 && same * 10 >= total * 9
        })
        .unwrap_or(n - n / 2);
    // The first whole period from the middle on that the next one repeats, starting with a
    // copy (an upload) when one does.
    let repeats = |i: &usize| (*i..*i + period).all(|k| subs[k].1 == subs[k + period].1);
    let starts = n / 2..n.saturating_sub(2 * period - 1);
    let first = starts
        .clone()
        .filter(repeats)
        .find(|&i| subs[i].1.starts_with("copy") || subs[i].1.starts_with("elided"))
        .or_else(|| starts.clone().find(repeats))
        .unwrap_or((n / 2).min(n - period));
    let last = first + period - 1;
    let sub = |i: usize| &m.submissions[subs[i].0];
    let from = if first > 0 {
        let p = sub(first - 1);
        p.completed.unwrap_or(p.seq)
    } else {
        sub(first).seq.saturating_sub(1)
    };
    let l = sub(last);
    let to = l.completed.unwrap_or(m.last_seq);
    (to > from).then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{Source, TimeSpan};

    fn item(time: Option<(f64, f64)>) -> Item {
        Item {
            kind: "copy".into(),
            label: String::new(),
            bytes: 0,
            count: 1,
            time: time.map(|(begin, end)| TimeSpan {
                begin,
                end,
                source: Source::Gpu,
            }),
        }
    }

    /// Measured copies keep their times; the commands between share the gap, those at the
    /// edges the time to the submission's begin or end.
    #[test]
    fn unmeasured_commands_share_the_time_between_measured_ones() {
        let sub = TimeSpan {
            begin: 0.0,
            end: 100.0,
            source: Source::Gpu,
        };
        let items = [
            item(None),
            item(Some((10.0, 20.0))),
            item(None),
            item(None),
            item(Some((60.0, 90.0))),
            item(None),
        ];
        let t: Vec<(f64, f64, String)> = place_in(Some(sub), &items)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        let ends: Vec<(f64, f64)> = t.iter().map(|x| (x.0, x.1)).collect();
        assert_eq!(
            ends,
            vec![
                (0.0, 10.0),
                (10.0, 20.0),
                (20.0, 40.0),
                (40.0, 60.0),
                (60.0, 90.0),
                (90.0, 100.0)
            ]
        );
        assert_eq!((t[1].2.as_str(), t[2].2.as_str()), ("gpu", "share"));
        assert!(place_in(None, &items).iter().all(Option::is_none));
    }
}
