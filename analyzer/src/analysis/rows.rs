//! The rows of `vkecho analyze` and the plan's rejections: one per candidate, with its
//! decision.

use super::output::{buffer_ref, BufferDesc, CandidateRow, Decision};
use crate::model::BufId;
use crate::pairing::{self, Candidate};
use crate::plan::{Direction, Rejection, Thresholds};
use crate::safety::{Ctx, Verdict};
use std::collections::BTreeMap;

/// Per candidate its row, and per refused candidate its rejection, in candidate order.
pub(super) fn rows(
    ctx: &Ctx,
    cands: &[Candidate],
    verdict: &[Option<Verdict>],
    accepted: &BTreeMap<usize, (u32, Direction)>,
    delta: &[Option<i64>],
    t: Thresholds,
) -> (Vec<CandidateRow>, Vec<Rejection>) {
    let m = ctx.m;
    let mut rejected = Vec::new();
    let mut rows = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        let iterations = c.iterations().max(1);
        let decision = match (&verdict[i], accepted.get(&i)) {
            (Some(v), _) => {
                rejected.push(rejection(ctx, c, v));
                refused(v, t)
            }
            (None, Some(&(group, direction))) => Decision::Accepted {
                group,
                direction,
                one_time: pairing::is_one_time(m, c),
            },
            (None, None) => unreachable!("every candidate is accepted or rejected"),
        };
        rows.push(CandidateRow {
            device_index: 0,
            staging: buffer_desc(ctx, c.staging),
            device: buffer_desc(ctx, c.device),
            role: c.role(),
            delta: delta[i],
            copies: c.copies(),
            bytes: c.bytes(),
            iterations,
            copies_per_iter: c.copies() as f64 / iterations as f64,
            bytes_per_iter: c.bytes() / iterations,
            host_coverage: m.coverage.get(&c.staging).copied(),
            decision,
        });
    }
    (rows, rejected)
}

/// The plan's record of a refused pair.
fn rejection(ctx: &Ctx, c: &Candidate, v: &Verdict) -> Rejection {
    Rejection {
        device_index: 0,
        device: buffer_ref(ctx, c.device),
        staging: buffer_ref(ctx, c.staging),
        condition: v.condition(),
        event: v.event,
        message: v.message.clone(),
        plain: v.plain.clone(),
        copies: c.copies(),
        bytes: c.bytes(),
    }
}

/// A refused pair's decision: its verdict, with the cause's key and remedy.
fn refused(v: &Verdict, t: Thresholds) -> Decision {
    Decision::Rejected {
        condition: v.condition(),
        event: v.event,
        message: v.message.clone(),
        plain: v.plain.clone(),
        reason: v.cause.key().into(),
        remedy: v.cause.remedy(t),
    }
}

fn buffer_desc(ctx: &Ctx, b: BufId) -> BufferDesc {
    let buf = &ctx.m.buffers[b];
    BufferDesc {
        number: buf.number,
        key: buf.key.clone(),
        size: buf.size,
        usage: buf.usage,
        created_at: ctx.created_at[b].clone(),
    }
}
