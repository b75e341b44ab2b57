//! `vkecho demo`, the README's main job, end to end at a small size: profile → analyze → enforce
//! for a positive sample and two negative controls, with the verdicts the table shows.

use serde_json::Value;
use std::process::Command;

#[test]
fn demo_profiles_analyzes_and_enforces_with_identical_output() {
    let vkecho = echo_tests::samples::samples_bin().with_file_name("vkecho");
    assert!(
        vkecho.is_file(),
        "{} is missing: build the workspace first",
        vkecho.display()
    );
    let out_dir = std::env::temp_dir().join(format!("vkecho-demo-test-{}", std::process::id()));
    let out = Command::new(&vkecho)
        .args([
            "demo",
            "--json",
            "--size-mib",
            "0.5",
            "--iters",
            "3",
            "--rounds",
            "1",
        ])
        .args(["--samples", "saxpy,race,bda", "--out"])
        .arg(&out_dir)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env_remove("VK_INSTANCE_LAYERS")
        .output()
        .expect("run vkecho demo");
    // A page per sample (`vkecho show`, issue 36), where the row says.
    let pages: Vec<(String, bool)> = serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let p = r["page"].as_str().unwrap_or_default().to_string();
            let ok = std::fs::read_to_string(&p).is_ok_and(|h| h.contains("id=\"echo-data\""));
            (p, ok)
        })
        .collect();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(
        pages.len() == 3 && pages.iter().all(|p| p.1),
        "a page per sample: {pages:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "vkecho demo failed ({}):\n{stderr}",
        out.status
    );
    // Issue 34: the progress bar (indicatif) is hidden when stderr is not a terminal: stderr
    // holds only the log lines, with no carriage returns or terminal escapes.
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "progress output on a stderr that is not a terminal:\n{stderr:?}"
    );
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with("vkecho demo: ") || l.starts_with("[VK_LAYER_echo]")),
        "a line that is not the demo's log:\n{stderr}"
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("demo --json prints rows");
    let row = |name: &str| -> &Value {
        rows.iter()
            .find(|r| r["sample"] == name)
            .unwrap_or_else(|| panic!("no row for {name}: {rows:?}"))
    };
    for r in &rows {
        assert_eq!(r["identical"], true, "{r}");
        assert_eq!(r["profile_identical"], true, "{r}");
    }
    let saxpy = row("saxpy");
    assert!(saxpy["accepted"].as_u64().unwrap() >= 1, "{saxpy}");
    // Upload and readback of every iteration (one region each way) were dropped.
    assert!(
        saxpy["regions_elided"].as_u64().unwrap() >= 2 * 3,
        "{saxpy}"
    );
    // Issue 47: what the groups' copies took of an iteration in the profiled run.
    let time = saxpy["copy_time"].as_str().unwrap_or_default();
    assert!(
        time.starts_with("profiled run: the groups' ")
            && time.contains(" of a ")
            && time.contains('%'),
        "{saxpy}"
    );
    let has = |r: &Value, cond: &str| r["rejected"].as_array().unwrap().iter().any(|c| c == cond);
    assert!(has(row("race"), "S2"), "{}", row("race"));
    assert!(has(row("bda"), "S3"), "{}", row("bda"));
    assert_eq!(row("bda")["accepted"], 0, "{}", row("bda"));
}
