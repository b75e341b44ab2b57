//! What `echo-bench` measures: the four configurations, each sample's runs and plan, the per-call
//! microbenchmark, and everything one invocation gathered (below the report that writes them).

use crate::machine::Machine;
use crate::opts::Opts;
use crate::stats::{self, Summary, MIN_GAIN, NOISY_RECOVERED};
use echo_analyzer::stats::Stats;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;

/// The four configurations of DESIGN §9 / issue 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Config {
    Base,
    Off,
    Echo,
    Zero,
}

impl Config {
    pub const ALL: [Config; 4] = [Config::Base, Config::Off, Config::Echo, Config::Zero];
    pub fn label(self) -> &'static str {
        match self {
            Config::Base => "A base (no layer)",
            Config::Off => "B layer mode=off",
            Config::Echo => "C echo (enforce + plan)",
            Config::Zero => "D zero-copy twin",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What profile + analyze produced for one sample and size.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PlanInfo {
    pub path: Option<PathBuf>,
    /// `N group(s)`, `no candidates`, `refused: …`, or `no plan: <error>`.
    pub status: String,
    pub groups: usize,
    pub rejected: Vec<String>,
    pub bytes_saved_per_iter: u64,
    pub memory_saved: u64,
    /// Peak of live `vkAllocateMemory` bytes in the profile trace (the sample without the layer).
    pub peak_memory: Option<u64>,
    pub profile_checksum: Option<String>,
}

/// Everything measured for one sample at one size.
#[derive(Clone, Debug, Serialize)]
pub struct SampleRun {
    pub sample: String,
    pub kind: String,
    pub size_mib: f64,
    pub configs: Vec<Config>,
    /// `times[config][round]`: the process's mean iteration time (ms); NaN when it failed.
    pub times: [Vec<f64>; 4],
    pub medians: [Vec<f64>; 4],
    pub checksums: [Vec<String>; 4],
    pub plan: PlanInfo,
    /// Statistics of the last enforce process (and of the last mode=off process).
    pub stats_echo: Option<Stats>,
    pub stats_off: Option<Stats>,
    pub f_copy: Vec<f64>,
    pub copy_ms: Vec<f64>,
    pub bytes_copied_per_iter: u64,
    pub iters_per_process: u32,
    pub errors: Vec<String>,
}

impl SampleRun {
    pub fn t(&self, c: Config) -> f64 {
        stats::median(&self.times[c.index()])
    }
    pub fn speedup(&self) -> Summary {
        Summary::of(&stats::paired(&self.times[0], &self.times[2], |b, e| b / e))
    }
    pub fn zero_speedup(&self) -> Summary {
        Summary::of(&stats::paired(&self.times[0], &self.times[3], |b, z| b / z))
    }
    /// B/A − 1 per round: what loading the layer costs when it does nothing.
    pub fn passthrough(&self) -> Summary {
        Summary::of(&stats::paired(&self.times[0], &self.times[1], |b, off| {
            off / b - 1.0
        }))
    }
    /// Per-round recovered fractions. Empty when the measured copy fraction is under `MIN_GAIN`:
    /// removing every copy cannot then gain more than the noise, so the quotient means nothing.
    pub fn recovered(&self) -> Summary {
        if self.f_copy() < MIN_GAIN {
            return Summary::of(&[]);
        }
        Summary::of(&stats::recovered_per_round(
            &self.times[0],
            &self.times[2],
            &self.times[3],
            MIN_GAIN,
        ))
    }
    /// The recovered fraction of the least-disturbed processes: each configuration's fastest
    /// (noise on a shared machine only adds time, so the minimum is the least disturbed).
    pub fn recovered_least_disturbed(&self) -> Option<f64> {
        let min = |c: Config| {
            self.times[c.index()]
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .fold(f64::INFINITY, f64::min)
        };
        if self.f_copy() < MIN_GAIN && !self.f_copy.is_empty() {
            return None;
        }
        stats::recovered(
            min(Config::Base),
            min(Config::Echo),
            min(Config::Zero),
            MIN_GAIN,
        )
    }
    /// Whether the per-round recovered fractions so far span more than the noise mark.
    pub fn spread_is_wide(&self) -> bool {
        let s = Summary::of(&stats::recovered_per_round(
            &self.times[0],
            &self.times[2],
            &self.times[3],
            MIN_GAIN,
        ));
        s.is_valid() && s.max - s.min > NOISY_RECOVERED
    }
    pub fn f_copy(&self) -> f64 {
        stats::median(&self.f_copy)
    }
    /// Every checksum of every configuration (and the profile run) equals the baseline's.
    pub fn identical(&self) -> Option<bool> {
        let base = self.checksums[0].first()?;
        let all = self.checksums.iter().flatten().all(|c| c == base);
        let prof = !matches!(&self.plan.profile_checksum, Some(c) if c != base);
        Some(all && prof)
    }
    /// Bytes the layer elided per iteration: its total over the process / iterations run
    /// (warm-up included, since the layer elides those too).
    pub fn elided_per_iter(&self) -> Option<u64> {
        let s = self.stats_echo.as_ref()?;
        Some(s.bytes_elided_run / (self.iters_per_process as u64).max(1))
    }
}

/// The per-call microbenchmark in three configurations.
#[derive(Clone, Debug, Serialize)]
pub struct CallsRun {
    pub labels: Vec<String>,
    /// `per[config][round]` = the JSON line of that process (or the error).
    pub per: Vec<Vec<Result<Value, String>>>,
    pub active: Vec<Option<bool>>,
}

pub const CALL_METRICS: &[(&str, &str)] = &[
    ("create_destroy_ns", "vkCreateBuffer + vkDestroyBuffer"),
    ("copy_record_ns", "vkCmdCopyBuffer (recording, 1 region)"),
    ("begin_end_ns", "vkBeginCommandBuffer + vkEndCommandBuffer"),
    (
        "submit_wait_ns",
        "vkQueueSubmit (empty) + vkWaitForFences + vkResetFences",
    ),
];

impl CallsRun {
    pub fn values(&self, config: usize, metric: &str) -> Vec<f64> {
        self.per[config]
            .iter()
            .map(|r| match r {
                Ok(v) => v[metric].as_f64().unwrap_or(f64::NAN),
                Err(_) => f64::NAN,
            })
            .collect()
    }
    /// Per-round `config / none − 1`.
    pub fn cost(&self, config: usize, metric: &str) -> Summary {
        Summary::of(&stats::paired(
            &self.values(0, metric),
            &self.values(config, metric),
            |n, c| c / n - 1.0,
        ))
    }
}

/// Everything one invocation measured.
#[derive(Serialize)]
pub struct Results {
    pub opts: Opts,
    pub started: String,
    pub finished: String,
    pub machine: Machine,
    pub samples: Vec<SampleRun>,
    pub sweep: Vec<SampleRun>,
    pub calls: Option<CallsRun>,
    pub wall_s: f64,
}
