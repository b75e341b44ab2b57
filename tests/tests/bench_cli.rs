//! `echo-bench`'s command line (clap, issue 34): bad usage exits 2, `--help` works, and a tiny
//! run with stderr piped carries only its log lines (the indicatif bar is hidden when stderr is
//! not a terminal).

use std::path::PathBuf;
use std::process::Command;

fn bench_bin() -> PathBuf {
    let p = echo_tests::samples::samples_bin().with_file_name("echo-bench");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first",
        p.display()
    );
    p
}

#[test]
fn usage_errors_exit_2_and_help_works() {
    for bad in [
        &["--frobnicate"][..],
        &["--quick", "--full"],
        &["--size-mib", "0"],
        &["--iters", "x"],
        &["--sweep", "8,-1"],
        &["--out"],
    ] {
        let out = Command::new(bench_bin()).args(bad).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "echo-bench {bad:?}:\n{err}");
        assert!(err.contains("error:"), "echo-bench {bad:?}:\n{err}");
    }
    for bin in ["echo-bench", "echo-bench-calls", "echo-bench-plot"] {
        let out = Command::new(bench_bin().with_file_name(bin))
            .arg("--help")
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{bin} --help");
        assert!(help.contains(&format!("Usage: {bin}")), "{help}");
    }
    let help = Command::new(bench_bin()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for opt in [
        "--quick",
        "--full",
        "--out",
        "--samples",
        "--negatives",
        "--size-mib",
        "--iters",
        "--procs",
        "--sweep",
        "--no-sweep",
        "--no-calls",
        "--no-memory",
        "--memory",
        "--kept",
        "--work",
        "--command",
    ] {
        assert!(help.contains(opt), "echo-bench --help lacks {opt}:\n{help}");
    }
}

#[test]
fn a_tiny_run_writes_results_and_no_progress_to_a_pipe() {
    let dir = std::env::temp_dir().join(format!("echo-bench-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(bench_bin())
        .args([
            "--samples",
            "saxpy",
            "--size-mib",
            "0.25",
            "--iters",
            "1",
            "--procs",
            "1",
            "--sweep",
            "0.25",
            "--no-calls",
            "--no-memory",
            "--command",
            "first",
            "--command",
            "tests/tests/bench_cli.rs",
        ])
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--work")
        .arg(dir.join("work"))
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env_remove("VK_INSTANCE_LAYERS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let results = std::fs::read_to_string(dir.join("out/RESULTS.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "echo-bench failed:\n{err}");
    assert!(
        !err.contains('\r') && !err.contains('\u{1b}'),
        "progress output on a stderr that is not a terminal:\n{err:?}"
    );
    assert!(
        err.lines().all(|l| l.starts_with("echo-bench:")),
        "a line that is not echo-bench's log:\n{err}"
    );
    assert!(err.contains("sweep [1/1] saxpy at 0.25 MiB"), "{err}");
    // The last --command wins (as before clap): scripts/bench.sh passes its own.
    assert!(results.contains("tests/tests/bench_cli.rs"), "{results}");
}
