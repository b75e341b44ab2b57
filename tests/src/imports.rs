//! The import graph of the workspace's crates (issue 48 for the layer, issue 56 for every
//! crate), read from their sources: which crates there are (the workspace's members and
//! excluded crates, each target's root file), which files each one compiles (its `mod`
//! declarations followed from the root, `#[path]` included), and which file names which (a file
//! names another through `crate::…`, `super::…`, or, in a file that declares modules,
//! `child::…`). `tests/tests/structure.rs` checks that no crate has a circle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File → the files it names, each a path as the caller gave it.
pub type Graph = BTreeMap<String, Vec<String>>;

/// One file of a crate: its path (relative to the repository), its module path below the
/// crate's root, its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub rel: String,
    pub module: Vec<String>,
    pub src: String,
}

/// One crate (one target of a package): its root file and every file it compiles.
#[derive(Clone, Debug)]
pub struct Crate {
    pub root: String,
    pub files: Vec<SourceFile>,
}

/// An out-of-line module a source declares (`mod name;`), with the inline modules it stands in
/// and its `#[path]`, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct ModDecl {
    pub name: String,
    pub inline: Vec<String>,
    pub path: Option<String>,
}

/// `pub`, `pub(crate)`, `pub(in a::b)` … and leading `#[…]` attributes off a line's code.
fn strip_prefixes(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        if let Some(r) = s.strip_prefix("#[") {
            let mut depth = 1;
            let end = r.char_indices().find_map(|(i, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i)
            });
            match end {
                Some(i) => s = &r[i + 1..],
                None => return "",
            }
        } else if let Some(r) = s.strip_prefix("pub(") {
            s = r.split_once(')').map_or("", |(_, r)| r);
        } else if let Some(r) = s.strip_prefix("pub ") {
            s = r;
        } else {
            return s;
        }
    }
}

/// The `mod name;` declarations of a source, in order.
pub fn mod_decls(src: &str) -> Vec<ModDecl> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    // Inline modules open: (name, the brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut path: Option<String> = None;
    for line in src.lines() {
        let raw = line.trim();
        if let Some(r) = raw.strip_prefix("#[path") {
            // `#[path = "x.rs"]`: the string, read from the raw line (code_of drops strings).
            path = r.split('"').nth(1).map(String::from);
        }
        let code = code_of(line);
        let rest = strip_prefixes(&code);
        let mut opens = None;
        if let Some(r) = rest.strip_prefix("mod ") {
            let r = r.trim();
            if let Some(name) = r.strip_suffix(';') {
                out.push(ModDecl {
                    name: name.trim().to_string(),
                    inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                    path: path.take(),
                });
            } else if let Some(name) = r.strip_suffix('{') {
                opens = Some(name.trim().to_string());
            }
        }
        if !rest.is_empty() && !raw.starts_with("#[") {
            path = None;
        }
        for c in code.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    while inline.last().is_some_and(|(_, d)| *d > depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
        }
        if let Some(name) = opens {
            inline.push((name, depth));
        }
    }
    out
}

/// The crate rooted at `root` (relative to `repo`): the root and every module file its `mod`
/// declarations reach, followed as rustc does (`a.rs` declares `a/b.rs`; `mod.rs`, a crate root
/// and a file reached through `#[path]` declare beside themselves; `#[path]` is relative to the
/// declaring file's folder). A declared file that does not exist is skipped (a `#[cfg]`'d one).
pub fn crate_at(repo: &Path, root: &str) -> Crate {
    let mut files = Vec::new();
    // (path, module, declares beside itself)
    let mut todo: Vec<(PathBuf, Vec<String>, bool)> = vec![(PathBuf::from(root), Vec::new(), true)];
    while let Some((rel, module, owns_dir)) = todo.pop() {
        let Ok(src) = std::fs::read_to_string(repo.join(&rel)) else {
            continue;
        };
        if files.iter().any(|f: &SourceFile| Path::new(&f.rel) == rel) {
            continue;
        }
        let dir = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let here = if owns_dir || rel.file_name().is_some_and(|n| n == "mod.rs") {
            dir.clone()
        } else {
            dir.join(rel.file_stem().unwrap_or_default())
        };
        for d in mod_decls(&src) {
            let mut m = module.clone();
            m.extend(d.inline.iter().cloned());
            m.push(d.name.clone());
            let inl: PathBuf = d.inline.iter().collect();
            if let Some(p) = &d.path {
                let base = if d.inline.is_empty() {
                    dir.clone()
                } else {
                    here.join(&inl)
                };
                todo.push((normal(&base.join(p)), m, true));
            } else {
                let base = here.join(&inl);
                let flat = base.join(format!("{}.rs", d.name));
                if repo.join(&flat).is_file() {
                    todo.push((flat, m, false));
                } else {
                    todo.push((base.join(&d.name).join("mod.rs"), m, false));
                }
            }
        }
        files.push(SourceFile {
            rel: rel.display().to_string(),
            module,
            src,
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Crate {
        root: root.to_string(),
        files,
    }
}

/// `a/b/../c` → `a/c`.
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The strings of a `key = [ "a", "b" ]` list in a Cargo.toml (one line or several).
fn toml_list(toml: &str, key: &str) -> Vec<String> {
    let Some(i) = toml
        .lines()
        .position(|l| l.trim_start().starts_with(key) && l.contains('['))
    else {
        return Vec::new();
    };
    let text: String = toml.lines().skip(i).collect::<Vec<_>>().join("\n");
    let body = text.split_once('[').map_or("", |(_, r)| r);
    let body = body.split_once(']').map_or("", |(b, _)| b);
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// The packages of the workspace at `repo`: its members and the crates it excludes (`fuzz`,
/// `layer/bindgen`: crates of their own), as folders relative to `repo`.
pub fn packages(repo: &Path) -> Vec<String> {
    let toml = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap_or_default();
    let mut out = toml_list(&toml, "members");
    out.extend(toml_list(&toml, "exclude"));
    out.retain(|p| repo.join(p).join("Cargo.toml").is_file());
    out.sort();
    out.dedup();
    out
}

/// The root file of every target of the package in `pkg` (relative to `repo`): Cargo's
/// conventional places (`src/lib.rs`, `src/main.rs`, `src/bin/*`, `tests/*`, `benches/*`,
/// `examples/*`, `build.rs`) and every `path = "….rs"` its Cargo.toml names.
pub fn target_roots(repo: &Path, pkg: &str) -> Vec<String> {
    let dir = repo.join(pkg);
    let mut out: Vec<String> = ["src/lib.rs", "src/main.rs", "build.rs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for sub in ["src/bin", "tests", "benches", "examples"] {
        let Ok(rd) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if p.is_dir() && p.join("main.rs").is_file() {
                out.push(format!("{sub}/{name}/main.rs"));
            } else if name.ends_with(".rs") {
                out.push(format!("{sub}/{name}"));
            }
        }
    }
    let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    for l in toml.lines() {
        let l = l.trim();
        if let Some(v) = l.strip_prefix("path") {
            let v = v
                .trim_start()
                .strip_prefix('=')
                .unwrap_or("")
                .trim()
                .trim_matches('"');
            if v.ends_with(".rs") {
                out.push(v.to_string());
            }
        }
    }
    let mut out: Vec<String> = out
        .into_iter()
        .filter(|r| dir.join(r).is_file())
        .map(|r| normal(&Path::new(pkg).join(r)).display().to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Every crate of the workspace at `repo` (every target of every package), root first.
pub fn workspace_crates(repo: &Path) -> Vec<Crate> {
    packages(repo)
        .iter()
        .flat_map(|p| target_roots(repo, p))
        .map(|r| crate_at(repo, &r))
        .collect()
}

/// Every circle of every crate of the workspace at `repo`, each as `root: a → b → a`.
pub fn workspace_circles(repo: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for c in workspace_crates(repo) {
        for circle in circles(&graph_of(&c.files)) {
            out.push(format!("{}: {}", c.root, circle.join(" → ")));
        }
    }
    out
}

/// A source's module path below the crate (`profile/watch/mod.rs` → `profile::watch`).
pub fn module_of(rel: &str) -> Vec<String> {
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
pub fn code_of(line: &str) -> String {
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
pub fn named_paths(me: &[String], src: &str) -> Vec<Vec<String>> {
    let me = me.to_vec();
    // The modules the file declares out of line, at its top (not inside an inline module).
    let children: Vec<String> = mod_decls(src)
        .into_iter()
        .filter(|d| d.inline.is_empty())
        .map(|d| d.name)
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

/// The file graph of `files` (relative path, source), each file's module read from its path
/// as in a library's `src/` ([`module_of`]): an arrow from each file to every other file whose
/// module (or an item in it) it names.
pub fn import_graph(files: &[(String, String)]) -> Graph {
    let files: Vec<SourceFile> = files
        .iter()
        .map(|(rel, src)| SourceFile {
            rel: rel.clone(),
            module: module_of(rel),
            src: src.clone(),
        })
        .collect();
    graph_of(&files)
}

/// The file graph of one crate's files: an arrow from each file to every other file of the
/// crate whose module (or an item in it) it names.
pub fn graph_of(files: &[SourceFile]) -> Graph {
    let by_module: BTreeMap<&[String], &str> = files
        .iter()
        .map(|f| (f.module.as_slice(), f.rel.as_str()))
        .collect();
    let mut g = BTreeMap::new();
    for f in files {
        let mut to: Vec<String> = Vec::new();
        for p in named_paths(&f.module, &f.src) {
            // The longest prefix that is a file's module: `crate::a::b::f` names `a/b.rs`.
            // Nothing longer: an item of the crate's root (`crate::vkGetInstanceProcAddr`).
            let hit = (0..=p.len())
                .rev()
                .find_map(|k| by_module.get(&p[..k]))
                .map(|f| f.to_string());
            if let Some(t) = hit {
                if t != f.rel && !to.contains(&t) {
                    to.push(t);
                }
            }
        }
        to.sort();
        g.insert(f.rel.clone(), to);
    }
    g
}

/// Every circle of the graph (one per strongly connected set of files, as a path through it).
pub fn circles(g: &Graph) -> Vec<Vec<String>> {
    // Tarjan's strongly connected components, then one cycle through each non-trivial one.
    struct T<'a> {
        g: &'a Graph,
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
