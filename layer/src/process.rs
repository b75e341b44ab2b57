//! The process around the devices (issue 11): what outlives one `VkDevice` or `VkInstance`.
//!
//! - **Device indices.** Every device created through echo gets the next index (0, 1, …) in
//!   creation order. Profile mode files each trace record under its device's index; a plan's
//!   groups carry the index they came from, and enforce applies to device `i` only the groups of
//!   device `i` — a test suite that creates 100 devices gets 100 separately traced devices, never
//!   the first device's plan on the others.
//! - **Auto mode decides once per context and process.** The first device of a context (program,
//!   arguments, physical device) decides: profile (no plan yet) or enforce. Later devices of the
//!   same context in the same process follow that decision even if a plan appears meanwhile (a
//!   checkpoint writes one at `vkDestroyInstance`), so one run never mixes the two.
//! - **Exit.** Many programs never call `vkDestroyDevice` or `vkDestroyInstance`. One `atexit`
//!   handler, registered at the first active instance (so mode off costs nothing), finishes
//!   everything in order: the last host-access window of every live device goes into the trace,
//!   every live device's statistics are written, the trace is finished (the writer thread is
//!   still running at `atexit` time; the wait is bounded), and auto mode's plans are made. The
//!   layer is linked `-z nodelete`, so this code is still mapped then. It makes no Vulkan call:
//!   the driver may already be tearing down.
//! - **Checkpoint.** When the last instance is destroyed the trace is flushed and auto mode's plan
//!   written from what was recorded so far; exit writes it again only if more was recorded.
//! - **Bounded cache** (issue 16). A process that wrote into a `cache_dir` (auto mode profiling,
//!   or profile mode's default trace) registers it ([`note_cache_write`]); at exit, after the
//!   plans are made, `echo_analyzer::cache::finish_run` deletes the traces whose plans were made
//!   (unless `keep_traces`) and evicts least-recently-used entries down to `cache_max_bytes`,
//!   never what this process wrote. Not at the checkpoint: the trace may still grow.

use crate::dispatch::{self, DeviceData};
use crate::log;
use echo_analyzer::settings::Settings;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};

static NEXT_DEVICE: AtomicU32 = AtomicU32::new(0);
static EXITING: AtomicBool = AtomicBool::new(false);

/// The exit-time path is running: code that may run on it avoids unbounded waits on locks.
pub fn exiting() -> bool {
    EXITING.load(Ordering::Relaxed)
}

/// The creation index of the next device.
pub fn next_device_index() -> u32 {
    NEXT_DEVICE.fetch_add(1, Ordering::Relaxed)
}

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

/// A cache directory this process wrote into, and how it is bounded.
struct CacheUse {
    dir: PathBuf,
    max_bytes: u64,
    keep_traces: bool,
    /// What this process wrote or used there: never evicted by it.
    protect: Vec<PathBuf>,
}

#[derive(Default)]
struct Auto {
    choices: HashMap<PathBuf, AutoChoice>,
    profiles: Vec<AutoProfile>,
    caches: Vec<CacheUse>,
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
        note_cache_write_locked(&mut a, settings, &[plan, trace]);
    }
    a.choices.insert(plan.to_path_buf(), choice.clone());
    choice
}

/// This process writes `paths` into `settings.cache_dir` (paths outside it are ignored): the
/// directory gets its tag now, and is bounded at exit.
pub fn note_cache_write(settings: &Settings, paths: &[&Path]) {
    note_cache_write_locked(&mut auto(), settings, paths);
}

fn note_cache_write_locked(a: &mut Auto, settings: &Settings, paths: &[&Path]) {
    let dir = &settings.cache_dir;
    let inside: Vec<PathBuf> = paths
        .iter()
        .filter(|p| p.starts_with(dir))
        .map(|p| p.to_path_buf())
        .collect();
    if inside.is_empty() {
        return;
    }
    let i = match a.caches.iter().position(|c| &c.dir == dir) {
        Some(i) => i,
        None => {
            if let Err(e) = echo_analyzer::cache::ensure_tag(dir) {
                log::warn!("cache {}: {e}", dir.display());
            }
            a.caches.push(CacheUse {
                dir: dir.clone(),
                max_bytes: settings.cache_max_bytes,
                keep_traces: settings.keep_traces,
                protect: Vec::new(),
            });
            a.caches.len() - 1
        }
    };
    a.caches[i].protect.extend(inside);
}

/// Registers the exit-time path once (called for every instance echo is active in).
pub fn ensure_exit_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        extern "C" fn at_exit() {
            // Nothing may unwind into libc.
            let _ = std::panic::catch_unwind(on_exit);
        }
        // SAFETY: registering a handler has no preconditions; the library is never unloaded
        // (-z nodelete), so the handler stays mapped.
        unsafe {
            libc::atexit(at_exit);
        }
    });
}

/// The exit-time path (see the module documentation).
fn on_exit() {
    EXITING.store(true, Ordering::Relaxed);
    let live = dispatch::live_devices();
    for d in &live {
        if let Some(p) = d.profile() {
            p.on_exit();
        }
    }
    for d in &live {
        crate::enforce::finish_device(d, "exit");
    }
    if let Some(s) = crate::profile::sink::global() {
        s.finish();
    }
    let analyzed = write_auto_plans(true);
    bound_caches(&analyzed);
}

/// The exit-time end of every cache this process wrote into: analyzed traces deleted, the rest
/// evicted down to the limit (`echo_analyzer::cache::finish_run`).
fn bound_caches(analyzed: &[PathBuf]) {
    let caches: Vec<(PathBuf, u64, bool, Vec<PathBuf>)> = {
        let a = auto();
        a.caches
            .iter()
            .map(|c| (c.dir.clone(), c.max_bytes, c.keep_traces, c.protect.clone()))
            .collect()
    };
    for (dir, max_bytes, keep_traces, protect) in caches {
        let run = echo_analyzer::cache::RunOutcome {
            analyzed_traces: analyzed
                .iter()
                .filter(|t| t.starts_with(&dir))
                .cloned()
                .collect(),
            // The analyzed traces are this run's to delete, not to protect.
            protect: protect
                .into_iter()
                .filter(|p| !analyzed.contains(p))
                .collect(),
        };
        let ev = echo_analyzer::cache::finish_run(&dir, &run, max_bytes, keep_traces);
        for (name, bytes) in &ev.removed {
            log::debug!("cache {}: removed {name} ({bytes} bytes)", dir.display());
        }
        if !ev.removed.is_empty() {
            log::info!(
                "cache {}: {} entr{} removed, {} bytes left (limit {max_bytes})",
                dir.display(),
                ev.removed.len(),
                if ev.removed.len() == 1 { "y" } else { "ies" },
                ev.bytes_left
            );
        }
    }
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
        let written = crate::enforce::finish_auto(&trace, &plan, &settings, base.as_ref());
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

/// Whether a device's statistics are already out (at `vkDestroyDevice` or at exit).
pub fn claim_stats(d: &DeviceData) -> bool {
    !d.stats_written.swap(true, Ordering::AcqRel)
}
