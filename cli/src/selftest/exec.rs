//! Running the selftest's children: one `vkecho selftest-worker` process per run, with echo in
//! the mode asked for (or kept out), time-bounded, its stdout and stderr in a log file; and
//! comparing their outputs byte for byte.

use crate::launch::{command, failure, LayerRun};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Sizes and counts of one device's runs.
pub(crate) struct Params {
    pub(crate) size: u64,
    pub(crate) iters: u32,
    pub(crate) rounds: usize,
}

pub(crate) fn params(quick: bool, heap: u64, rounds: Option<u64>) -> Params {
    const K64: u64 = 64 << 10;
    let (lo, hi, div) = if quick {
        (256 << 10, 2 << 20, 2048)
    } else {
        (1 << 20, 16 << 20, 256)
    };
    let size = (heap / div).clamp(lo, hi) / K64 * K64;
    let (iters, default_rounds) = if quick { (5, 3) } else { (12, 5) };
    Params {
        size,
        iters,
        rounds: rounds.map_or(default_rounds, |r| r as usize),
    }
}

/// The longest a run without echo may take before it counts as hung.
pub(crate) const BASE_LIMIT: Duration = Duration::from_secs(600);

/// How the selftest starts vkecho again for its children: `VKECHO_SELFTEST_RUNNER` (tests: an
/// emulator and its arguments, e.g. `qemu-aarch64-static -L /` — under qemu-user a foreign
/// binary cannot start another), then vkecho itself.
pub(crate) fn vkecho_argv(exe: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::env::var("VKECHO_SELFTEST_RUNNER")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    v.push(exe.display().to_string());
    v
}

pub(crate) fn worker_argv(exe: &Path, workload: &str, extra: &[String]) -> Vec<String> {
    let mut v = vkecho_argv(exe);
    v.push("selftest-worker".into());
    v.push(workload.into());
    v.extend_from_slice(extra);
    v
}

/// How echo takes part in one run.
pub enum Echo {
    /// Not loaded (an installed implicit copy kept out too).
    Off,
    /// `profile`: the trace goes to the path.
    Profile(PathBuf),
    /// `enforce` the plan; statistics to the second path.
    Enforce(PathBuf, PathBuf),
    /// `auto` with a private cache directory; statistics to the second path.
    Auto(PathBuf, PathBuf),
}

impl Echo {
    pub fn mode(&self) -> &'static str {
        match self {
            Echo::Off => "no echo",
            Echo::Profile(_) => "profile",
            Echo::Enforce(..) => "enforce",
            Echo::Auto(..) => "auto",
        }
    }
}

/// The smallest copy that makes a candidate pair in the selftest's echo runs (the workloads'
/// uniform buffer is 16 KiB; the default, 256 KiB, is for real programs).
pub const MIN_BYTES: &str = "4096";

/// One finished run.
pub struct Run {
    pub label: String,
    pub mode: &'static str,
    /// `None`: it ran to its end and wrote its result; else how it failed, in words.
    pub failed: Option<String>,
    pub seconds: f64,
    /// The worker's result (times, validation messages).
    pub result: Option<Value>,
    pub output: PathBuf,
    /// The log's name relative to the workload's directory.
    pub log: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.failed.is_none()
    }

    /// Median iteration time in ms, the first (warm-up) iteration left out when there are more.
    pub fn iter_ms(&self) -> Option<f64> {
        let v: Vec<f64> = self.result.as_ref()?["iter_ms"]
            .as_array()?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let mut v = if v.len() > 1 { v[1..].to_vec() } else { v };
        if v.is_empty() {
            return None;
        }
        Some(crate::calibrate::median(&mut v))
    }

    /// Bytes of output per iteration.
    pub fn per_iteration(&self) -> u64 {
        let r = match &self.result {
            Some(r) => r,
            None => return 0,
        };
        let bytes = r["output_bytes"].as_u64().unwrap_or(0);
        let iters = r["iters"].as_u64().unwrap_or(1).max(1);
        bytes / iters
    }
}

/// Where one workload's runs write.
pub struct Place {
    pub dir: PathBuf,
}

impl Place {
    pub fn new(dir: PathBuf) -> Result<Place, String> {
        for d in ["logs", "results"] {
            std::fs::create_dir_all(dir.join(d))
                .map_err(|e| format!("cannot create {}: {e}", dir.join(d).display()))?;
        }
        Ok(Place { dir })
    }

    /// Runs `argv` (a worker command line) as `label` with echo as `echo`, within `limit`.
    pub fn run(
        &self,
        argv: &[String],
        label: &str,
        echo: &Echo,
        validation: bool,
        limit: Duration,
    ) -> Run {
        let output = self.dir.join(format!("{label}.out"));
        let result = self.dir.join(format!("results/{label}.json"));
        let log = format!("logs/{label}.log");
        let _ = std::fs::remove_file(&output);
        let _ = std::fs::remove_file(&result);
        let s = |p: &Path| p.display().to_string();
        let mut settings: Vec<(&str, String)> = Vec::new();
        let mode = match echo {
            Echo::Off => None,
            Echo::Profile(trace) => {
                let _ = std::fs::remove_file(trace);
                settings.push(("TRACE", s(trace)));
                Some("profile")
            }
            Echo::Enforce(plan, stats) => {
                let _ = std::fs::remove_file(stats);
                settings.push(("PLAN", s(plan)));
                settings.push(("STATS", s(stats)));
                Some("enforce")
            }
            Echo::Auto(cache, stats) => {
                let _ = std::fs::remove_file(stats);
                settings.push(("CACHE_DIR", s(cache)));
                settings.push(("STATS", s(stats)));
                settings.push(("KEEP_TRACES", "true".into()));
                Some("auto")
            }
        };
        if mode.is_some() {
            settings.push(("MIN_BYTES", MIN_BYTES.into()));
            settings.push(("LOG", "info".into()));
        }
        let started = Instant::now();
        let failed = (|| -> Result<Option<String>, String> {
            let mut cmd = command(argv, &LayerRun { mode, settings })?;
            let file = std::fs::File::create(self.dir.join(&log))
                .map_err(|e| format!("cannot create {log}: {e}"))?;
            let err = file.try_clone().map_err(|e| e.to_string())?;
            cmd.env("VKECHO_SELFTEST_OUTPUT", &output)
                .env("VKECHO_SELFTEST_RESULT", &result)
                .env("VKECHO_SELFTEST_LABEL", label)
                .env(
                    "VKECHO_SELFTEST_VALIDATION",
                    if validation { "1" } else { "0" },
                )
                .stdin(std::process::Stdio::null())
                .stdout(file)
                .stderr(err);
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
            loop {
                match child.try_wait().map_err(|e| e.to_string())? {
                    Some(status) => return Ok(failure(status)),
                    None if started.elapsed() > limit => {
                        // Our own child, by its handle.
                        let _ = child.kill();
                        let _ = child.wait();
                        return Ok(Some(format!(
                            "did not finish within {} s (stopped)",
                            limit.as_secs()
                        )));
                    }
                    None => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })();
        let seconds = started.elapsed().as_secs_f64();
        let mut failed = match failed {
            Ok(f) => f,
            Err(e) => Some(e),
        };
        let result = std::fs::read_to_string(&result)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if failed.is_none() && result.is_none() {
            failed = Some("wrote no result".into());
        }
        if let Some(f) = &mut failed {
            if let Some(line) = last_worker_line(&self.dir.join(&log)) {
                f.push_str(": ");
                f.push_str(&line);
            }
        }
        Run {
            label: label.into(),
            mode: echo.mode(),
            failed,
            seconds,
            result,
            output,
            log,
        }
    }
}

/// The worker's own error line from a log, if it wrote one.
fn last_worker_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| l.starts_with("vkecho selftest-worker:"))
        .map(|l| l.trim_start_matches("vkecho selftest-worker: ").to_string())
}

/// Where two outputs first differ.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// First differing byte (or where the shorter one ends).
    pub offset: u64,
    /// Differing bytes over the common length.
    pub bytes: u64,
    pub reference_len: u64,
    pub len: u64,
}

impl Difference {
    /// In words, with the iteration when `per_iteration` is known.
    pub fn describe(&self, per_iteration: u64) -> String {
        let at = if per_iteration > 0 {
            format!(
                "byte {} of iteration {} ({} of the output)",
                self.offset % per_iteration,
                self.offset / per_iteration + 1,
                self.offset
            )
        } else {
            format!("byte {}", self.offset)
        };
        let len = if self.len != self.reference_len {
            format!(
                "; {} bytes of output instead of {}",
                self.len, self.reference_len
            )
        } else {
            String::new()
        };
        format!(
            "first difference at {at}, {} differ{len}",
            echo_analyzer::words::plural(self.bytes, "byte", "bytes")
        )
    }
}

/// Compares two files byte for byte: `None` when identical.
pub fn compare(reference: &Path, other: &Path) -> Result<Option<Difference>, String> {
    let open = |p: &Path| {
        std::fs::File::open(p)
            .map(std::io::BufReader::new)
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let (mut a, mut b) = (open(reference)?, open(other)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    let (mut pos, mut first, mut differ) = (0u64, None, 0u64);
    let (mut la, mut lb) = (0u64, 0u64);
    loop {
        let na = read_full(&mut a, &mut ba).map_err(|e| e.to_string())?;
        let nb = read_full(&mut b, &mut bb).map_err(|e| e.to_string())?;
        la += na as u64;
        lb += nb as u64;
        let n = na.min(nb);
        for i in 0..n {
            if ba[i] != bb[i] {
                differ += 1;
                first.get_or_insert(pos + i as u64);
            }
        }
        if na != nb {
            first.get_or_insert(pos + n as u64);
        }
        pos += n as u64;
        if na == 0 && nb == 0 {
            break;
        }
        if na == 0 || nb == 0 {
            // Count the rest of the longer one.
            let rest = if na == 0 { &mut b } else { &mut a };
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = read_full(rest, &mut buf).map_err(|e| e.to_string())?;
                if k == 0 {
                    break;
                }
                if na == 0 {
                    lb += k as u64;
                } else {
                    la += k as u64;
                }
            }
            break;
        }
    }
    Ok(first.map(|offset| Difference {
        offset,
        bytes: differ,
        reference_len: la,
        len: lb,
    }))
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_finds_the_first_difference_and_counts() {
        let d = std::env::temp_dir().join(format!("vkecho-st-cmp-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let (a, b, c, e) = (d.join("a"), d.join("b"), d.join("c"), d.join("e"));
        let mut bytes = vec![7u8; 200_000];
        std::fs::write(&a, &bytes).unwrap();
        std::fs::write(&b, &bytes).unwrap();
        assert_eq!(compare(&a, &b).unwrap(), None);
        bytes[70_000] ^= 1;
        bytes[150_000] ^= 1;
        std::fs::write(&c, &bytes).unwrap();
        let diff = compare(&a, &c).unwrap().unwrap();
        assert_eq!((diff.offset, diff.bytes), (70_000, 2));
        assert_eq!(
            diff.describe(100_000),
            "first difference at byte 70000 of iteration 1 (70000 of the output), 2 bytes differ"
        );
        std::fs::write(&e, &bytes[..1000]).unwrap();
        let short = compare(&a, &e).unwrap().unwrap();
        assert_eq!(
            (short.offset, short.len, short.reference_len),
            (1000, 1000, 200_000)
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
