//! `vkecho analyze` end to end: table, JSON, plan file, and bad input (clear error naming the
//! place, non-zero exit, never a panic).

// The trace builders the analyzer's own tests use.
#[path = "../../analyzer/tests/common/mod.rs"]
mod common;
use common::*;
use echo_analyzer::trace::TRACE_VERSION;
use std::path::PathBuf;
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vkecho-analyze-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn vkecho(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_vkecho"))
        .args(args)
        .output()
        .expect("vkecho runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn sample() -> T {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let (s2h, s2d) = (t.staging(MIB), t.device(MIB));
    for _ in 0..3 {
        let (_, f) = t.submit(&[Cmd::Write(s2d.buf), Cmd::Copy(s2d.buf, s2h.buf, MIB)]);
        t.host_read(s2h.buf);
        t.wait(f);
    }
    t
}

#[test]
fn table_json_and_private_plan_file() {
    let dir = tmp("ok");
    let trace = dir.join("t.jsonl");
    std::fs::write(&trace, sample().text()).unwrap();
    let plan = dir.join("plan.json");
    let (rc, out, err) = vkecho(&[
        "analyze",
        trace.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("accepted: group 1"), "{out}");
    assert!(out.contains("rejected: S2 at event"), "{out}");
    assert!(out.contains("S2: host read staging buffer #3"), "{out}");
    assert!(err.contains("plan written"), "{err}");
    // Issue 16: plain words first, then both creation sites, then the detail; the synthetic
    // trace's module `app` is nowhere on disk, so a note says how to get names.
    let why = &out[out.find("why rejected:").expect("a why section")..];
    let plain = why
        .find("2. The program reads staging buffer #3 while the GPU may still be working on")
        .unwrap_or_else(|| panic!("no plain words first:\n{why}"));
    let site = why
        .find("staging buffer #3 (1 MiB, SRC|DST): created at app+0x")
        .expect("site");
    let detail = why
        .find("detail: S2: host read staging buffer #3")
        .expect("detail");
    assert!(plain < site && site < detail, "{why}");
    assert!(
        out.contains("note: creation sites in app are shown as module+offset")
            && out.contains("/usr/lib/debug/.build-id")
            && !out.contains("addr2line"),
        "{out}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&plan).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let p = echo_analyzer::plan::parse_plan(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.rejected.len(), 1);

    let (rc, out, _) = vkecho(&["analyze", trace.to_str().unwrap(), "--json"]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("--json is JSON");
    assert_eq!(v["candidates"].as_array().unwrap().len(), 2);
    assert_eq!(v["plan"]["format"], "vk-echo-plan");

    // Thresholds from the command line.
    let (rc, out, _) = vkecho(&["analyze", trace.to_str().unwrap(), "--min-copies", "5"]);
    assert_eq!(rc, 0);
    assert!(out.contains("rejected: threshold"), "{out}");
}

#[test]
fn bad_input_names_the_place_and_fails_cleanly() {
    let dir = tmp("bad");
    let good = sample().text();
    let lines: Vec<&str> = good.lines().collect();
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "empty"),
        ("not-json", "hello\n".into(), "line 1"),
        (
            "corrupt-record",
            format!(
                "{}\n{}\n{{\"seq\":3,\"ev\":\"buffer_create\"}}\n",
                lines[0], lines[1]
            ),
            "line 3",
        ),
        (
            "cut-mid-line",
            format!(
                "{}\n{}\n{}",
                lines[0],
                lines[1],
                &lines[2][..lines[2].len() / 2]
            ),
            "line 3",
        ),
        (
            "future-version",
            good.replacen(&format!("\"version\":{TRACE_VERSION}"), "\"version\":99", 1),
            "version 99",
        ),
        (
            "binary",
            String::from_utf8_lossy(&[0xff, 0xfe, 0, 1, 2]).into(),
            "line 1",
        ),
    ];
    for (name, text, want) in cases {
        let p = dir.join(format!("{name}.jsonl"));
        std::fs::write(&p, text).unwrap();
        let (rc, out, err) = vkecho(&["analyze", p.to_str().unwrap()]);
        assert_eq!(rc, 1, "{name}: {out}{err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let (rc, _, err) = vkecho(&["analyze", dir.join("missing").to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(err.contains("cannot open"), "{err}");
    let (rc, _, _) = vkecho(&["analyze"]);
    assert_eq!(rc, 2);
    let (rc, _, err) = vkecho(&["analyze", "x", "--bogus"]);
    assert_eq!(rc, 2, "{err}");
}

#[test]
fn truncated_trace_is_analyzed_with_a_warning() {
    let dir = tmp("trunc");
    let mut t = sample();
    t.push(echo_analyzer::trace::Event::Truncated {
        dropped_after_bytes: 4096,
    });
    let p = dir.join("t.jsonl");
    std::fs::write(&p, t.text()).unwrap();
    let (rc, out, err) = vkecho(&["analyze", p.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("truncated"), "{err}");
    assert!(out.contains("warning: the trace was truncated"), "{out}");
}
