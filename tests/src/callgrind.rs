//! Reading callgrind's output files (tests/tests/costs.rs, tests/tests/recovered.rs).

use crate::world::{target_dir, World};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Echo's release library: instruction budgets and fractions are measured on what a user runs
/// (a debug build's counts say nothing about that). `scripts/test.sh` builds it.
pub fn release_layer() -> PathBuf {
    let p = target_dir()
        .parent()
        .expect("target dir")
        .join("release/libVkLayer_echo.so");
    assert!(
        p.is_file(),
        "{} is missing: the cost budgets are measured on the release library (`cargo build --release -p vk-layer-echo`, which scripts/test.sh runs)",
        p.display()
    );
    p
}

/// Points the implicit echo manifest of `w` (a world made with `Layers { echo: Some(..) }`)
/// at the release library.
pub fn use_release_layer(w: &World) {
    let manifest = w.dir.join("data/vulkan/implicit_layer.d/VkLayer_echo.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["layer"]["library_path"] = release_layer().display().to_string().into();
    std::fs::write(&manifest, m.to_string()).unwrap();
}

/// Exclusive instructions per (object, function) of a callgrind file (its `ob=` / `fn=`
/// records; the cost line after a `calls=` line is the callee's inclusive cost and belongs to
/// the callee). Objects are named as the file names them (full paths).
pub fn self_cost_by_function(text: &str) -> HashMap<(String, String), u64> {
    // "(id) name" defines a compressed name, "(id)" refers to one.
    fn name(names: &mut HashMap<String, String>, v: &str) -> String {
        let v = v.trim();
        match v.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((id, rest)) if !rest.trim().is_empty() => {
                names.insert(id.to_string(), rest.trim().to_string());
                rest.trim().to_string()
            }
            Some((id, _)) => names.get(id).cloned().unwrap_or_default(),
            None => v.to_string(),
        }
    }
    let (mut objects, mut functions) = (HashMap::new(), HashMap::new());
    let mut cost: HashMap<(String, String), u64> = HashMap::new();
    let (mut ob, mut fun) = (String::new(), String::new());
    let mut after_calls = false;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("ob=") {
            ob = name(&mut objects, v);
        } else if let Some(v) = line.strip_prefix("cob=") {
            name(&mut objects, v);
        } else if let Some(v) = line.strip_prefix("fn=") {
            fun = name(&mut functions, v);
        } else if let Some(v) = line.strip_prefix("cfn=") {
            name(&mut functions, v);
        } else if line.starts_with("calls=") {
            after_calls = true;
        } else if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
            if std::mem::take(&mut after_calls) {
                continue;
            }
            if let Some(ir) = line
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
            {
                *cost.entry((ob.clone(), fun.clone())).or_default() += ir;
            }
        }
    }
    cost
}

/// Calls to functions whose name contains `callee` in a callgrind file, and the instructions
/// they ran in all (inclusive: the cost line after each `calls=` line).
pub fn calls_to(text: &str, callee: &str) -> (u64, u64) {
    let mut names: HashMap<String, String> = HashMap::new();
    let mut target = String::new();
    let (mut calls, mut inclusive) = (0u64, 0u64);
    let mut pending = false;
    for line in text.lines() {
        if let Some(v) = line
            .strip_prefix("cfn=")
            .or_else(|| line.strip_prefix("fn="))
        {
            let v = v.trim();
            let n = match v.strip_prefix('(').and_then(|r| r.split_once(')')) {
                Some((id, rest)) if !rest.trim().is_empty() => {
                    names.insert(id.to_string(), rest.trim().to_string());
                    rest.trim().to_string()
                }
                Some((id, _)) => names.get(id).cloned().unwrap_or_default(),
                None => v.to_string(),
            };
            if line.starts_with("cfn=") {
                target = n;
            }
        } else if let Some(v) = line.strip_prefix("calls=") {
            pending = target.contains(callee);
            if pending {
                calls += v
                    .split_whitespace()
                    .next()
                    .and_then(|c| c.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        } else if std::mem::take(&mut pending) {
            inclusive += line
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    (calls, inclusive)
}

/// Exclusive instructions per object of a callgrind file. `callgrind_annotate` names a
/// function's object only on some lines: a filter on its output counted 88 of echo's 506.
pub fn self_cost_by_object(text: &str) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for ((ob, _), v) in self_cost_by_function(text) {
        *out.entry(ob).or_default() += v;
    }
    out
}

/// Is this function of glibc's heap allocator (malloc, free and their internals)? Its cost
/// follows the heap's layout rather than the work: two configurations making the same calls
/// differed by 1.4 million instructions an iteration in `_int_free` and `unlink_chunk`
/// (c_tensors at 3 × 2 MiB, where echo's copies cost 700,000). scripts/cg-steady.py uses the
/// same list.
pub fn is_allocator(object: &str, function: &str) -> bool {
    const EXACT: [&str; 20] = [
        "malloc",
        "free",
        "calloc",
        "realloc",
        "memalign",
        "_int_malloc",
        "_int_free",
        "_int_calloc",
        "_int_realloc",
        "_int_memalign",
        "malloc_consolidate",
        "sysmalloc",
        "systrim",
        "posix_memalign",
        "aligned_alloc",
        "_mid_memalign",
        "cfree",
        "malloc_trim",
        "mremap_chunk",
        "munmap_chunk",
    ];
    object.ends_with("/libc.so.6")
        && (EXACT.contains(&function)
            || [
                "unlink_chunk",
                "tcache_",
                "__libc_malloc",
                "__libc_free",
                "__libc_calloc",
                "__libc_realloc",
                "__libc_memalign",
            ]
            .iter()
            .any(|p| function.starts_with(p)))
}

/// One iteration's counts from a run with `--dump-before=iteration_mark` (tests/c/common.h).
pub struct Iteration {
    /// Every instruction of the iteration, every thread.
    pub total: u64,
    /// Those inside glibc's heap allocator ([`is_allocator`]).
    pub allocator: u64,
    /// Per object (full path, as callgrind names it).
    pub by_object: HashMap<String, u64>,
}

impl Iteration {
    /// The iteration's instructions outside the heap allocator.
    pub fn work(&self) -> u64 {
        self.total - self.allocator
    }
}

/// The steady iterations of a run of `iters` iterations (one case) made with
/// `--callgrind-out-file=OUT --dump-before=iteration_mark`: OUT.1 is start-up, OUT.(j + 2)
/// iteration j, OUT the last iteration with the teardown. Iteration 0 (first touch) and the
/// last are left out, as scripts/cg-steady.py does.
pub fn steady_iterations(out: &Path, iters: usize) -> Vec<Iteration> {
    steady_iterations_of_case(out, iters, 0)
}

/// As [`steady_iterations`], for case `case` (from 0) of a program that runs several cases one
/// after another, `iters` iterations each (c_vkfft): its iteration `j` is dump `case * iters +
/// j + 2` (scripts/cg-steady.py).
pub fn steady_iterations_of_case(out: &Path, iters: usize, case: usize) -> Vec<Iteration> {
    assert!(iters >= 3, "the first and the last iteration are left out");
    (1..iters - 1)
        .map(|j| {
            let p = PathBuf::from(format!("{}.{}", out.display(), case * iters + j + 2));
            let text = std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("{}: {e} (no dump per iteration?)", p.display()));
            let by_function = self_cost_by_function(&text);
            let mut by_object: HashMap<String, u64> = HashMap::new();
            let mut allocator = 0;
            for ((ob, fun), v) in &by_function {
                *by_object.entry(ob.clone()).or_default() += v;
                if is_allocator(ob, fun) {
                    allocator += v;
                }
            }
            Iteration {
                total: by_object.values().sum(),
                allocator,
                by_object,
            }
        })
        .collect()
}
