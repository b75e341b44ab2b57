//! Per-call pair classes (issue 24, DESIGN §4 "Buffer identity across runs"): a call site that
//! makes a fresh pair on every call is one class, so a run with more calls than the profile's
//! gets every call's pair, not only the first N.
//!
//! A plan names buffers by [`ObjectKey`] — call site, size, usage, flags and an ordinal among
//! buffers with the same key. Groups whose keys are equal but for the ordinals, and whose
//! ordinals all step by one from instance to instance, are the instances of one class when
//! *every* buffer and allocation the trace holds with those keys (but for the ordinal) is in one
//! of them: no instance was refused, unpaired or grouped otherwise. They must also agree on
//! everything else enforce uses (direction, sync, deltas, roles, memory offsets, what may be left
//! unallocated). A class is never formed from one instance.
//!
//! Instances past those profiled are behaviour no profile observed: the class goes there only
//! when every instance is `extrapolable` (`crate::safety::extrapolate`), and with the runtime
//! guard on unless every member is a one-time download.

use crate::plan::{Class, Group, Plan, Role};
use crate::trace::{Event, ObjectKey, Trace};
use std::collections::BTreeMap;

/// A key without its ordinal.
pub type Base = (String, u64, u32, u32);

pub fn base(k: &ObjectKey) -> Base {
    (k.site.clone(), k.size, k.usage, k.flags)
}

/// Everything about a group that its class's instances must share (keys without ordinals).
fn signature(g: &Group) -> String {
    let members: Vec<_> = g
        .members
        .iter()
        .map(|m| {
            (
                base(&m.staging.key),
                m.delta,
                m.role,
                m.one_time,
                m.memory.as_ref().map(base),
                m.memory_offset,
                m.skip_allocation,
            )
        })
        .collect();
    format!(
        "{:?}",
        (
            g.device_index,
            base(&g.device.key),
            g.direction,
            g.sync,
            g.device_mapped,
            g.device_memory
                .as_ref()
                .map(|dm| (base(&dm.key), dm.window_lo, dm.window_hi)),
            members,
        )
    )
}

/// The ordinals of a group's keys, in a fixed order (device, members, their allocations, the
/// device allocation).
fn ordinals(g: &Group) -> Vec<u32> {
    let mut v = vec![g.device.key.ordinal];
    for m in &g.members {
        v.push(m.staging.key.ordinal);
        v.push(m.memory.as_ref().map_or(0, |k| k.ordinal));
    }
    v.push(g.device_memory.as_ref().map_or(0, |dm| dm.key.ordinal));
    v
}

/// Bases of buffers (`true`) and allocations a group names.
fn bases(g: &Group) -> Vec<(bool, Base)> {
    let mut v = vec![(true, base(&g.device.key))];
    for m in &g.members {
        v.push((true, base(&m.staging.key)));
        if let Some(k) = &m.memory {
            v.push((false, base(k)));
        }
    }
    if let Some(dm) = &g.device_memory {
        v.push((false, base(&dm.key)));
    }
    v
}

/// Instance `n` of a class whose instance 0 is `g`: every ordinal moved up by `n` (`None` on
/// overflow).
pub fn instance(g: &Group, n: u32) -> Option<Group> {
    let mut g = g.clone();
    let up = |k: &mut ObjectKey| -> Option<()> {
        k.ordinal = k.ordinal.checked_add(n)?;
        Some(())
    };
    up(&mut g.device.key)?;
    for m in &mut g.members {
        up(&mut m.staging.key)?;
        if let Some(k) = &mut m.memory {
            up(k)?;
        }
    }
    if let Some(dm) = &mut g.device_memory {
        up(&mut dm.key)?;
    }
    Some(g)
}

/// Why the groups `gs` (same signature, sorted by device ordinal) are not one class, given how
/// many objects the trace holds of each base on their device.
fn refuse(gs: &[&Group], counts: &BTreeMap<(u32, bool, Base), u64>, plan: &Plan) -> Option<String> {
    if gs.len() < 2 {
        return Some("one instance".into());
    }
    for (n, g) in gs.iter().enumerate() {
        if instance(gs[0], n as u32).as_ref().map(ordinals) != Some(ordinals(g)) {
            return Some(format!("instance {n}'s ordinals do not step by one"));
        }
    }
    let dev = gs[0].device_index;
    for b in bases(gs[0]) {
        let seen = counts.get(&(dev, b.0, b.1.clone())).copied().unwrap_or(0);
        if seen != gs.len() as u64 {
            return Some(format!(
                "the trace holds {seen} objects with key {:?} (but for the ordinal), {} of them accepted alike",
                b.1,
                gs.len()
            ));
        }
    }
    let named: Vec<Base> = bases(gs[0])
        .into_iter()
        .filter(|b| b.0)
        .map(|b| b.1)
        .collect();
    if plan.rejected.iter().any(|r| {
        r.device_index == dev
            && (named.contains(&base(&r.device.key)) || named.contains(&base(&r.staging.key)))
    }) {
        return Some("a candidate of one of its buffers was refused".into());
    }
    None
}

/// Forms the plan's classes from its groups and the trace they came from (replacing any).
pub fn form(trace: &Trace, plan: &mut Plan) {
    plan.classes.clear();
    let mut counts: BTreeMap<(u32, bool, Base), u64> = BTreeMap::new();
    for r in &trace.records {
        match &r.event {
            Event::BufferCreate { key, .. } => {
                *counts.entry((r.dev, true, base(key))).or_default() += 1
            }
            Event::MemoryAlloc { key, .. } => {
                *counts.entry((r.dev, false, base(key))).or_default() += 1
            }
            _ => {}
        }
    }
    let mut by_sig: BTreeMap<String, Vec<&Group>> = BTreeMap::new();
    for g in &plan.groups {
        by_sig.entry(signature(g)).or_default().push(g);
    }
    let mut classes = Vec::new();
    for gs in by_sig.values_mut() {
        gs.sort_by_key(|g| g.device.key.ordinal);
        if refuse(gs, &counts, plan).is_some() {
            continue;
        }
        let not_beyond = gs
            .iter()
            .find(|g| !g.extrapolable)
            .map(|g| {
                format!(
                    "instance group {} may not be applied to behaviour no profile saw: {}",
                    g.id,
                    if g.not_extrapolable.is_empty() {
                        "the plan does not say why"
                    } else {
                        &g.not_extrapolable
                    }
                )
            })
            .unwrap_or_default();
        let guard_needed = !gs[0]
            .members
            .iter()
            .all(|m| m.one_time && m.role == Role::Readback);
        classes.push(Class {
            id: 0,
            device_index: gs[0].device_index,
            groups: gs.iter().map(|g| g.id).collect(),
            beyond: not_beyond.is_empty(),
            not_beyond,
            guard_needed,
        });
    }
    classes.sort_by_key(|c| c.groups[0]);
    for (i, c) in classes.iter_mut().enumerate() {
        c.id = i as u32 + 1;
    }
    plan.classes = classes;
}
