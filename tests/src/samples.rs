//! Running `echo-samples` from integration tests: where the binary is, running it with a timeout,
//! parsing its one JSON line, and running it under the Khronos validation layer with
//! synchronization validation (including cross-submission checks) to collect what it reports.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Every sample `echo-samples list` names.
pub const ALL: [&str; 11] = [
    "saxpy",
    "sgemm",
    "conv2d",
    "pipeline",
    "suballoc",
    "multiqueue",
    "threads",
    "race",
    "stale",
    "reuse",
    "bda",
];

/// The negative controls (correct programs whose buffers must not be aliased).
pub const NEGATIVE: [&str; 4] = ["race", "stale", "reuse", "bda"];

/// How long one sample run may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(600);

/// `target/<profile>/echo-samples`, found from the running test binary
/// (`target/<profile>/deps/<test>-<hash>`). Panics with a clear message when it was not built.
pub fn samples_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let bin = profile_dir.join(format!("echo-samples{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`, as scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// Environment that loads VK_LAYER_KHRONOS_validation with synchronization validation, also
/// across submissions. Validation layers 1.3.239 read `VK_LAYER_ENABLES` as a ':'-separated list on
/// Linux (a ',' silently enables nothing).
pub fn validation_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation"),
        (
            "VK_LAYER_ENABLES",
            "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT:\
             VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT",
        ),
    ]
}

/// A `Command` for `echo-samples ARGS` with XDG_RUNTIME_DIR set (Mesa warns without it).
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(samples_bin());
    cmd.args(args);
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    cmd
}

pub struct SampleRun {
    pub args: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl SampleRun {
    /// The JSON report: the last stdout line that starts with '{' (the validation layer also
    /// prints to stdout).
    pub fn json(&self) -> serde_json::Value {
        assert!(
            self.status.success(),
            "{} failed ({}):\n{}{}",
            self.args,
            self.status,
            self.stdout,
            self.stderr
        );
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("{}: no JSON line on stdout:\n{}", self.args, self.stdout));
        serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}: bad JSON {line:?}: {e}", self.args))
    }

    pub fn checksum(&self) -> String {
        self.json()["checksum"]
            .as_str()
            .expect("checksum is a string")
            .to_string()
    }

    /// Every message the validation layer printed (errors and warnings, any category).
    pub fn validation_messages(&self) -> Vec<String> {
        self.stdout
            .lines()
            .chain(self.stderr.lines())
            .filter(|l| {
                l.contains("Validation Error")
                    || l.contains("Validation Warning")
                    || l.contains("SYNC-HAZARD")
            })
            .map(str::to_string)
            .collect()
    }
}

/// Runs `cmd` to completion (killing it after `TIMEOUT`), capturing stdout and stderr.
pub fn run_command(cmd: Command) -> SampleRun {
    run_command_within(cmd, TIMEOUT)
}

/// Like [`run_command`], but the test fails when `cmd` runs longer than `limit` (a hang or a
/// deadlock).
pub fn run_command_within(mut cmd: Command, limit: Duration) -> SampleRun {
    let args = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {args}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args} did not finish within {limit:?}: a hang or a deadlock?");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    SampleRun {
        args,
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Runs `echo-samples ARGS` with extra environment variables.
pub fn run_sample(args: &[&str], env: &[(&str, &str)]) -> SampleRun {
    let mut cmd = command(args);
    cmd.envs(env.iter().copied());
    run_command(cmd)
}
