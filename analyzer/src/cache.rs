//! Auto mode's cache directory (`cache_dir`, DESIGN §6), bounded (issue 16).
//!
//! Layout, under `cache_dir`:
//!
//! - `<program>-<16 hex>/` — one **context entry** per (executable, arguments, device, driver)
//!   ([`crate::context::cache_paths`]): `plan.json`, and `trace.jsonl` while the run that
//!   profiles it is going (deleted once its plan is made, unless `keep_traces`);
//! - `traces/<program>-<pid>.jsonl` — **trace entries**: profile mode's traces when no `trace`
//!   setting names a file;
//! - `runs.jsonl` — the record of recent runs ([`record_run`]: statistics and warnings per
//!   device, the newest [`RUNS_KEPT`]), for `vkecho report`; not an entry;
//! - `CACHEDIR.TAG` — the standard tag (backup tools skip the directory), written with the first
//!   entry. Eviction and `vkecho cache clear` only ever delete inside a directory that has echo's
//!   tag, and only entries shaped like echo's (a name `<program>-<16 hex>` holding nothing but
//!   echo's files, or a `.jsonl` file in `traces/`), so a `cache_dir` pointed at the wrong place
//!   loses nothing.
//!
//! **Bounded.** After a run that wrote into the cache, [`finish_run`] deletes the traces whose plans
//! were made (unless kept) and evicts the least-recently-used entries until the cache is within
//! `cache_max_bytes`. An entry's last use is the newest modification time of its files; enforce
//! marks its plan used ([`touch`]) when it applies it. What the run itself wrote is never evicted by
//! that run, so one entry larger than the limit stays until a later run evicts it.
//!
//! Plain file-system code; no Vulkan calls. The layer calls it at exit, `vkecho cache` for people.

use crate::plan::{parse_plan, Plan};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The tag file's name and its required first line (<https://bford.info/cachedir/>).
pub const TAG_FILE: &str = "CACHEDIR.TAG";
const TAG_SIGNATURE: &str = "Signature: 8a477f597d28d172789f06886806bc55";
const TAG_TEXT: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This directory is VK_LAYER_echo's cache (traces and plans of auto mode).\n\
# It is bounded by the cache_max_bytes setting; `vkecho cache clear` empties it.\n";

/// The files a context entry may hold.
pub const PLAN_FILE: &str = "plan.json";
pub const TRACE_FILE: &str = "trace.jsonl";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `<program>-<hash>/`: a context's plan (and its trace while it is being made).
    Context,
    /// `traces/<file>.jsonl`: a profile-mode trace.
    Trace,
}

/// One entry of the cache.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The directory (context entries) or file (trace entries).
    pub path: PathBuf,
    /// `echo-samples-9c2a623c8d2c302a`, or `traces/app-1234.jsonl`.
    pub name: String,
    pub kind: EntryKind,
    /// Bytes of every file in it.
    pub bytes: u64,
    /// The newest modification time of its files.
    pub last_used: SystemTime,
    /// `plan.json`, when there is one.
    pub plan: Option<PathBuf>,
    /// The trace, when there is one.
    pub trace: Option<PathBuf>,
}

impl Entry {
    /// The plan, parsed (an error says why it cannot be read).
    pub fn read_plan(&self) -> Result<Plan, String> {
        let p = self.plan.as_ref().ok_or("no plan in this entry")?;
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        parse_plan(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

/// Whether `dir` carries echo's cache tag.
pub fn is_tagged(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(TAG_FILE))
        .map(|t| t.starts_with(TAG_SIGNATURE))
        .unwrap_or(false)
}

/// Creates `dir` (0700) and its tag when missing.
pub fn ensure_tag(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    if !is_tagged(dir) {
        // Private like everything echo writes there (DESIGN §8), whatever the umask.
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = dir.join(format!(".{TAG_FILE}.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(TAG_TEXT.as_bytes())?;
        drop(f);
        std::fs::rename(&tmp, dir.join(TAG_FILE))?;
    }
    Ok(())
}

/// `<program>-<16 hex digits>`, as [`crate::context::cache_paths`] names a context entry.
fn is_context_name(name: &str) -> bool {
    match name.rsplit_once('-') {
        Some((prog, hash)) => {
            !prog.is_empty()
                && hash.len() == 16
                && hash.bytes().all(|b| b.is_ascii_hexdigit())
                && prog
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }
        None => false,
    }
}

/// A file echo writes into a context entry: the plan, the trace, or a plan being written
/// (`plan.tmp.<pid>`).
fn is_entry_file(name: &str) -> bool {
    name == PLAN_FILE || name == TRACE_FILE || name.starts_with("plan.tmp.")
}

/// Reads one context directory; `None` when it is not shaped like echo's.
fn context_entry(path: &Path, name: &str) -> Option<Entry> {
    let mut bytes = 0;
    let mut last = SystemTime::UNIX_EPOCH;
    let (mut plan, mut trace) = (None, None);
    for e in std::fs::read_dir(path).ok()? {
        let e = e.ok()?;
        let fname = e.file_name().to_string_lossy().into_owned();
        let meta = e.metadata().ok()?;
        if !meta.is_file() || !is_entry_file(&fname) {
            return None; // not ours: never touched
        }
        bytes += meta.len();
        if let Ok(m) = meta.modified() {
            last = last.max(m);
        }
        match fname.as_str() {
            PLAN_FILE => plan = Some(e.path()),
            TRACE_FILE => trace = Some(e.path()),
            _ => {}
        }
    }
    if last == SystemTime::UNIX_EPOCH {
        // An empty directory: as old as it is.
        last = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .unwrap_or(last);
    }
    Some(Entry {
        path: path.to_path_buf(),
        name: name.to_string(),
        kind: EntryKind::Context,
        bytes,
        last_used: last,
        plan,
        trace,
    })
}

/// Every entry of the cache at `dir`, most recently used first. A missing directory is an empty
/// cache. Things in it that are not echo's are left out.
pub fn list(dir: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() && is_context_name(&name) {
            if let Some(entry) = context_entry(&e.path(), &name) {
                out.push(entry);
            }
        } else if ft.is_dir() && name == "traces" {
            for t in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
                let tname = t.file_name().to_string_lossy().into_owned();
                let Ok(meta) = t.metadata() else { continue };
                if meta.is_file() && tname.ends_with(".jsonl") {
                    out.push(Entry {
                        path: t.path(),
                        name: format!("traces/{tname}"),
                        kind: EntryKind::Trace,
                        bytes: meta.len(),
                        last_used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                        plan: None,
                        trace: Some(t.path()),
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| b.last_used.cmp(&a.last_used).then(a.name.cmp(&b.name)));
    out
}

/// Bytes of every entry.
pub fn total_bytes(entries: &[Entry]) -> u64 {
    entries.iter().map(|e| e.bytes).sum()
}

/// Removes one entry (a context directory or a trace file).
pub fn remove(entry: &Entry) -> std::io::Result<()> {
    match entry.kind {
        EntryKind::Context => std::fs::remove_dir_all(&entry.path),
        EntryKind::Trace => std::fs::remove_file(&entry.path),
    }
}

/// What [`evict`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Eviction {
    /// Names of the entries removed, oldest first, and their bytes.
    pub removed: Vec<(String, u64)>,
    /// Bytes left in the cache.
    pub bytes_left: u64,
}

/// Removes least-recently-used entries of the cache at `dir` until it holds at most `max_bytes`
/// (0: no limit). Entries at or under a path in `protect` stay. Does nothing in a directory
/// without echo's tag. Entries another process removes meanwhile are skipped.
pub fn evict(dir: &Path, max_bytes: u64, protect: &[PathBuf]) -> Eviction {
    let entries = list(dir);
    let mut left = total_bytes(&entries);
    let mut out = Eviction::default();
    if max_bytes == 0 || left <= max_bytes || !is_tagged(dir) {
        out.bytes_left = left;
        return out;
    }
    for e in entries.iter().rev() {
        if left <= max_bytes {
            break;
        }
        let protected = protect
            .iter()
            .any(|p| p.starts_with(&e.path) || e.path.starts_with(p));
        if protected {
            continue;
        }
        if remove(e).is_ok() || !e.path.exists() {
            left = left.saturating_sub(e.bytes);
            out.removed.push((e.name.clone(), e.bytes));
        }
    }
    out.bytes_left = left;
    out
}

/// Marks a plan used now (its modification time), for least-recently-used eviction.
pub fn touch(plan: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(plan)?
        .set_modified(SystemTime::now())
}

/// What one process did to the cache, for [`finish_run`].
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// Traces in the cache whose plans this process made (auto mode, at exit).
    pub analyzed_traces: Vec<PathBuf>,
    /// Paths this process wrote or used: never evicted by it.
    pub protect: Vec<PathBuf>,
}

/// The end of a process that wrote into the cache at `dir`: delete the analyzed traces (unless
/// `keep_traces`), then evict down to `max_bytes`. A trace outside `dir` (a `trace` setting) is
/// never deleted.
pub fn finish_run(dir: &Path, run: &RunOutcome, max_bytes: u64, keep_traces: bool) -> Eviction {
    let mut deleted = Vec::new();
    if !keep_traces {
        for t in &run.analyzed_traces {
            if t.starts_with(dir) && t.file_name().is_some_and(|n| n == TRACE_FILE) {
                if let Ok(meta) = std::fs::metadata(t) {
                    if std::fs::remove_file(t).is_ok() {
                        deleted.push((format!("{} (trace, plan made)", t.display()), meta.len()));
                    }
                }
            }
        }
    }
    let mut ev = evict(dir, max_bytes, &run.protect);
    deleted.append(&mut ev.removed);
    ev.removed = deleted;
    ev
}

/// Removes every entry of the cache at `dir` (`vkecho cache clear`); the tag stays. Refuses a
/// directory without echo's tag. Returns the entries removed and their bytes.
pub fn clear(dir: &Path) -> Result<Vec<(String, u64)>, String> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    if !is_tagged(dir) {
        return Err(format!(
            "{} has no {TAG_FILE} of VK_LAYER_echo; not clearing a directory echo did not make",
            dir.display()
        ));
    }
    let mut out = Vec::new();
    for e in list(dir) {
        remove(&e).map_err(|err| format!("cannot remove {}: {err}", e.path.display()))?;
        out.push((e.name, e.bytes));
    }
    Ok(out)
}

/// The cache's record of the runs that used it (issue 27, `vkecho report`): one JSON line per
/// device of a run (a [`RunRecord`]), the newest [`RUNS_KEPT`] lines. Not an entry: eviction and
/// `list` leave it alone.
pub const RUNS_FILE: &str = "runs.jsonl";
/// Lines [`record_run`] keeps.
pub const RUNS_KEPT: usize = 64;

/// One device of one run, as the layer recorded it at the device's end.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// Seconds since the epoch when the device ended.
    pub unix: u64,
    /// The executable's file name (no directory).
    pub program: String,
    pub pid: u32,
    pub layer_version: String,
    /// The device's statistics (what `stats` would write).
    pub stats: crate::stats::Stats,
    /// The warnings and errors the layer logged in this process so far (at most 32, each cut at
    /// 1000 characters), whatever the `log` level printed.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Appends `rec` to [`RUNS_FILE`] in `dir` (a tagged cache), keeping the newest `keep` lines;
/// the file is replaced whole (0600), so a reader never sees half a line. Two processes ending at
/// once may lose one of their lines, never the file.
pub fn record_run(dir: &Path, rec: &RunRecord, keep: usize) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if !is_tagged(dir) {
        return Err(std::io::Error::other("not echo's cache"));
    }
    let path = dir.join(RUNS_FILE);
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut lines: Vec<&str> = old.lines().filter(|l| !l.trim().is_empty()).collect();
    let line = serde_json::to_string(rec).map_err(std::io::Error::other)?;
    lines.push(&line);
    let from = lines.len().saturating_sub(keep.max(1));
    let tmp = dir.join(format!(".{RUNS_FILE}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    for l in &lines[from..] {
        f.write_all(l.as_bytes())?;
        f.write_all(b"\n")?;
    }
    drop(f);
    std::fs::rename(&tmp, &path)
}

/// The records of [`RUNS_FILE`] in `dir`, oldest first; lines that do not parse are skipped.
pub fn read_runs(dir: &Path) -> Vec<RunRecord> {
    std::fs::read_to_string(dir.join(RUNS_FILE))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("echo-cache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn names_and_files_that_are_not_echos_are_left_alone() {
        let d = tmp("foreign");
        ensure_tag(&d).unwrap();
        // A directory named like an entry but holding a file of someone else's.
        let foreign = d.join("photos-0123456789abcdef");
        std::fs::create_dir_all(&foreign).unwrap();
        std::fs::write(foreign.join("holiday.jpg"), vec![0u8; 5000]).unwrap();
        std::fs::write(d.join("notes.txt"), vec![0u8; 5000]).unwrap();
        let ours = d.join("app-00000000000000ff");
        std::fs::create_dir_all(&ours).unwrap();
        std::fs::write(ours.join(PLAN_FILE), vec![b'x'; 3000]).unwrap();
        let l = list(&d);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(l[0].name, "app-00000000000000ff");
        let ev = evict(&d, 1, &[]);
        assert_eq!(ev.removed.len(), 1);
        assert!(foreign.join("holiday.jpg").exists() && d.join("notes.txt").exists());
        assert!(!ours.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_untagged_directory_is_never_evicted_or_cleared() {
        let d = tmp("untagged");
        let e = d.join("app-00000000000000ff");
        std::fs::create_dir_all(&e).unwrap();
        std::fs::write(e.join(PLAN_FILE), vec![b'x'; 3000]).unwrap();
        assert!(evict(&d, 1, &[]).removed.is_empty());
        assert!(clear(&d).unwrap_err().contains(TAG_FILE));
        assert!(e.join(PLAN_FILE).exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_run_record_keeps_the_newest_lines_and_only_in_a_tagged_cache() {
        let d = tmp("runs");
        let rec = |pid| RunRecord {
            pid,
            program: "app".into(),
            warnings: vec![format!("warning of {pid}")],
            ..Default::default()
        };
        assert!(
            record_run(&d, &rec(1), 3).is_err(),
            "untagged: nothing written"
        );
        assert!(!d.join(RUNS_FILE).exists());
        ensure_tag(&d).unwrap();
        for pid in 1..=5 {
            record_run(&d, &rec(pid), 3).unwrap();
        }
        let runs = read_runs(&d);
        assert_eq!(runs.iter().map(|r| r.pid).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(runs[2].warnings, ["warning of 5"]);
        assert!(list(&d).is_empty(), "the record is no entry");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn context_names() {
        assert!(is_context_name("echo-samples-9c2a623c8d2c302a"));
        assert!(!is_context_name("traces"));
        assert!(!is_context_name("-9c2a623c8d2c302a"));
        assert!(!is_context_name("a-9c2a623c8d2c302"));
        assert!(!is_context_name("a b-9c2a623c8d2c302a"));
    }
}
