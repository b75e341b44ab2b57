//! What every sample shares outside Vulkan: options, deterministic input data, the iteration loop
//! with timing, the output checksum and the one-line JSON report.

use std::time::{Duration, Instant};

/// What a sample's step returns: a Vulkan call's error, or any other, in words.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Wall time spent in `vk::Stream::run` (record, submit, wait) by every thread, in ns; read by
/// `--per-iter` to split an iteration into host work and GPU round trips.
pub static RUN_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    /// Discrete-GPU style: staging buffers and vkCmdCopyBuffer.
    Staging,
    /// Hand-written UMA version: host-visible device-local buffers, no copies.
    ZeroCopy,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Staging => "staging",
            Variant::ZeroCopy => "zero-copy",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Opts {
    pub variant: Variant,
    /// The sample's main size in bytes (each sample says what it measures).
    pub size_bytes: u64,
    pub iters: u32,
    pub threads: u32,
    pub seed: u64,
    /// Timestamp queries around copies; adds copy_ms_median and f_copy to the report.
    pub timing: bool,
    /// Untimed iterations run first (they still feed the checksum).
    pub warmup: u32,
    /// Test only: saxpy omits the upload → compute barrier (validation must catch it).
    pub inject_hazard: bool,
    /// Test only: `race` writes the next input while the dispatch is pending in this iteration
    /// only, and after the dispatch's fence in every other one (a one-off, late race).
    pub race_at: Option<u32>,
    /// Print every timed iteration's time and the process's minor page faults during it
    /// (`iter_ms`, `iter_minflt`; faults read from /proc/self/stat outside the timed part).
    pub per_iter: bool,
}

impl Opts {
    pub fn staging(&self) -> bool {
        self.variant == Variant::Staging
    }
    /// Number of f32 elements in `size_bytes` (at least `min`).
    pub fn floats(&self, min: u64) -> u64 {
        (self.size_bytes / 4).max(min)
    }
}

/// Bytes copied and time spent in copies by one submission.
#[derive(Clone, Copy, Default)]
pub struct Exec {
    pub bytes_copied: u64,
    pub copy_ns: f64,
}

/// A deterministic seed for (run seed, iteration, stream).
pub fn seed(base: u64, iter: u32, stream: u32) -> u32 {
    let mut x = base ^ ((iter as u64) << 32) ^ (stream as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u32
}

#[inline]
fn hash32(seed: u32, i: u32) -> u32 {
    let mut h = (i ^ seed).wrapping_mul(0x9E37_79B1);
    h ^= h >> 15;
    h = h.wrapping_mul(0x85EB_CA77);
    h ^ (h >> 13)
}

/// Fills `dst` with values in [-1, 1), a pure function of (seed, index).
pub fn fill_f32(dst: &mut [f32], seed: u32) {
    for (i, v) in dst.iter_mut().enumerate() {
        *v = (hash32(seed, i as u32) >> 8) as f32 * (2.0 / 16_777_216.0) - 1.0;
    }
}

/// Fills `dst` with bytes, a pure function of (seed, index).
pub fn fill_u8(dst: &mut [u8], seed: u32) {
    for (i, v) in dst.iter_mut().enumerate() {
        *v = (hash32(seed, i as u32) >> 24) as u8;
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Collects per-iteration times, copy statistics and the FNV-1a 64 checksum of every output byte
/// the host reads back. Time spent folding the checksum is excluded from the iteration time.
pub struct Sink {
    warmup: u32,
    hash: u64,
    iter_ms: Vec<f64>,
    /// Minor faults of the whole process per timed iteration (`--per-iter`), else empty.
    iter_minflt: Vec<u64>,
    /// Per timed iteration (`--per-iter`): the counters of [`Counters`], differences.
    iter_ctr: Vec<Counters>,
    per_iter: bool,
    copy_ms: Vec<f64>,
    bytes: Vec<u64>,
    excluded: Duration,
    cur: Exec,
}

impl Sink {
    pub fn new(warmup: u32) -> Self {
        Sink {
            warmup,
            hash: FNV_OFFSET,
            iter_ms: Vec::new(),
            iter_minflt: Vec::new(),
            iter_ctr: Vec::new(),
            per_iter: false,
            copy_ms: Vec::new(),
            bytes: Vec::new(),
            excluded: Duration::ZERO,
            cur: Exec::default(),
        }
    }

    /// Runs `warmup` untimed, then `iters` timed iterations of `f(iteration, sink)`.
    pub fn iterate(&mut self, iters: u32, mut f: impl FnMut(u32, &mut Sink) -> Res<()>) -> Res<()> {
        for it in 0..self.warmup + iters {
            iteration_mark(it);
            self.excluded = Duration::ZERO;
            self.cur = Exec::default();
            let faults = if self.per_iter { minor_faults() } else { 0 };
            let ctr = if self.per_iter {
                Counters::now()
            } else {
                Counters::default()
            };
            let start = Instant::now();
            f(it, self)?;
            let elapsed = start.elapsed().saturating_sub(self.excluded);
            if it < self.warmup {
                continue;
            }
            if self.per_iter {
                self.iter_ctr.push(Counters::now().since(&ctr));
                self.iter_minflt.push(minor_faults().saturating_sub(faults));
            }
            self.iter_ms.push(elapsed.as_secs_f64() * 1e3);
            self.copy_ms.push(self.cur.copy_ns / 1e6);
            self.bytes.push(self.cur.bytes_copied);
        }
        Ok(())
    }

    /// Record per-iteration times and faults (`--per-iter`).
    pub fn per_iter(&mut self, on: bool) {
        self.per_iter = on;
    }

    /// Accounts one submission's copies to the current iteration.
    pub fn add(&mut self, e: Exec) {
        self.cur.bytes_copied += e.bytes_copied;
        self.cur.copy_ns += e.copy_ns;
    }

    /// Folds output bytes into the checksum (not timed).
    pub fn fold(&mut self, bytes: &[u8]) {
        let t = Instant::now();
        let mut h = self.hash;
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(FNV_PRIME);
        }
        self.hash = h;
        self.excluded += t.elapsed();
    }

    /// The one JSON line the run prints on stdout.
    pub fn json(&self, sample: &str, o: &Opts) -> String {
        let med = |v: &[f64]| {
            let mut s = v.to_vec();
            s.sort_by(|a, b| a.total_cmp(b));
            match s.len() {
                0 => 0.0,
                n if n % 2 == 1 => s[n / 2],
                n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
            }
        };
        let n = self.iter_ms.len().max(1) as f64;
        let iter_sum: f64 = self.iter_ms.iter().sum();
        let bytes_per_iter = self.bytes.iter().sum::<u64>() / self.bytes.len().max(1) as u64;
        let mut s = format!(
            "{{\"sample\":\"{sample}\",\"variant\":\"{}\",\"size_bytes\":{},\"iters\":{},\
             \"checksum\":\"{:016x}\",\"iter_ms_median\":{:.4},\"iter_ms_mean\":{:.4},\
             \"bytes_copied_per_iter\":{bytes_per_iter}",
            o.variant.name(),
            o.size_bytes,
            self.iter_ms.len(),
            self.hash,
            med(&self.iter_ms),
            iter_sum / n,
        );
        if o.timing {
            let copy_sum: f64 = self.copy_ms.iter().sum();
            let f_copy = if iter_sum > 0.0 {
                copy_sum / iter_sum
            } else {
                0.0
            };
            s += &format!(
                ",\"copy_ms_median\":{:.4},\"copy_ms_mean\":{:.4},\"f_copy\":{f_copy:.4}",
                med(&self.copy_ms),
                copy_sum / n
            );
        }
        if sample == "threads" {
            s += &format!(",\"threads\":{}", o.threads);
        }
        if o.per_iter {
            let ms: Vec<String> = self.iter_ms.iter().map(|v| format!("{v:.4}")).collect();
            let fl: Vec<String> = self.iter_minflt.iter().map(u64::to_string).collect();
            s += &format!(
                ",\"iter_ms\":[{}],\"iter_minflt\":[{}]",
                ms.join(","),
                fl.join(",")
            );
            let col = |f: &dyn Fn(&Counters) -> String| {
                self.iter_ctr.iter().map(f).collect::<Vec<_>>().join(",")
            };
            s += &format!(
                ",\"iter_run_ms\":[{}],\"iter_cpu_ms\":[{}],\"iter_main_cpu_ms\":[{}],\"iter_sys_ms\":[{}],\
                 \"iter_vcsw\":[{}],\"iter_ivcsw\":[{}],\"iter_steal_ms\":[{}]",
                col(&|c| format!("{:.4}", c.run_ns as f64 / 1e6)),
                col(&|c| format!("{:.4}", c.cpu_ns as f64 / 1e6)),
                col(&|c| format!("{:.4}", c.main_cpu_ns as f64 / 1e6)),
                col(&|c| format!("{:.4}", c.sys_ns as f64 / 1e6)),
                col(&|c| c.vcsw.to_string()),
                col(&|c| c.ivcsw.to_string()),
                col(&|c| (c.steal_ticks * 10).to_string()),
            );
        }
        s + "}"
    }
}

/// Counters read around each timed iteration with `--per-iter`, to tell where an iteration's
/// wall-clock time went: CPU time of the whole process (every thread, the driver's workers
/// included), of the calling thread, and the process's time in the kernel (page faults,
/// mprotect, futex: what an instruction count in user space does not see), wall time inside `Stream::run` (record, submit, wait),
/// voluntary context switches (a thread blocked: waiting) and involuntary ones (a thread
/// preempted: another process or thread wanted the CPU), and the machine's steal time (the
/// hypervisor ran something else; in clock ticks, reported as ms at 100 Hz).
#[derive(Clone, Copy, Default, Debug)]
pub struct Counters {
    pub run_ns: u64,
    pub cpu_ns: u64,
    pub main_cpu_ns: u64,
    pub sys_ns: u64,
    pub vcsw: u64,
    pub ivcsw: u64,
    pub steal_ticks: u64,
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
    fn getrusage(who: i32, usage: *mut [i64; 18]) -> i32;
}

fn clock_ns(clk: i32) -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec.
    if unsafe { clock_gettime(clk, &mut ts) } != 0 {
        return 0;
    }
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

impl Counters {
    pub fn now() -> Counters {
        // struct rusage on 64-bit Linux: two timevals, then 14 longs; nvcsw and nivcsw last.
        let mut ru = [0i64; 18];
        // SAFETY: getrusage(RUSAGE_SELF) fills one struct rusage (18 longs on LP64 Linux).
        let ok = unsafe { getrusage(0, &mut ru) } == 0;
        let steal = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| {
                s.lines()
                    .next()
                    .and_then(|l| l.split_whitespace().nth(8).and_then(|v| v.parse().ok()))
            })
            .unwrap_or(0);
        Counters {
            run_ns: RUN_NS.load(std::sync::atomic::Ordering::Relaxed),
            cpu_ns: clock_ns(2),      // CLOCK_PROCESS_CPUTIME_ID
            main_cpu_ns: clock_ns(3), // CLOCK_THREAD_CPUTIME_ID
            sys_ns: if ok {
                (ru[2] * 1_000_000_000 + ru[3] * 1000) as u64
            } else {
                0
            },
            vcsw: if ok { ru[16] as u64 } else { 0 },
            ivcsw: if ok { ru[17] as u64 } else { 0 },
            steal_ticks: steal,
        }
    }

    pub fn since(&self, before: &Counters) -> Counters {
        Counters {
            run_ns: self.run_ns.saturating_sub(before.run_ns),
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
            main_cpu_ns: self.main_cpu_ns.saturating_sub(before.main_cpu_ns),
            sys_ns: self.sys_ns.saturating_sub(before.sys_ns),
            vcsw: self.vcsw.saturating_sub(before.vcsw),
            ivcsw: self.ivcsw.saturating_sub(before.ivcsw),
            steal_ticks: self.steal_ticks.saturating_sub(before.steal_ticks),
        }
    }
}

/// The process's minor page faults so far (field 10 of /proc/self/stat); 0 where unreadable.
pub fn minor_faults() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the parenthesised command name (which may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |x| x.1);
    rest.split_whitespace()
        .nth(7)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Called at the start of every iteration, warm-up included. It does nothing; callgrind's
/// `--dump-before=iteration_mark` writes a count at each call, so each dump holds one iteration
/// (scripts/samples-cg.sh; tests/c/common.h has the same marker for the C programs).
#[no_mangle]
#[inline(never)]
pub extern "C" fn iteration_mark(it: u32) {
    std::hint::black_box(it);
}
