//! The process around the devices, below both modes (issue 11, issue 25): what outlives one
//! `VkDevice` or `VkInstance` and knows nothing of either mode.
//!
//! - **Device indices.** Every device created through echo gets the next index (0, 1, …) in
//!   creation order. Profile mode files each trace record under its device's index; a plan's
//!   groups carry the index they came from, and enforce applies to device `i` only the groups of
//!   device `i`.
//! - **Exit.** One `atexit` handler, registered at the first active instance (so mode off costs
//!   nothing), runs the exit path the coordinator registered ([`on_exit`]; `crate::coordinator`
//!   finishes traces, statistics and auto mode's plans there). The layer is linked
//!   `-z nodelete`, so this code is still mapped then.
//! - **Bounded cache** (issue 16). A process that wrote into a `cache_dir` (auto mode profiling,
//!   or profile mode's default trace) registers it ([`note_cache_write`]); at exit, after the
//!   plans are made, [`bound_caches`] runs `echo_analyzer::cache::finish_run`: the traces whose
//!   plans were made are deleted (unless `keep_traces`) and least-recently-used entries evicted
//!   down to `cache_max_bytes`, never what this process wrote.

use crate::log;
use crate::records::Device;
use echo_analyzer::settings::Settings;
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

/// Whether a device's statistics are already out (at `vkDestroyDevice` or at exit).
pub fn claim_stats(d: &Device) -> bool {
    !d.stats_written.swap(true, Ordering::AcqRel)
}

/// A cache directory this process wrote into, and how it is bounded.
struct CacheUse {
    dir: PathBuf,
    max_bytes: u64,
    keep_traces: bool,
    /// What this process wrote or used there: never evicted by it.
    protect: Vec<PathBuf>,
}

fn caches() -> MutexGuard<'static, Vec<CacheUse>> {
    static C: OnceLock<Mutex<Vec<CacheUse>>> = OnceLock::new();
    let m = C.get_or_init(|| Mutex::new(Vec::new()));
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process writes `paths` into `settings.cache_dir` (paths outside it are ignored): the
/// directory gets its tag now, and is bounded at exit.
pub fn note_cache_write(settings: &Settings, paths: &[&Path]) {
    let dir = &settings.cache_dir;
    let inside: Vec<PathBuf> = paths
        .iter()
        .filter(|p| p.starts_with(dir))
        .map(|p| p.to_path_buf())
        .collect();
    if inside.is_empty() {
        return;
    }
    let mut a = caches();
    let i = match a.iter().position(|c| &c.dir == dir) {
        Some(i) => i,
        None => {
            if let Err(e) = echo_analyzer::cache::ensure_tag(dir) {
                log::warn!("cache {}: {e}", dir.display());
            }
            a.push(CacheUse {
                dir: dir.clone(),
                max_bytes: settings.cache_max_bytes,
                keep_traces: settings.keep_traces,
                protect: Vec::new(),
            });
            a.len() - 1
        }
    };
    a[i].protect.extend(inside);
}

static EXIT_PATH: OnceLock<fn()> = OnceLock::new();

/// The exit path to run at `atexit` (the coordinator's; the first registration wins).
pub fn on_exit(f: fn()) {
    let _ = EXIT_PATH.set(f);
}

/// Registers the `atexit` handler once (called for every instance echo is active in).
pub fn ensure_exit_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        extern "C" fn at_exit() {
            EXITING.store(true, Ordering::Relaxed);
            // Nothing may unwind into libc.
            if let Some(f) = EXIT_PATH.get() {
                let _ = std::panic::catch_unwind(f);
            }
        }
        // SAFETY: registering a handler has no preconditions; the library is never unloaded
        // (-z nodelete), so the handler stays mapped.
        unsafe {
            libc::atexit(at_exit);
        }
    });
}

/// The exit-time end of every cache this process wrote into: analyzed traces deleted, the rest
/// evicted down to the limit (`echo_analyzer::cache::finish_run`).
pub fn bound_caches(analyzed: &[PathBuf]) {
    let caches: Vec<(PathBuf, u64, bool, Vec<PathBuf>)> = {
        caches()
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
