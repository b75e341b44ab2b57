//! The machine a benchmark ran on, for the report's header: CPU, GPU and driver, load, the
//! commits measured.

use serde::Serialize;
use std::process::Command;

/// The machine and software the numbers were measured on.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory: String,
    pub kernel: String,
    pub load_start: String,
    pub load_end: String,
    pub device: String,
    pub driver: String,
    pub api: String,
    pub loader: String,
    pub commit: String,
    pub enforce_commit: String,
}

fn sh(prog: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(prog)
        .args(args)
        .env("VK_ECHO_DISABLE", "1")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn now_utc() -> String {
    sh("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_else(|| "?".into())
}

impl Machine {
    pub fn gather() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name") || l.starts_with("Model"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "?".into());
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let kb: u64 = m
                    .lines()
                    .find(|l| l.starts_with("MemTotal"))?
                    .split_whitespace()
                    .nth(1)?
                    .parse()
                    .ok()?;
                Some(format!("{:.1} GiB", kb as f64 / 1048576.0))
            })
            .unwrap_or_else(|| "?".into());
        let mut m = Machine {
            cpu,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            memory,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            load_start: loadavg(),
            ..Default::default()
        };
        if let Some(s) = sh("vulkaninfo", &["--summary"]) {
            let field = |k: &str| {
                s.lines()
                    .find(|l| l.trim_start().starts_with(k))
                    .and_then(|l| l.split_once('='))
                    .map(|(_, v)| v.trim().to_string())
                    .unwrap_or_default()
            };
            m.device = field("deviceName");
            m.driver = format!("{} {}", field("driverName"), field("driverInfo"))
                .trim()
                .to_string();
            m.api = field("apiVersion");
            m.loader = s
                .lines()
                .find(|l| l.contains("Vulkan Instance Version"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default();
        }
        let dirty = sh("git", &["status", "--porcelain", "--untracked-files=no"])
            .map(|s| !s.is_empty())
            .unwrap_or(false);
        m.commit = sh("git", &["rev-parse", "--short", "HEAD"])
            .map(|c| {
                if dirty {
                    format!("{c} (with uncommitted changes in the tree)")
                } else {
                    c
                }
            })
            .unwrap_or_else(|| "?".into());
        m.enforce_commit = sh(
            "git",
            &["log", "-1", "--format=%h %s", "--", "layer/src/enforce"],
        )
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "none (layer/src/enforce has no commits)".into());
        m
    }
    pub fn finish(mut self) -> Machine {
        self.load_end = loadavg();
        self
    }
}
