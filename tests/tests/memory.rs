//! Memory at the driver (issue 14, DESIGN §6 "Memory"): the test layer below echo
//! (`VK_LAYER_ECHO_test_discrete` with the real table, `VK_ECHO_TEST_MEMLOG`) counts every
//! `vkAllocateMemory` that reaches the driver and the peak of live bytes, and checks that every
//! memory handle it is handed is one the driver allocated.
//!
//! - every positive sample under enforce allocates at the driver exactly the baseline less the
//!   layer's `memory_not_allocated` (the staging allocations the plan marks `skip_allocation`), and
//!   its peak of live bytes equals the zero-copy twin's within the one-time uploads' allocations
//!   and the windows of device allocations made in part (suballoc: its device block holds a
//!   parameter buffer no group names, so only the window holding it is made);
//! - uses the plan did not foresee (`echo-order` with `ECHO_ORDER_SURPRISE`: a buffer or an image
//!   bound into the allocation after its staging buffer is gone, a map of bytes outside the
//!   staging buffer) make the allocation at that moment: output identical to the run without
//!   the layer, nothing lost, validation (with synchronization validation) as silent as without
//!   echo, no invented handle at the driver;
//! - the planted fault: without the carry (`VK_ECHO_TEST_NO_CARRY=1`) the rebound buffer misses
//!   the bytes and the output changes.

use echo_analyzer::plan::{parse_plan, Plan};
use echo_analyzer::stats::Stats;
use echo_tests::samples::{run_command, samples_bin, SampleRun};
use echo_tests::world::{artifact, Layers, World};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A world with echo (implicit, mode set per run), the test layer presenting the real table
/// below it, and optionally the validation layer.
fn world(validation: bool) -> World {
    World::new(Layers {
        echo: Some("off"),
        test_layer: true,
        validation,
    })
    .set("VK_ECHO_TEST_TABLE", "real")
    .set("VK_ECHO_MIN_BYTES", "4096")
}

/// What the test layer counted for the (one) device of a run.
#[derive(Debug)]
struct Driver {
    allocations: u64,
    allocated_bytes: u64,
    peak_live_bytes: u64,
    unknown_handles: u64,
}

fn driver(log: &Path) -> Driver {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("the test layer wrote no memory log {}: {e}", log.display()));
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "one device, one line:\n{text}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    Driver {
        allocations: n("allocations"),
        allocated_bytes: n("allocated_bytes"),
        peak_live_bytes: n("peak_live_bytes"),
        unknown_handles: n("unknown_handles"),
    }
}

/// One run of `program ARGS` in `w`: `mode` none (echo disabled), `profile` or `enforce` (with
/// `plan`), extra environment; returns the run, the driver's count, and echo's statistics.
fn run(
    w: &World,
    program: &Path,
    args: &[&str],
    mode: Option<&str>,
    env: &[(&str, &str)],
    tag: &str,
) -> (SampleRun, Driver, Option<Stats>) {
    let memlog = w.dir.join(format!("{tag}.mem.jsonl"));
    let stats = w.dir.join(format!("{tag}.stats.jsonl"));
    let _ = std::fs::remove_file(&memlog);
    let _ = std::fs::remove_file(&stats);
    let mut c: Command = w.command(program, args);
    c.env("VK_ECHO_TEST_MEMLOG", &memlog);
    match mode {
        None => {
            c.env("VK_ECHO_DISABLE", "1");
        }
        Some(m) => {
            c.env("VK_ECHO_MODE", m).env("VK_ECHO_STATS", &stats);
        }
    }
    c.envs(env.iter().copied());
    let r = run_command(c);
    r.json();
    let s = std::fs::read_to_string(&stats).ok().map(|t| {
        serde_json::from_str::<Stats>(t.lines().next().expect("a statistics line")).unwrap()
    });
    (r, driver(&memlog), s)
}

/// Profile `program ARGS` in `w` (no surprise) and analyze: the plan file and the plan.
fn plan_for(w: &World, program: &Path, args: &[&str]) -> (PathBuf, Plan) {
    plan_with(w, program, args, &[])
}

/// [`plan_for`] with more environment for the profiling run.
fn plan_with(w: &World, program: &Path, args: &[&str], env: &[(&str, &str)]) -> (PathBuf, Plan) {
    let trace = w.dir.join("trace.jsonl");
    let plan = w.dir.join("plan.json");
    let mut e = vec![("VK_ECHO_TRACE", trace.to_str().unwrap())];
    e.extend_from_slice(env);
    let (r, _, _) = run(w, program, args, Some("profile"), &e, "profile");
    assert!(trace.is_file(), "no trace:\n{}", r.stderr);
    let out = Command::new(artifact("vkecho"))
        .arg("analyze")
        .arg(&trace)
        .arg("-o")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = parse_plan(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    (plan, p)
}

fn positive(sample: &str) {
    let w = world(false);
    let prog = samples_bin();
    let args = [sample, "--size-kib", "256", "--iters", "2"];
    let mut zero_args = args.to_vec();
    zero_args.extend(["--variant", "zero-copy"]);
    let (base, base_d, _) = run(&w, &prog, &args, None, &[], "base");
    let (zero, zero_d, _) = run(&w, &prog, &zero_args, None, &[], "zero");
    let (plan_path, plan) = plan_for(&w, &prog, &args);
    let p = plan_path.to_str().unwrap();
    let (enf, enf_d, s) = run(
        &w,
        &prog,
        &args,
        Some("enforce"),
        &[("VK_ECHO_PLAN", p)],
        "enforce",
    );
    let s = s.expect("enforce statistics");
    eprintln!(
        "{sample}: driver bytes base {} / enforce {} / zero-copy {}; peak live base {} / enforce {} / zero-copy {}; not allocated {}",
        base_d.allocated_bytes,
        enf_d.allocated_bytes,
        zero_d.allocated_bytes,
        base_d.peak_live_bytes,
        enf_d.peak_live_bytes,
        zero_d.peak_live_bytes,
        s.memory_not_allocated
    );
    assert_eq!(base.checksum(), enf.checksum(), "{sample}: output changed");
    assert_eq!(base.checksum(), zero.checksum());
    assert_eq!(s.plan_status, "applied");
    assert_eq!(s.groups_applied, s.groups_planned, "{:?}", s.not_applied);
    for d in [&base_d, &zero_d, &enf_d] {
        assert_eq!(
            d.unknown_handles, 0,
            "{sample}: an invented handle reached the driver"
        );
    }
    assert_eq!(s.allocations_made_late, 0, "{sample}: nothing unforeseen");
    // What echo says it did not allocate is exactly what the plan marked, and exactly what the
    // driver did not see.
    let skipped: Vec<_> = plan
        .groups
        .iter()
        .flat_map(|g| &g.members)
        .filter(|m| m.skip_allocation)
        .collect();
    let planned: u64 = skipped
        .iter()
        .map(|m| {
            m.memory
                .as_ref()
                .expect("a skipped allocation has a key")
                .size
        })
        .sum();
    // Device allocations made only in part (plan `device_memory`, one per allocation).
    let windows: std::collections::BTreeMap<_, _> = plan
        .groups
        .iter()
        .filter_map(|g| g.device_memory.as_ref())
        .map(|d| (d.key.clone(), (d.key.size, d.window_hi - d.window_lo)))
        .collect();
    let windowed = windows.values().filter(|w| w.1 > 0).count() as u64;
    let planned = planned + windows.values().map(|w| w.0 - w.1).sum::<u64>();
    let window_bytes: u64 = windows.values().map(|w| w.1).sum();
    assert_eq!(s.memory_not_allocated, planned, "{sample}: {s:?}");
    assert_eq!(
        s.allocations_skipped,
        skipped.len() as u64 + windows.len() as u64 - windowed
    );
    assert_eq!(s.allocations_windowed, windowed);
    assert_eq!(s.maps_refused, 0);
    assert_eq!(
        enf_d.allocated_bytes,
        base_d.allocated_bytes - s.memory_not_allocated,
        "{sample}: the driver saw every other allocation"
    );
    assert_eq!(
        enf_d.allocations,
        base_d.allocations - s.allocations_skipped
    );
    if sample == "suballoc" {
        // The staging block holds a header no group names and is mapped: it is made. The device
        // block holds a parameter buffer no group names at its start: only that window is made.
        assert!(skipped.is_empty());
        assert_eq!(windowed, 1, "{sample}: {:?}", plan.groups);
    } else {
        assert!(!skipped.is_empty(), "{sample}: the plan skips allocations");
    }
    // The headline: the staging allocations disappear; the peak is the zero-copy twin's, up to
    // the allocations of one-time uploads.
    let one_time: u64 = plan
        .groups
        .iter()
        .flat_map(|g| &g.members)
        .filter(|m| m.one_time)
        .map(|m| m.staging.key.size)
        .sum();
    assert!(
        enf_d.peak_live_bytes.abs_diff(zero_d.peak_live_bytes) <= one_time + window_bytes,
        "{sample}: peak live bytes at the driver: enforce {} vs zero-copy twin {} (one-time {one_time}, windows {window_bytes})",
        enf_d.peak_live_bytes,
        zero_d.peak_live_bytes
    );
    assert!(enf_d.peak_live_bytes < base_d.peak_live_bytes);
}

echo_tests::positive_sample_tests!(
    positive_samples_allocate_what_their_zero_copy_twin_does,
    super::positive
);

// ------------------------------------------------------------------ uses the plan did not foresee

const ORDER: &[&str] = &["--order", "normal", "--iters", "3", "--kib", "64"];

/// `echo-order` planned without a surprise, then run with `surprise` (and `extra` arguments,
/// the same for the plan): without echo and under enforce, both under validation.
fn surprise(kind: &str, extra: &[&str], env: &[(&str, &str)]) -> (SampleRun, SampleRun, Stats) {
    let w = world(true);
    let prog = artifact("echo-order");
    let mut args = ORDER.to_vec();
    args.extend_from_slice(extra);
    let (plan_path, plan) = plan_for(&w, &prog, &args);
    assert_eq!(plan.groups.len(), 1);
    assert!(
        plan.groups[0].members.iter().all(|m| m.skip_allocation),
        "{:?}",
        plan.groups[0].members
    );
    let mut e = vec![("ECHO_ORDER_SURPRISE", kind)];
    let (base, base_d, _) = run(&w, &prog, &args, None, &e, "base");
    e.push(("VK_ECHO_PLAN", plan_path.to_str().unwrap()));
    e.extend_from_slice(env);
    let (enf, enf_d, s) = run(&w, &prog, &args, Some("enforce"), &e, "enforce");
    let s = s.expect("enforce statistics");
    assert_eq!(
        base.json()["mismatches"],
        0,
        "{kind}: the program checks itself"
    );
    assert_eq!(enf_d.unknown_handles, 0, "{kind}: {}", enf.stderr);
    assert_eq!(base_d.unknown_handles, 0);
    assert_eq!(
        s.allocations_made_late, 1,
        "{kind}: the unforeseen use makes the allocation: {s:?}"
    );
    assert_eq!(s.groups_applied, 1, "{:?}", s.not_applied);
    assert!(s.copies_elided > 0);
    let (vb, ve) = (base.validation_messages(), enf.validation_messages());
    assert_eq!(
        ve,
        vb,
        "{kind}: validation under enforce says something new:\n{}",
        ve.join("\n")
    );
    (base, enf, s)
}

fn unforeseen(kind: &str, extra: &[&str]) {
    let (base, enf, s) = surprise(kind, extra, &[]);
    assert_eq!(enf.json()["mismatches"], 0, "{kind}: bytes lost");
    assert_eq!(base.checksum(), enf.checksum(), "{kind}: output changed");
    assert!(s.bytes_carried_late > 0, "{kind}: {s:?}");
    assert!(base.validation_messages().is_empty());
}

mod unforeseen_uses_make_the_allocation_with_its_bytes {
    /// The readback buffer is destroyed and a new buffer bound into its allocation.
    #[test]
    fn another_buffer_bound_into_it() {
        super::unforeseen("rebind", &[])
    }
    /// The readback buffer is destroyed and a linear image bound into its allocation.
    #[test]
    fn an_image_bound_into_it() {
        super::unforeseen("image", &[])
    }
    /// The allocation has slack beyond the readback buffer, and the slack is mapped.
    #[test]
    fn a_map_outside_its_staging_buffer() {
        super::unforeseen("map-outside", &["--slack-kib", "16"])
    }
}

/// The planted fault: an allocation made late without its bytes loses what the destroyed
/// staging buffer left there, and the program's output changes.
#[test]
fn without_the_carry_the_rebound_buffer_misses_bytes() {
    let (base, enf, s) = surprise("rebind", &[], &[("VK_ECHO_TEST_NO_CARRY", "1")]);
    assert_eq!(s.bytes_carried_late, 0);
    assert!(
        enf.json()["mismatches"].as_u64().unwrap() > 0,
        "the planted fault must lose bytes"
    );
    assert_ne!(base.checksum(), enf.checksum());
}

/// The validation layer is heard in this world: forwarding the self-copies (test switch) is
/// reported, so the silence asserted above means something.
#[test]
fn validation_is_heard_below_echo_and_above_the_test_layer() {
    let w = world(true);
    let prog = artifact("echo-order");
    let (plan_path, _) = plan_for(&w, &prog, ORDER);
    let env = [
        ("VK_ECHO_PLAN", plan_path.to_str().unwrap()),
        ("VK_ECHO_TEST_KEEP_SELF_COPIES", "1"),
        ("ECHO_ORDER_SURPRISE", "rebind"),
    ];
    let (r, d, _) = run(&w, &prog, ORDER, Some("enforce"), &env, "keep");
    assert_eq!(d.unknown_handles, 0);
    let msgs = r.validation_messages();
    assert!(
        msgs.iter().any(|m| m.contains("pRegions-00117")),
        "expected VUID-vkCmdCopyBuffer-pRegions-00117, got:\n{}",
        msgs.join("\n")
    );
}

/// The test layer hears an invented handle: with the planted fault `VK_ECHO_TEST_LEAK_HANDLE=1`
/// (echo's unmap of an allocation it did not make goes down with echo's handle) it counts one,
/// so the zero asserted above means something.
#[test]
fn an_invented_handle_at_the_driver_is_caught() {
    let w = world(false);
    let prog = artifact("echo-order");
    let (plan_path, _) = plan_for(&w, &prog, ORDER);
    let env = [
        ("VK_ECHO_PLAN", plan_path.to_str().unwrap()),
        ("VK_ECHO_TEST_LEAK_HANDLE", "1"),
    ];
    let (r, d, s) = run(&w, &prog, ORDER, Some("enforce"), &env, "leak");
    assert!(s.unwrap().allocations_skipped > 0);
    assert!(d.unknown_handles > 0, "{}", r.stderr);
    assert!(r.stderr.contains("unknown memory"), "{}", r.stderr);
}

// ------------------------------------------- device allocations made in part (plan device_memory)

const BLOCK: &[&str] = &["--iters", "3", "--kib", "64"];

/// `echo-block` planned without a surprise (and with `profile_env`), then run with `env`
/// (`ECHO_BLOCK_SURPRISE` …) without echo and under enforce, both under validation:
/// (plan, base, enforce, enforce's statistics, the driver's counts without and with echo).
fn block(
    profile_env: &[(&str, &str)],
    env: &[(&str, &str)],
) -> (Plan, SampleRun, SampleRun, Stats, Driver, Driver) {
    let w = world(true);
    let prog = artifact("echo-block");
    let (plan_path, plan) = plan_with(&w, &prog, BLOCK, profile_env);
    let (base, base_d, _) = run(&w, &prog, BLOCK, None, env, "base");
    let mut e = env.to_vec();
    e.push(("VK_ECHO_PLAN", plan_path.to_str().unwrap()));
    let (enf, enf_d, s) = run(&w, &prog, BLOCK, Some("enforce"), &e, "enforce");
    let s = s.expect("enforce statistics");
    assert_eq!(base.json()["mismatches"], 0, "the program checks itself");
    assert_eq!(enf_d.unknown_handles, 0, "{}", enf.stderr);
    assert_eq!(base_d.unknown_handles, 0);
    let (vb, ve) = (base.validation_messages(), enf.validation_messages());
    assert_eq!(
        ve,
        vb,
        "validation under enforce says something new:\n{}",
        ve.join("\n")
    );
    assert!(vb.is_empty(), "{}", vb.join("\n"));
    (plan, base, enf, s, base_d, enf_d)
}

/// Forward-direction groups whose device block holds nothing else (`--no-params`): none of it
/// is made; a buffer bound where a destroyed device buffer was makes it whole, with its bytes.
#[test]
fn a_device_allocation_holding_only_device_buffers_is_not_made() {
    let w = world(true);
    let prog = artifact("echo-block");
    let args = [BLOCK, &["--no-params"]].concat();
    let (plan_path, plan) = plan_for(&w, &prog, &args);
    let dm: Vec<_> = plan
        .groups
        .iter()
        .filter_map(|g| g.device_memory.as_ref())
        .collect();
    assert_eq!(dm.len(), 2, "{:?}", plan.groups);
    assert!(dm.iter().all(|d| d.window_lo == d.window_hi), "{dm:?}");
    for (surprise, late) in [("", 0), ("bind-outside", 1)] {
        let env = [
            ("ECHO_BLOCK_SURPRISE", surprise),
            ("VK_ECHO_PLAN", plan_path.to_str().unwrap()),
        ];
        let (base, base_d, _) = run(&w, &prog, &args, None, &env[..1], "base");
        let (enf, enf_d, s) = run(&w, &prog, &args, Some("enforce"), &env, "enforce");
        let s = s.unwrap();
        assert_eq!(enf_d.unknown_handles, 0, "{}", enf.stderr);
        assert_eq!(s.groups_applied, s.groups_planned, "{:?}", s.not_applied);
        assert_eq!((s.allocations_skipped, s.allocations_windowed), (1, 0));
        assert_eq!(s.allocations_made_late, late, "{surprise}: {s:?}");
        assert_eq!(enf.json()["mismatches"], 0, "{surprise}");
        assert_eq!(base.checksum(), enf.checksum(), "{surprise}");
        assert!(enf.validation_messages().is_empty());
        if late == 0 {
            assert_eq!(enf_d.allocations, base_d.allocations - 1);
            assert_eq!(
                enf_d.allocated_bytes,
                base_d.allocated_bytes - dm[0].key.size
            );
        }
    }
}

/// The plan makes only the window holding the parameter buffer of the device block.
fn windowed(plan: &Plan) {
    let dm: Vec<_> = plan
        .groups
        .iter()
        .filter_map(|g| g.device_memory.as_ref())
        .collect();
    assert!(!dm.is_empty(), "{:?}", plan.groups);
    for d in dm {
        assert_eq!((d.window_lo, d.window_hi), (0, 256), "{d:?}");
    }
}

/// A surprise whose bytes all arrive: output identical, `late` allocations made late.
fn block_surprise(kind: &str, late: u64) -> Stats {
    let (plan, base, enf, s, base_d, enf_d) = block(&[], &[("ECHO_BLOCK_SURPRISE", kind)]);
    windowed(&plan);
    assert_eq!(s.groups_applied, s.groups_planned, "{:?}", s.not_applied);
    assert_eq!(s.allocations_windowed, 1, "{kind}: {s:?}");
    assert_eq!(s.allocations_made_late, late, "{kind}: {s:?}");
    assert_eq!(enf.json()["mismatches"], 0, "{kind}: bytes lost");
    assert_eq!(base.checksum(), enf.checksum(), "{kind}: output changed");
    if late == 0 {
        assert!(enf_d.peak_live_bytes < base_d.peak_live_bytes);
        assert_eq!(
            enf_d.allocated_bytes,
            base_d.allocated_bytes - s.memory_not_allocated
        );
    } else {
        assert!(s.bytes_carried_late > 0, "{kind}: {s:?}");
        assert_eq!(s.memory_not_allocated, 0, "{kind}: {s:?}");
    }
    s
}

mod device_allocation_made_in_part {
    /// As planned: only the window is made.
    #[test]
    fn as_planned() {
        let s = super::block_surprise("", 0);
        assert!(s.memory_not_allocated > 0);
    }
    /// A new buffer over the parameter buffer (inside the window): the window serves it.
    #[test]
    fn a_buffer_bound_in_the_window() {
        super::block_surprise("bind-window", 0);
    }
    /// A new buffer where a destroyed device buffer was: the whole allocation is made, with
    /// the device buffer's bytes (from its staging memory).
    #[test]
    fn a_buffer_bound_outside_the_window() {
        super::block_surprise("bind-outside", 1);
    }
    /// A new buffer across the window's edge: the whole allocation, with the window's bytes and
    /// the device buffer's.
    #[test]
    fn a_buffer_bound_across_the_window() {
        super::block_surprise("bind-across", 1);
    }
    /// A map inside the window: served from echo's mapping of it (reads and writes).
    #[test]
    fn a_map_in_the_window() {
        super::block_surprise("map-window", 0);
    }
    /// A map of a device buffer's range: the whole allocation, with its bytes.
    #[test]
    fn a_map_outside_the_window() {
        super::block_surprise("map-outside", 1);
    }
    /// A map across the window's edge cannot be one mapping: refused with
    /// VK_ERROR_MEMORY_MAP_FAILED (counted); the parts mapped one after the other are right.
    #[test]
    fn a_map_across_the_window_is_refused() {
        let (_, base, enf, s, _, _) = super::block(&[], &[("ECHO_BLOCK_SURPRISE", "map-across")]);
        assert_eq!(base.json()["map_failed"], false);
        assert_eq!(enf.json()["map_failed"], true);
        assert_eq!(s.maps_refused, 1, "{s:?}");
        assert_eq!(enf.json()["mismatches"], 0);
        assert_eq!(base.checksum(), enf.checksum());
    }
    /// The planted fault: without the carry, the buffer bound where the destroyed device buffer
    /// was misses its bytes.
    #[test]
    fn without_the_carry_bytes_are_lost() {
        let (_, base, enf, s, _, _) = super::block(
            &[],
            &[
                ("ECHO_BLOCK_SURPRISE", "bind-outside"),
                ("VK_ECHO_TEST_NO_CARRY", "1"),
            ],
        );
        assert_eq!(s.allocations_made_late, 1);
        assert!(enf.json()["mismatches"].as_u64().unwrap() > 0);
        assert_ne!(base.checksum(), enf.checksum());
    }
    /// An exportable allocation (VkExportMemoryAllocateInfo): the analyzer never plans it in
    /// part, and enforce makes it whole even when a plan (profiled without the export) says
    /// otherwise; the export works.
    #[test]
    fn an_exportable_allocation_is_always_made() {
        let (plan, ..) = super::block(&[("ECHO_BLOCK_EXPORT", "1")], &[("ECHO_BLOCK_EXPORT", "1")]);
        assert!(
            plan.groups.iter().all(|g| g.device_memory.is_none()),
            "{:?}",
            plan.groups
        );
        let (plan, base, enf, s, base_d, enf_d) = super::block(&[], &[("ECHO_BLOCK_EXPORT", "1")]);
        super::windowed(&plan);
        assert_eq!(s.allocations_windowed + s.allocations_skipped, 0, "{s:?}");
        assert_eq!(s.memory_not_allocated, 0);
        assert_eq!(enf_d.peak_live_bytes, base_d.peak_live_bytes);
        assert_eq!(base.checksum(), enf.checksum());
    }
}

/// An export the plan did not foresee (`vkGetMemoryFdKHR` of the device block, allocated without
/// `VkExportMemoryAllocateInfo`: invalid usage, so without validation): echo makes the whole
/// allocation at that moment and passes the driver's answer on — the application gets what it
/// gets without echo.
#[test]
fn an_unforeseen_export_makes_the_allocation_and_the_driver_answers() {
    let w = world(false);
    let prog = artifact("echo-block");
    let (plan_path, plan) = plan_for(&w, &prog, BLOCK);
    windowed(&plan);
    let env = [
        ("ECHO_BLOCK_EXPORT", "unforeseen"),
        ("VK_ECHO_PLAN", plan_path.to_str().unwrap()),
    ];
    let (base, _, _) = run(&w, &prog, BLOCK, None, &env[..1], "base");
    let (enf, enf_d, s) = run(&w, &prog, BLOCK, Some("enforce"), &env, "enforce");
    let s = s.unwrap();
    assert_eq!(enf_d.unknown_handles, 0, "{}", enf.stderr);
    assert_eq!(s.allocations_windowed, 1, "{s:?}");
    assert_eq!(s.allocations_made_late, 1, "the export makes it: {s:?}");
    assert_eq!(base.json()["export"], enf.json()["export"]);
    assert_ne!(base.json()["export"], "", "the program exported");
    assert_eq!(base.checksum(), enf.checksum());
    assert_eq!(enf.json()["mismatches"], 0);
}
