//! What the selftest found, and the verdict a person can act on: the results of every device and
//! workload (written as `selftest.json` in the bundle), the findings they raise, the exit status,
//! and the text `vkecho selftest` prints — the verdict first.
//!
//! A finding is `unsafe` when echo changed what a program computes or would have shared memory
//! it must not (a run with echo differs from the run without it, crashes or hangs; a hazard's
//! pair is accepted or refused for another reason than the one that must refuse it; the
//! validation layer reports something with echo it does not report without). It is
//! `could-not-run` when the selftest itself could not judge (a workload fails or is not
//! deterministic without echo, echo did not load). Everything else is a note.

use echo_analyzer::words::{human_bytes, plural};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    Note,
    CouldNotRun,
    Unsafe,
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub level: Level,
    pub text: String,
}

impl Finding {
    pub fn new(level: Level, text: impl Into<String>) -> Finding {
        Finding {
            level,
            text: text.into(),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RunReport {
    pub label: String,
    pub mode: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iter_ms: Option<f64>,
    /// Compared with the reference run (no echo): identical or not; `None` when not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identical: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
    pub log: String,
    /// The layer's statistics of the run, in a line (`Stats::summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
}

impl RunReport {
    /// A run with echo loaded whose output was compared.
    pub fn compared_with_echo(&self) -> bool {
        self.mode != "no echo" && self.identical.is_some()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PairReport {
    pub staging: String,
    pub device: String,
    pub role: String,
    pub copies: u64,
    /// `accepted` or `refused`.
    pub decision: String,
    /// The refusal's condition (`S2`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Why, in plain words (refusals).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Timing {
    pub rounds: usize,
    /// Median iteration time of each run, per round.
    pub staging_ms: Vec<f64>,
    pub echo_ms: Vec<f64>,
    pub zero_copy_ms: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    crate::calibrate::median(&mut v)
}

impl Timing {
    pub fn staging(&self) -> f64 {
        median(&self.staging_ms)
    }
    pub fn echo(&self) -> f64 {
        median(&self.echo_ms)
    }
    pub fn zero(&self) -> Option<f64> {
        (!self.zero_copy_ms.is_empty()).then(|| median(&self.zero_copy_ms))
    }
    /// The per-round ratios staging / echo straddle 1.0: the difference is inside the noise.
    pub fn noisy(&self) -> bool {
        let r: Vec<f64> = self
            .staging_ms
            .iter()
            .zip(&self.echo_ms)
            .map(|(s, e)| s / e)
            .collect();
        r.is_empty() || (r.iter().any(|&x| x <= 1.0) && r.iter().any(|&x| x >= 1.0))
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ValidationReport {
    pub runs: usize,
    /// Message ids without echo.
    pub without_echo: Vec<String>,
    /// (run, ids) reported with echo but not without it.
    pub new: Vec<(String, Vec<String>)>,
    /// (run, ids) reported without echo but not with it.
    pub missing: Vec<(String, Vec<String>)>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkloadReport {
    pub name: String,
    pub about: String,
    /// `clean`, or `refuse S2 (upload)` …
    pub expect: String,
    pub runs: Vec<RunReport>,
    pub pairs: Vec<PairReport>,
    pub groups_planned: u32,
    pub groups_applied: u32,
    pub refusals_expected: usize,
    pub refusals_as_they_must: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
    pub memory_not_allocated: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationReport>,
    pub findings: Vec<Finding>,
    /// `vkecho show`'s page of the profile run, relative to the bundle's root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceReport {
    pub index: usize,
    pub name: String,
    pub class: String,
    pub active: bool,
    pub driver: String,
    pub api_version: String,
    pub buffer_bytes: u64,
    pub iterations: u32,
    pub rounds: usize,
    pub validation_layer: bool,
    pub workloads: Vec<WorkloadReport>,
    pub findings: Vec<Finding>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub vkecho_version: String,
    pub quick: bool,
    pub devices: Vec<DeviceReport>,
    /// What stopped the selftest before any device was tested.
    pub findings: Vec<Finding>,
    /// Filled in at the end: the verdict line and the exit status.
    pub verdict: String,
    pub exit_status: i32,
}

impl DeviceReport {
    fn all_findings(&self) -> impl Iterator<Item = (&str, &Finding)> {
        self.findings.iter().map(|f| ("", f)).chain(
            self.workloads
                .iter()
                .flat_map(|w| w.findings.iter().map(move |f| (w.name.as_str(), f))),
        )
    }
}

impl Report {
    fn worst(&self) -> Option<Level> {
        self.findings
            .iter()
            .chain(
                self.devices
                    .iter()
                    .flat_map(|d| d.all_findings().map(|x| x.1)),
            )
            .map(|f| f.level)
            .filter(|l| *l != Level::Note)
            .max()
    }

    /// 0 safe or inactive, 1 unsafe, 2 could not run.
    pub fn exit_status(&self) -> i32 {
        match self.worst() {
            Some(Level::Unsafe) => 1,
            Some(Level::CouldNotRun) => 2,
            _ => 0,
        }
    }

    fn texts(&self, level: Level) -> Vec<String> {
        let mut v: Vec<String> = self
            .findings
            .iter()
            .filter(|f| f.level == level)
            .map(|f| f.text.clone())
            .collect();
        for d in &self.devices {
            for (_, f) in d.all_findings() {
                if f.level == level {
                    v.push(if self.devices.len() > 1 {
                        format!("device {}: {}", d.index, f.text)
                    } else {
                        f.text.clone()
                    });
                }
            }
        }
        v
    }

    /// The first line: what to do.
    pub fn verdict(&self) -> String {
        match self.worst() {
            Some(Level::Unsafe) => {
                let t = self.texts(Level::Unsafe);
                format!("do not enable echo here: {}", t[0])
            }
            Some(Level::CouldNotRun) => {
                let t = self.texts(Level::CouldNotRun);
                format!("vkecho selftest could not judge echo here: {}", t[0])
            }
            _ => {
                let active: Vec<&DeviceReport> = self.devices.iter().filter(|d| d.active).collect();
                if active.is_empty() {
                    let why: Vec<String> = self
                        .devices
                        .iter()
                        .map(|d| format!("{} is {}", d.name, d.class))
                        .collect();
                    return format!(
                        "echo stays out on this machine: {} (echo acts only on unified-memory devices; with it enabled, programs run as without it); nothing else to test",
                        if why.is_empty() {
                            "no Vulkan device".to_string()
                        } else {
                            why.join(", ")
                        }
                    );
                }
                let mut parts = Vec::new();
                let (same, compared) = self.identical();
                parts.push(format!(
                    "{same}/{compared} runs with echo identical to the runs without"
                ));
                let (ok, want) = self.refusals();
                parts.push(format!("{ok}/{want} refusals as they must be"));
                if let Some(s) = self.savings() {
                    parts.push(s);
                }
                let mem: u64 = active
                    .iter()
                    .flat_map(|d| &d.workloads)
                    .map(|w| w.memory_not_allocated)
                    .sum();
                if mem > 0 {
                    parts.push(format!("{} of memory not allocated", human_bytes(mem)));
                }
                let on = if active.len() == 1 {
                    active[0].name.clone()
                } else {
                    format!("{} devices", active.len())
                };
                format!("echo is safe on {on}: {}", parts.join(", "))
            }
        }
    }

    /// (identical, compared) over every run with echo.
    pub fn identical(&self) -> (usize, usize) {
        let runs = self
            .devices
            .iter()
            .flat_map(|d| &d.workloads)
            .flat_map(|w| &w.runs)
            .filter(|r| r.compared_with_echo());
        let mut n = (0, 0);
        for r in runs {
            n.1 += 1;
            if r.identical == Some(true) {
                n.0 += 1;
            }
        }
        n
    }

    pub fn refusals(&self) -> (usize, usize) {
        self.devices
            .iter()
            .flat_map(|d| &d.workloads)
            .fold((0, 0), |(a, b), w| {
                (a + w.refusals_as_they_must, b + w.refusals_expected)
            })
    }

    /// "saves X of Y per iteration (Z %), W % of the zero-copy gain", over the timed workloads.
    pub fn savings(&self) -> Option<String> {
        let timed: Vec<&Timing> = self
            .devices
            .iter()
            .filter(|d| d.active)
            .flat_map(|d| &d.workloads)
            .filter_map(|w| w.timing.as_ref())
            .collect();
        if timed.is_empty() {
            return None;
        }
        let base: f64 = timed.iter().map(|t| t.staging()).sum();
        let echo: f64 = timed.iter().map(|t| t.echo()).sum();
        let saved = base - echo;
        // Round by round, over every timed workload: whether echo was faster in each round,
        // slower in each, or both (the difference is inside the noise).
        let rounds = timed
            .iter()
            .map(|t| t.staging_ms.len().min(t.echo_ms.len()))
            .min()
            .unwrap_or(0);
        let ratios: Vec<f64> = (0..rounds)
            .map(|r| {
                let b: f64 = timed.iter().map(|t| t.staging_ms[r]).sum();
                let e: f64 = timed.iter().map(|t| t.echo_ms[r]).sum();
                b / e
            })
            .collect();
        let faster = !ratios.is_empty() && ratios.iter().all(|&x| x > 1.0);
        let slower = !ratios.is_empty() && ratios.iter().all(|&x| x < 1.0);
        let pct = 100.0 * saved.abs() / base;
        let mut s = if faster {
            format!(
                "saves {} of {} per iteration ({pct:.0} %)",
                ms(saved),
                ms(base)
            )
        } else if slower {
            format!(
                "costs {} more than {} per iteration ({pct:.0} %)",
                ms(-saved),
                ms(base)
            )
        } else {
            format!(
                "no time difference beyond the noise ({} with echo, {} without, per iteration)",
                ms(echo),
                ms(base)
            )
        };
        let twins: Vec<&&Timing> = timed.iter().filter(|t| t.zero().is_some()).collect();
        if faster && !twins.is_empty() {
            let b: f64 = twins.iter().map(|t| t.staging()).sum();
            let e: f64 = twins.iter().map(|t| t.echo()).sum();
            let z: f64 = twins.iter().map(|t| t.zero().unwrap_or(f64::NAN)).sum();
            if b - z > 0.0 {
                s.push_str(&format!(
                    ", {:.0} % of the zero-copy gain",
                    100.0 * (b - e) / (b - z)
                ));
            }
        }
        if rounds < 2 {
            s.push_str(" (one timed round: no estimate of the noise)");
        }
        Some(s)
    }

    /// Everything `vkecho selftest` prints on stdout: the verdict first, then the evidence.
    pub fn render(&self, bundle: Option<&str>) -> String {
        let mut o = format!("{}\n", self.verdict);
        for level in [Level::Unsafe, Level::CouldNotRun] {
            let t = self.texts(level);
            for x in t
                .iter()
                .skip(if self.worst() == Some(level) { 1 } else { 0 })
            {
                o.push_str(&format!(
                    "  also{}: {x}\n",
                    if level == Level::Unsafe {
                        " unsafe"
                    } else {
                        ""
                    }
                ));
            }
        }
        for d in &self.devices {
            o.push('\n');
            o.push_str(&render_device(d));
        }
        for f in &self.findings {
            if f.level == Level::Note {
                o.push_str(&format!("note: {}\n", f.text));
            }
        }
        if let Some(b) = bundle {
            o.push_str(&format!(
                "\nreport bundle: {b}\n  send it with what you saw; it holds this text, the traces, plans and statistics of these runs, `vkecho doctor --json` and versions — nothing of your own programs (`tar -tzvf` it first if you like)\n"
            ));
        }
        o
    }
}

fn ms(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0} ms")
    } else if x.abs() >= 1.0 {
        format!("{x:.2} ms")
    } else {
        format!("{:.0} µs", x * 1000.0)
    }
}

fn render_device(d: &DeviceReport) -> String {
    let mut o = format!(
        "device {}: {} ({}, {}, Vulkan {})",
        d.index, d.name, d.class, d.driver, d.api_version
    );
    if !d.active {
        o.push_str(": echo stays out of it\n");
        for f in &d.findings {
            o.push_str(&format!("  {}\n", line(f)));
        }
        return o;
    }
    o.push_str(&format!(
        ": buffers of {}, {} per run, {} timed rounds{}\n",
        human_bytes(d.buffer_bytes),
        plural(u64::from(d.iterations), "iteration", "iterations"),
        d.rounds,
        if d.validation_layer {
            ", validation layer with synchronization validation"
        } else {
            ", no validation layer installed"
        }
    ));
    o.push_str(&format!(
        "  {:<11} {:<20} {:<34} {:>9} {:>10} {:>10} {:>10} {:>9}\n",
        "workload", "must", "pairs", "identical", "staging", "echo", "zero-copy", "not made"
    ));
    for w in &d.workloads {
        let same = w
            .runs
            .iter()
            .filter(|r| r.identical == Some(true) && r.compared_with_echo())
            .count();
        let compared = w.runs.iter().filter(|r| r.compared_with_echo()).count();
        let accepted = w.pairs.iter().filter(|p| p.decision == "accepted").count();
        let refused: Vec<String> = w.pairs.iter().filter_map(|p| p.condition.clone()).collect();
        let mut pairs = if w.pairs.is_empty() {
            "none".to_string()
        } else {
            format!("{accepted} accepted")
        };
        if !refused.is_empty() {
            pairs.push_str(&format!(", refused {}", refused.join(",")));
        }
        if w.groups_planned > 0 {
            pairs.push_str(&format!(
                ", {}/{} applied",
                w.groups_applied, w.groups_planned
            ));
        }
        let (s, e, z) = match &w.timing {
            Some(t) => (
                ms(t.staging()),
                format!("{}{}", ms(t.echo()), if t.noisy() { "~" } else { "" }),
                t.zero().map(ms).unwrap_or_else(|| "–".into()),
            ),
            None => ("–".into(), "–".into(), "–".into()),
        };
        o.push_str(&format!(
            "  {:<11} {:<20} {:<34} {:>9} {:>10} {:>10} {:>10} {:>9}\n",
            w.name,
            w.expect,
            pairs,
            format!("{same}/{compared}"),
            s,
            e,
            z,
            if w.memory_not_allocated > 0 {
                human_bytes(w.memory_not_allocated)
            } else {
                "–".into()
            }
        ));
        for f in &w.findings {
            o.push_str(&format!("    {}\n", line(f)));
        }
    }
    let val: Vec<&ValidationReport> = d
        .workloads
        .iter()
        .filter_map(|w| w.validation.as_ref())
        .collect();
    if !val.is_empty() {
        let runs: usize = val.iter().map(|v| v.runs).sum();
        let new: usize = val.iter().map(|v| v.new.len()).sum();
        o.push_str(&format!(
            "  validation (synchronization validation on): {}, {}\n",
            plural(runs as u64, "run", "runs"),
            if new == 0 {
                "no message with echo that is not there without it".to_string()
            } else {
                format!(
                    "{} with messages only with echo",
                    plural(new as u64, "run", "runs")
                )
            }
        ));
    }
    for f in &d.findings {
        o.push_str(&format!("  {}\n", line(f)));
    }
    o.push_str("  identical: runs with echo (profile, enforce, auto twice, timed rounds, validation) whose output equals the run without echo, byte for byte; staging, echo, zero-copy: median time per iteration over interleaved rounds (~: inside the noise); not made: device memory echo did not allocate\n");
    o
}

fn line(f: &Finding) -> String {
    match f.level {
        Level::Unsafe => format!("UNSAFE: {}", f.text),
        Level::CouldNotRun => format!("could not run: {}", f.text),
        Level::Note => format!("note: {}", f.text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, mode: &str, identical: Option<bool>) -> RunReport {
        RunReport {
            label: label.into(),
            mode: mode.into(),
            ok: true,
            identical,
            ..Default::default()
        }
    }

    fn clean() -> WorkloadReport {
        WorkloadReport {
            name: "upload".into(),
            expect: "clean".into(),
            runs: vec![
                run("baseline", "no echo", None),
                run("profile", "profile", Some(true)),
                run("enforce", "enforce", Some(true)),
            ],
            timing: Some(Timing {
                rounds: 2,
                staging_ms: vec![10.0, 10.2],
                echo_ms: vec![8.0, 8.1],
                zero_copy_ms: vec![7.5, 7.6],
            }),
            memory_not_allocated: 3 << 20,
            ..Default::default()
        }
    }

    fn hazard() -> WorkloadReport {
        WorkloadReport {
            name: "race".into(),
            expect: "refuse S2 (upload)".into(),
            runs: vec![run("enforce", "enforce", Some(true))],
            refusals_expected: 1,
            refusals_as_they_must: 1,
            ..Default::default()
        }
    }

    fn report(ws: Vec<WorkloadReport>) -> Report {
        Report {
            devices: vec![DeviceReport {
                name: "llvmpipe".into(),
                class: "uma-strict".into(),
                active: true,
                workloads: ws,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_clean_run_is_safe_with_its_counts_and_savings() {
        let r = report(vec![clean(), hazard()]);
        assert_eq!(r.exit_status(), 0);
        let v = r.verdict();
        assert!(
            v.starts_with("echo is safe on llvmpipe: 3/3 runs with echo identical"),
            "{v}"
        );
        assert!(v.contains("1/1 refusals as they must be"), "{v}");
        assert!(
            v.contains("saves 2.05 ms of 10.10 ms per iteration (20 %)"),
            "{v}"
        );
        assert!(v.contains("80 % of the zero-copy gain"), "{v}");
        assert!(v.contains("3 MiB of memory not allocated"), "{v}");
    }

    #[test]
    fn a_difference_or_an_accepted_hazard_is_unsafe_and_named_first() {
        let mut w = clean();
        w.runs[2].identical = Some(false);
        w.findings.push(Finding::new(
            Level::Unsafe,
            "upload differs in enforce: first difference at byte 17",
        ));
        let mut h = hazard();
        h.refusals_as_they_must = 0;
        h.findings.push(Finding::new(
            Level::Unsafe,
            "race: echo accepted the hazard",
        ));
        let r = report(vec![w, h]);
        assert_eq!(r.exit_status(), 1);
        assert_eq!(
            r.verdict(),
            "do not enable echo here: upload differs in enforce: first difference at byte 17"
        );
        let text = r.render(None);
        assert!(
            text.contains("also unsafe: race: echo accepted the hazard"),
            "{text}"
        );
    }

    #[test]
    fn unsafe_wins_over_could_not_run_and_notes_change_nothing() {
        let mut w = clean();
        w.findings.push(Finding::new(Level::Note, "a note"));
        assert_eq!(report(vec![w.clone()]).exit_status(), 0);
        w.findings
            .push(Finding::new(Level::CouldNotRun, "not deterministic"));
        assert_eq!(report(vec![w.clone()]).exit_status(), 2);
        w.findings
            .push(Finding::new(Level::Unsafe, "crashed in profile"));
        let r = report(vec![w]);
        assert_eq!(r.exit_status(), 1);
        assert!(r.verdict().ends_with("crashed in profile"));
    }

    #[test]
    fn no_active_device_is_inactive_and_exit_0() {
        let r = Report {
            devices: vec![DeviceReport {
                name: "Discrete".into(),
                class: "discrete".into(),
                active: false,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(r.exit_status(), 0);
        assert!(r
            .verdict()
            .starts_with("echo stays out on this machine: Discrete is discrete"));
    }

    #[test]
    fn savings_inside_the_noise_say_so() {
        let mut w = clean();
        w.timing = Some(Timing {
            rounds: 2,
            staging_ms: vec![10.0, 9.0],
            echo_ms: vec![9.5, 9.5],
            zero_copy_ms: vec![],
        });
        let s = report(vec![w.clone()]).savings().unwrap();
        assert!(
            s.starts_with("no time difference beyond the noise") && !s.contains("zero-copy"),
            "{s}"
        );
        // Slower in every round: said as a cost, never as a saving.
        w.timing = Some(Timing {
            rounds: 2,
            staging_ms: vec![9.0, 9.2],
            echo_ms: vec![9.5, 9.6],
            zero_copy_ms: vec![8.0, 8.0],
        });
        let s = report(vec![w]).savings().unwrap();
        assert!(
            s.starts_with("costs 450 µs more than 9.10 ms per iteration (5 %)")
                && !s.contains("zero-copy"),
            "{s}"
        );
    }
}
