//! The auto coordinator (issue 25): the only place that knows both modes exist. Auto mode is
//! profile → analyze → write the plan → enforce on the next run; this module decides which, per
//! context and process, starts profile mode or enforce for an active device, and makes the plans
//! at the checkpoint (the last instance destroyed) and at exit. Below it, `crate::profile` and
//! `crate::enforce` never import each other; they meet only in `crate::hostmem` (below) and
//! here (above).
//!
//! - **Auto mode decides once per context and process.** The first device of a context (program,
//!   arguments, physical device) decides: profile (no plan yet) or enforce. Later devices of the
//!   same context in the same process follow that decision even if a plan appears meanwhile (a
//!   checkpoint writes one at `vkDestroyInstance`), so one run never mixes the two.
//! - **Exit.** Many programs never call `vkDestroyDevice` or `vkDestroyInstance`. The exit path
//!   ([`crate::lifetime`] runs it at `atexit`) finishes everything in order: the last host-access
//!   window of every live device goes into the trace, every live device's statistics are
//!   written, the trace is finished (the writer thread is still running at `atexit` time; the
//!   wait is bounded), auto mode's plans are made, and the caches bounded. It makes no Vulkan
//!   call: the driver may already be tearing down.
//! - **Checkpoint.** When the last instance is destroyed the trace is flushed and auto mode's plan
//!   written from what was recorded so far; exit writes it again only if more was recorded.

use crate::dispatch::{self, DeviceData};
use crate::enforce::Start;
use crate::log;
use echo_analyzer::plan::Plan;
use echo_analyzer::settings::Settings;
use echo_analyzer::settings::{ContextMode, Mode};
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::Context;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// What auto mode decided for a context in this process (keyed by the context's plan path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AutoChoice {
    /// No plan existed: profile into this trace; the plan is made at the checkpoint and at exit.
    Profile { trace: PathBuf },
    /// A plan existed: enforce it.
    Enforce,
}

struct AutoProfile {
    trace: PathBuf,
    plan: PathBuf,
    settings: Settings,
    /// `context=program`: the program's plan before this run's profile, to merge into.
    base: Option<echo_analyzer::plan::Plan>,
    /// The sequence counter when the plan was last written (0: never).
    analyzed_at: u64,
    /// The plan was written (at the checkpoint or at exit).
    written: bool,
}

#[derive(Default)]
struct Auto {
    choices: HashMap<PathBuf, AutoChoice>,
    profiles: Vec<AutoProfile>,
}

fn auto() -> MutexGuard<'static, Auto> {
    static A: OnceLock<Mutex<Auto>> = OnceLock::new();
    let m = A.get_or_init(|| Mutex::new(Auto::default()));
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// This process's decision for the context whose plan lives at `plan`, if one was made.
pub fn auto_choice(plan: &Path) -> Option<AutoChoice> {
    auto().choices.get(plan).cloned()
}

/// Records the decision for `plan`'s context (the first one stays); a profile decision is
/// remembered so that its plan is made later. Returns the decision in force.
pub fn set_auto_choice(
    plan: &Path,
    choice: AutoChoice,
    settings: &Settings,
    base: Option<echo_analyzer::plan::Plan>,
) -> AutoChoice {
    let mut a = auto();
    if let Some(c) = a.choices.get(plan) {
        return c.clone();
    }
    if let AutoChoice::Profile { trace } = &choice {
        a.profiles.push(AutoProfile {
            trace: trace.clone(),
            plan: plan.to_path_buf(),
            settings: settings.clone(),
            base,
            analyzed_at: 0,
            written: false,
        });
        crate::lifetime::note_cache_write(settings, &[plan, trace]);
    }
    a.choices.insert(plan.to_path_buf(), choice.clone());
    choice
}

/// Registers the exit path with [`crate::lifetime`] and its `atexit` handler (called for every
/// instance echo is active in).
pub fn ensure_exit_hook() {
    crate::lifetime::on_exit(on_exit);
    crate::lifetime::ensure_exit_hook();
}

/// The exit-time path (see the module documentation).
fn on_exit() {
    let live = dispatch::live_devices();
    for d in &live {
        if let Some(p) = d.profile() {
            p.on_exit();
        }
    }
    for d in &live {
        finish_device(d, "exit");
    }
    if let Some(s) = crate::profile::sink::global() {
        s.finish();
    }
    let analyzed = write_auto_plans(true);
    crate::lifetime::bound_caches(&analyzed);
}

/// `vkDestroyInstance` of the last live instance: flush the trace and write auto mode's plans
/// from what was recorded so far.
pub fn checkpoint() {
    if let Some(s) = crate::profile::sink::global() {
        s.flush();
    }
    write_auto_plans(false);
}

/// Makes the plan of every context auto mode profiled, unless nothing was recorded since the
/// last time. `at_exit`: the trace is finished. Returns the cache's own traces (no `trace`
/// setting) whose plans have been written, now or at a checkpoint.
fn write_auto_plans(at_exit: bool) -> Vec<PathBuf> {
    let now = crate::profile::sink::current_seq();
    type Todo = (
        PathBuf,
        PathBuf,
        Settings,
        Option<echo_analyzer::plan::Plan>,
    );
    let todo: Vec<Todo> = {
        let mut a = auto();
        a.profiles
            .iter_mut()
            .filter(|p| p.analyzed_at < now)
            .map(|p| {
                p.analyzed_at = now;
                (
                    p.trace.clone(),
                    p.plan.clone(),
                    p.settings.clone(),
                    p.base.clone(),
                )
            })
            .collect()
    };
    for (trace, plan, settings, base) in todo {
        let written = finish_auto(&trace, &plan, &settings, base.as_ref());
        if at_exit {
            log::debug!("auto mode: plan {} made at exit", plan.display());
        }
        if written {
            if let Some(p) = auto().profiles.iter_mut().find(|p| p.plan == plan) {
                p.written = true;
            }
        }
    }
    let mut analyzed = Vec::new();
    for p in auto().profiles.iter() {
        if p.written && p.settings.trace.is_none() && !analyzed.contains(&p.trace) {
            analyzed.push(p.trace.clone());
        }
    }
    analyzed
}

/// `vkCreateDevice` glue, after the device record exists, for an active device in enforce or
/// auto mode: auto mode's choice (profile into the cache's trace, or enforce the plan there),
/// then the [`Start`] is installed.
pub fn on_create_device(dev: &DeviceData) {
    if !dev.is_active() || !matches!(dev.decision.mode, Mode::Enforce | Mode::Auto) {
        return;
    }
    let auto_plan = if dev.decision.mode == Mode::Auto {
        let Some(inst) = dev.instance.as_ref() else {
            return;
        };
        let ctx = crate::context::gather(inst, dev.physical_device);
        match choose(&dev.settings, &ctx) {
            Err(profile) => {
                let _ = dev.enforce.set(start_profile(dev, profile));
                return;
            }
            Ok(p) => Some(p),
        }
    } else {
        None
    };
    let s = crate::enforce::on_create_device(dev, auto_plan);
    let _ = dev.enforce.set(s);
}

/// Auto mode's choice for this context: `Ok(plan)` to enforce, `Err(Start::Profile)` to profile.
fn choose(settings: &Settings, ctx: &Context) -> Result<PathBuf, Start> {
    let (trace_path, cached_plan) = crate::enforce::cache_entry(settings, ctx);
    let p = settings.plan.clone().unwrap_or(cached_plan);
    // One decision per context and process (`crate::coordinator`): later devices of this
    // run follow the first one's, even once a checkpoint has written a plan.
    let choice = auto_choice(&p).unwrap_or_else(|| {
        let profile = || AutoChoice::Profile {
            trace: settings.trace.clone().unwrap_or(trace_path),
        };
        // A guarded run that could not keep the program's semantics marked the plan
        // untrusted: profile again (the fresh plan removes the marker).
        let untrusted = crate::enforce::guard::untrusted_marker(&p);
        let untrusted = p.exists() && untrusted.exists() && {
            log::info!(
                "auto mode: {} says a guarded run could not keep the program's semantics; profiling again",
                untrusted.display()
            );
            true
        };
        // `context=program`: a plan made under other arguments is profiled again until
        // it is stable (`echo_analyzer::program`); the new profile merges into it.
        let (c, base) = if !p.exists() || untrusted {
            (profile(), None)
        } else if settings.context == ContextMode::Program {
            match crate::enforce::load_plan_in(&p, ctx, settings.context) {
                Ok(plan)
                    if echo_analyzer::program::auto_should_profile(
                        &plan,
                        &ctx.args_hash,
                    ) =>
                {
                    log::info!(
                        "auto mode (context=program): the plan {} is not stable yet and these arguments were not profiled; profiling them",
                        p.display()
                    );
                    (profile(), Some(plan))
                }
                _ => (AutoChoice::Enforce, None),
            }
        } else {
            (AutoChoice::Enforce, None)
        };
        set_auto_choice(&p, c, settings, base)
    });
    match choice {
        AutoChoice::Profile { trace } => {
            log::info!(
                "auto mode: no plan for this program and device at {}; profiling into {} (the plan is made when the last instance is destroyed, or at exit)",
                p.display(),
                trace.display()
            );
            Err(Start::Profile { trace, plan: p })
        }
        AutoChoice::Enforce => {
            log::info!("auto mode: enforcing the plan {}", p.display());
            Ok(p)
        }
    }
}

/// Auto mode without a plan: profile this device into the context's trace (one trace per
/// process: a second context passes through).
fn start_profile(dev: &DeviceData, profile: Start) -> Start {
    let Start::Profile { trace, .. } = &profile else {
        return profile;
    };
    if let Some(other) = crate::profile::sink::global()
        .and_then(|g| g.path())
        .filter(|p| *p != trace.as_path())
    {
        log::warn!(
            "auto mode: this process already profiles another device context into {}; device '{}' passes through unchanged",
            other.display(),
            dev.decision.name
        );
        return Start::Passthrough {
            plan: None,
            why: format!(
                "auto mode: the process already profiles another context into {}",
                other.display()
            ),
        };
    }
    if !profile_device(dev, Some(trace)) {
        return Start::Passthrough {
            plan: None,
            why: "auto mode: profiling could not start".into(),
        };
    }
    profile
}

/// `auto` mode when the last instance is destroyed and at exit: analyze the
/// trace recorded so far and write the plan (0600, atomic rename) for the next run. Returns
/// whether the plan was written.
pub fn finish_auto(
    trace: &Path,
    plan_path: &Path,
    settings: &Settings,
    base: Option<&Plan>,
) -> bool {
    if let Some(s) = crate::profile::sink::global() {
        s.flush();
    }
    let file = match std::fs::File::open(trace) {
        Ok(f) => f,
        Err(e) => {
            log::warn!(
                "auto mode: cannot read the trace {} ({e}); no plan made",
                trace.display()
            );
            return false;
        }
    };
    let t = match echo_analyzer::trace::read_trace(std::io::BufReader::new(file)) {
        Ok(t) => t,
        Err(e) => {
            log::warn!("auto mode: trace {}: {e}; no plan made", trace.display());
            return false;
        }
    };
    let thresholds = echo_analyzer::plan::Thresholds {
        min_bytes: settings.min_bytes,
        min_copies: settings.min_copies,
    };
    let mut plan = echo_analyzer::analysis::analyze(&t, thresholds);
    if settings.context == ContextMode::Program {
        // Argument lists are evidence: merge into the program's plan so far.
        plan = match base {
            Some(b) => echo_analyzer::program::merge(b, &plan),
            None => echo_analyzer::program::first(plan),
        };
    }
    match crate::enforce::write_private(plan_path, plan.to_json().as_bytes()) {
        Ok(()) => {
            let _ = std::fs::remove_file(crate::enforce::guard::untrusted_marker(plan_path));
            log::info!(
                "auto mode: plan {} written ({}, {} rejected); later runs enforce it",
                plan_path.display(),
                echo_analyzer::words::plural(plan.groups.len() as u64, "group", "groups"),
                echo_analyzer::words::plural(plan.rejected.len() as u64, "candidate", "candidates")
            );
            true
        }
        Err(e) => {
            log::warn!(
                "auto mode: cannot write the plan {}: {e}",
                plan_path.display()
            );
            false
        }
    }
}

// ------------------------------------------------------------------ statistics (both modes)

/// `vkDestroyDevice` glue, before the call goes down: deferred frees, then the statistics.
pub fn on_destroy_device(dev: &DeviceData) {
    if let Some(e) = dev.enforce() {
        e.device_destroyed(dev);
    }
    finish_device(dev, "destroyed");
}

/// The statistics of a device, once (the `stats` setting, and a summary line at `info`), when it
/// is destroyed or, for a device the program never destroyed, at exit (`ended` says which).
/// Auto mode's plan is not made here but when the last instance goes, or at exit
/// (`crate::coordinator`): a later device of the process may still be profiled.
pub fn finish_device(dev: &DeviceData, ended: &str) {
    if !crate::lifetime::claim_stats(dev) {
        return;
    }
    let mut stats = device_stats(dev);
    stats.ended = ended.into();
    if dev.enforce().is_some() {
        log::info!("{}", stats.summary());
        for line in stats.group_lines() {
            log::info!("  {line}");
        }
    }
    if let Some(p) = &dev.settings.stats {
        crate::enforce::write_stats(p, &stats);
    }
    record_run(dev, &stats);
}

/// The cache's record of this device's run (`echo_analyzer::cache::record_run`, for `vkecho
/// report`): written in auto mode, and in other modes where the cache already exists; never
/// creates a cache otherwise.
fn record_run(dev: &DeviceData, stats: &Stats) {
    let dir = &dev.settings.cache_dir;
    if dev.decision.mode == Mode::Auto {
        let _ = echo_analyzer::cache::ensure_tag(dir);
    }
    if !echo_analyzer::cache::is_tagged(dir) {
        return;
    }
    let program = std::fs::read_link("/proc/self/exe")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let rec = echo_analyzer::cache::RunRecord {
        unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        program,
        pid: std::process::id(),
        layer_version: env!("CARGO_PKG_VERSION").into(),
        stats: stats.clone(),
        warnings: log::recent_warnings(),
    };
    if let Err(e) = echo_analyzer::cache::record_run(dir, &rec, echo_analyzer::cache::RUNS_KEPT) {
        log::debug!("cache: cannot record the run in {}: {e}", dir.display());
    }
}

/// The statistics record of a device.
pub fn device_stats(dev: &DeviceData) -> Stats {
    let mut s = match dev.enforce() {
        Some(e) => e.stats(),
        None => Stats::default(),
    };
    s.device = dev.decision.name.clone();
    s.device_index = dev.index;
    for m in &mut s.members {
        m.device_index = dev.index;
    }
    s.class = dev.decision.topology.class.to_string();
    s.active = dev.is_active();
    let profiling = dev.profile().is_some();
    s.mode = if !dev.decision.active {
        "off".into()
    } else if profiling {
        "profile".into()
    } else {
        match dev.decision.mode {
            Mode::Enforce | Mode::Auto => "enforce".into(),
            Mode::Profile => "profile".into(),
            Mode::Off => "off".into(),
        }
    };
    match dev.enforce.get() {
        Some(Start::Enforce(e)) => {
            s.plan = Some(e.plan_path.display().to_string());
            s.plan_status = "applied".into();
        }
        Some(Start::Passthrough { plan, why }) => {
            s.plan = plan.as_ref().map(|p| p.display().to_string());
            s.plan_status = why.clone();
        }
        Some(Start::Profile { trace, plan }) => {
            s.plan = Some(plan.display().to_string());
            s.plan_status =
                "none: auto mode profiled this run (the plan is written at exit)".into();
            s.trace = Some(trace.display().to_string());
        }
        None => s.plan_status = "none".into(),
    }
    if dev.failed.load(std::sync::atomic::Ordering::Relaxed) {
        s.errors
            .push("an internal error turned this device to passthrough".into());
    }
    s
}

/// Starts profiling `dev` (profile mode at `vkCreateDevice`, and auto mode without a plan) and
/// keeps its recorder in the device's record; whether it runs.
pub fn profile_device(dev: &DeviceData, trace: Option<&Path>) -> bool {
    if dev.profile.get().is_some() {
        return true;
    }
    match crate::profile::start(dev, trace) {
        Some(p) => {
            let _ = dev.profile.set(p);
            true
        }
        None => false,
    }
}
