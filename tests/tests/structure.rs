//! The layer's structure (issue 25), read from its sources: profile and enforce meet only in
//! `hostmem` (below both) and the coordinator (above both); `dispatch.rs` and `state/` name no
//! mode's internals; no two files of `layer/src` share a name except `mod.rs`. The checker is
//! shown to catch a planted forbidden import.

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

/// The rule for one file (path relative to `layer/src`): the crate paths it may not name.
fn violations(rel: &str, src: &str) -> Vec<String> {
    let room = rel.split('/').next().unwrap_or(rel);
    // Issue 32 (item 4): arrows point one way — hooks (and dispatch.rs, their table) →
    // coordinator → profile and enforce → records.rs → state → handles.rs. Nothing below the hooks
    // names dispatch.rs, the hooks or their panic guard.
    const ABOVE: [&str; 4] = ["dispatch", "hooks", "ffi_guard", "coordinator"];
    let forbidden: Vec<&str> = match room {
        "enforce" => [&ABOVE[..], &["profile", "super::super"]].concat(),
        "profile" => [&ABOVE[..], &["enforce", "super::super"]].concat(),
        "hostmem" | "lifetime.rs" => [&ABOVE[..], &["profile", "enforce"]].concat(),
        "records.rs" => [&ABOVE[..], &["profile", "enforce"]].concat(),
        "callsite.rs" | "state" => [&ABOVE[..], &["profile", "enforce", "records"]].concat(),
        "handles.rs" => [
            &ABOVE[..],
            &[
                "profile", "enforce", "records", "state", "callsite", "lifetime", "hostmem", "log",
            ],
        ]
        .concat(),
        "dispatch.rs" => vec!["profile", "enforce", "coordinator"],
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
            forbidden
                .iter()
                .any(|f| p == f || p.starts_with(&format!("{f}::")))
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
