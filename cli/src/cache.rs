//! `vkecho cache list|show|clear`: auto mode's cache (`cache_dir`, bounded by `cache_max_bytes`;
//! `echo_analyzer::cache` holds the rules the layer follows too).
//!
//! The cache directory and its limit are resolved as the layer would resolve them here (the
//! environment and `vk_layer_settings.txt`, like `vkecho doctor`); `--dir DIR` names another.

use echo_analyzer::cache::{self, Entry, EntryKind};
use echo_analyzer::settings::{parse_settings_file, resolve, Settings};
use echo_analyzer::words::human_bytes;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::SystemTime;

pub const AFTER_HELP: &str = "The cache is `cache_dir` as the layer resolves it here \
(docs/settings.md); NAME is an entry's name as `list` prints it, or a unique prefix of it.";

/// `vkecho cache list|show|clear`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Every entry: size, last use, plan, program, device
    List {
        /// Print the entries as JSON
        #[arg(long)]
        json: bool,
        /// The cache directory (default: `cache_dir` as the layer resolves it here)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// One entry: its context, groups and rejections
    Show {
        /// The entry (its name as `list` prints it, or a unique prefix)
        name: String,
        /// The cache directory (default: `cache_dir` as the layer resolves it here)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Remove the named entries, or every entry
    Clear {
        /// Entries to remove (default: all)
        names: Vec<String>,
        /// The cache directory (default: `cache_dir` as the layer resolves it here)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub fn main(cmd: &Command) -> i32 {
    let dir_or_default = |dir: &Option<PathBuf>| {
        dir.clone()
            .unwrap_or_else(|| settings_here().cache_dir.clone())
    };
    let r = match cmd {
        Command::List { json, dir } => {
            let settings = settings_here();
            let dir = dir.clone().unwrap_or_else(|| settings.cache_dir.clone());
            list(&dir, settings.cache_max_bytes, *json);
            Ok(0)
        }
        Command::Show { name, dir } => show(&dir_or_default(dir), name),
        Command::Clear { names, dir } => clear(&dir_or_default(dir), names),
    };
    r.unwrap_or_else(|e| {
        eprintln!("vkecho cache: {e}");
        2
    })
}

/// The settings the layer would resolve in this environment (no application settings).
pub(crate) fn settings_here() -> Settings {
    let env = |k: &str| std::env::var(k).ok();
    let file = crate::doctor::settings_file(&env)
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| parse_settings_file(&t, &mut Vec::new()))
        .unwrap_or_default();
    resolve(&env, &file, &[]).0
}

fn age(t: SystemTime) -> String {
    let s = SystemTime::now()
        .duration_since(t)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match s {
        0..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What an entry's plan says, in a few words, and its context for the JSON.
fn plan_words(e: &Entry) -> (String, Value) {
    if e.kind == EntryKind::Trace {
        return ("profile trace (no plan)".into(), Value::Null);
    }
    match e.read_plan() {
        Ok(p) => {
            let c = &p.context;
            let args = match &p.evidence {
                Some(e) => format!(
                    ", context=program: {} profile{}, {}",
                    e.profiles.len(),
                    if e.profiles.len() == 1 { "" } else { "s" },
                    if e.stable { "stable" } else { "still changing" }
                ),
                None if c.args_hash.is_empty() => String::new(),
                None => format!(", arguments {}", &c.args_hash),
            };
            (
                format!(
                    "{} group{}, {} rejected — {}{args}, on {}",
                    p.groups.len(),
                    if p.groups.len() == 1 { "" } else { "s" },
                    p.rejected.len(),
                    c.exe_path,
                    c.device_name
                ),
                json!({
                    "groups": p.groups.len(),
                    "rejected": p.rejected.len(),
                    "program": c.exe_path,
                    "program_id": c.exe_id,
                    "arguments_hash": c.args_hash,
                    "context": if p.evidence.is_some() { "program" } else { "arguments" },
                    "profiles": p.evidence.as_ref().map(|e| e.profiles.len()),
                    "stable": p.evidence.as_ref().map(|e| e.stable),
                    "device": c.device_name,
                    "driver_version": c.driver_version,
                }),
            )
        }
        Err(_) if e.plan.is_none() && e.trace.is_some() => {
            ("being profiled (trace, no plan yet)".into(), Value::Null)
        }
        Err(why) => (format!("unreadable plan: {why}"), Value::Null),
    }
}

fn list(dir: &std::path::Path, limit: u64, json_out: bool) {
    let entries = cache::list(dir);
    let total = cache::total_bytes(&entries);
    let limit_words = if limit == 0 {
        "no limit".to_string()
    } else {
        format!("limit {}: cache_max_bytes", human_bytes(limit))
    };
    if json_out {
        let items: Vec<Value> = entries
            .iter()
            .map(|e| {
                let (_, plan) = plan_words(e);
                json!({
                    "name": e.name,
                    "path": e.path.display().to_string(),
                    "kind": if e.kind == EntryKind::Context { "context" } else { "trace" },
                    "bytes": e.bytes,
                    "last_used_unix": unix(e.last_used),
                    "has_plan": e.plan.is_some(),
                    "has_trace": e.trace.is_some(),
                    "plan": plan,
                })
            })
            .collect();
        let doc = json!({
            "dir": dir.display().to_string(),
            "bytes": total,
            "limit_bytes": limit,
            "entries": items,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    println!(
        "cache {}: {} entr{}, {} ({limit_words})",
        dir.display(),
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        human_bytes(total)
    );
    if entries.is_empty() {
        return;
    }
    println!("  (most recently used first)");
    for e in &entries {
        let (words, _) = plan_words(e);
        let trace = if e.kind == EntryKind::Context && e.trace.is_some() {
            ", trace kept"
        } else {
            ""
        };
        println!(
            "  {}  {}, used {}{trace}\n      {words}",
            e.name,
            human_bytes(e.bytes),
            age(e.last_used)
        );
    }
}

/// The one entry `name` names: its exact name, else the only one it is a prefix of.
pub(crate) fn find(dir: &std::path::Path, name: &str) -> Result<Entry, String> {
    let entries = cache::list(dir);
    if let Some(e) = entries.iter().find(|e| e.name == name) {
        return Ok(e.clone());
    }
    let hits: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.name.starts_with(name))
        .collect();
    match hits.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "no entry '{name}' in {} (`vkecho cache list` lists them)",
            dir.display()
        )),
        many => Err(format!(
            "'{name}' names {} entries ({}); give more of the name",
            many.len(),
            many.iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn show(dir: &std::path::Path, name: &str) -> Result<i32, String> {
    let e = find(dir, name)?;
    println!("{}", e.path.display());
    println!(
        "  {} in all, last used {}",
        human_bytes(e.bytes),
        age(e.last_used)
    );
    if let Some(t) = &e.trace {
        let n = std::fs::metadata(t).map(|m| m.len()).unwrap_or(0);
        println!("  trace {} ({})", t.display(), human_bytes(n));
    }
    if e.kind == EntryKind::Trace {
        println!(
            "  a profile trace: `vkecho analyze {}` explains it",
            e.path.display()
        );
        return Ok(0);
    }
    let p = match e.read_plan() {
        Ok(p) => p,
        Err(why) => {
            println!("  no plan: {why}");
            return Ok(0);
        }
    };
    let c = &p.context;
    println!("  plan for:");
    println!("    program   {} ({})", c.exe_path, c.exe_id);
    match &p.evidence {
        Some(e) => println!(
            "    arguments any (context=program): {} profile{} merged ({}), {}",
            e.profiles.len(),
            if e.profiles.len() == 1 { "" } else { "s" },
            e.profiles.join(", "),
            if e.stable {
                "stable: enforced under any arguments"
            } else {
                "still changing: new arguments are profiled"
            }
        ),
        None => println!("    arguments hash {}", c.args_hash),
    }
    println!(
        "    device    {} (UUID {}, driver version {})",
        c.device_name, c.device_uuid, c.driver_version
    );
    println!(
        "  thresholds: copies of at least {}, at least {} times",
        human_bytes(p.thresholds.min_bytes),
        p.thresholds.min_copies
    );
    if let Some(cal) = &p.calibration {
        println!(
            "  calibrated: {} trials, {:.3} ms without, {:.3} ms with the plan: {}",
            cal.trials,
            cal.baseline_ms_median,
            cal.plan_ms_median,
            if cal.enabled { "enabled" } else { "disabled" }
        );
    }
    println!(
        "  {}:",
        echo_analyzer::words::plural(p.groups.len() as u64, "group", "groups")
    );
    for g in &p.groups {
        println!(
            "    group {} (device {}): the {}, {}, saves {} per iteration",
            g.id,
            g.device_index,
            buffer(&g.device),
            echo_analyzer::words::plural(g.members.len() as u64, "member", "members"),
            human_bytes(g.bytes_saved_per_iter)
        );
        for m in &g.members {
            println!(
                "      staging: the {} ({} copies, {})",
                buffer(&m.staging),
                m.copies,
                human_bytes(m.bytes)
            );
        }
    }
    println!(
        "  {}:",
        echo_analyzer::words::plural(
            p.rejected.len() as u64,
            "rejected candidate",
            "rejected candidates"
        )
    );
    for r in &p.rejected {
        let headline = if r.plain.is_empty() {
            &r.message
        } else {
            &r.plain
        };
        println!("    {headline}");
        println!("      staging: the {}", buffer(&r.staging));
        println!("      device:  the {}", buffer(&r.device));
        if !r.plain.is_empty() {
            println!("      detail: {}", r.message);
        }
    }
    Ok(0)
}

/// "1 MiB buffer (TRANSFER_SRC) created at main (src/x.rs:12)".
fn buffer(b: &echo_analyzer::plan::BufferRef) -> String {
    let site = if b.created_at.is_empty() {
        format!("call site {}", b.key.site)
    } else {
        b.created_at.clone()
    };
    format!(
        "{} buffer ({}) created at {site}",
        human_bytes(b.key.size),
        echo_analyzer::words::usage_names(b.usage)
    )
}

fn clear(dir: &std::path::Path, names: &[String]) -> Result<i32, String> {
    let removed = if names.is_empty() {
        cache::clear(dir)?
    } else {
        let mut out = Vec::new();
        for n in names {
            let e = find(dir, n)?;
            cache::remove(&e)
                .map_err(|err| format!("cannot remove {}: {err}", e.path.display()))?;
            out.push((e.name, e.bytes));
        }
        out
    };
    let bytes: u64 = removed.iter().map(|(_, b)| b).sum();
    for (n, b) in &removed {
        println!("removed {n} ({})", human_bytes(*b));
    }
    println!(
        "vkecho cache: {} entr{} removed ({}) from {}",
        removed.len(),
        if removed.len() == 1 { "y" } else { "ies" },
        human_bytes(bytes),
        dir.display()
    );
    Ok(0)
}
