//! Enforce mode on lavapipe through the real loader (DESIGN §6, issue 6): every sample runs
//! without the layer, is profiled, analyzed and enforced, and its output is compared byte for byte.
//!
//! - positive samples: identical checksum, every planned group applied, every copy of the loop
//!   elided (bytes elided = iterations × bytes the sample copies per iteration, plus the one-time
//!   uploads the plan took), no copy between planned buffers left;
//! - negative controls: the controlled pair is refused by the analyzer and the output is
//!   identical; a plan forced by hand to alias that pair changes the output (race, stale, reuse):
//!   the refusal is what keeps them correct;
//! - Khronos validation with synchronization validation reports nothing under enforce, and does
//!   report VUID-vkCmdCopyBuffer-pRegions-00117 when the self-copies are forwarded (so it sees the
//!   aliasing at all);
//! - corrupt, truncated, foreign-context, future-version and group-writable plans: one warning,
//!   passthrough, identical output;
//! - auto mode: the first run profiles and writes the plan, the second enforces it;
//! - bind/map/free orders (`echo-order`): staging bound before the device buffer has memory
//!   (binds held back, then aliased), the device memory freed while an aliased staging buffer is
//!   still read (free deferred), a staging buffer mapped and written before its partner is bound
//!   (bound as asked at that first use, reported) — all identical and validation-clean.
//!
//! Over 1,000 lines: one test per sample and per negative control, each with what it must
//! show said in its own words; the flow they share (profile, analyze, enforce) is `Flow` here.

use echo_analyzer::plan::{parse_plan, Direction, Group, Member, Plan, Role, SubstituteSync};
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::{read_trace, Event, ObjectKey, Trace};
use echo_tests::samples::{
    command as sample_command, run_command, samples_bin, validation_env, SampleRun,
};
use echo_tests::world::scratch;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const SIZE_KIB: &str = "256";
const VALIDATION_SIZE_KIB: &str = "64";
const ITERS: u64 = 3;

fn vkecho() -> PathBuf {
    samples_bin().with_file_name("vkecho")
}

/// One sample with fixed arguments (a plan only applies to the arguments it was made with).
struct Flow {
    dir: PathBuf,
    program: PathBuf,
    args: Vec<String>,
}

impl Flow {
    fn new(sample: &str, size_kib: &str) -> Flow {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Flow {
            dir: scratch(&format!("{sample}-{size_kib}-{n}")),
            args: [
                sample,
                "--size-kib",
                size_kib,
                "--iters",
                &ITERS.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            program: samples_bin(),
        }
    }

    /// `echo-order --order ORDER` (tests/src/bin/echo-order.rs).
    fn order(order: &str) -> Flow {
        let mut f = Flow::new(&format!("order-{order}"), "64");
        f.program = samples_bin().with_file_name("echo-order");
        f.args = ["--order", order, "--iters", "3", "--kib", "64"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        f
    }

    fn argv(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    fn sample(&self, env: &[(&str, &str)]) -> SampleRun {
        let mut c = sample_command(&self.argv());
        c.envs(env.iter().copied());
        if self.program != samples_bin() {
            c = Command::new(&self.program);
            c.args(&self.args).envs(env.iter().copied());
        }
        run_command(c)
    }

    fn vkecho(&self, sub: &[&str], env: &[(&str, &str)]) -> SampleRun {
        let mut c = Command::new(vkecho());
        c.args(sub).arg("--").arg(&self.program).args(&self.args);
        c.envs(env.iter().copied());
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            c.env("XDG_RUNTIME_DIR", std::env::temp_dir());
        }
        run_command(c)
    }

    /// Profile (small thresholds, test sizes) and analyze: (trace, plan file).
    fn profile_and_analyze(&self) -> (Trace, PathBuf) {
        let trace = self.dir.join("trace.jsonl");
        let t = trace.display().to_string();
        let run = self.vkecho(
            &["profile", "--trace", &t],
            // The defaults: no vouch for the host's writes (exact host writes see them).
            &[("VK_ECHO_MIN_BYTES", "4096")],
        );
        run.json();
        let plan = self.dir.join("plan.json");
        let out = Command::new(vkecho())
            .args(["analyze", &t, "-o"])
            .arg(&plan)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "vkecho analyze failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let trace = read_trace(std::io::BufReader::new(
            std::fs::File::open(&trace).unwrap(),
        ))
        .expect("trace reads");
        (trace, plan)
    }

    /// `vkecho run --plan PLAN` with statistics: (run, the device's statistics).
    fn enforce(&self, plan: &Path, env: &[(&str, &str)]) -> (SampleRun, Stats) {
        let stats = self.dir.join(format!(
            "stats-{}.jsonl",
            plan.file_stem().unwrap().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&stats);
        let run = self.vkecho(
            &[
                "run",
                "--plan",
                &plan.display().to_string(),
                "--stats",
                &stats.display().to_string(),
            ],
            env,
        );
        run.json();
        let text = std::fs::read_to_string(&stats).expect("the layer wrote statistics");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one device, one statistics line:\n{text}");
        assert_eq!(
            std::fs::metadata(&stats).unwrap().permissions().mode() & 0o777,
            0o600
        );
        (run, serde_json::from_str(lines[0]).unwrap())
    }

    /// The program under the layer in enforce mode with PLAN, started without `vkecho` (which
    /// refuses a file that is not a plan): (run, the device's statistics).
    fn enforce_direct(&self, plan: &Path) -> (SampleRun, Stats) {
        let stats = self.dir.join(format!(
            "stats-{}-direct.jsonl",
            plan.file_stem().unwrap().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&stats);
        let mut env = layer_env(&self.dir);
        env.push(("VK_ECHO_MODE".into(), "enforce".into()));
        env.push(("VK_ECHO_PLAN".into(), plan.display().to_string()));
        env.push(("VK_ECHO_STATS".into(), stats.display().to_string()));
        let env: Vec<(&str, &str)> = env.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let run = self.sample(&env);
        run.json();
        let text = std::fs::read_to_string(&stats).expect("the layer wrote statistics");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one device, one statistics line:\n{text}");
        (run, serde_json::from_str(lines[0]).unwrap())
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn read_plan(p: &Path) -> Plan {
    parse_plan(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Bytes of one-time uploads the plan took (elided once, outside the loop).
fn one_time_bytes(plan: &Plan) -> u64 {
    plan.groups
        .iter()
        .flat_map(|g| &g.members)
        .filter(|m| m.one_time)
        .map(|m| m.bytes)
        .sum()
}

fn positive(sample: &str) {
    let f = Flow::new(sample, SIZE_KIB);
    let base = f.sample(&[]);
    let (_, plan_path) = f.profile_and_analyze();
    let plan = read_plan(&plan_path);
    assert!(!plan.groups.is_empty(), "{sample}: the plan has groups");
    let (run, s) = f.enforce(&plan_path, &[]);
    assert_eq!(
        base.checksum(),
        run.checksum(),
        "{sample}: enforce changed the output"
    );
    assert_eq!(s.mode, "enforce");
    assert_eq!(s.plan_status, "applied");
    assert_eq!(s.groups_planned as usize, plan.groups.len());
    assert_eq!(
        s.groups_applied, s.groups_planned,
        "{sample}: not applied: {:?}",
        s.not_applied
    );
    assert_eq!(
        s.regions_passed, 0,
        "{sample}: copies between planned buffers still ran"
    );
    let per_iter = base.json()["bytes_copied_per_iter"].as_u64().unwrap();
    assert_eq!(
        s.bytes_elided,
        ITERS * per_iter + one_time_bytes(&plan),
        "{sample}: every copy of the loop elided ({s:?})"
    );
    assert!(s.copies_elided > 0 && s.barriers_inserted > 0);
    // Issue 14: every positive sample leaves device memory out, and `vkecho run` says how much.
    assert!(s.memory_not_allocated > 0, "{sample}: {s:?}");
    let said = format!("{} bytes not allocated", s.memory_not_allocated);
    assert!(
        run.stderr.contains("vkecho run: device 0: ") && run.stderr.contains(&said),
        "{sample}: vkecho run does not print {said:?}:\n{}",
        run.stderr
    );
    assert!(s.binds_redirected as usize >= plan.groups.len());
}

echo_tests::positive_sample_tests!(positive_samples, super::positive);

// ------------------------------------------------------------------ negative controls

/// Where each buffer handle of the trace was bound, and which allocation holds only it.
fn memory_of(trace: &Trace) -> HashMap<ObjectKey, (Option<ObjectKey>, u64)> {
    let mut key_of_buf: HashMap<u64, ObjectKey> = HashMap::new();
    let mut key_of_mem: HashMap<u64, ObjectKey> = HashMap::new();
    let mut binds: Vec<(u64, u64, u64)> = Vec::new();
    for r in &trace.records {
        match &r.event {
            Event::BufferCreate { buffer, key, .. } => {
                key_of_buf.insert(*buffer, key.clone());
            }
            Event::MemoryAlloc { memory, key, .. } => {
                key_of_mem.insert(*memory, key.clone());
            }
            Event::BindBuffer {
                buffer,
                memory,
                offset,
            } => binds.push((*buffer, *memory, *offset)),
            _ => {}
        }
    }
    let mut per_mem: HashMap<u64, HashSet<u64>> = HashMap::new();
    for (b, m, _) in &binds {
        per_mem.entry(*m).or_default().insert(*b);
    }
    binds
        .iter()
        .filter_map(|(b, m, o)| {
            let own = per_mem[m].len() == 1;
            Some((
                key_of_buf.get(b)?.clone(),
                (own.then(|| key_of_mem.get(m).cloned()).flatten(), *o),
            ))
        })
        .collect()
}

/// The test-only unsafe plan: every pair the analyzer refused, aliased anyway (first pair of
/// each staging buffer; δ = 0 as in these samples).
fn forced(plan: &Plan, trace: &Trace) -> Plan {
    let mem = memory_of(trace);
    let mut p = plan.clone();
    let mut used: HashSet<ObjectKey> = p
        .groups
        .iter()
        .flat_map(|g| {
            std::iter::once(g.device.key.clone())
                .chain(g.members.iter().map(|m| m.staging.key.clone()))
        })
        .collect();
    let mut id = p.groups.iter().map(|g| g.id).max().unwrap_or(0);
    for r in &plan.rejected {
        if used.contains(&r.staging.key) || used.contains(&r.device.key) {
            continue;
        }
        used.insert(r.staging.key.clone());
        used.insert(r.device.key.clone());
        let (own, offset) = mem.get(&r.staging.key).cloned().unwrap_or((None, 0));
        id += 1;
        p.groups.push(Group {
            device_index: 0,
            id,
            device: r.device.clone(),
            direction: if own.is_some() {
                Direction::StagingIntoDevice
            } else {
                Direction::DeviceIntoStaging
            },
            members: vec![Member {
                staging: r.staging.clone(),
                delta: 0,
                role: Role::Both,
                copies: r.copies,
                bytes: r.bytes,
                one_time: false,
                memory: own,
                memory_offset: offset,
                skip_allocation: false,
                allocation_note: String::new(),
            }],
            sync: SubstituteSync::MemoryBarrier,
            bytes_saved_per_iter: 0,
            copies_total: r.copies,
            bytes_total: r.bytes,
            memory_saved: 0,
            device_memory: None,
            device_mapped: false,
            extrapolable: false,
            not_extrapolable: String::new(),
        });
    }
    p.rejected.clear();
    p
}

fn negative(sample: &str, condition: &str, forced_changes_output: bool) {
    let f = Flow::new(sample, SIZE_KIB);
    let base = f.sample(&[]);
    let (trace, plan_path) = f.profile_and_analyze();
    let plan = read_plan(&plan_path);
    assert!(
        plan.rejected
            .iter()
            .any(|r| r.condition.as_str() == condition),
        "{sample}: the controlled pair is refused with {condition}: {:?}",
        plan.rejected
    );
    let (run, s) = f.enforce(&plan_path, &[]);
    assert_eq!(
        base.checksum(),
        run.checksum(),
        "{sample}: enforce changed the output"
    );
    assert_eq!(
        s.groups_applied as usize,
        plan.groups.len(),
        "{:?}",
        s.not_applied
    );

    // Aliasing the refused pair anyway (a plan written by hand) breaks the program.
    let unsafe_plan = forced(&plan, &trace);
    assert!(unsafe_plan.groups.len() > plan.groups.len());
    let up = f.dir.join("forced.json");
    std::fs::write(&up, unsafe_plan.to_json()).unwrap();
    std::fs::set_permissions(&up, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (run, s) = f.enforce(&up, &[]);
    assert_eq!(
        s.groups_applied as usize,
        unsafe_plan.groups.len(),
        "{sample}: the forced plan is applied: {:?}",
        s.not_applied
    );
    if forced_changes_output {
        assert_ne!(
            base.checksum(),
            run.checksum(),
            "{sample}: aliasing the refused pair must change the output"
        );
    } else {
        assert_eq!(base.checksum(), run.checksum());
    }
}

// ------------------------------------------------------------------ guarded enforce (issue 16)

const GUARD_ON: &[(&str, &str)] = &[("VK_ECHO_GUARD", "1")];

/// The headline of guarded enforce: the race control run against a plan forced to alias its
/// refused pair gives wrong output without the guard and the program's own output with it — the
/// host's write during the window was split copy-on-write and merged at the next upload.
#[test]
fn guard_turns_the_forced_race_into_the_right_output() {
    let f = Flow::new("race", SIZE_KIB);
    let base = f.sample(&[]);
    let (trace, plan_path) = f.profile_and_analyze();
    let plan = read_plan(&plan_path);
    let unsafe_plan = forced(&plan, &trace);
    assert!(unsafe_plan.groups.len() > plan.groups.len());
    let up = f.dir.join("forced.json");
    std::fs::write(&up, unsafe_plan.to_json()).unwrap();
    std::fs::set_permissions(&up, std::fs::Permissions::from_mode(0o600)).unwrap();

    let (wrong, s) = f.enforce(&up, &[]);
    assert_eq!(s.groups_applied as usize, unsafe_plan.groups.len());
    assert_ne!(
        base.checksum(),
        wrong.checksum(),
        "without the guard the forced plan changes the output"
    );
    assert_eq!(s.guard_windows, 0, "guard off: no guard state touched");

    let (right, s) = f.enforce(&up, GUARD_ON);
    assert_eq!(
        s.groups_applied as usize,
        unsafe_plan.groups.len(),
        "the forced plan is applied under the guard: {:?}",
        s.not_applied
    );
    assert!(s.copies_elided > 0);
    assert_eq!(
        base.checksum(),
        right.checksum(),
        "the guard turns the forced race's wrong output into the right one ({s:?})"
    );
    assert!(s.guard_windows > 0, "{s:?}");
    // One write per iteration lands in a window (the next input, written while the dispatch
    // waits for the host's signal); every one but the last is merged at the next upload.
    assert_eq!(s.guard_splits, ITERS, "{s:?}");
    assert_eq!(s.guard_merges, ITERS - 1, "{s:?}");
    assert_eq!(s.guard_timeouts, 0, "{s:?}");
    assert!(s.errors.is_empty(), "{:?}", s.errors);
}

/// The guard covers host writes made while the GPU may still use a group (S2), not value
/// violations outside any window (S1): the stale control writes its staging buffer after the
/// first dispatch completed, and a later dispatch reads the device buffer with no upload between.
/// Forced to alias that pair, the output stays wrong under the guard — the analyzer's S1 refusal
/// is what keeps it right, and the guard is no licence to force any plan.
#[test]
fn guard_does_not_make_an_s1_refusal_safe() {
    let f = Flow::new("stale", SIZE_KIB);
    let base = f.sample(&[]);
    let (trace, plan_path) = f.profile_and_analyze();
    let plan = read_plan(&plan_path);
    assert!(plan.rejected.iter().any(|r| r.condition.as_str() == "S1"));
    let unsafe_plan = forced(&plan, &trace);
    let up = f.dir.join("forced.json");
    std::fs::write(&up, unsafe_plan.to_json()).unwrap();
    std::fs::set_permissions(&up, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (run, s) = f.enforce(&up, GUARD_ON);
    assert_eq!(s.groups_applied as usize, unsafe_plan.groups.len());
    assert_eq!(s.guard_splits, 0, "no write inside a window: {s:?}");
    assert_ne!(base.checksum(), run.checksum());
}

/// The positive samples under the guard: same output, every group applied, and no split (they
/// never write a staging buffer while the GPU may use its group) — or, where the sample's
/// direction cannot be guarded, the group refused (fail closed) and the output still the same.
fn guarded_positive(sample: &str) {
    let f = Flow::new(sample, SIZE_KIB);
    let base = f.sample(&[]);
    let (_, plan_path) = f.profile_and_analyze();
    let plan = read_plan(&plan_path);
    let (run, s) = f.enforce(&plan_path, GUARD_ON);
    eprintln!("{sample}: {}", s.summary());
    assert_eq!(
        base.checksum(),
        run.checksum(),
        "{sample}: guarded enforce changed the output"
    );
    assert!(s.errors.is_empty(), "{sample}: {:?}", s.errors);
    let forward = plan
        .groups
        .iter()
        .filter(|g| g.direction == Direction::DeviceIntoStaging)
        .count();
    assert_eq!(
        s.groups_applied as usize,
        plan.groups.len() - forward,
        "{sample}: not applied: {:?}",
        s.not_applied
    );
    assert!(s.not_applied.iter().all(|n| n
        .reason
        .contains("guard: the device-into-staging direction")));
    if s.groups_applied > 0 {
        assert!(s.guard_windows > 0, "{sample}: {s:?}");
    }
    assert_eq!(
        s.guard_splits, 0,
        "{sample}: a positive sample never writes in a window ({s:?})"
    );
    assert_eq!(s.guard_timeouts, 0, "{sample}: {s:?}");
}

echo_tests::positive_sample_tests!(guarded_positive_samples, super::guarded_positive);

/// A buffer the plan does not name bound into guarded memory: the guard lets go of that
/// allocation (its host writes must reach the GPU as in the program), says so in the statistics,
/// and the output is the program's.
#[test]
fn guard_lets_go_of_memory_a_foreign_buffer_is_bound_into() {
    let f = Flow::order("normal");
    let surprise = ("ECHO_ORDER_SURPRISE", "guard-foreign");
    let base = f.sample(&[surprise]);
    assert_eq!(base.json()["mismatches"], 0, "{}", base.stderr);
    let (_, plan) = f.profile_and_analyze();
    let (run, s) = f.enforce(&plan, &[surprise, GUARD_ON[0]]);
    assert_eq!(base.checksum(), run.checksum(), "{}", run.stderr);
    assert_eq!(run.json()["mismatches"], 0);
    assert_eq!(s.groups_applied, 1, "{:?}", s.not_applied);
    assert!(s.guard_windows > 0);
    assert!(
        s.errors.iter().any(|e| e.contains("ran unguarded")),
        "{:?}",
        s.errors
    );
}

/// Guarded enforce never waits forever: GPU work that reads the device buffer waits for an event
/// the host sets only after submitting the next upload, so the merge at that upload cannot wait
/// for it. The wait is bounded (2 s), reported (`guard_timeouts`, one warning saying the plan
/// should not be trusted) and the merge proceeds — which here changes what the blocked read sees,
/// exactly why the plan is reported untrusted.
#[test]
fn guard_never_waits_forever_for_a_host_set_event() {
    let f = Flow::order("normal");
    let surprise = ("ECHO_ORDER_SURPRISE", "guard-wait");
    let base = f.sample(&[surprise]);
    assert_eq!(base.json()["mismatches"], 0, "{}", base.stderr);
    let (_, plan) = f.profile_and_analyze();
    let t0 = std::time::Instant::now();
    let (run, s) = f.enforce(&plan, &[surprise, GUARD_ON[0]]);
    let took = t0.elapsed();
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    assert_eq!(s.groups_applied, 1, "{:?}", s.not_applied);
    assert_eq!(s.guard_splits, 1, "{s:?}");
    assert_eq!(s.guard_timeouts, 1, "{s:?}");
    assert_eq!(s.guard_merges, 1, "{s:?}");
    assert!(
        layer_warnings(&run)
            .iter()
            .any(|w| w.contains("did not complete within") && w.contains("not be trusted")),
        "{}",
        run.stderr
    );
    assert!(
        run.json()["mismatches"].as_u64().unwrap() > 0,
        "the merge proceeded after the timeout, so the blocked read saw the new input"
    );

    // The plan is marked untrusted; auto mode honours the mark: it profiles again (the output is
    // the program's), writes a fresh plan and removes the mark.
    let mut marker = plan.clone().into_os_string();
    marker.push(".untrusted");
    let marker = PathBuf::from(marker);
    assert!(marker.is_file(), "{} written", marker.display());
    let mut env = layer_env(&f.dir);
    env.push(("VK_ECHO_MODE".into(), "auto".into()));
    env.push(("VK_ECHO_LOG".into(), "info".into()));
    env.push(("VK_ECHO_MIN_BYTES".into(), "4096".into()));
    env.push(("VK_ECHO_PLAN".into(), plan.display().to_string()));
    env.push(("VK_ECHO_GUARD".into(), "1".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let again = f.sample(&env);
    assert_eq!(again.json()["mismatches"], 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("profiling again") && again.stderr.contains("written"),
        "{}",
        again.stderr
    );
    assert!(!marker.exists(), "the fresh plan clears the mark");
}

/// Khronos validation with synchronization validation is silent under guarded enforce (the
/// imported memory, the external-memory buffers and echo's own fence are all valid usage).
#[test]
fn guarded_validation_clean_saxpy() {
    validation_clean_with("saxpy", GUARD_ON);
}

mod negative_controls {
    #[test]
    fn race() {
        super::negative("race", "S2", true)
    }
    #[test]
    fn stale() {
        super::negative("stale", "S1", true)
    }
    #[test]
    fn reuse() {
        super::negative("reuse", "reuse", true)
    }
    /// bda: the shader reaches the buffers through addresses queried after binding, so a forced
    /// alias gives the same output on this sample; S3 guards programs that keep or compare
    /// addresses (capture/replay, address equality), which this one does not.
    #[test]
    fn bda() {
        super::negative("bda", "S3", false)
    }
}

// ------------------------------------------------------------------ validation

fn validation_clean(sample: &str) {
    validation_clean_with(sample, &[]);
}

fn validation_clean_with(sample: &str, extra: &[(&str, &str)]) {
    let f = Flow::new(sample, VALIDATION_SIZE_KIB);
    let (_, plan) = f.profile_and_analyze();
    let mut env = validation_env();
    env.extend(extra.iter().copied());
    let (run, s) = f.enforce(&plan, &env);
    assert!(s.copies_elided > 0, "{sample}: something was elided");
    if !extra.is_empty() {
        assert!(s.guard_windows > 0, "{sample}: the guard ran: {s:?}");
    }
    let msgs = run.validation_messages();
    assert!(
        msgs.is_empty(),
        "{sample}: validation under enforce:\n{}",
        msgs.join("\n")
    );
}

mod validation_is_silent_under_enforce {
    #[test]
    fn saxpy() {
        super::validation_clean("saxpy")
    }
    #[test]
    fn sgemm() {
        super::validation_clean("sgemm")
    }
    #[test]
    fn conv2d() {
        super::validation_clean("conv2d")
    }
    #[test]
    fn pipeline() {
        super::validation_clean("pipeline")
    }
    #[test]
    fn suballoc() {
        super::validation_clean("suballoc")
    }
    #[test]
    fn multiqueue() {
        super::validation_clean("multiqueue")
    }
}

/// The validation layer sits below echo and sees the aliased binds: forwarding the self-copies
/// (test switch) is reported as VUID-vkCmdCopyBuffer-pRegions-00117.
#[test]
fn validation_sees_forwarded_self_copies() {
    let f = Flow::new("saxpy", VALIDATION_SIZE_KIB);
    let (_, plan) = f.profile_and_analyze();
    let mut env = validation_env();
    env.push(("VK_ECHO_TEST_KEEP_SELF_COPIES", "1"));
    let (run, s) = f.enforce(&plan, &env);
    assert_eq!(s.copies_elided, 0);
    let msgs = run.validation_messages();
    assert!(
        msgs.iter().any(|m| m.contains("pRegions-00117")),
        "expected VUID-vkCmdCopyBuffer-pRegions-00117, got:\n{}",
        msgs.join("\n")
    );
}

// ------------------------------------------------------------------ bad plans

fn layer_warnings(run: &SampleRun) -> Vec<String> {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("[VK_LAYER_echo] warn"))
        .map(str::to_string)
        .collect()
}

#[test]
fn bad_plans_are_one_warning_and_passthrough() {
    let f = Flow::new("saxpy", SIZE_KIB);
    let base = f.sample(&[]);
    let (_, plan_path) = f.profile_and_analyze();
    let good = std::fs::read_to_string(&plan_path).unwrap();
    let plan = read_plan(&plan_path);

    let mut foreign = plan.clone();
    foreign.context.args_hash = "0000000000000000".into();
    let mut future = serde_json::to_value(&plan).unwrap();
    future["version"] = serde_json::json!(plan.version + 1);
    let cases: Vec<(&str, String, u32, &str)> = vec![
        (
            "corrupt",
            "{ this is not json".into(),
            0o600,
            "not a valid plan",
        ),
        (
            "truncated",
            good[..good.len() / 2].to_string(),
            0o600,
            "not a valid plan",
        ),
        ("foreign", foreign.to_json(), 0o600, "another arguments"),
        ("future", future.to_string(), 0o600, "is not supported"),
        (
            "writable",
            good.clone(),
            0o664,
            "writable by group or others",
        ),
    ];
    for (name, text, mode, why) in cases {
        let p = f.dir.join(format!("{name}.json"));
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        // `vkecho run --plan` reads the plan first: one that is not a plan (corrupt, truncated,
        // a future version) is refused before the program starts, with the reason.
        let refused_by_vkecho = matches!(name, "corrupt" | "truncated" | "future");
        if refused_by_vkecho {
            let stats = f.dir.join(format!("stats-{name}-vkecho.jsonl"));
            let out = Command::new(vkecho())
                .args(["run", "--plan"])
                .arg(&p)
                .arg("--stats")
                .arg(&stats)
                .arg("--")
                .arg(&f.program)
                .args(&f.args)
                .env("XDG_RUNTIME_DIR", std::env::temp_dir())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{name}: vkecho run accepted it:\n{err}"
            );
            assert!(err.contains(why), "{name}: {err}");
            assert!(out.stdout.is_empty(), "{name}: the program ran");
            assert!(!stats.exists(), "{name}: the program ran under the layer");
        }
        // The layer itself (a run vkecho does not start, or a plan that reads but does not
        // apply): one warning, the program's output unchanged.
        let (run, s) = if refused_by_vkecho {
            f.enforce_direct(&p)
        } else {
            f.enforce(&p, &[])
        };
        assert_eq!(base.checksum(), run.checksum(), "{name}: output changed");
        let w = layer_warnings(&run);
        assert_eq!(w.len(), 1, "{name}: exactly one warning, got {w:?}");
        assert!(w[0].contains(why), "{name}: {w:?}");
        assert!(
            s.plan_status.starts_with("refused"),
            "{name}: {}",
            s.plan_status
        );
        assert_eq!(s.groups_applied, 0);
        assert_eq!(s.copies_elided, 0);
    }
}

// ------------------------------------------------------------------ calibrate

/// `vkecho calibrate` times the program without and with the plan and writes the numbers into
/// the plan; with stderr not a terminal its progress bar (indicatif) is hidden: stderr holds the
/// per-trial log lines and nothing else.
#[test]
fn calibrate_records_its_numbers_and_draws_no_progress_without_a_terminal() {
    let f = Flow::new("saxpy", SIZE_KIB);
    let (_, plan_path) = f.profile_and_analyze();
    let p = plan_path.display().to_string();
    let run = f.vkecho(
        &[
            "calibrate",
            "--trials",
            "2",
            "--metric",
            "iter_ms_median",
            "--plan",
            &p,
        ],
        &[],
    );
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stdout.contains("(median of 2, iter_ms_median)"),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.stderr.lines().collect::<Vec<_>>(),
        ["vkecho calibrate: trial 1/2", "vkecho calibrate: trial 2/2"],
        "{:?}",
        run.stderr
    );
    let c = read_plan(&plan_path)
        .calibration
        .expect("calibration written");
    assert_eq!(c.trials, 2);
    assert!(
        c.baseline_ms_median > 0.0 && c.plan_ms_median > 0.0,
        "{c:?}"
    );
}

// ------------------------------------------------------------------ auto mode

/// An explicit manifest for this build's layer, for runs `vkecho` does not start.
fn layer_env(dir: &Path) -> Vec<(String, String)> {
    let lib = samples_bin().with_file_name("libVkLayer_echo.so");
    let m = serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": "VK_LAYER_echo",
            "type": "GLOBAL",
            "library_path": lib,
            "api_version": "1.3.239",
            "implementation_version": "1",
            "description": "echo (enforce tests)"
        }
    });
    let mdir = dir.join("manifest");
    std::fs::create_dir_all(&mdir).unwrap();
    std::fs::write(mdir.join("VkLayer_echo.json"), m.to_string()).unwrap();
    vec![
        ("VK_ADD_LAYER_PATH".into(), mdir.display().to_string()),
        ("VK_INSTANCE_LAYERS".into(), "VK_LAYER_echo".into()),
    ]
}

#[test]
fn auto_mode_profiles_then_enforces() {
    let f = Flow::new("saxpy", SIZE_KIB);
    let base = f.sample(&[]);
    let cache = f.dir.join("cache");
    let stats = f.dir.join("auto-stats.jsonl");
    let mut env = layer_env(&f.dir);
    env.extend(
        [
            ("VK_ECHO_MODE", "auto"),
            ("VK_ECHO_LOG", "info"),
            ("VK_ECHO_MIN_BYTES", "4096"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    env.push(("VK_ECHO_CACHE_DIR".into(), cache.display().to_string()));
    env.push(("VK_ECHO_STATS".into(), stats.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();

    let first = f.sample(&env);
    assert_eq!(base.checksum(), first.checksum());
    assert!(
        first.stderr.contains("auto mode: no plan"),
        "{}",
        first.stderr
    );
    assert!(
        first.stderr.contains("plan") && first.stderr.contains("written"),
        "{}",
        first.stderr
    );
    let plans: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("plan.json"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(plans.len(), 1, "one plan in the cache");
    assert_eq!(
        std::fs::metadata(&plans[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!read_plan(&plans[0]).groups.is_empty());

    let second = f.sample(&env);
    assert_eq!(base.checksum(), second.checksum());
    let text = std::fs::read_to_string(&stats).unwrap();
    let all: Vec<Stats> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all.len(), 2, "{text}");
    assert_eq!(all[0].mode, "profile");
    assert_eq!(all[1].mode, "enforce");
    assert_eq!(all[1].plan_status, "applied");
    assert!(
        all[1].groups_applied > 0 && all[1].copies_elided > 0,
        "{:?}",
        all[1]
    );
}

// ------------------------------------------------------------------ bind, map and free orders

/// Profile, analyze and enforce `echo-order --order ORDER` under the validation layer: identical
/// output, no validation message, and the statistics.
fn ordered(order: &str) -> Stats {
    let f = Flow::order(order);
    let base = f.sample(&[]);
    assert_eq!(base.json()["mismatches"], 0);
    let (_, plan) = f.profile_and_analyze();
    assert_eq!(
        read_plan(&plan).groups.len(),
        1,
        "{order}: one group (up, down) around d"
    );
    let (run, s) = f.enforce(&plan, &validation_env());
    assert_eq!(base.checksum(), run.checksum(), "{order}: output changed");
    assert_eq!(run.json()["mismatches"], 0);
    let msgs = run.validation_messages();
    assert!(msgs.is_empty(), "{order}: validation:\n{}", msgs.join("\n"));
    s
}

/// Both staging buffers are bound before the device buffer has memory: their binds are held
/// back, then aliased when the device buffer is bound.
#[test]
fn staging_bound_before_device_is_deferred_then_aliased() {
    let s = ordered("host-late");
    assert_eq!(s.groups_applied, 1, "{:?}", s.not_applied);
    assert_eq!((s.binds_redirected, s.maps_redirected), (2, 2));
    assert_eq!(s.copies_elided, 6);
}

/// The device buffer and its memory are freed while the readback staging buffer (aliased into
/// that memory) is still read: the free is deferred until the staging buffer is destroyed.
#[test]
fn free_of_memory_a_partner_lives_in_is_deferred() {
    let s = ordered("free-early");
    assert_eq!(s.groups_applied, 1, "{:?}", s.not_applied);
    assert_eq!(s.frees_deferred, 1);
}

/// The upload buffer is mapped and written before the device buffer has memory, and stays
/// mapped: when the device buffer is bound the application still holds a pointer into the upload
/// buffer's own allocation, which enforce cannot serve from the shared memory. Issue 36: the
/// analysis says so (the same check, `apply::check_staging_mapping`) and plans the readback member
/// alone, which enforce applies in full — before, the plan held both, and enforce reported the
/// group "not applied" while it aliased the readback member and elided its copies.
#[test]
fn staging_used_before_its_partner_is_bound_as_asked() {
    let f = Flow::order("map-early");
    let (_, plan) = f.profile_and_analyze();
    let p = read_plan(&plan);
    assert_eq!(p.groups.len(), 1, "{:#?}", p.rejected);
    assert_eq!(p.groups[0].members.len(), 1);
    assert_eq!(p.groups[0].members[0].role, Role::Readback);
    assert_eq!(p.rejected.len(), 1, "{:#?}", p.rejected);
    assert!(
        p.rejected[0]
            .plain
            .contains(echo_analyzer::apply::MAPPED_BY_APPLICATION),
        "{:#?}",
        p.rejected
    );
    let s = ordered("map-early");
    assert_eq!(s.groups_applied, 1, "{:?}", s.not_applied);
    assert!(s.not_applied.is_empty() && s.partly_applied.is_empty());
    assert_eq!(s.binds_redirected, 1);
    assert_eq!(s.copies_elided, 3);
    assert!(s.members.iter().all(|m| m.applied) && s.members.len() == 1);
}

#[test]
fn normal_order_aliases_both_staging_buffers() {
    let s = ordered("normal");
    assert_eq!(s.groups_applied, 1);
    assert_eq!(
        (s.binds_redirected, s.maps_redirected, s.frees_deferred),
        (2, 2, 0)
    );
}

/// `host_writes` (issues 45 and 54): saxpy uploads `y` every iteration and its kernel rewrites
/// `y` in place. Without exact host writes (`VK_ECHO_EXACT_WRITES=0`) echo cannot see whether
/// each host write rewrites all of `y`, so by default (`any`) the upload member of `y` is refused
/// — S1, naming the bytes the host may not have written — while the `x` upload and the `y`
/// readback stay applied and the output stays the program's. With exact host writes (the default)
/// profile sees every store of each write cover all of `y`, and every member is applied, as with
/// the user's vouch (`whole`); the output stays the program's.
#[test]
fn an_in_place_upload_is_applied_by_default_once_its_writes_are_seen_whole() {
    let f = Flow::new("saxpy", SIZE_KIB);
    let base = f.sample(&[]);
    let analyze = |name: &str, exact: &str| {
        let trace = f.dir.join(format!("{name}.jsonl"));
        let t = trace.display().to_string();
        f.vkecho(
            &["profile", "--trace", &t],
            &[
                ("VK_ECHO_MIN_BYTES", "4096"),
                ("VK_ECHO_HOST_WRITES", "any"),
                ("VK_ECHO_EXACT_WRITES", exact),
            ],
        )
        .json();
        let plan = f.dir.join(format!("{name}.plan.json"));
        let out = Command::new(vkecho())
            .args(["analyze", &t, "-o"])
            .arg(&plan)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        (plan, text)
    };
    let (plan, text) = analyze("any", "0");
    let p = read_plan(&plan);
    let members: usize = p.groups.iter().map(|g| g.members.len()).sum();
    assert_eq!(members, 2, "x's upload and y's readback stay: {text}");
    assert_eq!(p.rejected.len(), 1, "{text}");
    assert!(
        p.rejected[0].message.contains("where it did not write"),
        "{:?}",
        p.rejected[0]
    );
    let (run, s) = f.enforce(&plan, &[]);
    assert_eq!(base.checksum(), run.checksum());
    assert_eq!(s.groups_applied, s.groups_planned);
    // Exact host writes, the default: every member, and the program's output.
    let (plan, text) = analyze("exact", "1");
    let p = read_plan(&plan);
    let members: usize = p.groups.iter().map(|g| g.members.len()).sum();
    assert_eq!(members, 3, "{text}");
    let (run, s) = f.enforce(&plan, &[]);
    assert_eq!(base.checksum(), run.checksum());
    assert_eq!(s.groups_applied, s.groups_planned);
    // The vouch: every member.
    let (_, vouched) = f.profile_and_analyze();
    let p = read_plan(&vouched);
    assert_eq!(p.groups.iter().map(|g| g.members.len()).sum::<usize>(), 3);
}
