//! S2 order: no host access to a staging buffer of the group while GPU work that touches any
//! buffer of the group is in flight (submitted, its completion not yet observed by the host).
//!
//! Once the buffers share memory, a host access during such work races with the GPU on the very
//! bytes it reads or writes, even where the original program's copy kept them apart. The classic
//! case is a readback whose copy was also the host's wait: reading the staging buffer after the
//! fence is fine; reading it before is not.
//!
//! A member bound into memory the host mapped before the bind counts as written by the host at
//! its bind: enforce carries those bytes into the shared range right there.

use super::{Cause, Ctx, GroupSpec, Verdict};
use crate::model::{Step, SubId};
use crate::trace::Access;
use std::collections::BTreeSet;

pub fn check(ctx: &Ctx, g: &GroupSpec) -> Result<(), Verdict> {
    let m = ctx.m;
    let mut in_flight: BTreeSet<SubId> = BTreeSet::new();
    let binds: Vec<(u64, Step)> = m
        .written_before_bind
        .iter()
        .map(|&(b, seq)| {
            (
                seq,
                Step::Host {
                    buffer: b,
                    access: Access::Write,
                },
            )
        })
        .collect();
    let mut steps: Vec<&(u64, Step)> = m.timeline.iter().chain(binds.iter()).collect();
    steps.sort_by_key(|(seq, _)| *seq); // stable: at one seq the timeline's step comes first
    for (seq, step) in steps {
        match step {
            Step::Submit(s) => {
                if m.touched[*s].iter().any(|b| g.contains(*b)) {
                    in_flight.insert(*s);
                }
            }
            Step::Complete(s) => {
                in_flight.remove(s);
            }
            Step::Host { buffer, access } => {
                if !g.is_member(*buffer) {
                    continue;
                }
                let Some(&s) = in_flight.iter().next() else {
                    continue;
                };
                let touched = &m.touched[s];
                let what = if touched.contains(&g.device) {
                    format!("its device buffer #{}", m.buffers[g.device].number)
                } else if touched.contains(buffer) {
                    "the staging buffer itself".to_string()
                } else {
                    let other = g
                        .members
                        .iter()
                        .find(|x| touched.contains(&x.0))
                        .map(|x| m.buffers[x.0].number)
                        .unwrap_or(0);
                    format!("staging buffer #{other} of the same group")
                };
                let verb = if access.writes() { "wrote" } else { "read" };
                let gpu_what = if touched.contains(&g.device) {
                    ctx.short(g.device, "device")
                } else if touched.contains(buffer) {
                    "the staging buffer itself".to_string()
                } else {
                    "another staging buffer of the group".to_string()
                };
                let plain = if access.writes() {
                    format!(
                        "The program writes {} while the GPU may still be using {gpu_what} (submission {} had not finished): sharing memory, the new bytes would reach the GPU too early — sharing memory would change what the GPU reads.",
                        ctx.short(*buffer, "staging"),
                        m.submissions[s].seq
                    )
                } else {
                    format!(
                        "The program reads {} while the GPU may still be working on {gpu_what} (submission {} had not finished). Sharing memory, the program could read bytes the GPU has not finished writing.",
                        ctx.short(*buffer, "staging"),
                        m.submissions[s].seq
                    )
                };
                let sub = &m.submissions[s];
                let seen = match sub.completed {
                    Some(c) => format!("the host observed its completion only at event {c}"),
                    None => "the host never observed its completion".to_string(),
                };
                return Err(Verdict {
                    cause: Cause::S2,
                    event: Some(*seq),
                    message: format!(
                        "S2: host {verb} {} at event {seq} while submission {} using {what} was in flight ({seen}); sharing memory, that access would race with the GPU — wait for the submission's fence before touching the staging buffer",
                        ctx.name(*buffer, "staging"),
                        sub.seq
                    ),
                    plain,
                });
            }
        }
    }
    Ok(())
}
