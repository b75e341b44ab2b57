//! Memory per sample (issue 14): device memory measured at the driver boundary and peak resident
//! memory, without the layer (A), with it (C, enforce with a plan made for these arguments) and
//! for the zero-copy twin (D).
//!
//! Every process runs with the test-only layer `VK_LAYER_ECHO_test_discrete` below echo, presenting
//! the driver's own memory table (`VK_ECHO_TEST_TABLE=real`): it counts every `vkAllocateMemory`
//! that reaches the driver (bytes, and the peak of live bytes) and writes them at
//! `vkDestroyDevice` (`VK_ECHO_TEST_MEMLOG`). Peak resident memory is the child's `ru_maxrss`
//! (`wait4`). Memory does not depend on timing, so one process per configuration suffices;
//! the figures are read, not sampled. report.rs puts the section into RESULTS.md (and the
//! per-sample table's device-memory column), also when run alone (`echo-bench --memory`); the
//! plot goes next to it.

use crate::opts::{caps_text, sample_args, sample_size, Opts};
use crate::plan::make_plan;
use crate::runner::{self, Build, Layer};
use crate::svg::{self, Axis, Marker, Plot, Point, Series};
use echo_analyzer::stats::Stats;
use echo_analyzer::words::human_bytes;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

pub const TEST_LAYER_FILE: &str = "libVkLayer_echo_test_discrete.so";
pub const SECTION: &str = "## Memory per sample";
pub const PLOT: &str = "memory_per_sample.svg";

/// One process: what the driver saw and what the process held.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Meas {
    pub allocations: u64,
    pub allocated_bytes: u64,
    pub peak_live_bytes: u64,
    pub unknown_handles: u64,
    pub peak_rss_bytes: u64,
    pub checksum: String,
}

/// One sample: A (no layer), C (enforce), D (zero-copy twin).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct MemRun {
    pub sample: String,
    pub size_mib: f64,
    pub plan: String,
    pub base: Option<Meas>,
    pub echo: Option<Meas>,
    pub zero: Option<Meas>,
    pub stats: Option<Stats>,
    pub errors: Vec<String>,
}

impl MemRun {
    pub fn identical(&self) -> bool {
        let c: Vec<&str> = [&self.base, &self.echo, &self.zero]
            .iter()
            .filter_map(|m| m.as_ref().map(|m| m.checksum.as_str()))
            .collect();
        c.len() == 3 && c.iter().all(|x| *x == c[0])
    }
}

/// Writes the test layer's manifest into `work/testlayer`; the directory.
fn test_layer_dir(b: &Build, work: &Path) -> Result<PathBuf, String> {
    let lib = b
        .samples
        .parent()
        .ok_or("no build directory")?
        .join(TEST_LAYER_FILE);
    if !lib.exists() {
        return Err(format!(
            "{} not found: build the workspace (`cargo build --release --workspace`)",
            lib.display()
        ));
    }
    let dir = work.join("testlayer");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let m = serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": "VK_LAYER_ECHO_test_discrete",
            "type": "GLOBAL",
            "library_path": lib,
            "api_version": "1.3.239",
            "implementation_version": "1",
            "description": "test only: counts device memory at the driver boundary"
        }
    });
    std::fs::write(dir.join("VkLayer_ECHO_test_discrete.json"), m.to_string())
        .map_err(|e| e.to_string())?;
    Ok(dir)
}

/// Runs one process with the test layer below (echo above it when `layer` loads echo).
fn measure_one(
    b: &Build,
    test_dir: &Path,
    args: &[String],
    layer: &Layer,
    memlog: &Path,
) -> Result<Meas, String> {
    let _ = std::fs::remove_file(memlog);
    let mut cmd = runner::command(b, &b.samples, args, layer);
    // The first directory's layer sits closest to the application (loader 1.3.239).
    let (path, layers) = match layer {
        Layer::None => (
            test_dir.display().to_string(),
            "VK_LAYER_ECHO_test_discrete".to_string(),
        ),
        Layer::Mode(..) => (
            format!("{}:{}", b.manifest_dir.display(), test_dir.display()),
            "VK_LAYER_echo:VK_LAYER_ECHO_test_discrete".to_string(),
        ),
    };
    cmd.env("VK_ADD_LAYER_PATH", path)
        .env("VK_INSTANCE_LAYERS", layers)
        .env("VK_ECHO_TEST_TABLE", "real")
        .env("VK_ECHO_TEST_MEMLOG", memlog)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run: {e}"))?;
    let mut out = String::new();
    if let Some(mut so) = child.stdout.take() {
        use std::io::Read;
        let _ = so.read_to_string(&mut out);
    }
    let (status, rss) = wait_rusage(child.id() as i32)?;
    if status != 0 {
        return Err(format!("{} exited with status {status}", args.join(" ")));
    }
    let v: Value = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or("no JSON line")?;
    let text = std::fs::read_to_string(memlog)
        .map_err(|e| format!("the test layer wrote no memory log: {e}"))?;
    let m: Value = serde_json::from_str(text.lines().last().unwrap_or("")).map_err(|e| {
        format!(
            "memory log {}: {e}",
            memlog.file_name().unwrap_or_default().to_string_lossy()
        )
    })?;
    let n = |k: &str| m[k].as_u64().unwrap_or(0);
    Ok(Meas {
        allocations: n("allocations"),
        allocated_bytes: n("allocated_bytes"),
        peak_live_bytes: n("peak_live_bytes"),
        unknown_handles: n("unknown_handles"),
        peak_rss_bytes: rss,
        checksum: v["checksum"].as_str().unwrap_or("?").to_string(),
    })
}

/// Waits for child `pid`: (exit status, peak resident bytes).
fn wait_rusage(pid: i32) -> Result<(i32, u64), String> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child; the out pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if r != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((code, ru.ru_maxrss as u64 * 1024))
}

/// Measures every sample in `samples` at its bench size (3 timed iterations after 1 warm-up:
/// memory does not depend on iterations; the plan is made for exactly these arguments).
pub fn measure(o: &Opts, b: &Build, samples: &[(String, String)]) -> Vec<MemRun> {
    let mut mo = o.clone();
    mo.iters = 3;
    mo.warmup = 1;
    let test_dir = match test_layer_dir(b, &o.work) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("echo-bench: memory: {e}");
            return samples
                .iter()
                .map(|(n, _)| MemRun {
                    sample: n.clone(),
                    errors: vec![e.clone()],
                    ..Default::default()
                })
                .collect();
        }
    };
    let mut out = Vec::new();
    for (name, _) in samples {
        let size = sample_size(name, o);
        eprintln!("echo-bench: memory: {name} at {size} MiB …");
        let mut r = MemRun {
            sample: name.clone(),
            size_mib: size,
            ..Default::default()
        };
        let plan = make_plan(&mo, b, name, size);
        r.plan = plan.status.clone();
        let base = o.work.join(format!("{name}.memory"));
        let memlog = base.with_extension("mem.jsonl");
        let stats = base.with_extension("stats.jsonl");
        let args = |variant: &str| sample_args(name, size, &mo, variant, false);
        let mut take = |what: &str, res: Result<Meas, String>| match res {
            Ok(m) => Some(m),
            Err(e) => {
                r.errors.push(format!("{what}: {e}"));
                None
            }
        };
        r.base = take(
            "A",
            measure_one(b, &test_dir, &args("staging"), &Layer::None, &memlog),
        );
        r.zero = take(
            "D",
            measure_one(b, &test_dir, &args("zero-copy"), &Layer::None, &memlog),
        );
        if let Some(p) = &plan.path {
            let _ = std::fs::remove_file(&stats);
            let layer = Layer::Mode(
                "enforce",
                vec![
                    ("PLAN", p.display().to_string()),
                    ("STATS", stats.display().to_string()),
                ],
            );
            r.echo = take(
                "C",
                measure_one(b, &test_dir, &args("staging"), &layer, &memlog),
            );
            r.stats = runner::read_stats(&stats)
                .ok()
                .and_then(|s| s.into_iter().last());
        } else {
            r.errors.push(format!("no plan: {}", plan.status));
        }
        eprintln!(
            "echo-bench:   driver {} → {} (zero-copy {}), peak RSS {} → {}",
            mib(r.base.as_ref().map(|m| m.peak_live_bytes)),
            mib(r.echo.as_ref().map(|m| m.peak_live_bytes)),
            mib(r.zero.as_ref().map(|m| m.peak_live_bytes)),
            mib(r.base.as_ref().map(|m| m.peak_rss_bytes)),
            mib(r.echo.as_ref().map(|m| m.peak_rss_bytes)),
        );
        out.push(r);
    }
    out
}

fn mib(v: Option<u64>) -> String {
    v.map_or("?".into(), human_bytes)
}

fn ratio(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0 => format!("{:.2}", b as f64 / a as f64),
        _ => "?".into(),
    }
}

/// The RESULTS.md section.
pub fn markdown(runs: &[MemRun], o: &Opts, when: &str, png: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "{SECTION}");
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Measured {when} by `echo-bench {}--memory` (bench/src/memory.rs): one process per configuration, {} MiB ({}) (3 timed iterations after 1 warm-up; the plan is made for exactly these arguments). **Device memory** is counted at the driver boundary by the test-only layer `VK_LAYER_ECHO_test_discrete` loaded *below* echo (it presents the driver's own table): every `vkAllocateMemory` that reaches the driver, and the peak of live bytes (allocations minus frees). **Peak RSS** is the process's `ru_maxrss`. A = staging sample without the layer, C = with echo enforcing the plan, D = the hand-written zero-copy twin.",
        if o.full { "--full " } else { "" },
        o.size_mib,
        caps_text(o)
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| sample | MiB | plan | device memory A → C (peak live at the driver) | C / A | zero-copy D | allocations A → C | not allocated by echo (skipped / in part / made late) | peak RSS A → C | C / A | peak RSS D | identical | invented handles at the driver |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let g = |m: &Option<Meas>, f: fn(&Meas) -> u64| m.as_ref().map(f);
        let skipped = r.stats.as_ref().map_or("?".to_string(), |st| {
            format!(
                "{} ({} / {} / {})",
                human_bytes(st.memory_not_allocated),
                st.allocations_skipped,
                st.allocations_windowed,
                st.allocations_made_late
            )
        });
        let unknown: u64 = [&r.base, &r.echo, &r.zero]
            .iter()
            .filter_map(|m| m.as_ref().map(|m| m.unknown_handles))
            .sum();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} → {} | {} | {} | {} → {} | {} | {} → {} | {} | {} | {} | {} |",
            r.sample,
            r.size_mib,
            r.plan,
            mib(g(&r.base, |m| m.peak_live_bytes)),
            mib(g(&r.echo, |m| m.peak_live_bytes)),
            ratio(
                g(&r.base, |m| m.peak_live_bytes),
                g(&r.echo, |m| m.peak_live_bytes)
            ),
            mib(g(&r.zero, |m| m.peak_live_bytes)),
            g(&r.base, |m| m.allocations).map_or("?".into(), |v| v.to_string()),
            g(&r.echo, |m| m.allocations).map_or("?".into(), |v| v.to_string()),
            skipped,
            mib(g(&r.base, |m| m.peak_rss_bytes)),
            mib(g(&r.echo, |m| m.peak_rss_bytes)),
            ratio(
                g(&r.base, |m| m.peak_rss_bytes),
                g(&r.echo, |m| m.peak_rss_bytes)
            ),
            mib(g(&r.zero, |m| m.peak_rss_bytes)),
            if r.identical() { "yes" } else { "**NO**" },
            unknown,
        );
    }
    let errs: Vec<String> = runs
        .iter()
        .flat_map(|r| r.errors.iter().map(move |e| format!("{}: {e}", r.sample)))
        .collect();
    if !errs.is_empty() {
        let _ = writeln!(s);
        for e in errs {
            let _ = writeln!(s, "- error: {e}");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Echo does not make a staging allocation when the plan shows that every buffer bound into it is an aliased member whose bytes live in its partner's memory (`skip_allocation`); the application gets a handle of echo's own. Where every staging allocation qualifies, C's device memory is D's: the staging copies' memory is gone at the driver, not only untouched. A device buffer bound into its staging buffer's memory (`device_into_staging`, sub-allocated staging) leaves its own allocation empty: echo makes only the window of it that holds buffers no group names (`device_memory`; suballoc's device block: its 256-byte parameter buffer), or none of it. suballoc's staging block is mapped and holds a header, so it is made. Peak RSS includes the process's own heap (host-side input and output arrays, the driver's code and state), so it falls by less than device memory does; on lavapipe, which backs device memory with host memory, untouched pages were never resident even before this change."
    );
    let _ = writeln!(s);
    if png {
        let _ = writeln!(
            s,
            "**Device memory at the driver, with against without the layer** ([SVG]({PLOT}))\n\n![Device memory at the driver, with against without the layer]({})",
            Path::new(PLOT).with_extension("png").display()
        );
    } else {
        let _ = writeln!(
            s,
            "**Device memory at the driver, with against without the layer**: [SVG]({PLOT})"
        );
    }
    let _ = writeln!(s);
    s
}

/// The plot: device memory with the layer (and the zero-copy twin) against without, per sample,
/// with the lines "no saving" and "halved". Returns whether a PNG was made.
pub fn plot(runs: &[MemRun], out: &Path, full: bool) -> Result<bool, String> {
    const M: f64 = 1024.0 * 1024.0;
    let pts = |f: fn(&MemRun) -> Option<u64>, label: bool| -> Vec<Point> {
        runs.iter()
            .filter_map(|r| {
                let x = r.base.as_ref()?.peak_live_bytes as f64 / M;
                let y = f(r)? as f64 / M;
                Some(Point {
                    label: label.then(|| r.sample.clone()),
                    ..Point::new(x, y)
                })
            })
            .collect()
    };
    let xs: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.base.as_ref().map(|m| m.peak_live_bytes as f64 / M))
        .collect();
    if xs.is_empty() {
        return Ok(false);
    }
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min) * 0.4;
    let hi = xs.iter().copied().fold(0.0, f64::max) * 1.6;
    let line = |k: f64| -> Vec<Point> {
        (0..=20)
            .map(|i| {
                let x = lo * (hi / lo).powf(i as f64 / 20.0);
                Point::new(x, x * k)
            })
            .collect()
    };
    let plot = Plot {
        title: format!(
            "Device memory at the driver, per sample ({} run)",
            if full { "full" } else { "quick" }
        ),
        x_label: "without the layer: peak live vkAllocateMemory bytes (MiB, log scale)".into(),
        y_label: "with the layer / zero-copy twin (MiB, log scale)".into(),
        x: Axis {
            log: true,
            range: Some((lo, hi)),
        },
        y: Axis {
            log: true,
            range: Some((lo * 0.5 * 0.8, hi)),
        },
        x_ticks: None,
        series: vec![
            Series {
                name: "no saving (y = x)".into(),
                color: "#555555",
                marker: Marker::None,
                line: true,
                dashed: true,
                points: line(1.0),
            },
            Series {
                name: "halved (y = x/2)".into(),
                color: "#2ca02c",
                marker: Marker::None,
                line: true,
                dashed: true,
                points: line(0.5),
            },
            Series {
                name: "zero-copy twin (ring; drawn first)".into(),
                color: "#1f77b4",
                marker: Marker::Ring,
                line: false,
                dashed: false,
                points: pts(|r| r.zero.as_ref().map(|m| m.peak_live_bytes), false),
            },
            Series {
                name: "echo (enforce; a dot inside a ring: equal)".into(),
                color: "#d62728",
                marker: Marker::Dot,
                line: false,
                dashed: false,
                points: pts(|r| r.echo.as_ref().map(|m| m.peak_live_bytes), true),
            },
        ],
        note: Some(
            "counted by the test layer below echo (VK_ECHO_TEST_MEMLOG); one process per configuration"
                .into(),
        ),
    };
    Ok(svg::write_with_png(&out.join(PLOT), &plot.to_svg())?.is_some())
}

#[cfg(test)]
mod plot_tests {
    /// The committed bench/memory.json drawn again: the plot names its axes and series.
    #[test]
    fn memory_plot_from_the_committed_measurement() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/memory.json"))
            .expect("bench/memory.json");
        let runs: Vec<super::MemRun> = serde_json::from_str(&text).unwrap();
        let dir = std::env::temp_dir().join(format!("echo-bench-memplot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        super::plot(&runs, &dir, true).unwrap();
        let svg = std::fs::read_to_string(dir.join(super::PLOT)).unwrap();
        if std::env::var_os("ECHO_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("log scale"), "{svg}");
        for r in &runs {
            assert!(svg.contains(&r.sample), "{} not labelled", r.sample);
        }
    }
}
