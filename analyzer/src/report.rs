//! What people and scripts read: the `vkecho analyze` table and its JSON twin.

use crate::analysis::{Analysis, BufferDesc, Decision};
use crate::plan::Role;
// The words the table is written in; re-exported here, where the layer's enforce mode and the
// command line have named them.
pub use crate::plan::{direction_words, role_words};
pub use crate::words::{copies_of, human_bytes, plural, usage_names};
use std::collections::BTreeMap;
use std::fmt::Write;

fn short(b: &BufferDesc) -> String {
    format!(
        "#{} {} {}",
        b.number,
        human_bytes(b.size),
        usage_names(b.usage)
    )
}

/// The readable report: one row per candidate, then the buffers, the reasons and the warnings.
pub fn table(a: &Analysis, source: &str) -> String {
    let mut s = String::new();
    let ctx = &a.plan.context;
    let accepted = a
        .candidates
        .iter()
        .filter(|c| matches!(c.decision, Decision::Accepted { .. }))
        .count();
    let _ =
        writeln!(
        s,
        "vkecho analyze: {source}{}\n  {}, {accepted} accepted in {}, {} rejected; thresholds: {}",
        if ctx.device_name.is_empty() {
            String::new()
        } else {
            format!(" (device \"{}\", {})", ctx.device_name, ctx.exe_path)
        },
        plural(a.candidates.len() as u64, "candidate pair", "candidate pairs"),
        plural(a.plan.groups.len() as u64, "group", "groups"),
        a.plan.rejected.len(),
        copies_of(a.plan.thresholds.min_copies, a.plan.thresholds.min_bytes),
    );
    for w in &a.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s.push_str(&copies_summary(a));
    if a.candidates.is_empty() {
        let _ = writeln!(
            s,
            "\nno candidates: {}",
            if a.copies.copies == 0 && a.copies.unknown_copies == 0 {
                "the trace holds no executed buffer copy"
            } else if a.copies.reasons.is_empty() {
                "no executed copy has one side the host touches and one it leaves alone"
            } else {
                "no executed copy has one side the host touches and one it leaves alone (reasons above)"
            }
        );
        return s;
    }
    let mut rows: Vec<[String; 7]> = vec![[
        "".into(),
        "staging".into(),
        "device".into(),
        "role".into(),
        "copies/it".into(),
        "bytes/it".into(),
        "decision".into(),
    ]];
    // Several devices in the trace: rows and groups say which device (creation index) they are of.
    let multi = a
        .candidates
        .iter()
        .any(|c| c.device_index != a.candidates[0].device_index)
        || a.plan.groups.iter().any(|g| g.device_index != 0);
    let on_dev = |d: u32| {
        if multi {
            format!("device {d}: ")
        } else {
            String::new()
        }
    };
    for (i, c) in a.candidates.iter().enumerate() {
        let decision = decision(c);
        rows.push([
            format!("{}", i + 1),
            format!("{}{}", on_dev(c.device_index), short(&c.staging)),
            short(&c.device),
            role_words(c.role).into(),
            format!("{:.1} ({} in all)", c.copies_per_iter, c.copies),
            human_bytes(c.bytes_per_iter),
            decision,
        ]);
    }
    let mut w = [0usize; 7];
    for r in &rows {
        for (k, cell) in r.iter().enumerate() {
            w[k] = w[k].max(cell.chars().count());
        }
    }
    s.push('\n');
    for r in &rows {
        let mut line = String::new();
        for (k, cell) in r.iter().enumerate() {
            let pad = w[k] - cell.chars().count();
            line.push_str(cell);
            if k + 1 < r.len() {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        let _ = writeln!(s, "  {}", line.trim_end());
    }

    let mut bufs: BTreeMap<usize, &BufferDesc> = BTreeMap::new();
    for c in &a.candidates {
        bufs.insert(c.staging.number, &c.staging);
        bufs.insert(c.device.number, &c.device);
    }
    let _ = writeln!(s, "\nbuffers:");
    for b in bufs.values() {
        let _ = writeln!(
            s,
            "  #{:<4} {}  {}  {}  created at {}",
            b.number,
            b.key,
            human_bytes(b.size),
            usage_names(b.usage),
            if b.created_at.is_empty() {
                "?"
            } else {
                &b.created_at
            }
        );
    }
    let reasons: Vec<(usize, &crate::analysis::CandidateRow)> = a
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c.decision, Decision::Rejected { .. }))
        .map(|(i, c)| (i + 1, c))
        .collect();
    let mut covered: BTreeMap<usize, crate::sampling::Coverage> = BTreeMap::new();
    for c in &a.candidates {
        if let Some(cov) = c.host_coverage {
            covered.insert(c.staging.number, cov);
        }
    }
    if !covered.is_empty() {
        let _ = writeln!(s, "\nhost access sampled (validate_sample_every > 1):");
        for (n, c) in covered {
            let _ = writeln!(
                s,
                "  #{n}: watched in {} of {} windows; its pairs are refused (a window that was not watched cannot accept a pair; profile with validate_sample_every=1, the default, for full evidence)",
                c.observed, c.windows
            );
        }
    }
    if !reasons.is_empty() {
        let _ = writeln!(s, "\nwhy rejected:");
        for (i, c) in reasons {
            s.push_str(&rejection(i, c));
        }
    }
    if !a.plan.groups.is_empty() {
        let _ = writeln!(s, "\ngroups:");
        for g in &a.plan.groups {
            let _ = writeln!(
                s,
                "  group {}{}: {}, {}, saves {} per iteration ({}, {} in the trace), {} of buffer memory",
                g.id,
                if multi {
                    format!(" (device {})", g.device_index)
                } else {
                    String::new()
                },
                direction_words(g.direction),
                plural(g.members.len() as u64, "member", "members"),
                human_bytes(g.bytes_saved_per_iter),
                plural(g.copies_total, "copy", "copies"),
                human_bytes(g.bytes_total),
                human_bytes(g.memory_saved)
            );
            let skipped: Vec<&crate::plan::Member> =
                g.members.iter().filter(|m| m.skip_allocation).collect();
            if !skipped.is_empty() {
                let bytes: u64 = skipped
                    .iter()
                    .filter_map(|m| m.memory.as_ref().map(|k| k.size))
                    .sum();
                let _ = writeln!(
                    s,
                    "    {} staging allocation{} ({}) not made at the driver",
                    skipped.len(),
                    if skipped.len() == 1 { "" } else { "s" },
                    human_bytes(bytes)
                );
            }
            if let Some(dm) = &g.device_memory {
                let _ = writeln!(
                    s,
                    "    the device buffer's allocation ({}) {}",
                    human_bytes(dm.key.size),
                    if dm.window_hi > dm.window_lo {
                        format!(
                            "is made only in [{}, {}) at the driver (the buffers no group names)",
                            dm.window_lo, dm.window_hi
                        )
                    } else {
                        "is not made at the driver".to_string()
                    }
                );
            }
            // Member by member (issue 36): what the plan applies, and which partners of the
            // device buffer it leaves out, and why.
            let number = |key: &str| {
                a.candidates
                    .iter()
                    .find(|c| c.staging.key.to_string() == key)
                    .map_or(String::new(), |c| format!("staging #{} ", c.staging.number))
            };
            for st in a
                .member_statuses()
                .iter()
                .filter(|x| x.group == g.id && x.device_index == g.device_index)
            {
                match st.member {
                    Some(i) => {
                        let _ = writeln!(
                            s,
                            "    member {i}: {}({}) applied",
                            number(&st.staging),
                            st.role
                        );
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            "    not a member: {}({}): {}",
                            number(&st.staging),
                            st.role,
                            st.reason
                        );
                    }
                }
            }
            for (i, m) in g.members.iter().enumerate() {
                if !m.allocation_note.is_empty() {
                    let _ = writeln!(
                        s,
                        "    member {i}: its allocation is made: {}",
                        m.allocation_note
                    );
                }
            }
        }
    }
    s
}

/// The decision column of the table for one row: `accepted: group 0, staging into device`,
/// `rejected: S2 at event 71`.
pub fn decision(c: &crate::analysis::CandidateRow) -> String {
    match &c.decision {
        Decision::Accepted {
            group,
            direction,
            one_time,
        } => format!(
            "accepted: group {group}, {}{}",
            direction_words(*direction),
            if !*one_time {
                ""
            } else if c.role == Role::Readback {
                ", one-time download"
            } else {
                ", one-time upload"
            }
        ),
        Decision::Rejected {
            condition, event, ..
        } => match event {
            Some(e) => format!("rejected: {} at event {e}", condition.as_str()),
            None => format!("rejected: {}", condition.as_str()),
        },
    }
}

/// One rejection for people (issue 16): first in plain words, then where the two buffers were
/// created, then the detail with the condition and the events that showed it.
pub fn rejection(i: usize, c: &crate::analysis::CandidateRow) -> String {
    let Decision::Rejected {
        message,
        plain,
        reason,
        remedy,
        ..
    } = &c.decision
    else {
        return String::new();
    };
    let mut s = String::new();
    let headline = if plain.is_empty() { message } else { plain };
    let _ = writeln!(s, "  {i}. {headline}");
    for (what, b) in [("staging", &c.staging), ("device", &c.device)] {
        let _ = writeln!(
            s,
            "       {what} buffer #{} ({}, {}): created at {}",
            b.number,
            human_bytes(b.size),
            usage_names(b.usage),
            if b.created_at.is_empty() {
                "an unknown place"
            } else {
                &b.created_at
            }
        );
    }
    if !plain.is_empty() {
        let _ = writeln!(s, "       detail: {message}");
    }
    if !remedy.is_empty() {
        let _ = writeln!(s, "       to change ({reason}): {remedy}");
    }
    s
}

/// How many copies the trace holds and, by reason, why those outside accepted pairs stayed out.
pub fn copies_summary(a: &Analysis) -> String {
    let c = &a.copies;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ncopies: the trace holds {} ({}), {} of them ({}) in accepted pairs{}",
        plural(c.copies, "executed buffer copy", "executed buffer copies"),
        human_bytes(c.bytes),
        c.accepted_copies,
        human_bytes(c.accepted_bytes),
        if c.unknown_copies > 0 {
            format!(
                "; {} more recorded {} a buffer the trace does not know",
                c.unknown_copies,
                if c.unknown_copies == 1 {
                    "copy names"
                } else {
                    "copies name"
                }
            )
        } else {
            String::new()
        }
    );
    if !c.reasons.is_empty() {
        let _ = writeln!(s, "not in accepted pairs, by reason:");
    }
    for r in &c.reasons {
        let pairs = if r.pairs > 0 {
            format!(", {}", plural(r.pairs, "pair", "pairs"))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  {}: {} ({}){pairs}: {}\n    to change: {}",
            r.reason,
            plural(r.copies, "copy", "copies"),
            human_bytes(r.bytes),
            r.explanation,
            r.remedy
        );
    }
    s
}

/// The same data for scripts.
pub fn json(a: &Analysis) -> String {
    serde_json::to_string_pretty(a).expect("analysis serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_usage_read_well() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(usage_names(0x1 | 0x20), "SRC|STORAGE");
        assert_eq!(usage_names(0), "-");
        assert_eq!(usage_names(0x4000_0000), "0x40000000");
    }
}
