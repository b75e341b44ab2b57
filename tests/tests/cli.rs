//! `vkecho doctor`, `vkecho install`, `vkecho uninstall` and `vkecho run` (auto mode) on the real
//! loader and lavapipe.
//!
//! Every test runs the built `vkecho` (from `cargo build --workspace`, as scripts/test.sh does)
//! with its own temporary HOME / XDG_DATA_HOME and a cleaned environment, so nothing outside
//! the temporary directory is read or written.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// target/<profile>/, found from this test executable (target/<profile>/deps/cli-…).
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn vkecho_path() -> PathBuf {
    let p = build_dir().join("vkecho");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`; scripts/test.sh does)",
        p.display()
    );
    p
}

fn layer_lib() -> PathBuf {
    let p = build_dir().join("libVkLayer_echo.so");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first",
        p.display()
    );
    std::fs::canonicalize(p).unwrap()
}

fn repo_manifest() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifest/VkLayer_echo.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A fresh private directory that is removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        let p = std::env::temp_dir().join(format!("vkecho-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Temp(p)
    }
    fn home(&self) -> PathBuf {
        self.0.join("home")
    }
    fn data(&self) -> PathBuf {
        self.0.join("data")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `vkecho` with an environment that points every user directory into `t` and drops every
/// variable that would steer the loader or echo.
fn vkecho(t: &Temp, args: &[&str]) -> Command {
    let mut c = Command::new(vkecho_path());
    c.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("VK_") || k.starts_with("XDG_") {
            c.env_remove(&k);
        }
    }
    std::fs::create_dir_all(t.home()).unwrap();
    c.env("HOME", t.home())
        .env("XDG_DATA_HOME", t.data())
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .current_dir(&t.0);
    c
}

fn run(mut c: Command) -> Output {
    c.output().expect("vkecho runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn doctor_json(c: Command) -> (Value, i32) {
    let out = run(c);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (doc, out.status.code().unwrap_or(-1))
}

fn problems(doc: &Value) -> String {
    doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn lavapipe(doc: &Value) -> &Value {
    doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"].as_str().unwrap_or("").contains("llvmpipe"))
        .unwrap_or_else(|| panic!("no lavapipe device in {:#}", doc["devices"]))
}

/// Doctor explains this machine: the loader, lavapipe's driver manifest, lavapipe as a
/// `uma-strict` device with its one DL|HV|HC|HCA memory type, and echo not installed (a problem,
/// so exit status 1).
#[test]
fn doctor_json_reports_lavapipe_as_uma_strict() {
    let t = Temp::new("doctor");
    let (doc, code) = doctor_json(vkecho(&t, &["doctor", "--json"]));
    assert_eq!(doc["loader"]["found"], true);
    let v = doc["loader"]["version"].as_str().unwrap();
    assert!(v.starts_with("1."), "loader version {v}");
    assert!(
        doc["drivers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["manifest"].as_str().unwrap().contains("lvp_icd")
                && d["library_found"] == true),
        "lavapipe's ICD manifest: {:#}",
        doc["drivers"]
    );
    let d = lavapipe(&doc);
    assert_eq!(d["class"], "uma-strict");
    assert_eq!(d["type"], "CPU");
    assert_eq!(d["alias_type"], 0);
    assert_eq!(d["cached_host_visible"], true);
    assert_eq!(
        d["types"][0]["flags"],
        serde_json::json!(["DL", "HV", "HC", "HCA"])
    );
    assert_eq!(d["heaps"][0]["flags"], serde_json::json!(["DEVICE_LOCAL"]));
    assert_eq!(d["echo_active"], true);
    assert_eq!(doc["echo"]["installed"], false);
    assert_eq!(doc["echo"]["loaded_in_doctor"], false);
    assert!(
        problems(&doc).contains("not installed"),
        "{}",
        problems(&doc)
    );
    assert_eq!(code, 1, "a problem gives exit status 1");
}

#[test]
fn doctor_text_names_the_device_and_its_class() {
    let t = Temp::new("doctor-text");
    let out = run(vkecho(&t, &["doctor"]));
    let s = text(&out.stdout);
    for want in [
        "Vulkan loader",
        "llvmpipe",
        "uma-strict",
        "DL|HV|HC|HCA",
        "not installed",
    ] {
        assert!(s.contains(want), "doctor's text lacks '{want}':\n{s}");
    }
}

/// Doctor says which Vulkan versions and extensions echo follows (issue 33 item 4), from the
/// registry's table: every core version up to 1.4, the 1.4 extensions among those followed, and
/// per device which of its extensions echo follows or steps aside from.
#[test]
fn doctor_says_which_versions_and_extensions_echo_follows() {
    let t = Temp::new("doctor-follows");
    let out = run(vkecho(&t, &["doctor"]));
    let s = text(&out.stdout);
    for want in [
        "What echo follows (Vulkan registry 1.4.",
        "Vulkan 1.0 core:",
        "Vulkan 1.4 core:",
        "vkCmdCopyQueryPoolResults",
        "VK_KHR_map_memory2",
        "VK_KHR_maintenance5",
        "VK_KHR_maintenance6",
        "its extensions echo follows:",
        "staging allocations may be left unmade: yes",
    ] {
        assert!(s.contains(want), "doctor's text lacks '{want}':\n{s}");
    }
    let (doc, _) = doctor_json(vkecho(&t, &["doctor", "--json"]));
    let core = doc["follows"]["core"].as_array().expect("follows.core");
    let versions: Vec<&str> = core
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["1.0", "1.1", "1.2", "1.3", "1.4"]);
    assert_eq!(core[4]["aside"], serde_json::json!([]), "{:#}", core[4]);
    let d = lavapipe(&doc);
    let followed = d["extensions_followed"]
        .as_array()
        .expect("extensions_followed");
    assert!(
        followed.iter().any(|e| e == "VK_KHR_copy_commands2"),
        "lavapipe offers VK_KHR_copy_commands2: {followed:?}"
    );
}

/// Install writes the repository's manifest with an absolute library_path into the user's
/// implicit-layer directory; doctor then finds it where the loader looks, the loader lists it,
/// and doctor did not load echo itself even with VK_ECHO_ENABLE=1 in its environment.
/// Uninstall removes it again.
#[test]
fn install_implicit_then_doctor_then_uninstall() {
    let t = Temp::new("implicit");
    let out = run(vkecho(&t, &["install"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = t.data().join("vulkan/implicit_layer.d/VkLayer_echo.json");
    assert!(file.is_file(), "{} not written", file.display());
    let so = text(&out.stdout);
    assert!(
        so.contains(&file.display().to_string()) && so.contains("VK_ECHO_ENABLE=1"),
        "{so}"
    );

    let installed: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let lib = installed["layer"]["library_path"].as_str().unwrap();
    assert!(Path::new(lib).is_absolute(), "library_path {lib}");
    assert_eq!(Path::new(lib), layer_lib());
    let mut expected = repo_manifest();
    expected["layer"]["library_path"] = lib.into();
    assert_eq!(
        installed, expected,
        "only library_path differs from manifest/"
    );

    let mut c = vkecho(&t, &["doctor", "--json"]);
    c.env("VK_ECHO_ENABLE", "1");
    let (doc, _) = doctor_json(c);
    let e = &doc["echo"];
    assert_eq!(e["installed"], true);
    assert_eq!(e["manifests"].as_array().unwrap().len(), 1);
    let m = &e["manifests"][0];
    assert_eq!(m["path"], file.display().to_string());
    assert_eq!(m["kind"], "implicit");
    assert_eq!(m["origin"], "XDG_DATA_HOME");
    assert_eq!(m["library_found"], true);
    assert_eq!(e["seen_by_loader"], true, "the loader lists VK_LAYER_echo");
    assert_eq!(e["enabled_in_this_environment"], true);
    assert_eq!(e["loaded_in_doctor"], false, "doctor must not load echo");
    assert!(!problems(&doc).contains("not installed"));

    let out = run(vkecho(&t, &["uninstall"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!file.exists());
    let (doc, _) = doctor_json(vkecho(&t, &["doctor", "--json"]));
    assert_eq!(doc["echo"]["installed"], false);
    assert_eq!(doc["echo"]["seen_by_loader"], false);
    // Uninstalling twice is not an error.
    assert!(run(vkecho(&t, &["uninstall"])).status.success());
}

/// The explicit install goes to explicit_layer.d without the implicit-layer switches, and doctor
/// says it is enabled by name.
#[test]
fn install_explicit() {
    let t = Temp::new("explicit");
    let out = run(vkecho(&t, &["install", "--explicit"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("VK_INSTANCE_LAYERS=VK_LAYER_echo"));
    let file = t.data().join("vulkan/explicit_layer.d/VkLayer_echo.json");
    let installed: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(installed["layer"].get("enable_environment").is_none());
    assert_eq!(
        installed["layer"]["features"],
        repo_manifest()["layer"]["features"]
    );
    let (doc, _) = doctor_json(vkecho(&t, &["doctor", "--json"]));
    assert_eq!(doc["echo"]["manifests"][0]["kind"], "explicit");
    assert_eq!(doc["echo"]["seen_by_loader"], true);
    assert_eq!(doc["echo"]["enabled_in_this_environment"], false);
    let mut c = vkecho(&t, &["doctor", "--json"]);
    c.env("VK_INSTANCE_LAYERS", "VK_LAYER_echo");
    let (doc, _) = doctor_json(c);
    assert_eq!(doc["echo"]["enabled_in_this_environment"], true);
    assert_eq!(doc["echo"]["loaded_in_doctor"], false);
    let out = run(vkecho(&t, &["uninstall", "--explicit"]));
    assert!(out.status.success());
    assert!(!file.exists());
}

/// Doctor's load test: with echo installed, a child process creates an instance with echo
/// enabled (mode off) and the built library must be mapped there and accepted by the loader.
#[test]
fn doctor_load_test_loads_the_built_layer() {
    let t = Temp::new("probe");
    assert!(run(vkecho(&t, &["install"])).status.success());
    let (doc, _) = doctor_json(vkecho(&t, &["doctor", "--json"]));
    let p = &doc["echo"]["load_probe"];
    assert_eq!(p["loaded"], true, "load test: {p:#}");
    assert_eq!(Path::new(p["library"].as_str().unwrap()), layer_lib());
    assert_eq!(p["physical_devices"], 1);
    assert_eq!(problems(&doc), "", "no problem with echo installed");
}

#[test]
fn install_errors_are_clear() {
    let t = Temp::new("errors");
    let out = run(vkecho(
        &t,
        &["install", "--lib", "/nonexistent/libVkLayer_echo.so"],
    ));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/libVkLayer_echo.so"));

    let not_elf = t.0.join("fake.so");
    std::fs::write(&not_elf, "hello").unwrap();
    let out = run(vkecho(&t, &["install", "--lib", not_elf.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a shared library"));

    let mut c = vkecho(&t, &["install"]);
    c.env_remove("HOME").env_remove("XDG_DATA_HOME");
    let out = run(c);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("HOME"), "{}", text(&out.stderr));

    let out = run(vkecho(&t, &["install", "--frobnicate"]));
    assert_eq!(out.status.code(), Some(2));

    // Uninstall removes only echo manifests.
    let dir = t.data().join("vulkan/implicit_layer.d");
    std::fs::create_dir_all(&dir).unwrap();
    let foreign = dir.join("VkLayer_echo.json");
    std::fs::write(
        &foreign,
        r#"{"file_format_version":"1.0.0","layer":{"name":"VK_LAYER_other"}}"#,
    )
    .unwrap();
    let out = run(vkecho(&t, &["uninstall"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(foreign.exists());
    let out = run(vkecho(&t, &["install"]));
    assert_eq!(out.status.code(), Some(1), "no overwrite of a foreign file");
}

/// `XDG_DATA_DIRS` replaces the loader's default list (DESIGN §3): without /usr/share the
/// lavapipe ICD disappears, and doctor says why.
#[test]
fn doctor_flags_xdg_data_dirs_without_usr_share() {
    let t = Temp::new("xdg");
    let mut c = vkecho(&t, &["doctor", "--json"]);
    c.env("XDG_DATA_DIRS", "/nonexistent");
    let (doc, code) = doctor_json(c);
    assert!(
        problems(&doc).contains("lacks /usr/share"),
        "{}",
        problems(&doc)
    );
    assert_eq!(code, 1);
}

/// Doctor resolves settings as the layer does: VK_ECHO_* first, then vk_layer_settings.txt in
/// $XDG_DATA_HOME/vulkan/settings.d; an invalid value is a warning naming the accepted values.
#[test]
fn doctor_resolves_settings_like_the_layer() {
    let t = Temp::new("settings");
    let sd = t.data().join("vulkan/settings.d");
    std::fs::create_dir_all(&sd).unwrap();
    std::fs::write(
        sd.join("vk_layer_settings.txt"),
        "echo.topology = integrated\necho.mode = profile\n",
    )
    .unwrap();
    let mut c = vkecho(&t, &["doctor", "--json"]);
    c.env("VK_ECHO_MODE", "enforce")
        .env("VK_ECHO_MIN_BYTES", "1M")
        .env("VK_ECHO_LOG", "loud");
    let (doc, _) = doctor_json(c);
    let s = &doc["settings"];
    assert_eq!(s["values"]["mode"], "enforce");
    assert_eq!(s["sources"]["mode"], "environment");
    assert_eq!(s["values"]["min_bytes"], "1048576");
    assert_eq!(s["values"]["topology"], "integrated");
    assert_eq!(s["sources"]["topology"], "vk_layer_settings.txt");
    assert_eq!(s["values"]["log"], "warn");
    let w = s["warnings"].to_string();
    assert!(
        w.contains("VK_ECHO_LOG") && w.contains("error|warn|info|debug"),
        "{w}"
    );
    assert_eq!(
        s["values"]["cache_dir"],
        t.home().join(".cache/vk-echo").display().to_string()
    );
}

/// `vkecho run -- CMD` without `--plan` is auto mode (issue 16): the first run profiles and says
/// which plan it wrote, the second enforces that plan and says so, with the program's output
/// unchanged; other arguments are another context (profiled again) under `context=arguments`.
#[test]
fn run_without_plan_is_auto_mode_and_names_the_plan() {
    let t = Temp::new("run-auto");
    let samples = build_dir().join("echo-samples");
    assert!(samples.is_file(), "{} is missing", samples.display());
    let samples = samples.display().to_string();
    let saxpy = |iters: &str| {
        let c = vkecho(
            &t,
            &[
                "run",
                "--",
                &samples,
                "saxpy",
                "--size-mib",
                "1",
                "--iters",
                iters,
            ],
        );
        let out = run(c);
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "vkecho run failed:\n{so}\n{se}");
        assert!(
            !se.contains("No such file or directory"),
            "auto mode looked for a plan that is not there as if it were required:\n{se}"
        );
        let checksum = so
            .lines()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v["checksum"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("no result line:\n{so}"));
        (checksum, se)
    };
    let cache = t.home().join(".cache/vk-echo");

    let (sum1, first) = saxpy("3");
    let wrote = first
        .lines()
        .find(|l| l.contains("this run was profiled and the plan "))
        .unwrap_or_else(|| panic!("the first run does not say which plan it wrote:\n{first}"));
    let plan: PathBuf = wrote
        .split("the plan ")
        .nth(1)
        .and_then(|r| r.split(" was written").next())
        .map(PathBuf::from)
        .unwrap();
    assert!(
        plan.starts_with(&cache),
        "{} not in {}",
        plan.display(),
        cache.display()
    );
    assert!(plan.is_file(), "{} was not written", plan.display());
    assert!(wrote.contains("(2 groups"), "{wrote}");

    let (sum2, second) = saxpy("3");
    assert!(
        second.contains(&format!("enforced the cached plan {}", plan.display())),
        "the second run does not name the plan it enforced:\n{second}"
    );
    assert!(second.contains("2/2 groups applied"), "{second}");
    assert_eq!(sum1, sum2, "enforce changed the program's output");

    // Other arguments: another context under the default `context=arguments`.
    let (_, third) = saxpy("4");
    assert!(
        third.contains("this run was profiled and the plan ")
            && !third.contains(&plan.display().to_string()),
        "other arguments did not make their own plan:\n{third}"
    );
}

/// The bounded cache on real runs (issue 16): distinct argument lists through `vkecho run` with
/// `cache_max_bytes` = 20000 (a trace is about 11 KB, a plan about 4 KB); after every run the
/// cache is within the limit and holds no trace, the oldest plans are evicted, the newest is
/// enforced on a rerun; `keep_traces` keeps a trace; `vkecho cache show` and `clear` work.
/// (`analyzer/tests/cache.rs` runs 100 argument lists through the same eviction code.)
#[test]
fn cache_stays_bounded_over_real_runs() {
    let t = Temp::new("cache-bounded");
    let samples = build_dir().join("echo-samples").display().to_string();
    // Room for one entry with its kept trace (about 15 KB with exact host writes' records).
    const LIMIT: u64 = 24_000;
    let with_env = |mut c: Command, keep: bool| {
        c.env("VK_ECHO_CACHE_MAX_BYTES", LIMIT.to_string());
        if keep {
            c.env("VK_ECHO_KEEP_TRACES", "true");
        }
        c
    };
    let saxpy = |mib: u32, keep: bool| {
        let mib = mib.to_string();
        let args = [
            "run",
            "--",
            &samples,
            "saxpy",
            "--size-mib",
            &mib,
            "--iters",
            "2",
        ];
        let out = run(with_env(vkecho(&t, &args), keep));
        let se = text(&out.stderr);
        assert!(out.status.success(), "vkecho run failed:\n{se}");
        se
    };
    let list = || -> Value {
        let out = run(with_env(vkecho(&t, &["cache", "list", "--json"]), false));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("cache list --json: {e}\n{}", text(&out.stdout)))
    };
    let plan_of = |se: &str| -> PathBuf {
        let l = se
            .lines()
            .find(|l| l.contains("the plan ") && l.contains(" was written"))
            .unwrap_or_else(|| panic!("no plan written:\n{se}"));
        PathBuf::from(
            l.split("the plan ")
                .nth(1)
                .unwrap()
                .split(" was written")
                .next()
                .unwrap(),
        )
    };
    let mut plans = Vec::new();
    for mib in 1..=7 {
        let se = saxpy(mib, false);
        plans.push(plan_of(&se));
        let doc = list();
        assert_eq!(doc["limit_bytes"], LIMIT, "{doc:#}");
        let bytes = doc["bytes"].as_u64().unwrap();
        assert!(
            bytes <= LIMIT,
            "after run {mib}: {bytes} bytes > {LIMIT}:\n{doc:#}"
        );
        let entries = doc["entries"].as_array().unwrap();
        assert!(
            entries.iter().all(|e| e["has_trace"] == false),
            "a trace outlived its plan:\n{doc:#}"
        );
        assert!(
            plans.last().unwrap().is_file(),
            "the run's own plan was evicted"
        );
    }
    let doc = list();
    let n = doc["entries"].as_array().unwrap().len();
    assert!(
        (3..7).contains(&n),
        "{n} entries: eviction did not happen or took too much\n{doc:#}"
    );
    assert!(
        !plans[0].exists(),
        "the least recently used plan is still there"
    );
    // The newest entry is enforced on a rerun.
    let se = saxpy(7, false);
    assert!(
        se.contains(&format!("enforced the cached plan {}", plans[6].display())),
        "{se}"
    );
    // show: the context and groups of an entry, by a prefix of its name.
    let name = plans[6]
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = run(with_env(
        vkecho(&t, &["cache", "show", &name[..name.len() - 4]]),
        false,
    ));
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}{}", text(&out.stderr));
    assert!(
        shown.contains("plan for:") && shown.contains(&samples),
        "{shown}"
    );
    assert!(shown.contains("2 groups:"), "{shown}");
    // keep_traces keeps the trace (and the limit still holds).
    let se = saxpy(8, true);
    let kept = plan_of(&se).with_file_name("trace.jsonl");
    assert!(
        kept.is_file(),
        "keep_traces did not keep {}",
        kept.display()
    );
    assert!(list()["bytes"].as_u64().unwrap() <= LIMIT);
    // clear empties it.
    let out = run(with_env(vkecho(&t, &["cache", "clear"]), false));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(list()["entries"].as_array().unwrap().len(), 0);
}

/// `context=program` (issue 16): a program profiled under one argument list enforces under
/// another when its buffers are recreated with the same identities. Auto mode profiles new
/// arguments until a profile leaves the plan unchanged (here: the second), then enforces under
/// any arguments; the output is the program's own every time, and buffers whose identities do
/// not match (another size) are left alone.
#[test]
fn program_context_enforces_under_other_arguments() {
    let t = Temp::new("program-context");
    let samples = build_dir().join("echo-samples").display().to_string();
    let checksum = |so: &str| {
        so.lines()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v["checksum"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("no result line:\n{so}"))
    };
    let args = |mib: &str, iters: &str| -> Vec<String> {
        ["saxpy", "--size-mib", mib, "--iters", iters]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let plain = |a: &[String]| {
        let mut c = Command::new(&samples);
        c.args(a).env("VK_ECHO_DISABLE", "1");
        let out = run(c);
        assert!(out.status.success(), "{}", text(&out.stderr));
        checksum(&text(&out.stdout))
    };
    let auto = |a: &[String]| {
        let mut all = vec!["run".to_string(), "--".into(), samples.clone()];
        all.extend(a.iter().cloned());
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut c = vkecho(&t, &all);
        c.env("VK_ECHO_CONTEXT", "program");
        let out = run(c);
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{so}\n{se}");
        (checksum(&so), se)
    };
    let (sum, first) = auto(&args("1", "3"));
    assert_eq!(sum, plain(&args("1", "3")));
    assert!(
        first.contains("merged into the program's plan") && first.contains("1 profile so far"),
        "{first}"
    );
    assert!(first.contains("still changing"), "{first}");

    let (sum, second) = auto(&args("1", "4"));
    assert_eq!(sum, plain(&args("1", "4")));
    assert!(
        second.contains("2 profiles so far") && second.contains("the plan is stable"),
        "other arguments must be profiled once more, then agree:\n{second}"
    );

    // New arguments, never profiled: enforced, identities matching, output unchanged. Only the
    // group whose unseen hazards the guard catches goes along (issue 22): x's upload (the GPU
    // only reads its device buffer); y's group, whose device buffer the shader writes and whose
    // readback buffer holds the previous result, is left out and says why.
    let (sum, third) = auto(&args("1", "5"));
    assert_eq!(
        sum,
        plain(&args("1", "5")),
        "enforce under new arguments changed the output"
    );
    assert!(third.contains("enforced the program's plan"), "{third}");
    assert!(third.contains("1/2 groups applied"), "{third}");
    assert!(
        third.contains("these arguments were not profiled (context=program)"),
        "{third}"
    );
    // Under context=program enforce runs guarded (guard=auto): the summary counts its windows.
    assert!(
        third.contains(", guard: ") && third.contains("0 timeouts"),
        "context=program must turn the guard on (guard=auto):\n{third}"
    );
    assert!(
        !third.contains("profiling") && !third.contains("were profiled and merged"),
        "{third}"
    );

    // Another size: the buffers' identities differ, nothing is applied, output unchanged.
    let (sum, fourth) = auto(&args("2", "5"));
    assert_eq!(sum, plain(&args("2", "5")));
    assert!(fourth.contains("0/2 groups applied"), "{fourth}");
    assert!(
        fourth.contains("none of its buffers was recreated with the same identity"),
        "{fourth}"
    );
}

/// Issue 23 (4): a child killed by SIGSEGV makes `vkecho run` and `vkecho profile` exit with 139,
/// as a shell reports it (128 + 11), and neither prints a hint about the layer or the device:
/// the program crashed, which says nothing about either.
#[test]
fn a_crashed_child_gives_128_plus_its_signal_and_no_misleading_hint() {
    let t = Temp::new("segv");
    for cmd in ["run", "profile"] {
        let out = run(vkecho(&t, &[cmd, "--", "sh", "-c", "kill -SEGV $$"]));
        let se = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(139),
            "vkecho {cmd}: a SIGSEGV child gave {}:\n{se}",
            out.status
        );
        for hint in [
            "was it loaded",
            "did the program create",
            "created no Vulkan device",
        ] {
            assert!(
                !se.contains(hint),
                "vkecho {cmd}: a hint that does not apply to a crash ({hint:?}):\n{se}"
            );
        }
        assert!(
            se.contains("killed by signal 11 (SIGSEGV"),
            "vkecho {cmd} does not say the program crashed:\n{se}"
        );
    }
    // Exit statuses pass through unchanged.
    let out = run(vkecho(&t, &["run", "--", "sh", "-c", "exit 7"]));
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
}

/// Issue 23 (5): auto mode keeps no plan profiled by a run whose program failed. The program
/// (saxpy, behind `sh -c '...; exit 3'` or `kill -SEGV $$`) runs to its end inside, so the
/// layer writes a plan at exit; `vkecho run` sees the failure, says so and removes that plan;
/// the next run profiles again instead of enforcing it. A successful run's plan is kept.
#[test]
fn auto_mode_does_not_keep_the_plan_of_a_failed_run() {
    let t = Temp::new("run-failed");
    let samples = build_dir().join("echo-samples");
    assert!(samples.is_file(), "{} is missing", samples.display());
    let saxpy = format!("{} saxpy --size-mib 1 --iters 3", samples.display());
    let cache = t.home().join(".cache/vk-echo");
    let plans = || {
        std::fs::read_dir(&cache)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path().join("plan.json"))
                    .filter(|p| p.is_file())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    for (tail, code, how) in [
        ("exit 3", 3, "exited with status 3"),
        ("kill -SEGV $$", 139, "killed by signal 11"),
    ] {
        let script = format!("{saxpy} >/dev/null; {tail}");
        let out = run(vkecho(&t, &["run", "--", "sh", "-c", &script]));
        let se = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{script}:\n{se}");
        assert!(
            se.contains("this run was profiled") || se.contains("the plan this run profiled"),
            "{script}: the failed run was not profiled:\n{se}"
        );
        assert!(
            se.lines().any(|l| l.contains(how)
                && l.contains("the plan this run profiled")
                && l.contains("is not kept")),
            "{script}: vkecho run does not say the failed run's plan is dropped:\n{se}"
        );
        assert!(
            !se.contains("the next run of the same command enforces it"),
            "{script}: a failed run's plan announced for enforcement:\n{se}"
        );
        assert_eq!(plans(), Vec::<PathBuf>::new(), "{script}: a plan was kept");
    }
    // The next (successful) run of the program profiles again, and its plan is kept.
    let args: Vec<&str> = saxpy.split(' ').collect();
    let mut argv = vec!["run", "--"];
    argv.extend(&args);
    let out = run(vkecho(&t, &argv));
    let se = text(&out.stderr);
    assert!(out.status.success(), "{se}");
    assert!(
        se.contains("this run was profiled and the plan ") && !se.contains("enforced"),
        "the run after a failed one did not profile again:\n{se}"
    );
    assert_eq!(plans().len(), 1, "the successful run's plan:\n{se}");
}

/// Issue 23 (7): doctor shows the layer order the loader itself uses (its `VK_LOADER_DEBUG=layer`
/// callstack, from the load test), with the layers the user's environment adds: an installed
/// implicit echo sits closest to the application, the validation layer named in
/// `VK_INSTANCE_LAYERS` below it (docs/usage.md, "Layer order").
#[test]
fn doctor_shows_the_loaders_layer_order() {
    let t = Temp::new("doctor-order");
    assert!(run(vkecho(&t, &["install"])).status.success());
    let mut c = vkecho(&t, &["doctor", "--json"]);
    c.env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation");
    let (doc, _) = doctor_json(c);
    let order: Vec<&str> = doc["echo"]["load_probe"]["layer_order"]
        .as_array()
        .unwrap_or_else(|| panic!("no layer_order: {:#}", doc["echo"]))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let at = |name: &str| order.iter().position(|n| *n == name);
    assert_eq!(at("VK_LAYER_echo"), Some(0), "{order:?}");
    assert!(
        at("VK_LAYER_KHRONOS_validation").is_some_and(|v| v > 0),
        "{order:?}"
    );
    let mut c = vkecho(&t, &["doctor"]);
    c.env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation");
    let out = text(&run(c).stdout);
    assert!(
        out.lines().any(|l| l.contains("layer order")
            && l.contains("VK_LAYER_echo → ")
            && l.contains("VK_LAYER_KHRONOS_validation")),
        "{out}"
    );
}

/// Issue 34: the command line is clap's. Bad usage exits 2 with clap's message; every
/// subcommand has its `--help`; `vkecho completions SHELL` prints a completion script.
#[test]
fn usage_errors_exit_2_and_every_subcommand_has_help() {
    let t = Temp::new("usage");
    for bad in [
        &[][..],
        &["frobnicate"],
        &["run", "--frobnicate", "--", "true"],
        &["run"],
        &["run", "--"],
        &["run", "true"],
        &["profile", "--trace"],
        &["analyze"],
        &["analyze", "a", "b"],
        &["analyze", "t.jsonl", "--min-copies", "0"],
        &["lint"],
        &["lint", "t.jsonl", "--format", "xml"],
        &["lint", "t.jsonl", "--", "true"],
        &["calibrate", "--", "true"],
        &[
            "calibrate",
            "--plan",
            "p.json",
            "--trials",
            "0",
            "--",
            "true",
        ],
        &["demo", "--size-mib", "-1"],
        &["demo", "--rounds", "x"],
        &["cache", "show"],
        &["cache", "frobnicate"],
        &["plan", "export"],
        &["plan", "import", "f", "--frobnicate"],
        &["install", "--explicit", "--implicit"],
        &["uninstall", "--lib", "x"],
        &["report", "-o"],
        &["doctor", "--frobnicate"],
        &["completions", "tcsh"],
    ] {
        let out = run(vkecho(&t, bad));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "vkecho {bad:?}:\n{err}");
        assert!(
            err.contains("Usage:") || err.contains("--help"),
            "vkecho {bad:?} does not point at the usage:\n{err}"
        );
        assert!(out.stdout.is_empty(), "vkecho {bad:?} printed on stdout");
    }
    for sub in [
        "doctor",
        "install",
        "uninstall",
        "profile",
        "analyze",
        "lint",
        "run",
        "calibrate",
        "cache",
        "plan",
        "report",
        "demo",
        "completions",
    ] {
        for args in [vec![sub, "--help"], vec!["help", sub]] {
            let out = run(vkecho(&t, &args));
            let help = text(&out.stdout);
            assert!(
                out.status.success(),
                "vkecho {args:?}: {}",
                text(&out.stderr)
            );
            assert!(
                help.contains(&format!("Usage: vkecho {sub}")),
                "vkecho {args:?}:\n{help}"
            );
        }
    }
    let out = run(vkecho(&t, &["--help"]));
    assert!(out.status.success() && text(&out.stdout).contains("calibrate"));
    let out = run(vkecho(&t, &["completions", "bash"]));
    let script = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        script.contains("_vkecho()")
            && script.contains("complete ")
            && script.contains("calibrate"),
        "not a bash completion script:\n{script}"
    );
}

/// `vkecho run --plan FILE` reads the plan before it starts the program: a file that is not a
/// plan (or none) exits non-zero with the reason, and the program never runs.
#[test]
fn run_refuses_a_file_that_is_not_a_plan_before_starting_the_program() {
    let t = Temp::new("notaplan");
    let ran = t.0.join("ran");
    let script = format!("touch {}", ran.display());
    std::fs::write(t.0.join("notaplan"), "this is not a plan\n").unwrap();
    std::fs::write(t.0.join("other.json"), "{\"format\": \"something else\"}\n").unwrap();
    for (plan, why) in [
        ("notaplan", "not a valid plan"),
        ("other.json", "not a valid plan"),
        ("missing.json", "No such file"),
        (".", "is not a plan file"),
    ] {
        let out = run(vkecho(
            &t,
            &["run", "--plan", plan, "--", "sh", "-c", &script],
        ));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--plan {plan}:\n{err}");
        assert!(
            err.contains(plan) && err.contains(why),
            "--plan {plan}:\n{err}"
        );
        assert!(!ran.exists(), "--plan {plan}: the program ran");
    }
    // `true` exits 0 by itself: the refusal is vkecho's.
    let out = run(vkecho(&t, &["run", "--plan", "notaplan", "--", "true"]));
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// `vkecho report -o FILE`: plain tar, or gzip-compressed for `.tar.gz` / `.tgz`; `tar` lists
/// the same files either way.
#[test]
fn report_writes_tar_or_gzip_by_the_name() {
    let t = Temp::new("report");
    let cache = t.0.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let cache = cache.display().to_string();
    let mut listings = Vec::new();
    for (name, flags, gzip) in [
        ("r.tar", "-tf", false),
        ("r.tar.gz", "-tzf", true),
        ("r.tgz", "-tzf", true),
    ] {
        let out = run(vkecho(&t, &["report", "-o", name, "--dir", &cache]));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let path = t.0.join(name);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.starts_with(&[0x1f, 0x8b]), gzip, "{name}: gzip magic");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let list = Command::new("tar").arg(flags).arg(&path).output().unwrap();
        assert!(list.status.success(), "tar {flags} {name}: {list:?}");
        let mut names: Vec<String> = text(&list.stdout).lines().map(str::to_string).collect();
        names.sort();
        assert!(
            names.contains(&"vkecho-report/doctor.json".to_string())
                && names.contains(&"vkecho-report/README.txt".to_string()),
            "{name}: {names:?}"
        );
        listings.push(names);
    }
    assert_eq!(listings[0], listings[1]);
    assert_eq!(listings[0], listings[2]);
}
