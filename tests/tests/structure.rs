//! The layer's structure (issue 25), read from its sources: profile and enforce meet only in
//! `hostmem` (below both) and the coordinator (above both); `dispatch.rs` and `state/` name no
//! mode's internals; every room the rules name exists; no two files of `layer/src` share a name
//! except `mod.rs`; and no crate of the workspace has a circle in its files' import graph (issue
//! 48 for the layer, issue 56 for every crate; the graph is `echo_tests::imports`). The checkers
//! are shown to catch a planted forbidden import and a planted circle.

use echo_tests::imports::{circles, crate_at, import_graph, workspace_circles, workspace_crates};
use echo_tests::world::repo_root;
use std::path::{Path, PathBuf};

/// Every `crate::a::b…` path a source names (in `use` lines and inline), as `a::b…`.
fn crate_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in src.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            out.push(tail[..end].trim_end_matches(':').to_string());
            rest = &tail[end..];
        }
        // `use super::super::x` climbs out of a room too.
        if code.contains("super::super") {
            out.push("super::super".into());
        }
    }
    out
}

/// The rooms (a file or folder directly under `layer/src`) [`violations`] has a rule for.
const RULED: [&str; 14] = [
    "chassis.rs",
    "events.rs",
    "enforce",
    "profile",
    "hostmem",
    "lifetime.rs",
    "records.rs",
    "callsite",
    "state",
    "handles.rs",
    "submit.rs",
    "hook_id.rs",
    "dispatch.rs",
    "ffi_guard.rs",
];

/// The rule for one file (path relative to `layer/src`): the crate paths it may not name.
fn violations(rel: &str, src: &str) -> Vec<String> {
    let room = rel.split('/').next().unwrap_or(rel);
    // Issue 32 (item 4): arrows point one way — hooks → ffi_guard.rs (their one panic guard) →
    // dispatch.rs (the device records) → coordinator → profile and enforce → records.rs → state
    // → handles.rs and submit.rs. Nothing below the hooks names dispatch.rs, the hooks or their
    // panic guard. Issue 48: `HookId` (hook_id.rs, generated) is the bottom and names nothing;
    // dispatch.rs and the guard name no hook. Issue 56: the chassis (chassis.rs, the one place
    // that calls the modes) sits above them beside the coordinator, and names no hook; its
    // interface (events.rs: the commands as values, the `Mode` trait) sits below them and names
    // neither mode, so a mode implements it without naming the chassis.
    const ABOVE: [&str; 5] = ["dispatch", "hooks", "ffi_guard", "coordinator", "chassis"];
    const BELOW_MODES: [&str; 9] = [
        "profile", "enforce", "events", "records", "state", "callsite", "lifetime", "hostmem",
        "log",
    ];
    let forbidden: Vec<&str> = match room {
        "chassis.rs" => vec!["hooks", "ffi_guard", "coordinator"],
        "events.rs" => [&ABOVE[..], &["profile", "enforce"]].concat(),
        "enforce" => [&ABOVE[..], &["profile", "super::super"]].concat(),
        "profile" => [&ABOVE[..], &["enforce", "super::super"]].concat(),
        "hostmem" | "lifetime.rs" => [&ABOVE[..], &["profile", "enforce", "events"]].concat(),
        "records.rs" => [&ABOVE[..], &["profile", "enforce", "events"]].concat(),
        "callsite" | "state" => [&ABOVE[..], &["profile", "enforce", "events", "records"]].concat(),
        "handles.rs" => [&ABOVE[..], &BELOW_MODES[..], &["submit"]].concat(),
        "submit.rs" => [&ABOVE[..], &BELOW_MODES[..]].concat(),
        "hook_id.rs" => vec![""],
        "dispatch.rs" => vec![
            "profile",
            "enforce",
            "coordinator",
            "hooks",
            "ffi_guard",
            "chassis",
        ],
        "ffi_guard.rs" => vec!["profile", "enforce", "coordinator", "hooks"],
        _ => vec![],
    };
    // dispatch.rs holds each device's mode state: the modes' public types, nothing deeper.
    let allowed: &[&str] = match room {
        "dispatch.rs" => &["profile::Profiler", "enforce::Start", "enforce::Enforcer"],
        _ => &[],
    };
    crate_paths(src)
        .into_iter()
        .filter(|p| {
            // `""`: every crate path.
            forbidden
                .iter()
                .any(|f| f.is_empty() || p == f || p.starts_with(&format!("{f}::")))
                && !allowed
                    .iter()
                    .any(|a| p == a || p.starts_with(&format!("{a}::")))
        })
        .map(|p| format!("{rel} names crate::{p}"))
        .collect()
}

fn sources(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, base, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            out.push((rel, p));
        }
    }
}

fn layer_sources() -> Vec<(String, PathBuf)> {
    let base = repo_root().join("layer/src");
    let mut v = Vec::new();
    sources(&base, &base, &mut v);
    v.sort();
    assert!(v.len() > 20, "layer/src not found: {v:?}");
    v
}

#[test]
fn profile_and_enforce_meet_only_below_and_above() {
    let mut bad = Vec::new();
    for (rel, path) in layer_sources() {
        if rel.starts_with("loader/") {
            continue; // generated bindings
        }
        bad.extend(violations(&rel, &std::fs::read_to_string(path).unwrap()));
    }
    assert!(bad.is_empty(), "forbidden imports:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_catches_a_planted_import() {
    let planted = "use crate::log;\nuse crate::profile::sink::global;\n";
    assert_eq!(
        violations("enforce/alias.rs", planted),
        ["enforce/alias.rs names crate::profile::sink::global"]
    );
    let inline = "    let x = crate::enforce::guard::signalled(d, f, true); // crate::enforce in a comment\n";
    assert_eq!(violations("profile/watch.rs", inline).len(), 1);
    assert_eq!(
        violations("hooks/queue.rs", inline).len(),
        0,
        "hooks may call both"
    );
    assert_eq!(
        violations("dispatch.rs", "pub x: OnceLock<crate::enforce::Start>,\n").len(),
        0
    );
    assert_eq!(
        violations("dispatch.rs", "use crate::enforce::guard::Guard;\n").len(),
        1
    );
    assert_eq!(
        violations("state/mod.rs", "use crate::profile::Profiler;\n").len(),
        1
    );
    // One direction (issue 32): below the hooks, nothing names the device record of the hooks.
    assert_eq!(
        violations("enforce/copy.rs", "use crate::dispatch::DeviceData;\n").len(),
        1
    );
    assert_eq!(
        violations("profile/recorder.rs", "use crate::records::Device;\n").len(),
        0
    );
    assert_eq!(
        violations("state/mod.rs", "use crate::records::Device;\n").len(),
        1
    );
    assert_eq!(
        violations("records.rs", "use crate::hooks::HookId;\n").len(),
        1
    );
    assert_eq!(
        violations("handles.rs", "use crate::state::DeviceState;\n").len(),
        1
    );
    assert_eq!(
        violations("enforce/copy.rs", "use super::super::profile;\n").len(),
        1
    );
    // Issue 48: the hooks' id is the bottom; the device records and the guard name no hook.
    assert_eq!(violations("hook_id.rs", "use crate::log;\n").len(), 1);
    assert_eq!(
        violations("dispatch.rs", "use crate::hooks::intercept_of;\n").len(),
        1
    );
    assert_eq!(
        violations("ffi_guard.rs", "use crate::hooks::aside::report;\n").len(),
        1
    );
    assert_eq!(
        violations("dispatch.rs", "use crate::hook_id::HookId;\n").len(),
        0
    );
    // Issue 56: a mode implements the chassis's interface and never calls the chassis; the
    // interface names no mode; the chassis names no hook.
    assert_eq!(
        violations("profile/profile_mode.rs", "use crate::events::Mode;\n").len(),
        0
    );
    assert_eq!(
        violations(
            "enforce/guard/guard_mode.rs",
            "use crate::chassis::Modes;\n"
        )
        .len(),
        1
    );
    assert_eq!(
        violations("events.rs", "use crate::enforce::Enforcer;\n").len(),
        1
    );
    assert_eq!(
        violations("chassis.rs", "use crate::hooks::uses::Work;\n").len(),
        1
    );
    assert_eq!(
        violations("state/mod.rs", "use crate::events::Cmd;\n").len(),
        1
    );
}

/// Every room a rule names exists (a rule for a file since moved into a folder checks nothing),
/// and every one has its rule (each forbids naming the coordinator, above both modes).
#[test]
fn every_room_the_rules_name_exists() {
    let base = repo_root().join("layer/src");
    for room in RULED {
        assert!(
            base.join(room).exists(),
            "structure.rs has a rule for layer/src/{room}, which does not exist"
        );
        let file = if room.ends_with(".rs") {
            room.to_string()
        } else {
            format!("{room}/x.rs")
        };
        assert!(
            !violations(&file, "use crate::coordinator::x;\n").is_empty(),
            "RULED names {room}, which violations() has no rule for"
        );
    }
}

/// No crate of the workspace (issue 56: every target of every package, the fuzz targets and the
/// bindings generator included) has an import circle.
#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let found = workspace_circles(&repo_root());
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The circle check reads every crate and every Rust file: the crates the workspace's
/// Cargo.toml names are all found, the layer's graph is the one its `src/` paths give, and
/// every `.rs` file of the repository (but build outputs) is compiled by some crate the check
/// reads, so none escapes it.
#[test]
fn the_circle_check_reads_every_crate_and_file() {
    let repo = repo_root();
    let crates = workspace_crates(&repo);
    let roots: Vec<&str> = crates.iter().map(|c| c.root.as_str()).collect();
    for r in [
        "analyzer/src/lib.rs",
        "cli/src/main.rs",
        "samples/src/main.rs",
        "tests/src/lib.rs",
        "tests/tests/structure.rs",
        "layer/src/lib.rs",
        "layer/registry/src/lib.rs",
        "layer/registry/src/main.rs",
        "symbols/src/lib.rs",
        "fuzz/fuzz_targets/spirv_access.rs",
        "layer/bindgen/src/main.rs",
        "bench/src/bin/echo-bench-plot.rs",
        "tests/src/bin/echo-fuzzprog/main.rs",
    ] {
        assert!(roots.contains(&r), "no crate rooted at {r}: {roots:?}");
    }
    // The layer's files, each under its module (`#[path = "site_tests.rs"] mod tests;` in
    // `callsite/mod.rs` is `callsite::tests`).
    let layer = crates
        .iter()
        .find(|c| c.root == "layer/src/lib.rs")
        .unwrap();
    assert_eq!(layer.files.len(), layer_sources().len());
    let module = |rel: &str| {
        let f = layer.files.iter().find(|f| f.rel == rel).unwrap();
        f.module.join("::")
    };
    assert_eq!(module("layer/src/profile/watch/mod.rs"), "profile::watch");
    assert_eq!(
        module("layer/src/callsite/site_tests.rs"),
        "callsite::tests"
    );
    let reached: std::collections::BTreeSet<&str> = crates
        .iter()
        .flat_map(|c| c.files.iter().map(|f| f.rel.as_str()))
        .collect();
    let mut all = Vec::new();
    rust_files(&repo, &repo, &mut all);
    let missed: Vec<&String> = all
        .iter()
        .filter(|f| !reached.contains(f.as_str()))
        .collect();
    assert!(missed.is_empty(), "files no crate compiles: {missed:?}");
}

/// Every `.rs` file below `dir`, but in build outputs (`target/`) and hidden folders.
fn rust_files(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, base, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p.strip_prefix(base).unwrap().display().to_string());
        }
    }
}

/// The workspace check fails on a planted circle: a small workspace in a temporary folder, a
/// binary whose two modules name each other (as `samples/src/harness.rs` and `vk.rs` did), and
/// a library without one.
#[test]
fn the_workspace_check_catches_a_planted_circle() {
    let dir = std::env::temp_dir().join(format!("echo-structure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\", \"lib\"]\nexclude = [\"other\"]\n",
    );
    write("app/Cargo.toml", "[package]\nname = \"app\"\n");
    write("app/src/main.rs", "mod harness;\nmod vk;\nfn main() {}\n");
    write(
        "app/src/harness.rs",
        "use crate::vk::Ctx;\npub fn run() {}\n",
    );
    write(
        "app/src/vk.rs",
        "pub struct Ctx;\npub fn f() { crate::harness::run() }\n",
    );
    write("lib/Cargo.toml", "[package]\nname = \"lib\"\n");
    write(
        "lib/src/lib.rs",
        "mod a;\n#[path = \"deep/b.rs\"]\nmod b;\n",
    );
    write("lib/src/a.rs", "use crate::b::x;\n");
    write("lib/src/deep/b.rs", "pub fn x() {}\nmod c;\n");
    write("lib/src/deep/c.rs", "use super::x;\n");
    // Outside the members but excluded: a crate of its own, read too.
    write("other/Cargo.toml", "[package]\nname = \"other\"\n");
    write("other/src/lib.rs", "mod m;\npub fn r() {}\n");
    write("other/src/m.rs", "pub fn m() { crate::r() }\n");
    let found = workspace_circles(&dir);
    assert_eq!(
        found,
        ["app/src/main.rs: app/src/harness.rs → app/src/vk.rs → app/src/harness.rs"]
    );
    let lib = crate_at(&dir, "lib/src/lib.rs");
    let files: Vec<(&str, String)> = lib
        .files
        .iter()
        .map(|f| (f.rel.as_str(), f.module.join("::")))
        .collect();
    assert_eq!(
        files,
        [
            ("lib/src/a.rs", "a".to_string()),
            ("lib/src/deep/b.rs", "b".to_string()),
            ("lib/src/deep/c.rs", "b::c".to_string()),
            ("lib/src/lib.rs", String::new()),
        ]
    );
    assert_eq!(workspace_crates(&dir).len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_circle_checker_catches_planted_circles() {
    let f = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    // Through `crate::`.
    let two = f(&[
        ("a.rs", "use crate::b::thing;\n"),
        ("b.rs", "pub fn thing() { crate::a::other() }\n"),
        ("c.rs", "use crate::a;\n"),
    ]);
    assert_eq!(circles(&import_graph(&two)), [["a.rs", "b.rs", "a.rs"]]);
    // A parent naming its child's items while the child names the parent's (`super::`), and a
    // group.
    let family = f(&[
        ("m/mod.rs", "mod k;\nmod q;\npub fn f() { k::g() }\n"),
        ("m/k.rs", "use super::{h, q};\n"),
        ("m/q.rs", "pub fn q() {}\n"),
    ]);
    assert_eq!(
        circles(&import_graph(&family)),
        [["m/k.rs", "m/mod.rs", "m/k.rs"]]
    );
    // What is not a circle: `super` inside a file's own test module, siblings one way, a comment
    // and a string naming the other way.
    let fine = f(&[
        (
            "m/mod.rs",
            "mod k;\nmod q;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        ("m/k.rs", "use super::q::r; // super::k\n"),
        ("m/q.rs", "pub fn r() { let _ = \"super::k::x\"; }\n"),
    ]);
    assert!(
        circles(&import_graph(&fine)).is_empty(),
        "{:?}",
        import_graph(&fine)
    );
    assert_eq!(import_graph(&fine)["m/k.rs"], ["m/q.rs"]);
}

#[test]
fn no_two_files_of_the_layer_share_a_name() {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (rel, _) in layer_sources() {
        let name = rel.rsplit('/').next().unwrap().to_string();
        if name != "mod.rs" {
            seen.entry(name).or_default().push(rel);
        }
    }
    let dup: Vec<String> = seen
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, v)| format!("{n}: {v:?}"))
        .collect();
    assert!(dup.is_empty(), "file names used twice:\n{}", dup.join("\n"));
}

/// The command-line crates of `vkecho` and `echo-bench` (issue 34: clap, clap_complete,
/// indicatif, tar, flate2, plotters) stay out of the layer library: nothing `vk-layer-echo`
/// depends on, directly or not, is one of them (read from Cargo.lock, normal and build
/// dependencies alike).
#[test]
fn the_layer_links_none_of_the_command_line_crates() {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    // name -> dependency names, from the [[package]] blocks.
    let mut deps: std::collections::HashMap<String, Vec<String>> = Default::default();
    for block in lock.split("[[package]]").skip(1) {
        let mut name = String::new();
        let mut list = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            let l = line.trim();
            if let Some(n) = l.strip_prefix("name = ") {
                name = n.trim_matches('"').to_string();
            } else if l.starts_with("dependencies = [") {
                in_deps = true;
            } else if in_deps && l.starts_with(']') {
                in_deps = false;
            } else if in_deps {
                // "name", or "name version" when two versions are locked.
                let d = l.trim_matches(|c| c == '"' || c == ',');
                list.push(d.split(' ').next().unwrap().to_string());
            }
        }
        deps.entry(name).or_default().extend(list);
    }
    assert!(deps.contains_key("vk-layer-echo") && deps.contains_key("clap"));
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec!["vk-layer-echo".to_string()];
    while let Some(p) = todo.pop() {
        if seen.insert(p.clone()) {
            todo.extend(deps.get(&p).cloned().unwrap_or_default());
        }
    }
    let cli_only = [
        "clap",
        "clap_complete",
        "indicatif",
        "tar",
        "flate2",
        "plotters",
    ];
    let linked: Vec<&&str> = cli_only.iter().filter(|c| seen.contains(**c)).collect();
    assert!(
        linked.is_empty(),
        "the layer depends on {linked:?}: {seen:?}"
    );
}
