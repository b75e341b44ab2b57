//! The Jetson Nano's software, emulated on lavapipe (issue 13): `VK_LAYER_ECHO_test_discrete`
//! with `VK_ECHO_TEST_TABLE=jetson-nano` below echo presents the Jetson Nano's memory table from
//! `analyzer/testdata/devices.json`, Vulkan 1.2, no Vulkan 1.3 command and no
//! `VK_EXT_external_memory_host`, and gives the application mappings the driver's threads do not
//! use (a GPU has its own page tables).
//!
//! - the presentation itself (probe): API 1.2, the table of devices.json, 1.3 commands NULL
//!   through the loader, with and without echo on top, the extension neither listed nor creatable;
//! - every positive sample: profile (validation through the application's own mapping:
//!   `driver-map`), analyze, enforce — checksums identical to plain lavapipe, groups applied,
//!   copies elided;
//! - the race negative control: its host access while the GPU works is seen through the
//!   application's mapping and the pair is refused (S2), output identical;
//! - control: with the emulated page tables off (`VK_ECHO_TEST_JETSON_MAP=driver`) lavapipe's own
//!   threads fault on the protected pages and show up as host accesses in flight — what the
//!   emulation avoids;
//! - auto mode (the README's "On a Jetson" flow): the first run profiles and writes the plan, the
//!   second enforces it.

use echo_analyzer::plan::{parse_plan, Plan};
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::{read_trace, Event, Trace};
use echo_tests::samples::SampleRun;
use echo_tests::world::{repo_root, Layers, World};
use serde_json::Value;
use std::path::Path;

const SIZE_KIB: &str = "256";
const ITERS: &str = "3";

/// A world with the test layer in jetson mode below echo (in `mode`, or no echo).
fn jetson(echo: Option<&'static str>) -> World {
    World::new(Layers {
        echo,
        test_layer: true,
        validation: false,
    })
    .set("VK_ECHO_TEST_TABLE", "jetson-nano")
    .set("VK_ECHO_MIN_BYTES", "4096")
}

fn plain() -> World {
    World::new(Layers::default())
}

fn args(sample: &str) -> Vec<&str> {
    vec![sample, "--size-kib", SIZE_KIB, "--iters", ITERS]
}

/// `echo-probe` in `w` (JSON written to a file: layers may print to stdout): (device 0, stderr).
fn probe(w: &World) -> (Value, String) {
    let out = w.dir.join("probe.json");
    let run = w.run(
        "echo-probe",
        &[
            "--bytes",
            "262144",
            "--try-extension",
            "VK_EXT_external_memory_host",
            "--out",
            &out.display().to_string(),
        ],
    );
    assert!(run.status.success(), "echo-probe failed:\n{}", run.stderr);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let devs = v["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 1, "{v}");
    (devs[0].clone(), run.stderr)
}

/// The Jetson Nano's memory types as devices.json lists them.
fn devices_json_types() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(repo_root().join("analyzer/testdata/devices.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let dev = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"].as_str().unwrap().contains("Jetson Nano"))
        .expect("devices.json has the Jetson Nano");
    dev["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["flags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn read(path: &Path) -> Trace {
    read_trace(std::io::BufReader::new(std::fs::File::open(path).unwrap())).unwrap()
}

fn device_create(t: &Trace) -> (String, Option<u32>, String) {
    t.records
        .iter()
        .find_map(|r| match &r.event {
            Event::DeviceCreate {
                class,
                alias_type,
                validation,
                ..
            } => Some((class.clone(), *alias_type, validation.clone())),
            _ => None,
        })
        .expect("the trace has a device_create")
}

fn host_accesses(t: &Trace) -> usize {
    t.records
        .iter()
        .filter(|r| matches!(r.event, Event::HostAccess { .. }))
        .count()
}

fn read_plan(p: &Path) -> Plan {
    parse_plan(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Enforce `plan` in `w`: (run, the device's statistics).
fn enforce(w: World, sample: &str, plan: &Path) -> (SampleRun, Stats) {
    let stats = w.dir.join("stats.jsonl");
    let w = w
        .set("VK_ECHO_MODE", "enforce")
        .set("VK_ECHO_PLAN", plan.display().to_string())
        .set("VK_ECHO_STATS", stats.display().to_string());
    let run = w.sample(&args(sample));
    run.json();
    let text = std::fs::read_to_string(&stats).expect("enforce wrote statistics");
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap();
    (run, serde_json::from_str(line).unwrap())
}

#[test]
fn the_test_layer_presents_a_jetson_nano_with_a_vulkan_12_driver() {
    let reference = probe(&plain()).0["work"]["checksum"].clone();
    for echo in [None, Some("profile")] {
        let w = jetson(echo).set("VK_ECHO_LOG", "info");
        let (d, stderr) = probe(&w);
        let what = format!("echo {echo:?}: {d}\n{stderr}");
        assert!(
            d["name"].as_str().unwrap().contains("Jetson Nano"),
            "{what}"
        );
        assert!(
            d["api_version"].as_str().unwrap().starts_with("1.2."),
            "{what}"
        );
        assert_eq!(d["device_type"], "INTEGRATED_GPU", "{what}");
        let types: Vec<Vec<String>> = serde_json::from_value(d["memory_types"].clone()).unwrap();
        assert_eq!(types, devices_json_types(), "{what}");
        assert_eq!(d["lists_external_memory_host"], false, "{what}");
        assert_eq!(d["try_extension"], "ERROR_EXTENSION_NOT_PRESENT", "{what}");
        for c in [
            "vkCmdCopyBuffer2",
            "vkQueueSubmit2",
            "vkCmdPipelineBarrier2",
        ] {
            assert_eq!(d["hooks"][c], "null", "{c} is Vulkan 1.3: {what}");
        }
        assert_eq!(d["work"]["mismatches"], 0, "{what}");
        assert_eq!(d["work"]["checksum"], reference, "{what}");
        if echo.is_some() {
            assert_eq!(
                d["hooks"]["vkCmdCopyBuffer"], "libVkLayer_echo.so",
                "{what}"
            );
            assert!(
                stderr.contains("class uma-strict, alias memory type 2"),
                "{what}"
            );
            assert!(
                stderr.contains("the driver's mapping is protected (no double mapping)"),
                "{what}"
            );
        }
        assert!(
            !stderr.contains("driver's own mapping"),
            "the emulated page tables fell back: {what}"
        );
    }
}

/// Profile → analyze → enforce on the Jetson table: identical checksums, groups applied.
fn positive(sample: &str) {
    let reference = plain().sample(&args(sample)).checksum();
    let base = jetson(None).sample(&args(sample));
    assert_eq!(
        base.checksum(),
        reference,
        "{sample}: the Jetson emulation changed the output"
    );

    let w = jetson(Some("profile"));
    let plan_path = w.make_plan(&args(sample));
    let trace = read(&w.dir.join("trace.jsonl"));
    let (class, alias, validation) = device_create(&trace);
    assert_eq!(class, "uma-strict");
    assert_eq!(alias, Some(2), "the coherent DL|HV type");
    assert_eq!(
        validation, "driver-map",
        "{sample}: validation through the application's own mapping"
    );
    assert!(
        host_accesses(&trace) > 0,
        "{sample}: the host's accesses were seen"
    );
    let plan = read_plan(&plan_path);
    assert!(!plan.groups.is_empty(), "{sample}: the plan has groups");
    for r in &plan.rejected {
        assert!(
            !matches!(r.condition.as_str(), "S2" | "evidence"),
            "{sample}: {r:?}"
        );
    }

    let (run, s) = enforce(jetson(Some("enforce")), sample, &plan_path);
    assert_eq!(
        run.checksum(),
        reference,
        "{sample}: enforce changed the output"
    );
    assert_eq!(s.plan_status, "applied");
    assert_eq!(s.groups_planned as usize, plan.groups.len());
    assert_eq!(
        s.groups_applied, s.groups_planned,
        "{sample}: {:?}",
        s.not_applied
    );
    assert!(s.copies_elided > 0 && s.bytes_elided > 0, "{s:?}");
}

echo_tests::positive_sample_tests!(positive_samples, super::positive);

/// Guarded enforce needs `VK_EXT_external_memory_host` to double-map aliased memory; this table
/// has none, so with `guard` on every group is refused (fail closed), with one warning, and the
/// output is the program's.
#[test]
fn guard_without_external_memory_host_refuses_the_groups() {
    let sample = "saxpy";
    let reference = plain().sample(&args(sample)).checksum();
    let w = jetson(Some("profile"));
    let plan_path = w.make_plan(&args(sample));
    let plan = read_plan(&plan_path);
    assert!(!plan.groups.is_empty());
    let (run, s) = enforce(
        jetson(Some("enforce")).set("VK_ECHO_GUARD", "1"),
        sample,
        &plan_path,
    );
    assert_eq!(run.checksum(), reference);
    assert_eq!(s.groups_applied, 0, "{s:?}");
    assert_eq!(s.not_applied.len(), plan.groups.len());
    assert!(
        s.not_applied
            .iter()
            .all(|n| n.reason.contains("guard: unavailable")),
        "{:?}",
        s.not_applied
    );
    assert_eq!(s.copies_elided, 0);
    let warnings = run
        .stderr
        .lines()
        .filter(|l| l.contains("the guard cannot run"))
        .count();
    assert_eq!(warnings, 1, "{}", run.stderr);
}

/// The race control writes its staging buffer while the GPU still reads it: the write is caught
/// through the application's own mapping (no double mapping on this driver) and the pair refused.
#[test]
fn race_is_caught_through_the_application_mapping() {
    let reference = plain().sample(&args("race")).checksum();
    let w = jetson(Some("profile"));
    let plan_path = w.make_plan(&args("race"));
    let (_, _, validation) = device_create(&read(&w.dir.join("trace.jsonl")));
    assert_eq!(validation, "driver-map");
    let plan = read_plan(&plan_path);
    assert!(
        plan.rejected.iter().any(|r| r.condition.as_str() == "S2"),
        "the race is refused with S2: {:?}",
        plan.rejected
    );
    let (run, _) = enforce(jetson(Some("enforce")), "race", &plan_path);
    assert_eq!(run.checksum(), reference);
}

/// Control: without the emulated page tables, lavapipe's copy threads use the very pages echo
/// protects for the host, fault, and are taken for host accesses while the GPU works — every
/// pair of saxpy then looks unsafe. The jetson mode's double mapping is what keeps the
/// emulation faithful to a GPU with its own page tables.
#[test]
fn without_emulated_page_tables_the_driver_threads_look_like_host_accesses() {
    let w = jetson(Some("profile")).set("VK_ECHO_TEST_JETSON_MAP", "driver");
    let plan = read_plan(&w.make_plan(&args("saxpy")));
    assert!(
        plan.rejected.iter().any(|r| r.condition.as_str() == "S2"),
        "{:?}",
        plan.rejected
    );
}

/// The README's flow: enable for one program in auto mode; the first run profiles and plans, the
/// second enforces; the output never changes.
#[test]
fn auto_mode_profiles_then_enforces_on_the_jetson_table() {
    let reference = plain().sample(&args("saxpy")).checksum();
    let w = jetson(Some("auto"));
    let stats = w.dir.join("stats.jsonl");
    let w = w.set("VK_ECHO_STATS", stats.display().to_string());
    let first = w.sample(&args("saxpy"));
    assert_eq!(first.checksum(), reference);
    let second = w.sample(&args("saxpy"));
    assert_eq!(second.checksum(), reference);
    let text = std::fs::read_to_string(&stats).unwrap();
    let all: Vec<Stats> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all.len(), 2, "{text}");
    assert_eq!(all[0].mode, "profile", "{text}");
    assert_eq!(all[1].mode, "enforce", "{text}");
    assert!(
        all[1].groups_applied > 0 && all[1].copies_elided > 0,
        "{text}"
    );
}

/// `vkecho` in world `w`: (exit code, stdout, stderr).
fn vkecho(w: &World, args: &[&str]) -> (i32, String, String) {
    let out = w
        .command(&echo_tests::world::artifact("vkecho"), args)
        .output()
        .expect("vkecho runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats_lines(path: &Path) -> Vec<Stats> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Issue 27, a fleet of identical boards: board A profiles in auto mode; its plan, exported and
/// imported on board B (same model, driver and memory table, another UUID), is enforced there
/// by auto mode; board C (a newer driver) refuses it, at import and in enforce, saying why.
#[test]
fn a_plan_made_on_one_board_applies_on_another_of_the_same_model() {
    let reference = plain().sample(&args("saxpy")).checksum();
    // Each board is a world of its own: another machine, another cache.
    let board = |uuid: &str| {
        let w = jetson(Some("auto")).set("VK_ECHO_TEST_UUID", uuid.repeat(16));
        let stats = w.dir.join("stats.jsonl");
        (w.set("VK_ECHO_STATS", stats.display().to_string()), stats)
    };
    let (a, a_stats) = board("aa");
    assert_eq!(a.sample(&args("saxpy")).checksum(), reference);
    assert_eq!(stats_lines(&a_stats)[0].mode, "profile");
    let entries = echo_analyzer::cache::list(&a.dir.join("cache/vk-echo"));
    let entry = entries
        .iter()
        .find(|e| e.plan.is_some())
        .expect("auto mode wrote a plan into board A's cache");
    let made = entry.read_plan().unwrap();
    assert!(!made.groups.is_empty(), "{:?}", made.rejected);
    assert_eq!(made.context.device_uuid, "aa".repeat(16));
    assert!(echo_analyzer::context::keyed_by_model(&made.context));
    let file = a.dir.join("work/saxpy-plan.json");
    let (code, _, err) = vkecho(
        &a,
        &[
            "plan",
            "export",
            &entry.name,
            "-o",
            &file.display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("every device of that model"), "{err}");
    let file_s = file.display().to_string();

    // Board B: same model, another UUID. Import checks this machine's devices.
    let (b, b_stats) = board("bb");
    let (code, out, err) = vkecho(&b, &["plan", "import", &file_s]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("is of the plan's model"), "{err}");
    assert!(out.contains("imported"), "{out}");
    let run = b.sample(&args("saxpy"));
    assert_eq!(run.checksum(), reference);
    let s = stats_lines(&b_stats);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0].mode, "enforce", "board B profiled instead: {s:?}");
    assert!(
        s[0].groups_applied > 0 && s[0].copies_elided > 0,
        "{:?}",
        s[0]
    );

    // Board C: a newer driver. Import refuses, and so does enforce, naming the driver version.
    let (c, _) = board("cc");
    let c = c.set("VK_ECHO_TEST_DRIVER_VERSION", "4242");
    let (code, _, err) = vkecho(&c, &["plan", "import", &file_s]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("another driver version") && err.contains("this run has '4242'"),
        "{err}"
    );
    assert!(
        echo_analyzer::cache::list(&c.dir.join("cache/vk-echo")).is_empty(),
        "a refused import leaves the cache alone"
    );
    let run = c
        .set("VK_ECHO_MODE", "enforce")
        .set("VK_ECHO_PLAN", &file_s)
        .sample(&args("saxpy"));
    assert_eq!(run.checksum(), reference);
    let warned = echo_tests::world::echo_warnings(&run);
    assert!(
        warned.iter().any(
            |w| w.contains("not used: the plan was made for another driver version")
                && w.contains("same model, driver and memory table")
        ),
        "{}",
        run.stderr
    );
}

/// `echo-samples saxpy` in `w` with `extra` variables set.
fn sample_with(w: &World, extra: &[(&str, &str)]) -> SampleRun {
    let mut c = w.command(&echo_tests::samples::samples_bin(), &args("saxpy"));
    for (k, v) in extra {
        c.env(k, v);
    }
    echo_tests::samples::run_command(c)
}

/// Issue 27, `vkecho report`: after auto-mode runs (one with a bad setting, one refusing a plan
/// named outside the cache), the archive holds exactly the named files — doctor, versions, the
/// cached plan, the run records, the last run's warnings — and nothing planted around them: not
/// a file outside the cache, not a foreign file inside it, not an environment variable, not a
/// path outside the cache.
#[test]
fn the_report_holds_what_it_names_and_nothing_else() {
    const SECRET: &str = "TOPSECRET-7f3a";
    let w = jetson(Some("auto")).set("MY_API_TOKEN", format!("{SECRET}-env"));
    let cache = w.dir.join("cache/vk-echo");
    std::fs::write(w.dir.join("home/notes.txt"), format!("{SECRET}-file")).unwrap();
    let first = sample_with(&w, &[("VK_ECHO_MIN_COPIES", "banana")]);
    assert!(
        echo_tests::world::echo_warnings(&first)
            .iter()
            .any(|l| l.contains("banana")),
        "{}",
        first.stderr
    );
    w.sample(&args("saxpy")); // enforced
    std::fs::write(cache.join("notes.txt"), format!("{SECRET}-in-cache")).unwrap();
    let elsewhere = w.dir.join(format!("home/{SECRET}-dir/plan.json"));
    let elsewhere = elsewhere.display().to_string();
    let refused = sample_with(
        &w,
        &[("VK_ECHO_MODE", "enforce"), ("VK_ECHO_PLAN", &elsewhere)],
    );
    assert!(
        !echo_tests::world::echo_warnings(&refused).is_empty(),
        "{}",
        refused.stderr
    );

    let tar = w.dir.join("work/report.tar");
    let (code, out, err) = vkecho(&w, &["report", "-o", &tar.display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    let list = std::process::Command::new("tar")
        .arg("-tf")
        .arg(&tar)
        .output()
        .unwrap();
    assert!(list.status.success(), "tar cannot read it: {list:?}");
    let names: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let entry = echo_analyzer::cache::list(&cache)
        .into_iter()
        .find(|e| e.plan.is_some())
        .expect("auto mode made a plan");
    let mut want = vec![
        "vkecho-report/README.txt".to_string(),
        "vkecho-report/doctor.json".into(),
        "vkecho-report/versions.json".into(),
        format!("vkecho-report/cache/{}/plan.json", entry.name),
        "vkecho-report/cache/runs.jsonl".into(),
        "vkecho-report/last-run-warnings.txt".into(),
    ];
    want.sort();
    let mut got = names.clone();
    got.sort();
    assert_eq!(got, want);
    let file = |n: &str| {
        let o = std::process::Command::new("tar")
            .arg("-xOf")
            .arg(&tar)
            .arg(format!("vkecho-report/{n}"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{n}: {o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    let mut everything = String::new();
    for n in &names {
        everything.push_str(&file(n.trim_start_matches("vkecho-report/")));
    }
    assert!(
        !everything.contains(SECRET),
        "a planted secret is in the report"
    );
    assert!(
        !everything.contains("MY_API_TOKEN"),
        "the environment is in the report"
    );
    // What it names, it holds.
    let plan = file(&format!("cache/{}/plan.json", entry.name));
    assert_eq!(plan, std::fs::read_to_string(entry.plan.unwrap()).unwrap());
    let doctor: Value = serde_json::from_str(&file("doctor.json")).unwrap();
    assert!(
        doctor["devices"].as_array().is_some_and(|d| !d.is_empty()),
        "{doctor}"
    );
    let v: Value = serde_json::from_str(&file("versions.json")).unwrap();
    assert_eq!(v["echo"], env!("CARGO_PKG_VERSION"));
    assert!(
        v["glibc"].as_str().is_some_and(|g| g.starts_with("2.")),
        "{v}"
    );
    assert!(
        v["kernel"]["release"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{v}"
    );
    assert!(
        v["loader"].as_str().is_some_and(|l| l.starts_with("1.")),
        "{v}"
    );
    assert!(v["drivers"][0]["driver_version"].is_string(), "{v}");
    let runs: Vec<Value> = file("cache/runs.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let modes: Vec<&str> = runs
        .iter()
        .map(|r| r["stats"]["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes[..2], ["profile", "enforce"], "{runs:?}");
    assert!(
        runs[0]["warnings"].to_string().contains("banana"),
        "{runs:?}"
    );
    let last = file("last-run-warnings.txt");
    assert!(
        last.contains("warn: plan <outside the cache>: No such file")
            && last.contains("mode enforce, refused"),
        "{last}"
    );
}
