//! Issue 36 item 4, one truth: what `vkecho analyze` accepts is what enforce applies, and every
//! report says the same thing member by member.
//!
//! `c_mapped_upload persistent` (tests/c) maps its upload buffer's allocation before the device
//! buffer is bound and keeps that mapping; its readback buffer is mapped only after. Enforce
//! cannot serve the early mapping from the device buffer's memory, so it refuses the upload
//! member and applies the readback member alone. Before, the analysis put both in one group, and
//! enforce reported `0/1 groups applied … group 1 not applied: member 0: …` in the same line that
//! counted the readback member's copies elided and allocation skipped.
//!
//! Checked here, on the real loader and lavapipe:
//! - the analysis refuses the upload member in enforce's words (`apply::MAPPED_BY_APPLICATION`,
//!   cause `compat_mapped`) and plans the readback member alone; enforce applies that plan in full,
//!   and its statistics list the same applied members as the analysis;
//! - the `remap` twin's plan (both members, as the analysis used to accept), forced onto
//!   `persistent`: enforce applies the group in part, and its log line, its statistics and the
//!   analysis of `persistent` agree member by member — the same member refused for the same
//!   reason, the same member applied — and nothing calls the group "not applied";
//! - every run's output is byte-identical to the run without the layer.

use echo_analyzer::analysis::{Analysis, Decision};
use echo_analyzer::apply::MAPPED_BY_APPLICATION;
use echo_analyzer::stats::{MemberStatus, Stats};
use echo_tests::samples::SampleRun;
use echo_tests::world::{artifact, c_spv, program, run_within, scratch, World};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Scratch files of the test, removed at the end unless `ECHO_KEEP_TEST_DIRS` is set.
fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `c_mapped_upload ARG` with echo in `mode` (`None`: not installed) and `env`; must exit 0.
fn run(mode: Option<&'static str>, arg: &str, env: &[(&str, String)]) -> SampleRun {
    let mut w = World::echo(mode).set("ECHO_C_SPV", c_spv());
    for (k, v) in env {
        w = w.set(k, v);
    }
    let r = run_within(w.command(&program("c_mapped_upload"), &[arg]), LIMIT);
    assert!(
        r.status.success(),
        "c_mapped_upload {arg} (echo {mode:?}) failed ({}):\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    r
}

/// Profile `arg`, then `vkecho analyze --json -o PLAN`: the analysis and the plan's path.
fn profile_analyze(dir: &Path, arg: &str, baseline: &str) -> (Analysis, PathBuf) {
    let trace = dir.join(format!("{arg}.trace"));
    // The user's vouch: this test is about the mapped-by-application rule and its words. Without
    // it the upload's S1 comes first: c_mapped_upload fills 4 MiB 4 bytes a store, past what one
    // window of exact host writes may cost (issue 54), so its writes are "any part".
    let p = run(
        Some("profile"),
        arg,
        &[
            ("VK_ECHO_TRACE", s(&trace)),
            ("VK_ECHO_HOST_WRITES", "whole".into()),
        ],
    );
    assert_eq!(p.stdout, baseline, "{arg}: profile changed the output");
    let plan = dir.join(format!("{arg}.plan"));
    let mut cmd = Command::new(artifact("vkecho"));
    cmd.arg("analyze")
        .arg(&trace)
        .arg("-o")
        .arg(&plan)
        .arg("--json");
    let r = run_within(cmd, LIMIT);
    assert!(r.status.success(), "vkecho analyze {arg}: {}", r.stderr);
    let a: Analysis = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("vkecho analyze --json {arg}: {e}\n{}", r.stdout));
    (a, plan)
}

/// Enforce `plan` on `arg` with statistics and the `info` log: the run and its one stats record.
fn enforce(dir: &Path, arg: &str, plan: &Path, tag: &str) -> (SampleRun, Stats) {
    let stats = dir.join(format!("{tag}.stats.jsonl"));
    let r = run(
        Some("enforce"),
        arg,
        &[
            ("VK_ECHO_PLAN", s(plan)),
            ("VK_ECHO_STATS", s(&stats)),
            ("VK_ECHO_LOG", "info".into()),
        ],
    );
    let text = std::fs::read_to_string(&stats).unwrap_or_default();
    let all: Vec<Stats> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{tag}: {e}: {l}")))
        .collect();
    assert_eq!(all.len(), 1, "{tag}: one device, one record: {text}");
    (r, all.into_iter().next().unwrap())
}

/// Staging keys of the members that are (`applied`) or are not applied.
fn keys(st: &[MemberStatus], applied: bool) -> BTreeSet<String> {
    st.iter()
        .filter(|m| m.applied == applied)
        .map(|m| m.staging.clone())
        .collect()
}

/// enforce's `info` summary line.
fn summary_line(r: &SampleRun) -> &str {
    r.stderr
        .lines()
        .find(|l| l.contains("groups applied"))
        .unwrap_or_else(|| panic!("no summary line:\n{}", r.stderr))
}

#[test]
fn analysis_log_and_statistics_agree_member_by_member() {
    let dir = scratch("agree");
    let dir = dir.as_path();
    let baseline = run(None, "persistent", &[]).stdout;
    assert!(baseline.contains("checksum"), "{baseline}");
    assert_eq!(
        run(None, "remap", &[]).stdout,
        baseline,
        "the twins compute the same"
    );

    // The analysis refuses the upload member, in enforce's words, and keeps the readback one.
    let (a, plan) = profile_analyze(dir, "persistent", &baseline);
    let upload = a
        .candidates
        .iter()
        .find(|c| c.role == echo_analyzer::plan::Role::Upload)
        .expect("the upload pair is a candidate");
    let Decision::Rejected { reason, plain, .. } = &upload.decision else {
        panic!("the upload member is refused: {:?}", upload.decision);
    };
    assert_eq!(reason, "compat_mapped");
    assert!(plain.contains(MAPPED_BY_APPLICATION), "{plain}");
    assert_eq!(a.plan.groups.len(), 1, "{:#?}", a.candidates);
    assert_eq!(a.plan.groups[0].members.len(), 1);
    let planned = a.member_statuses();
    assert_eq!(
        a.members, planned,
        "`vkecho analyze --json` holds the same records"
    );
    assert_eq!(keys(&planned, true).len(), 1, "{planned:#?}");
    assert_eq!(
        keys(&planned, false),
        BTreeSet::from([upload.staging.key.to_string()])
    );

    // Enforce applies that plan in full: the same members, nothing "not applied".
    let (r, st) = enforce(dir, "persistent", &plan, "own");
    assert_eq!(r.stdout, baseline, "enforce changed the output");
    assert_eq!(
        (
            st.groups_planned,
            st.groups_applied,
            st.groups_partly_applied
        ),
        (1, 1, 0),
        "{st:#?}"
    );
    assert!(
        st.not_applied.is_empty() && st.partly_applied.is_empty(),
        "{st:#?}"
    );
    assert_eq!(keys(&st.members, true), keys(&planned, true), "{st:#?}");
    assert!(keys(&st.members, false).is_empty(), "{st:#?}");
    assert!(st.copies_elided_run > 0, "{st:#?}");
    assert!(
        summary_line(&r).contains(": 1/1 groups applied, "),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("not applied"), "{}", r.stderr);

    // The plan the analysis used to make (the remap twin's: both members), forced onto
    // `persistent`: applied in part, and every report says which member and why.
    let (ra, rplan) = profile_analyze(dir, "remap", &baseline);
    assert_eq!(ra.plan.groups.len(), 1, "{:#?}", ra.candidates);
    assert_eq!(ra.plan.groups[0].members.len(), 2, "{:#?}", ra.candidates);
    let mut forced: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rplan).unwrap()).unwrap();
    let own: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    forced["context"] = own["context"].clone();
    let forced_file = dir.join("forced.plan");
    std::fs::write(&forced_file, forced.to_string()).unwrap();
    let (r, st) = enforce(dir, "persistent", &forced_file, "forced");
    assert_eq!(
        r.stdout, baseline,
        "enforce (forced plan) changed the output"
    );
    assert_eq!(
        (
            st.groups_planned,
            st.groups_applied,
            st.groups_partly_applied
        ),
        (1, 0, 1),
        "{st:#?}"
    );
    assert!(
        st.not_applied.is_empty(),
        "nothing is called not applied: {st:#?}"
    );
    // The same member refused, for the same reason, and the same member applied, as the analysis
    // of `persistent` says.
    let refused: Vec<&MemberStatus> = st.members.iter().filter(|m| !m.applied).collect();
    assert_eq!(refused.len(), 1, "{st:#?}");
    assert_eq!(refused[0].staging, upload.staging.key.to_string());
    assert_eq!(refused[0].role, "upload");
    assert_eq!(refused[0].reason, MAPPED_BY_APPLICATION);
    let analysed = planned.iter().find(|m| !m.applied).unwrap();
    assert!(analysed.reason.contains(&refused[0].reason), "{analysed:?}");
    assert_eq!(keys(&st.members, true), keys(&planned, true), "{st:#?}");
    // The work enforce did is that of the applied member.
    assert!(
        st.copies_elided_run > 0 && st.binds_redirected > 0,
        "{st:#?}"
    );
    let p = &st.partly_applied[0];
    let m_refused = refused[0].member.unwrap();
    let m_applied = st
        .members
        .iter()
        .find(|m| m.applied)
        .unwrap()
        .member
        .unwrap();
    assert_eq!(p.applied, [m_applied]);
    assert_eq!(
        p.reason,
        format!("member {m_refused}: {MAPPED_BY_APPLICATION}")
    );
    // The log line and the per-group line say the same.
    let line = summary_line(&r);
    assert!(
        line.contains(": 0/1 groups applied in full, 1 in part, "),
        "{line}"
    );
    let want = format!(
        "group 1 applied in part: member {m_applied} applied; not applied: member {m_refused}: {MAPPED_BY_APPLICATION}"
    );
    assert!(r.stderr.contains(&want), "{want}\n{}", r.stderr);
    assert!(
        !r.stderr.contains("group 1 not applied"),
        "no report calls the group not applied:\n{}",
        r.stderr
    );
    assert_eq!(st.group_lines(), [want]);

    // The twin with its own plan: both members applied.
    let base_remap = run(None, "remap", &[]).stdout;
    let (r, st) = enforce(dir, "remap", &rplan, "remap");
    assert_eq!(r.stdout, base_remap);
    assert_eq!(
        (st.groups_applied, st.groups_partly_applied),
        (1, 0),
        "{st:#?}"
    );
    assert_eq!(keys(&st.members, true), keys(&ra.member_statuses(), true));
}
