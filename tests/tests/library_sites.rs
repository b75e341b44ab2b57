//! Issue 34 item 2: creation sites inside shared libraries are named.
//!
//! A small C++ library (`libdemo.so`, in its own directory, not beside the program) creates the
//! staging buffer of an upload workload in `demo::Uploader::make_staging()`; a C program (built
//! from tests/c/common.h, linked with `-lvulkan` and the library by absolute rpath) runs it under
//! echo in profile mode on lavapipe. The trace records the library once, with its full path and
//! build-id; `vkecho analyze`, run from another working directory with an empty `PATH` (no
//! binutils tool can be run: the symbols are read in process), names the site:
//!
//! - built without debug info (`g++ -O1 -fPIC -shared`, symbol tables only): the demangled
//!   function and the offset `nm` says, `demo::Uploader::make_staging()+0x… (libdemo.so)`;
//! - built with `-g`, its debug info split off into `DIR/.build-id/xx/yyyy.debug` and the library
//!   stripped: `demo::Uploader::make_staging() (demo.cpp:LINE)` with `--debug-dir DIR`, the
//!   symbol-table form without it; and through a `.gnu_debuglink` to a debug file beside it.
//!
//! And the layer depends on none of the symbolizer's crates (Cargo.lock).

use echo_analyzer::trace::{read_trace, Event};
use echo_tests::samples::run_command;
use echo_tests::world::{artifact, c_spv, repo_root, Layers, World};
use std::path::{Path, PathBuf};
use std::process::Command;

const LIBRARY: &str = r#"
#include <vulkan/vulkan.h>

namespace demo {
struct Uploader {
    VkDevice dev;
    VkDeviceSize size;
    VkBuffer make_staging();
};

__attribute__((noinline)) VkBuffer Uploader::make_staging()
{
    VkBufferCreateInfo bci = {};
    bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bci.size = size;
    bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer b = VK_NULL_HANDLE;
    if (vkCreateBuffer(dev, &bci, nullptr, &b) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    return b;
}
} // namespace demo

extern "C" VkBuffer demo_make_staging(VkDevice dev, VkDeviceSize size)
{
    demo::Uploader u = {dev, size};
    return u.make_staging();
}
"#;

/// The C corpus's upload workload, its staging buffer created by the library.
const PROGRAM: &str = r#"
#include "common.h"

VkBuffer demo_make_staging(VkDevice dev, VkDeviceSize size);

int main(int argc, char **argv)
{
    const char *spv = spv_path(argc, argv, 1);
    VkInstance inst = create_instance(VK_API_VERSION_1_1, NULL, 0, NULL, 0, NULL);
    struct gpu g = gpu_create(inst);
    struct work w = work_create(&g, spv, 4 * MIB, 1, BIND_THEN_WRITE);
    /* The staging buffer the library makes replaces the one work_create made, in memory of its
     * own. */
    buffer_destroy(&g, &w.h);
    w.h.buf = demo_make_staging(g.dev, w.size);
    REQUIRE(w.h.buf != VK_NULL_HANDLE);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(g.dev, w.h.buf, &req);
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = find_memory_type(&g, req.memoryTypeBits, MEM_STAGING),
    };
    CHECK(vkAllocateMemory(g.dev, &ai, NULL, &w.h.mem));
    buffer_bind(&g, &w.h);
    fill_pattern(&g, w.h.mem, w.size, 1);
    for (int i = 0; i < 3; i++)
        work_iterate(&g, &w);
    printf("checksum %016llx\n", (unsigned long long)w.checksum);
    work_destroy(&g, &w);
    vkDestroyDevice(g.dev, NULL);
    vkDestroyInstance(inst, NULL);
    return 0;
}
"#;

const MANGLED: &str = "_ZN4demo8Uploader12make_stagingEv";
const DEMANGLED: &str = "demo::Uploader::make_staging()";

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("echo-libsites-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for sub in ["src", "lib", "bin", "elsewhere"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    d
}

fn run_ok(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: cannot run ({e}); scripts/deps.sh installs g++ and binutils")
    });
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dir/lib/libdemo.so` built with `flags`, and `dir/bin/demo-app` linked against it.
fn build(dir: &Path, flags: &[&str]) -> (PathBuf, PathBuf) {
    let src = dir.join("src/demo.cpp");
    std::fs::write(&src, LIBRARY).unwrap();
    let lib = dir.join("lib/libdemo.so");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    run_ok(
        Command::new(&cxx)
            .args(["-O1", "-fPIC", "-shared"])
            .args(flags)
            .arg("-o")
            .arg(&lib)
            .arg(&src)
            .arg("-lvulkan"),
        "g++ libdemo.so",
    );
    let main = dir.join("src/demo_app.c");
    std::fs::write(&main, PROGRAM).unwrap();
    let app = dir.join("bin/demo-app");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    run_ok(
        Command::new(&cc)
            .args(["-O1", "-std=c11", "-I"])
            .arg(repo_root().join("tests/c"))
            .arg("-o")
            .arg(&app)
            .arg(&main)
            .arg(format!("-L{}", dir.join("lib").display()))
            .arg(format!("-Wl,-rpath,{}", dir.join("lib").display()))
            .args(["-ldemo", "-lvulkan"]),
        "cc demo-app",
    );
    (lib, app)
}

/// Runs the program under echo in profile mode; returns the trace.
fn profile(dir: &Path, app: &Path) -> PathBuf {
    profile_as(dir, app, "trace.jsonl", "1")
}

/// [`profile`] into `dir/name`, with `VK_ECHO_CALLSITE_CHECK=check`.
fn profile_as(dir: &Path, app: &Path, name: &str, check: &str) -> PathBuf {
    let world = World::new(Layers {
        echo: Some("profile"),
        ..Layers::default()
    });
    let trace = dir.join(name);
    let mut cmd = world.command(app, &[&c_spv()]);
    // Issue 35: every capture is also made by libgcc's unwinder (the path every site was
    // captured with before echo had its own), through the library and the program alike.
    cmd.env("VK_ECHO_TRACE", &trace)
        .env("VK_ECHO_CALLSITE_CHECK", check)
        .env("VK_ECHO_LOG", "info");
    let run = run_command(cmd);
    assert!(
        run.status.success() && run.stdout.contains("checksum"),
        "demo-app under echo failed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let sites = run
        .stderr
        .lines()
        .rfind(|l| l.contains("call sites: "))
        .unwrap_or_else(|| panic!("no call-site counters:\n{}", run.stderr));
    if check == "reference" {
        assert!(
            sites.contains("call sites: 0 captured by echo's unwinder")
                && sites.contains("by libgcc's alone"),
            "{sites}"
        );
    } else {
        assert!(
            sites.contains(" 0 by libgcc's (fallback)")
                && sites.contains(", 0 differed")
                && !sites.contains("; 0 checked"),
            "echo's unwinder and libgcc's gave different sites, or echo's fell back: {sites}\n{}",
            run.stderr
        );
    }
    assert!(trace.is_file(), "no trace:\n{}", run.stderr);
    trace
}

/// `vkecho analyze TRACE ARGS` from `cwd`, with an empty environment and `PATH` (nothing to run).
fn analyze(trace: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = Command::new(artifact("vkecho"))
        .env_clear()
        .env("PATH", "")
        .current_dir(cwd)
        .arg("analyze")
        .arg(trace)
        .args(args)
        .output()
        .expect("run vkecho analyze");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "vkecho analyze failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::env::var_os("ECHO_SHOW_ANALYSIS").is_some() {
        eprintln!("vkecho analyze {args:?}:\n{text}");
    }
    text
}

/// The creation stack of the buffer the library made, and the trace's record of the library.
fn library_frame(trace: &Path) -> (u64, echo_analyzer::trace::Module) {
    let t = read_trace(std::io::BufReader::new(std::fs::File::open(trace).unwrap())).unwrap();
    let offset = t
        .records
        .iter()
        .find_map(|r| match &r.event {
            Event::BufferCreate { stack, .. } => stack
                .iter()
                .find(|f| f.module == "libdemo.so")
                .map(|f| f.offset),
            _ => None,
        })
        .expect("a buffer created inside libdemo.so");
    let modules = t.modules();
    let m = modules
        .get("libdemo.so")
        .unwrap_or_else(|| panic!("no module record of libdemo.so: {modules:?}"))
        .clone();
    // Each module once.
    let records: usize = t
        .records
        .iter()
        .map(|r| match &r.event {
            Event::BufferCreate { modules, .. } => {
                modules.iter().filter(|m| m.name == "libdemo.so").count()
            }
            _ => 0,
        })
        .sum();
    assert_eq!(records, 1, "libdemo.so recorded {records} times");
    (offset, m)
}

/// The address `nm` gives the library's `make_staging`.
fn nm_address(lib: &Path) -> u64 {
    let out = Command::new("nm").arg("-D").arg(lib).output().expect("nm");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.ends_with(MANGLED))
        .unwrap_or_else(|| panic!("{MANGLED} not in nm -D {}:\n{text}", lib.display()));
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

/// Built without `-g`: the symbol table names the site, demangled, with the offset into the
/// function that `nm` implies; from another working directory, with nothing on `PATH`.
#[test]
fn cpp_library_without_debug_info_is_named_from_its_symbol_table() {
    let dir = tmp_dir("nodebug");
    let (lib, app) = build(&dir, &[]);
    let trace = profile(&dir, &app);
    let (offset, module) = library_frame(&trace);
    assert_eq!(module.path, lib.display().to_string());
    let id = echo_analyzer::context::elf_build_id(&std::fs::read(&lib).unwrap())
        .expect("g++ output has a build-id");
    assert_eq!(module.build_id, id);
    let expected = format!("{DEMANGLED}+{:#x} (libdemo.so)", offset - nm_address(&lib));
    let text = analyze(&trace, &dir.join("elsewhere"), &[]);
    assert!(text.contains(&expected), "no `{expected}` in:\n{text}");
    assert!(!text.contains("libdemo.so+0x"), "{text}");
    // Symbolization off: the plain form, as before.
    let plain = analyze(&trace, &dir.join("elsewhere"), &["--no-symbolize"]);
    assert!(
        plain.contains(&format!("libdemo.so+{offset:#x}")),
        "{plain}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Built with `-g`, debug info split off by build-id (as Debian's -dbgsym packages install it)
/// and the library stripped: `--debug-dir` finds `function (file:line)`; without it only the
/// dynamic symbol table is left.
#[test]
fn split_debug_info_is_found_by_build_id() {
    let dir = tmp_dir("split");
    let (lib, app) = build(&dir, &["-g"]);
    let id = echo_analyzer::context::elf_build_id(&std::fs::read(&lib).unwrap())
        .expect("g++ output has a build-id");
    let debug_root = dir.join("debug");
    let debug = debug_root
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    run_ok(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&lib)
            .arg(&debug),
        "objcopy --only-keep-debug",
    );
    run_ok(
        Command::new("strip").arg("--strip-all").arg(&lib),
        "strip --strip-all",
    );
    let trace = profile(&dir, &app);
    let (_, module) = library_frame(&trace);
    assert_eq!(module.build_id, id, "strip keeps the build-id note");
    let root = debug_root.display().to_string();
    let text = analyze(&trace, &dir.join("elsewhere"), &["--debug-dir", &root]);
    let want = format!("{DEMANGLED} (");
    let line = text
        .lines()
        .find(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("no `{want}` in:\n{text}"));
    // The line of the vkCreateBuffer call (1-based in LIBRARY).
    let call = LIBRARY
        .lines()
        .position(|l| l.contains("vkCreateBuffer("))
        .unwrap()
        + 1;
    assert!(line.contains(&format!("demo.cpp:{call})")), "{line}");
    // Without the debug directory: the stripped library's .dynsym only.
    let bare = analyze(&trace, &dir.join("elsewhere"), &[]);
    assert!(bare.contains(&format!("{DEMANGLED}+0x")), "{bare}");
    assert!(!bare.contains("demo.cpp:"), "{bare}");
    // The other layout: a `.gnu_debuglink` naming a debug file beside the library (objcopy keeps
    // the build-id, so the recorded one still matches).
    let linked = dir.join("lib/libdemo.debug");
    std::fs::copy(&debug, &linked).unwrap();
    run_ok(
        Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", linked.display()))
            .arg(&lib),
        "objcopy --add-gnu-debuglink",
    );
    let text = analyze(&trace, &dir.join("elsewhere"), &[]);
    assert!(
        text.contains(&format!("{DEMANGLED} (")) && text.contains(&format!("demo.cpp:{call})")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 35: a plan made from the sites libgcc's unwinder gives (`VK_ECHO_CALLSITE_CHECK=
/// reference`: how every plan was made before echo had its own unwinder) is the plan made with
/// echo's unwinder, and enforce (echo's unwinder) applies it: its buffers are found, copies
/// are elided, the output is the same.
#[test]
fn plans_made_with_libgcc_sites_still_match() {
    let dir = tmp_dir("plans");
    let (_, app) = build(&dir, &[]);
    let plan_of = |check: &str| -> (PathBuf, serde_json::Value) {
        let trace = profile_as(&dir, &app, &format!("trace-{check}.jsonl"), check);
        let plan = dir.join(format!("plan-{check}.json"));
        let (v, _) = echo_tests::world::analyze_plan(&trace, &plan);
        (plan, v)
    };
    let (before, b) = plan_of("reference");
    let (_, now) = plan_of("1");
    let groups = b["groups"].as_array().expect("groups");
    assert!(!groups.is_empty(), "the demo's plan has a group: {b}");
    assert_eq!(b["groups"], now["groups"]);
    assert_eq!(b["classes"], now["classes"]);
    assert_eq!(b["context"], now["context"]);

    let want = {
        let w = World::new(Layers::default());
        let run = run_command(w.command(&app, &[&c_spv()]));
        assert!(run.status.success(), "{}", run.stderr);
        run.stdout
    };
    let w = World::new(Layers {
        echo: Some("enforce"),
        ..Layers::default()
    });
    let stats = dir.join("stats.json");
    let mut cmd = w.command(&app, &[&c_spv()]);
    cmd.env("VK_ECHO_PLAN", &before)
        .env("VK_ECHO_STATS", &stats)
        .env("VK_ECHO_LOG", "info");
    let run = run_command(cmd);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout, want);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert!(
        s["bytes_elided"].as_u64().unwrap_or(0) > 0,
        "the plan made with libgcc's sites elided nothing under echo's unwinder: {s}\n{}",
        run.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The symbolizer's crates never reach the layer: no package `vk-layer-echo` depends on, however
/// indirectly (Cargo.lock, all targets and features), is one of them. (The standard library has
/// its own copies of gimli, addr2line and object for backtraces; they are not in Cargo.lock.)
/// gimli itself is allowed since issue 35: the layer's unwinder reads `.eh_frame` with it
/// (`read` only, no default features; docs/third-party.md). It needs neither object nor
/// addr2line.
#[test]
fn layer_links_none_of_the_symbol_crates() {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let mut deps: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for block in lock.split("[[package]]").skip(1) {
        let field = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                .map(|v| v.trim_end_matches('"').to_string())
        };
        let Some(name) = field("name") else { continue };
        let list: Vec<String> = match block.split("dependencies = [").nth(1) {
            Some(rest) => rest
                .split(']')
                .next()
                .unwrap_or("")
                .split('"')
                .skip(1)
                .step_by(2)
                .map(|d| d.split(' ').next().unwrap_or(d).to_string())
                .collect(),
            None => Vec::new(),
        };
        deps.entry(name).or_default().extend(list);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec!["vk-layer-echo".to_string()];
    while let Some(p) = todo.pop() {
        if seen.insert(p.clone()) {
            todo.extend(deps.get(&p).cloned().unwrap_or_default());
        }
    }
    assert!(seen.contains("echo-analyzer"), "{seen:?}");
    assert!(seen.contains("gimli"), "the layer's unwinder: {seen:?}");
    for c in [
        "echo-symbols",
        "object",
        "addr2line",
        "cpp_demangle",
        "rustc-demangle",
    ] {
        assert!(!seen.contains(c), "the layer depends on {c}: {seen:?}");
    }
    // The checker sees the CLI's dependencies.
    assert!(deps["echo-cli"].iter().any(|d| d == "echo-symbols"));
    assert!(deps["echo-symbols"].iter().any(|d| d == "object"));
}
