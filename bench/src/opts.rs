//! What one `echo-bench` invocation was asked for, and the arguments and sizes each sample runs
//! with (below the steps that run them, the memory measurement and the report).

use serde::Serialize;
use std::path::PathBuf;

/// Sizes of the full sweep (DESIGN §9: not only powers of two; 31/32/33 straddle allocator cliffs).
pub const FULL_SWEEP: &[f64] = &[
    1.0, 4.0, 8.0, 16.0, 24.0, 31.0, 32.0, 33.0, 48.0, 64.0, 128.0,
];

pub const QUICK_SWEEP: &[f64] = &[8.0, 31.0, 32.0, 33.0];

/// Compute-heavy samples are capped so a run stays in minutes: sgemm's work grows as n³ with
/// n = sqrt(size/4); pipeline and conv2d do much more arithmetic per byte than the others.
/// (name, quick cap, full cap) in MiB.
pub const SIZE_CAPS: &[(&str, f64, f64)] = &[
    ("sgemm", 1.0, 1.0),
    ("pipeline", 1.0, 4.0),
    ("conv2d", 4.0, 16.0),
];

/// The size a sample runs at: `--size-mib`, capped for the compute-heavy ones.
pub fn sample_size(name: &str, o: &Opts) -> f64 {
    SIZE_CAPS
        .iter()
        .find(|c| c.0 == name)
        .map_or(o.size_mib, |c| {
            o.size_mib.min(if o.full { c.2 } else { c.1 })
        })
}

/// The caps in force, for people.
pub fn caps_text(o: &Opts) -> String {
    SIZE_CAPS
        .iter()
        .map(|c| format!("{} ≤ {} MiB", c.0, if o.full { c.2 } else { c.1 }))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Clone, Debug, Serialize)]
pub struct Opts {
    pub full: bool,
    pub out: PathBuf,
    pub work: PathBuf,
    pub samples: Option<Vec<String>>,
    pub negatives: bool,
    pub size_mib: f64,
    pub iters: u32,
    pub warmup: u32,
    pub procs: usize,
    pub timing_procs: usize,
    pub sweep: Vec<f64>,
    pub calls: bool,
    pub calls_scale: f64,
    /// Measure memory per sample (on by default).
    pub memory: bool,
    /// Only the memory measurement.
    pub memory_only: bool,
    pub kept_only: bool,
    pub command: String,
}

pub fn sample_args(
    name: &str,
    size_mib: f64,
    o: &Opts,
    variant: &str,
    timing: bool,
) -> Vec<String> {
    let mut a = vec![
        name.to_string(),
        "--size-mib".into(),
        format!("{size_mib}"),
        "--iters".into(),
        o.iters.to_string(),
        "--warmup".into(),
        o.warmup.to_string(),
        "--variant".into(),
        variant.into(),
    ];
    if timing {
        a.push("--timing".into());
    }
    a
}

pub fn slug(name: &str, size_mib: f64) -> String {
    format!("{name}-{}", format!("{size_mib}").replace('.', "_"))
}
