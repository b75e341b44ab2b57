//! Enforce mode (DESIGN §6): apply a plan the analyzer made.
//!
//! - [`start`] (at `vkCreateDevice`): find the plan (the `plan` setting, else the cache entry of
//!   this context), refuse it with one warning when it is unsafe to read, corrupt, of another
//!   version or another context, or turned off by calibration. Auto mode's choice (profile or
//!   enforce) is the coordinator's (`crate::coordinator`), above both modes.
//! - [`Enforcer`] (`enforcer/`, the type and all its `impl`): binds planned buffers into their
//!   partner's memory (both directions), redirects maps of staging allocations, defers binds
//!   until the partner is bound (first use at the latest) and frees while a guest still lives in
//!   the memory; drops self-copy regions and records one substitute barrier in their place
//!   (`enforcer/copy.rs`); its events from the chassis (`enforcer/enforce_mode.rs`).
//! - `guard/`: the runtime guard of guarded enforce (`Guard`, its events in `guard_mode.rs`).
//! - [`Enforcer::stats`]: what was done, written at `vkDestroyDevice` ([`write_stats`]).
//!
//! Every decision (which buffer plays which role, whether a redirected bind fits) is
//! `echo_analyzer::apply`'s; this module makes the Vulkan calls.

mod enforcer;
pub mod guard;

pub use enforcer::Enforcer;

use crate::log;
use crate::records::{Decision, Device, InstanceData};
use ash::vk;
use echo_analyzer::apply::PlanIndex;
use echo_analyzer::context::{cache_paths_for, legacy_cache_paths_for, plan_applies_in};
use echo_analyzer::plan::{parse_plan, Plan};
use echo_analyzer::settings::ContextMode;
use echo_analyzer::settings::{Mode, Settings};
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::Context;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Plans larger than this are not read (a plan is a few KiB).
const MAX_PLAN_BYTES: u64 = 64 << 20;

/// What a device does, decided at `vkCreateDevice` for `enforce` and `auto` mode.
pub enum Start {
    /// Apply this plan.
    Enforce(Box<Enforcer>),
    /// `auto` without a plan for this context: profile into `trace`, analyze into `plan` when the
    /// device is destroyed.
    Profile { trace: PathBuf, plan: PathBuf },
    /// Pass through; the reason goes into the statistics (`plan_status`).
    Passthrough { plan: Option<PathBuf>, why: String },
}

/// Reads and checks the plan at `path` for context `now`. The error is one sentence.
#[cfg(test)]
pub fn load_plan(path: &Path, now: &Context) -> Result<Plan, String> {
    load_plan_in(path, now, ContextMode::Arguments)
}

/// [`load_plan`] under a `context` setting (`program`: the arguments may differ).
pub fn load_plan_in(path: &Path, now: &Context, mode: ContextMode) -> Result<Plan, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("plan {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("plan {shown} is not a regular file"));
    }
    // DESIGN §8 hardening: a plan decides where memory is bound; only its owner may write it.
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "plan {shown} is writable by group or others (mode {:o}); not used (chmod go-w it)",
            meta.permissions().mode() & 0o777
        ));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "plan {shown} belongs to uid {}, not to this user ({me}) or root; not used",
            meta.uid()
        ));
    }
    if meta.len() > MAX_PLAN_BYTES {
        return Err(format!("plan {shown} is {} bytes; not a plan", meta.len()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("plan {shown}: {e}"))?;
    let plan = parse_plan(&text).map_err(|e| format!("plan {shown}: {e}"))?;
    plan_applies_in(&plan.context, now, mode).map_err(|e| format!("plan {shown} not used: {e}"))?;
    Ok(plan)
}

/// The cache entry of this context: `(trace, plan)` paths. A cache written before issue 27
/// keyed its entries by the device UUID: its plans (whose context names that UUID,
/// `plan_applies_in`) are still found and used.
pub fn cache_entry(settings: &Settings, ctx: &Context) -> (PathBuf, PathBuf) {
    let (trace, plan) = cache_paths_for(&settings.cache_dir, ctx, settings.context);
    if !plan.exists() {
        let (lt, lp) = legacy_cache_paths_for(&settings.cache_dir, ctx, settings.context);
        if lp.exists() {
            return (lt, lp);
        }
    }
    (trace, plan)
}

/// Enforce start-up for an active device (auto mode: with the plan the coordinator chose). `ctx` is this run's context.
/// `device_index` is the device's creation index in the process: only the plan's groups of that
/// device apply.
pub fn start(
    inst: &InstanceData,
    pd: vk::PhysicalDevice,
    decision: &Decision,
    settings: &Settings,
    ctx: &Context,
    device_index: u32,
    auto_plan: Option<PathBuf>,
) -> Start {
    let path = match decision.mode {
        Mode::Enforce => settings
            .plan
            .clone()
            .unwrap_or_else(|| cache_entry(settings, ctx).1),
        // Auto mode's choice is the coordinator's (`crate::coordinator`): here only the plan it
        // decided to enforce.
        Mode::Auto => match auto_plan {
            Some(p) => p,
            None => {
                return Start::Passthrough {
                    plan: None,
                    why: "auto mode: no plan chosen".into(),
                }
            }
        },
        _ => {
            return Start::Passthrough {
                plan: None,
                why: "not in enforce mode".into(),
            }
        }
    };
    let plan = match load_plan_in(&path, ctx, settings.context) {
        Ok(p) => p,
        Err(why) => {
            log::warn!("{why}; echo passes this device through unchanged");
            return Start::Passthrough {
                plan: Some(path),
                why: format!("refused: {why}"),
            };
        }
    };
    if path.starts_with(&settings.cache_dir) {
        // Least-recently-used eviction (`echo_analyzer::cache`) keeps what is in use.
        if let Err(e) = echo_analyzer::cache::touch(&path) {
            log::debug!("cache: cannot mark {} used: {e}", path.display());
        }
    }
    if !plan.enabled() {
        let c = plan.calibration.as_ref();
        log::info!(
            "plan {}: calibration disabled it (baseline {:.3} ms, plan {:.3} ms per loop); passthrough",
            path.display(),
            c.map_or(0.0, |c| c.baseline_ms_median),
            c.map_or(0.0, |c| c.plan_ms_median)
        );
        return Start::Passthrough {
            plan: Some(path),
            why: "refused: calibration found the plan no faster; disabled".into(),
        };
    }
    // Behaviour no profile observed (issue 22): under context=program with an argument list no
    // profile saw, only the groups whose unseen hazards the guard catches or that cannot meet
    // one go along (`echo_analyzer::safety::extrapolate`).
    let mut plan = plan;
    plan.groups.retain(|g| g.device_index == device_index);
    let observed = settings.context != ContextMode::Program
        || echo_analyzer::program::arguments_profiled(&plan, &ctx.args_hash);
    let left_out = echo_analyzer::program::extrapolate(&mut plan, observed, settings.guard_on());
    for (group, why) in &left_out {
        log::info!("plan {}: group {group} left out: {why}", path.display());
    }
    // Per-call classes (issue 24): past the instances profiled only where that cannot go wrong
    // unseen, or the guard catches it.
    plan.classes.retain(|c| c.device_index == device_index);
    for (_, why) in echo_analyzer::program::classes_beyond(&mut plan, settings.guard_on()) {
        log::info!("plan {}: {why}", path.display());
    }
    let (index, conflicts) = PlanIndex::for_device(plan, device_index);
    if !conflicts.is_empty() {
        log::warn!("plan {}: {}", path.display(), conflicts.join("; "));
    }
    let mut props = vk::PhysicalDeviceProperties::default();
    // SAFETY: pd belongs to this instance; the out struct is valid.
    unsafe { (inst.fp.get_physical_device_properties)(pd, &mut props) };
    let mut e = Enforcer::new(
        path,
        index,
        &decision.table,
        props.limits.non_coherent_atom_size,
    );
    e.left_out = left_out
        .into_iter()
        .map(|(group, reason)| echo_analyzer::stats::NotApplied { group, reason })
        .collect();
    let env = crate::settings::env_lookup(crate::settings::secure_execution());
    if env("VK_ECHO_TEST_KEEP_SELF_COPIES").is_some_and(|v| v == "1") {
        log::warn!(
            "VK_ECHO_TEST_KEEP_SELF_COPIES: self-copies are forwarded (invalid usage, for tests)"
        );
        e.keep_self_copies = true;
    }
    if env("VK_ECHO_TEST_NO_CARRY").is_some_and(|v| v == "1") {
        log::warn!("VK_ECHO_TEST_NO_CARRY: bytes written before a redirected bind are left behind (for tests)");
        e.skip_carry = true;
    }
    if env("VK_ECHO_TEST_LEAK_HANDLE").is_some_and(|v| v == "1") {
        log::warn!("VK_ECHO_TEST_LEAK_HANDLE: echo's own memory handles are passed down at unmap (invalid, for tests)");
        e.leak_handle = true;
    }
    log::info!(
        "enforce: plan {} with {} for this context",
        e.plan_path.display(),
        echo_analyzer::report::plural(e.groups_planned() as u64, "group", "groups")
    );
    Start::Enforce(Box::new(e))
}

/// `vkUpdateDescriptorSets`: buffers written into descriptors are used from now on, so a bind
/// still held back for one of them happens now.
///
/// # Safety
/// `writes` points to `count` valid descriptor writes (the application's arguments).
pub unsafe fn touch_writes(
    e: &Enforcer,
    dev: &Device,
    count: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
) {
    use ash::vk::Handle;
    if !e.has_pending() || count == 0 || writes.is_null() {
        return;
    }
    for w in std::slice::from_raw_parts(writes, count as usize) {
        if w.p_buffer_info.is_null() {
            continue;
        }
        if matches!(
            w.descriptor_type,
            vk::DescriptorType::UNIFORM_BUFFER
                | vk::DescriptorType::STORAGE_BUFFER
                | vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC
                | vk::DescriptorType::STORAGE_BUFFER_DYNAMIC
        ) {
            for b in std::slice::from_raw_parts(w.p_buffer_info, w.descriptor_count as usize) {
                e.touch(dev, b.buffer.as_raw());
            }
        }
    }
}

/// `vkCreateDevice` glue (through `crate::coordinator`), after the device record exists: enforce start-up for an active device in enforce mode, or in auto mode with the plan the
/// coordinator chose (`auto_plan`): the [`Start`] to install.
pub fn on_create_device(dev: &Device, auto_plan: Option<PathBuf>) -> Start {
    let Some(inst) = dev.instance.as_ref() else {
        return Start::Passthrough {
            plan: None,
            why: "no instance".into(),
        };
    };
    let ctx = crate::context::gather(inst, dev.physical_device);
    let mut s = start(
        inst,
        dev.physical_device,
        &dev.decision,
        &dev.settings,
        &ctx,
        dev.index,
        auto_plan,
    );
    if let Start::Enforce(e) = &mut s {
        if dev.settings.guard_on() {
            match guard::start(dev, &e.plan_path) {
                Ok(g) => {
                    log::info!("enforce: guarded enforce on (aliased memory is double-mapped and write-protected while the GPU may use it)");
                    e.guard = Some(g);
                }
                Err(why) => {
                    log::warn!("enforce: the guard setting is on but the guard cannot run on device '{}': {why}; its groups are refused (fail closed)", dev.decision.name);
                    e.guard_refused = Some(why);
                }
            }
        }
        // Allocations may be left unmade only where echo follows every command that takes one.
        e.set_memory_commands(echo_analyzer::apply::memory_commands_followed(
            dev.extensions.iter().map(String::as_str),
            dev.sparse_binding,
            dev.api_version,
        ));
    }
    s
}

/// Writes `bytes` to `path` with mode 0600 through a temporary file and a rename.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Appends one JSON line to the `stats` file (created 0600).
pub fn write_stats(path: &Path, s: &Stats) {
    let line = match serde_json::to_string(s) {
        Ok(l) => l + "\n",
        Err(_) => return,
    };
    let r = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        log::warn!("cannot write statistics to {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use echo_analyzer::plan::Thresholds;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("echo-enforce-unit-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    fn ctx() -> Context {
        Context {
            exe_id: "build-id:ab".into(),
            device_name: "llvmpipe".into(),
            ..Default::default()
        }
    }

    #[test]
    fn plan_loading_refuses_what_it_must() {
        let now = ctx();
        let good = tmp("good.json");
        write_private(
            &good,
            Plan::empty(now.clone(), Thresholds::default())
                .to_json()
                .as_bytes(),
        )
        .unwrap();
        assert!(load_plan(&good, &now).is_ok());
        assert_eq!(
            std::fs::metadata(&good).unwrap().permissions().mode() & 0o777,
            0o600
        );

        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = load_plan(&good, &now).unwrap_err();
        assert!(e.contains("writable by group or others"), "{e}");
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).unwrap();

        let mut other = now.clone();
        other.device_name = "other".into();
        let e = load_plan(&good, &other).unwrap_err();
        assert!(e.contains("another device"), "{e}");

        let bad = tmp("bad.json");
        write_private(&bad, b"{\"format\": \"vk-echo-plan\", \"vers").unwrap();
        assert!(load_plan(&bad, &now)
            .unwrap_err()
            .contains("not a valid plan"));

        let mut p = Plan::empty(now.clone(), Thresholds::default());
        p.version = 99;
        let fut = tmp("future.json");
        write_private(&fut, p.to_json().as_bytes()).unwrap();
        assert!(load_plan(&fut, &now).unwrap_err().contains("version 99"));

        assert!(load_plan(&tmp("missing.json"), &now).is_err());
        let _ = std::fs::remove_dir_all(good.parent().unwrap());
    }
}
