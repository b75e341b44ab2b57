//! Step 3: the per-pair rules. Per candidate, in this order, the first failing rule rejects
//! it: host import, reuse over time, identity, one constant offset, thresholds, a name a later
//! run recognises, S3 pointer, what else reaches the bytes (commands echo steps aside from,
//! buffers and images bound over them), untracked uses, S2 order, sampled evidence, S1 value, and the
//! trace's evidence for the pair (DESIGN §5).

use crate::model::BufId;
use crate::pairing::{self, Candidate};
use crate::plan::Thresholds;
use crate::safety::{
    compat, reach, s1_value, s2_order, s3_pointer, Cause, Ctx, GroupSpec, Verdict,
};
use crate::trace::{ObjectKey, Trace};
use std::collections::{BTreeMap, BTreeSet};

/// Every candidate's verdict (`None`: it passed every per-pair rule) and its offset (`Some`
/// once its copies were found to keep one).
pub(super) fn verdicts(
    trace: &Trace,
    ctx: &Ctx,
    cands: &[Candidate],
    reuse: &BTreeMap<usize, Verdict>,
    t: Thresholds,
) -> (Vec<Option<Verdict>>, Vec<Option<i64>>) {
    let racy = racy_bases(trace);
    let mut verdict: Vec<Option<Verdict>> = vec![None; cands.len()];
    let mut delta: Vec<Option<i64>> = vec![None; cands.len()];
    for (i, c) in cands.iter().enumerate() {
        verdict[i] = pair(trace, ctx, &racy, reuse.get(&i), c, t, &mut delta[i]).err();
    }
    (verdict, delta)
}

/// The rules for one candidate, in order; `delta` is set when the offset rule passes.
fn pair(
    trace: &Trace,
    ctx: &Ctx,
    racy: &BTreeSet<Base>,
    reused: Option<&Verdict>,
    c: &Candidate,
    t: Thresholds,
    delta: &mut Option<i64>,
) -> Result<(), Verdict> {
    let m = ctx.m;
    host_import(ctx, c.staging, c.device)?;
    if let Some(v) = reused {
        return Err(v.clone());
    }
    identity(ctx, racy, c.staging, c.device)?;
    let dl = pairing::offset(m, c)?;
    *delta = Some(dl);
    pairing::threshold(m, c, t)?;
    named(ctx, c.staging, c.device)?;
    s3_pointer::check(ctx, c.staging, c.device)?;
    reach::check(ctx, c.staging, c.device)?;
    compat::untracked(ctx, c.staging, c.device)?;
    let g = GroupSpec::single(c.device, c.staging, dl);
    s2_order::check(ctx, &g)?;
    watched_throughout(ctx, c)?;
    s1_value::check(ctx, &g)?;
    evidence(trace, m)?;
    validated(ctx, c)
}

/// Sampled validation: a race seen is a race whatever was not seen; S1 needs every host
/// access, so a window that was not watched refuses the pair, for the staging buffer and for a
/// mapped partner alike.
fn watched_throughout(ctx: &Ctx, c: &Candidate) -> Result<(), Verdict> {
    let m = ctx.m;
    for (b, what) in [(c.staging, "staging"), (c.device, "device")] {
        if what == "device" && !m.host_mapped(b) {
            continue;
        }
        if let Some((seq, why)) = m.unwatched.get(&b) {
            return Err(Verdict {
                cause: Cause::EvidenceSampled,
                event: Some(*seq),
                message: why.clone(),
                plain: format!(
                    "Echo watched the program's reads and writes of {} only in some rounds of its loop (sampled validation), and it never accepts a pair from rounds it did not watch: profile with every round watched (validate_sample_every=1, the default).",
                    ctx.short(b, what)
                ),
            });
        }
    }
    Ok(())
}

/// The profiler saw the host's accesses to the staging buffer, and to a mapped partner (that
/// the host never touches it is itself evidence).
fn validated(ctx: &Ctx, c: &Candidate) -> Result<(), Verdict> {
    let m = ctx.m;
    if let Some((seq, why)) = m.unvalidated.get(&c.staging) {
        return Err(Verdict {
            cause: Cause::Evidence,
            event: Some(*seq),
            message: format!(
                "evidence: the host's accesses to {} were not seen while profiling ({why}), so S1/S2 cannot be checked",
                ctx.name(c.staging, "staging")
            ),
            plain: format!(
                "Echo could not watch the program's reads and writes of {} while profiling, so it cannot tell whether sharing memory with {} is safe.",
                ctx.short(c.staging, "staging"),
                ctx.short(c.device, "device")
            ),
        });
    }
    if m.host_mapped(c.device) {
        if let Some((seq, why)) = m.unvalidated.get(&c.device) {
            return Err(Verdict {
                cause: Cause::Evidence,
                event: Some(*seq),
                message: format!(
                    "evidence: {} is mapped, and the host's accesses to it were not seen while profiling ({why}), so it is not known that the host leaves it alone",
                    ctx.name(c.device, "device")
                ),
                plain: format!(
                    "The program maps the memory of {}, and echo could not watch the program's reads and writes of it while profiling, so it cannot tell whether the program leaves it alone while {} shares its memory.",
                    ctx.short(c.device, "device"),
                    ctx.short(c.staging, "staging")
                ),
            });
        }
    }
    Ok(())
}

/// Fail closed (DESIGN §5): S1 and S2 are checked against the host accesses the trace holds;
/// when the trace cannot vouch that it holds all of them — host-access validation off, unknown
/// or lost during the run, or the trace cut short — a candidate is refused, never accepted with
/// a warning.
fn evidence(trace: &Trace, m: &crate::model::Model) -> Result<(), Verdict> {
    let refuse = |event: Option<u64>, message: String, plain: String| {
        Err(Verdict {
            cause: Cause::Evidence,
            event,
            message,
            plain,
        })
    };
    if trace.truncated {
        return refuse(
            Some(m.last_seq),
            format!(
                "evidence: the trace was cut at the size limit after event {}, so a host access or GPU use after the cut would go unseen; re-profile with a larger trace_max_bytes",
                m.last_seq
            ),
            "The profile ends early (the trace reached its size limit), so echo did not see everything the program did with these buffers; it refuses rather than guess.".into(),
        );
    }
    if trace.header.version < crate::trace::TRACE_VERSION_COMPLETE {
        return refuse(
            None,
            format!(
                "evidence: trace format version {} was written by a layer that saw less than this one (before version 4, only the commands it hooked; before version {}, descriptor sets as recorded, not as the GPU reads them at submission), so a use of a buffer may be missing; re-profile with this layer",
                trace.header.version,
                crate::trace::TRACE_VERSION_COMPLETE
            ),
            "The profile was recorded by an older echo that did not see every way a command can reach a buffer, so echo cannot vouch for these buffers; profile again with this version.".into(),
        );
    }
    let validated = match m.validation.as_str() {
        "double-map" | "driver-map" => true,
        // A version 1 trace does not say per device; its header's settings do.
        "" => trace.header.settings.get("validate").map(String::as_str) == Some("true"),
        _ => false,
    };
    if !validated {
        return refuse(
            None,
            "evidence: host-access validation was off while profiling (validate=false, or the device could not be validated), so the host's reads and writes of the staging buffer were not seen and S1/S2 cannot be checked; re-profile with validate=true".into(),
            "Echo did not watch when the program reads and writes its staging buffers while profiling, so it cannot tell whether sharing memory is safe; it refuses rather than guess.".into(),
        );
    }
    if let Some((seq, why)) = &m.validation_lost {
        return refuse(
            Some(*seq),
            format!(
                "evidence: host-access validation stopped at event {seq} ({why}), so later host accesses were not seen and S1/S2 cannot be checked"
            ),
            "Echo stopped seeing the program's reads and writes of staging buffers partway through profiling, so it cannot tell whether sharing memory is safe; it refuses rather than guess.".into(),
        );
    }
    Ok(())
}

/// Key (without its ordinal) of a buffer (`true`) or allocation (`false`).
type Base = (bool, String, u64, u32, u32);

fn base(buffer: bool, k: &ObjectKey) -> Base {
    (buffer, k.site.clone(), k.size, k.usage, k.flags)
}

/// Keys (without the ordinal) whose objects were created on more than one thread: their
/// ordinals follow the scheduler, so a later run cannot tell those objects apart.
fn racy_bases(trace: &Trace) -> BTreeSet<Base> {
    use crate::trace::Event;
    let mut first: BTreeMap<Base, u32> = BTreeMap::new();
    let mut racy = BTreeSet::new();
    for r in &trace.records {
        let b = match &r.event {
            Event::BufferCreate { key, .. } => base(true, key),
            Event::MemoryAlloc { key, .. } => base(false, key),
            _ => continue,
        };
        if *first.entry(b.clone()).or_insert(r.thread) != r.thread {
            racy.insert(b);
        }
    }
    racy
}

/// Identity: enforce finds buffers (and the staging buffer's allocation) by key; a key created
/// on several threads is not a stable identity.
fn identity(
    ctx: &Ctx,
    racy: &BTreeSet<Base>,
    staging: BufId,
    device: BufId,
) -> Result<(), Verdict> {
    if racy.is_empty() {
        return Ok(());
    }
    let m = ctx.m;
    for (b, role) in [(staging, "staging"), (device, "device")] {
        let buf = &m.buffers[b];
        let mem = buf.bind.as_ref().map(|x| &m.memories[x.memory].key);
        let what = if racy.contains(&base(true, &buf.key)) {
            Some("it")
        } else if mem.is_some_and(|k| racy.contains(&base(false, k))) {
            Some("its allocation")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(Verdict {
                cause: Cause::CompatIdentity,
                event: Some(buf.created),
                message: format!(
                    "compat: {} cannot be recognised in a later run: objects created like {what} (same call site, size, usage) are created on several threads, so their order depends on the scheduler",
                    ctx.name(b, role)
                ),
                plain: format!(
                    "Several threads create buffers like {} from the same place, so a later run cannot tell which one is which.",
                    ctx.short(b, role)
                ),
            });
        }
    }
    Ok(())
}

/// Memory the application imported from its own pointer (VK_EXT_external_memory_host) is host
/// memory whose accesses echo does not see: refused first, with that reason, and its buffers
/// are called host buffers (never "device", whatever their copies look like).
fn host_import(ctx: &Ctx, staging: BufId, device: BufId) -> Result<(), Verdict> {
    let imported = |b: BufId| {
        ctx.m.buffers[b]
            .bind
            .as_ref()
            .map(|bind| &ctx.m.memories[bind.memory])
            .filter(|mem| mem.host_import)
    };
    for b in [staging, device] {
        let Some(mem) = imported(b) else { continue };
        let other = if b == staging { device } else { staging };
        let other_role = if imported(other).is_some() {
            "host"
        } else if b == staging {
            "device"
        } else {
            "staging"
        };
        let number = ctx.m.buffers[b].number;
        return Err(Verdict {
            cause: Cause::HostImport,
            event: Some(mem.allocated),
            message: format!(
                "S3: host buffer #{number} lives in host memory the application imported from its own pointer (VK_EXT_external_memory_host, allocated at event {}); the host reads and writes it through that pointer, which echo does not see, so its copies with {} stay",
                mem.allocated,
                ctx.name(other, other_role)
            ),
            plain: format!(
                "Host buffer #{number} is memory the program brought in from its own pointer; echo cannot see when the program reads or writes it, so it leaves it as it is."
            ),
        });
    }
    Ok(())
}

/// A pair above the thresholds whose buffers were created below the profiling run's
/// `min_bytes` (an analysis with lower thresholds): they have no identity a later run could
/// recognise (`ObjectKey::anonymous`).
fn named(ctx: &Ctx, staging: BufId, device: BufId) -> Result<(), Verdict> {
    for (b, role) in [(staging, "staging"), (device, "device")] {
        let buf = &ctx.m.buffers[b];
        if buf.key.is_anonymous() {
            return Err(Verdict {
                cause: Cause::CompatAnonymous,
                event: Some(buf.created),
                message: format!(
                    "compat: {} has no identity: it was smaller than min_bytes while profiling, so its creation site was not taken and a later run cannot recognise it; re-profile with min_bytes at most {}",
                    ctx.name(b, role),
                    buf.size
                ),
                plain: format!(
                    "{} was too small to be followed while profiling, so a later run could not recognise it.",
                    crate::safety::upper(&ctx.short(b, role))
                ),
            });
        }
    }
    Ok(())
}
