//! `vkecho report [-o FILE]`: one archive a user can send back (issue 27).
//!
//! A tar archive (the `tar` crate), gzip-compressed (`flate2`) when FILE ends with `.tar.gz` or
//! `.tgz`, holding exactly:
//!
//! - `vkecho-report/README.txt` — what the archive holds and what it leaves out;
//! - `vkecho-report/doctor.json` — what `vkecho doctor --json` prints here;
//! - `vkecho-report/versions.json` — echo, the Vulkan loader, each device's driver, the kernel
//!   (`uname`), glibc;
//! - `vkecho-report/cache/<entry>/plan.json` — every plan of auto mode's cache (`cache_dir`);
//! - `vkecho-report/cache/runs.jsonl` — the cache's record of the runs that used it (statistics
//!   and warnings per device, `echo_analyzer::cache::RUNS_FILE`);
//! - `vkecho-report/last-run-warnings.txt` — the warnings of the last run recorded there;
//! - `vkecho-report/show.html` — `vkecho show`'s page of the newest trace the cache still holds
//!   (auto mode keeps traces only with `keep_traces`), when it holds one.
//!
//! Nothing else of the machine: no environment dump (doctor names only the variables that decide
//! where Vulkan looks), no traces, no file outside the cache. Paths outside the cache that the
//! run records mention (a `plan` setting, a trace elsewhere) are replaced by `<outside the
//! cache>`.

use crate::files::write_private_bytes;
use echo_analyzer::cache::{self, EntryKind, RunRecord};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// `vkecho report [-o FILE] [--dir DIR]`.
#[derive(clap::Args)]
#[command(
    long_about = "Writes one archive to send with a problem report: `vkecho doctor --json`, \
the plans and run statistics of auto mode's cache (`cache_dir`, or DIR), versions (echo, Vulkan \
loader, drivers, kernel, glibc) and the last run's warnings. Nothing else: no environment dump, no \
traces, no file outside the cache."
)]
pub struct Args {
    /// The archive: gzip-compressed tar when it ends with .tar.gz or .tgz, plain tar otherwise
    /// (default: vkecho-report-<seconds>.tar here)
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The cache directory (default: `cache_dir` as the layer resolves it here)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Stand-in for a path outside the cache in what the archive quotes.
pub const OUTSIDE: &str = "<outside the cache>";

pub fn main(args: &Args) -> i32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("vkecho-report-{now}.tar")));
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| crate::cache::settings_here().cache_dir);
    // Doctor first: it adjusts this process's environment before the loader is loaded.
    let doctor = crate::doctor::report_here();
    let files = contents(&dir, &doctor, now);
    let gzip = is_gzip_name(&out);
    let bytes = match archive(&files, now, gzip) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("vkecho report: {e}");
            return 1;
        }
    };
    if let Err(e) = write_private_bytes(&out, &bytes) {
        eprintln!("vkecho report: {e}");
        return 1;
    }
    println!(
        "vkecho report: wrote {} ({} files, {} bytes); list it with `tar -t{}vf {}`",
        out.display(),
        files.len(),
        bytes.len(),
        if gzip { "z" } else { "" },
        out.display()
    );
    0
}

/// A name that asks for a gzip-compressed archive: `*.tar.gz` or `*.tgz`.
pub fn is_gzip_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// The archive of `files` (name in it, bytes): regular files, mode 0600, owner 0, time `mtime`;
/// gzip-compressed when `gzip`.
pub fn archive(files: &[(String, Vec<u8>)], mtime: u64, gzip: bool) -> Result<Vec<u8>, String> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o600);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(mtime);
        h.set_size(bytes.len() as u64);
        tar.append_data(&mut h, name, bytes.as_slice())
            .map_err(|e| format!("{name}: {e}"))?;
    }
    let plain = tar.into_inner().map_err(|e| e.to_string())?;
    if !gzip {
        return Ok(plain);
    }
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&plain).map_err(|e| e.to_string())?;
    z.finish().map_err(|e| e.to_string())
}

/// Every file of the archive: (name in it, bytes).
fn contents(dir: &Path, doctor: &Value, now: u64) -> Vec<(String, Vec<u8>)> {
    let root = "vkecho-report";
    let mut files = Vec::new();
    let pretty = |v: &Value| {
        let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
        s.push('\n');
        s.into_bytes()
    };
    files.push((format!("{root}/doctor.json"), pretty(doctor)));
    files.push((format!("{root}/versions.json"), pretty(&versions(doctor))));
    let mut plans = 0;
    for e in cache::list(dir) {
        if e.kind != EntryKind::Context {
            continue; // traces stay home: they name every buffer and call of a program
        }
        let Some(p) = &e.plan else { continue };
        if let Ok(bytes) = std::fs::read(p) {
            files.push((format!("{root}/cache/{}/plan.json", e.name), bytes));
            plans += 1;
        }
    }
    let runs: Vec<RunRecord> = if cache::is_tagged(dir) {
        cache::read_runs(dir)
            .into_iter()
            .map(|r| redact_run(r, dir))
            .collect()
    } else {
        Vec::new()
    };
    if !runs.is_empty() {
        let mut text = String::new();
        for r in &runs {
            text.push_str(&serde_json::to_string(r).unwrap_or_default());
            text.push('\n');
        }
        files.push((format!("{root}/cache/runs.jsonl"), text.into_bytes()));
    }
    let last = runs.last().map(|l| {
        // The last run: its process's records (one per device), the last one holding every
        // warning of the process.
        let mine: Vec<&RunRecord> = runs
            .iter()
            .filter(|r| r.pid == l.pid && r.program == l.program)
            .collect();
        let mut t = format!(
            "last run: {} (pid {}), ended {} s before this report, echo {}\n",
            l.program,
            l.pid,
            now.saturating_sub(l.unix),
            l.layer_version
        );
        for r in &mine {
            t.push_str(&format!(
                "  device {} ({}): mode {}, {}\n",
                r.stats.device_index, r.stats.device, r.stats.mode, r.stats.plan_status
            ));
        }
        if l.warnings.is_empty() {
            t.push_str("no warnings\n");
        }
        for w in &l.warnings {
            t.push_str(w);
            t.push('\n');
        }
        t
    });
    files.push((
        format!("{root}/last-run-warnings.txt"),
        last.unwrap_or_else(|| "no run is recorded in the cache\n".into())
            .into_bytes(),
    ));
    // The page of the newest trace the cache holds (`vkecho show`), when it holds one.
    let page = crate::show::newest_cached_page(dir);
    let page_line = match &page {
        Some((_, _, entry)) => {
            format!("show.html               `vkecho show` of the cache's newest trace ({entry})\n")
        }
        None => "(no show.html: the cache holds no trace; keep_traces=1 keeps them)\n".into(),
    };
    if let Some((name, bytes, _)) = page {
        files.push((format!("{root}/{name}"), bytes));
    }
    let readme = format!(
        "VK_LAYER_echo problem report, made by vkecho {} ({now} s since the epoch).\n\
         \n\
         doctor.json             `vkecho doctor --json` on this machine\n\
         versions.json           echo, Vulkan loader, drivers, kernel, glibc\n\
         cache/*/plan.json       the {plans} plan(s) of auto mode's cache\n\
         cache/runs.jsonl        the cache's record of recent runs: statistics and warnings per device\n\
         last-run-warnings.txt   the last recorded run's warnings\n\
         {page_line}\
         \n\
         Nothing else: no environment dump, no traces, no file from outside the cache; paths\n\
         outside the cache in the run records read {OUTSIDE}.\n",
        env!("CARGO_PKG_VERSION")
    );
    files.insert(0, (format!("{root}/README.txt"), readme.into_bytes()));
    files
}

/// Versions of everything between the program and the GPU.
pub(crate) fn versions(doctor: &Value) -> Value {
    let drivers: Vec<Value> = doctor["devices"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    json!({
                        "device": d["name"],
                        "driver_version": d["driver_version"],
                        "driver_name": d["driver_name"],
                        "driver_info": d["driver_info"],
                        "api_version": d["api_version"],
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "echo": env!("CARGO_PKG_VERSION"),
        "loader": doctor["loader"]["version"],
        "drivers": drivers,
        "kernel": kernel(),
        "glibc": glibc(),
    })
}

/// `uname`: system, release, version, machine (not the host name).
fn kernel() -> Value {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return Value::Null;
    }
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    json!({
        "sysname": s(&u.sysname),
        "release": s(&u.release),
        "version": s(&u.version),
        "machine": s(&u.machine),
    })
}

/// The C library's version (`gnu_get_libc_version`).
fn glibc() -> Value {
    extern "C" {
        fn gnu_get_libc_version() -> *const libc::c_char;
    }
    // SAFETY: returns a static NUL-terminated string.
    let p = unsafe { gnu_get_libc_version() };
    if p.is_null() {
        return Value::Null;
    }
    // SAFETY: non-null, static, NUL-terminated.
    Value::from(
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `text` with every absolute path that is not under `cache` replaced by [`OUTSIDE`].
pub fn redact(text: &str, cache: &Path) -> String {
    let cache = cache.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('/') {
        // A path starts at a '/' at the beginning or after a space, quote or bracket.
        let starts = at == 0
            || rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || "'\"(=[{:,".contains(c));
        if !starts {
            out.push_str(&rest[..=at]);
            rest = &rest[at + 1..];
            continue;
        }
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || "'\"),;]}".contains(c))
            .unwrap_or(tail.len());
        let path = &tail[..end];
        let path_trim = path.trim_end_matches(['.', ':']);
        if Path::new(path_trim).starts_with(cache.as_ref()) {
            out.push_str(path);
        } else {
            out.push_str(OUTSIDE);
            out.push_str(&path[path_trim.len()..]);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn redact_run(mut r: RunRecord, cache: &Path) -> RunRecord {
    let path = |p: &mut Option<String>| {
        if let Some(s) = p {
            *s = redact(s, cache);
        }
    };
    path(&mut r.stats.plan);
    path(&mut r.stats.trace);
    r.stats.plan_status = redact(&r.stats.plan_status, cache);
    for e in &mut r.stats.errors {
        *e = redact(e, cache);
    }
    for n in &mut r.stats.not_applied {
        n.reason = redact(&n.reason, cache);
    }
    for n in &mut r.stats.partly_applied {
        n.reason = redact(&n.reason, cache);
    }
    for m in &mut r.stats.members {
        m.reason = redact(&m.reason, cache);
    }
    for w in &mut r.warnings {
        *w = redact(w, cache);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_the_cache_are_replaced() {
        let c = Path::new("/home/u/.cache/vk-echo");
        assert_eq!(
            redact(
                "plan /home/u/secret/p.json not used; see /home/u/.cache/vk-echo/app-0123456789abcdef/plan.json.",
                c
            ),
            "plan <outside the cache> not used; see /home/u/.cache/vk-echo/app-0123456789abcdef/plan.json."
        );
        assert_eq!(
            redact("trace '/tmp/t.jsonl': 3 MiB/s", c),
            "trace '<outside the cache>': 3 MiB/s"
        );
        assert_eq!(redact("no paths here", c), "no paths here");
    }

    #[test]
    fn archives_read_back() {
        use std::io::Read;
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(190));
        let files = vec![
            ("r/a.txt".to_string(), b"hello".to_vec()),
            (long.clone(), vec![7u8; 1000]),
        ];
        for gzip in [false, true] {
            let bytes = archive(&files, 1, gzip).unwrap();
            let reader: Box<dyn Read> = if gzip {
                assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip magic");
                Box::new(flate2::read::GzDecoder::new(bytes.as_slice()))
            } else {
                Box::new(bytes.as_slice())
            };
            let mut a = tar::Archive::new(reader);
            let mut got = Vec::new();
            for e in a.entries().unwrap() {
                let mut e = e.unwrap();
                let name = e.path().unwrap().display().to_string();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                assert_eq!(e.header().mode().unwrap(), 0o600);
                got.push((name, data));
            }
            assert_eq!(got, files, "gzip={gzip}");
        }
        assert!(is_gzip_name(Path::new("x/r.tar.gz")) && is_gzip_name(Path::new("r.TGZ")));
        assert!(!is_gzip_name(Path::new("r.tar")) && !is_gzip_name(Path::new("gz")));
    }
}
