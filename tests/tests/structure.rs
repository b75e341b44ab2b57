//! The layer's structure (issue 25), read from its sources: profile and enforce meet only in
//! `hostmem` (below both) and the coordinator (above both); `dispatch.rs` and `state/` name no
//! mode's internals; every room the rules name exists; no two files of `layer/src` share a name
//! except `mod.rs`; and the files' import graph has no circle (issue 48): a file names another
//! through `crate::…`, `super::…`, or, in a file that declares modules, `child::…`. The checkers
//! are shown to catch a planted forbidden import and a planted circle.

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

// ------------------------------------------------------------------------------ import graph

/// A source's module path below the crate (`profile/watch/mod.rs` → `profile::watch`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a line: what is left without its comment and string literals.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
        } else if c == '/' && chars.peek() == Some(&'/') {
            break;
        } else {
            out.push(c);
        }
    }
    out
}

/// The module paths (below the crate) a source `rel` names: `crate::a::b`, `super::x` (through
/// the modules written inline in the file, such as `mod tests { use super::*; }`, first), and,
/// in a file that declares out-of-line modules, `child::…` and `self::child::…`. A group
/// (`super::{a, b}`) names each of its members.
fn named_paths(rel: &str, src: &str) -> Vec<Vec<String>> {
    let me = module_of(rel);
    let children: Vec<String> = src
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    // Inline modules open at each brace depth, to resolve `super`.
    let mut depth = 0usize;
    let mut inline: Vec<usize> = Vec::new();
    for line in src.lines() {
        let code = code_of(line);
        let trimmed = code.trim_start();
        let opens_inline = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .is_some_and(|r| r.trim_end().ends_with('{'));
        // Every path start: a word boundary (not after an identifier or `::`).
        let bytes: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            let at_start = i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == ':');
            if !at_start || !is_ident(bytes[i]) {
                i += 1;
                continue;
            }
            // The path: identifiers joined by `::`, maybe ending in a `{group}`.
            let mut segs: Vec<String> = Vec::new();
            let mut j = i;
            let mut group: Vec<String> = Vec::new();
            loop {
                let s = j;
                while j < bytes.len() && is_ident(bytes[j]) {
                    j += 1;
                }
                segs.push(bytes[s..j].iter().collect());
                if j + 1 < bytes.len() && bytes[j] == ':' && bytes[j + 1] == ':' {
                    j += 2;
                    if j < bytes.len() && bytes[j] == '{' {
                        let end = bytes[j..]
                            .iter()
                            .position(|c| *c == '}')
                            .map_or(bytes.len(), |k| j + k);
                        let inner: String = bytes[j + 1..end].iter().collect();
                        group = inner
                            .split(',')
                            .map(|m| m.trim().split("::").next().unwrap_or("").to_string())
                            .filter(|m| !m.is_empty() && m != "self" && m != "*")
                            .collect();
                        j = end;
                        break;
                    }
                    if j < bytes.len() && is_ident(bytes[j]) {
                        continue;
                    }
                }
                break;
            }
            i = j.max(i + 1);
            if segs.len() < 2 && group.is_empty() {
                continue;
            }
            let mut with = |mut p: Vec<String>| {
                if group.is_empty() {
                    out.push(p);
                } else {
                    for g in &group {
                        p.push(g.clone());
                        out.push(p.clone());
                        p.pop();
                    }
                }
            };
            let head = segs[0].as_str();
            if head == "crate" {
                with(segs[1..].to_vec());
            } else if head == "super" {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                // `super`s spent inside the file's own inline modules stay in the file.
                let outside = ups.saturating_sub(inline.len());
                if outside > me.len() {
                    continue;
                }
                let mut p = me[..me.len() - outside].to_vec();
                p.extend(segs[ups..].iter().cloned());
                with(p);
            } else if inline.is_empty() && (children.iter().any(|c| c == head) || head == "self") {
                let rest = if head == "self" {
                    &segs[1..]
                } else {
                    &segs[..]
                };
                if rest.first().is_some_and(|c| children.contains(c)) {
                    let mut p = me.clone();
                    p.extend(rest.iter().cloned());
                    with(p);
                }
            }
        }
        for c in code.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    while inline.last().is_some_and(|d| *d > depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
        }
        if opens_inline {
            inline.push(depth);
        }
    }
    out
}

/// The file graph of `files` (relative path, source): an arrow from each file to every other
/// file whose module (or an item in it) it names.
fn import_graph(files: &[(String, String)]) -> std::collections::BTreeMap<String, Vec<String>> {
    let by_module: std::collections::BTreeMap<Vec<String>, &str> = files
        .iter()
        .map(|(rel, _)| (module_of(rel), rel.as_str()))
        .collect();
    let mut g = std::collections::BTreeMap::new();
    for (rel, src) in files {
        let mut to: Vec<String> = Vec::new();
        for p in named_paths(rel, src) {
            // The longest prefix that is a file's module: `crate::a::b::f` names `a/b.rs`.
            // Nothing longer: an item of the crate's root (`crate::vkGetInstanceProcAddr`).
            let hit = (0..=p.len())
                .rev()
                .find_map(|k| by_module.get(&p[..k]))
                .map(|f| f.to_string());
            if let Some(f) = hit {
                if &f != rel && !to.contains(&f) {
                    to.push(f);
                }
            }
        }
        to.sort();
        g.insert(rel.clone(), to);
    }
    g
}

/// Every circle of the graph (one per strongly connected set of files, as a path through it).
fn circles(g: &std::collections::BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    // Tarjan's strongly connected components, then one cycle through each non-trivial one.
    struct T<'a> {
        g: &'a std::collections::BTreeMap<String, Vec<String>>,
        index: std::collections::HashMap<&'a str, usize>,
        low: std::collections::HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: std::collections::HashSet<&'a str>,
        sccs: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[w].min(t.low[v]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.index[w].min(t.low[v]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w);
                if w == v {
                    break;
                }
            }
            t.sccs.push(c);
        }
    }
    let mut t = T {
        g,
        index: Default::default(),
        low: Default::default(),
        stack: Vec::new(),
        on: Default::default(),
        sccs: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    let mut out = Vec::new();
    for scc in t.sccs.iter().filter(|c| c.len() > 1) {
        let set: std::collections::HashSet<&str> = scc.iter().copied().collect();
        let mut start: Vec<&str> = scc.clone();
        start.sort();
        // A path from the first file back to it, inside the component (breadth first).
        let s = start[0];
        let mut prev: std::collections::HashMap<&str, &str> = Default::default();
        let mut queue = std::collections::VecDeque::from([s]);
        let mut found = None;
        while let Some(v) = queue.pop_front() {
            for w in g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if w == s {
                    found = Some(v);
                    break;
                }
                if set.contains(w) && !prev.contains_key(w) {
                    prev.insert(w, v);
                    queue.push_back(w);
                }
            }
            if found.is_some() {
                break;
            }
        }
        let mut path = vec![s.to_string()];
        let mut v = found.unwrap_or(s);
        let mut back = Vec::new();
        while v != s {
            back.push(v.to_string());
            v = prev[v];
        }
        back.reverse();
        path.extend(back);
        path.push(s.to_string());
        if scc.len() > path.len() - 1 {
            path.push(format!(
                "(one of {} files in a circle: {})",
                scc.len(),
                start.join(", ")
            ));
        }
        out.push(path);
    }
    out
}

#[test]
fn the_layer_has_no_import_circle() {
    let files: Vec<(String, String)> = layer_sources()
        .into_iter()
        .map(|(rel, p)| (rel, std::fs::read_to_string(p).unwrap()))
        .collect();
    let g = import_graph(&files);
    let found = circles(&g);
    assert!(
        found.is_empty(),
        "import circles in layer/src:\n{}",
        found
            .iter()
            .map(|c| c.join(" → "))
            .collect::<Vec<_>>()
            .join("\n")
    );
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
