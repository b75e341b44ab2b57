//! Helpers for the unit tests.

/// A `Command` that runs this test binary again (for tests that need a fresh process). Under an
/// emulator the child is started through it: `ECHO_TEST_RUNNER` (e.g. `qemu-aarch64-static -L /`,
/// as the aarch64 tests set it), because qemu-user cannot exec a foreign binary by itself.
pub fn self_command() -> std::process::Command {
    let exe = std::env::current_exe().unwrap();
    let runner = std::env::var("ECHO_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut c = std::process::Command::new(program);
            c.args(words).arg(exe);
            c
        }
        None => std::process::Command::new(exe),
    }
}

/// Runs the unit test `path` (e.g. `"profile::sink::tests::name"`) alone in a fresh process of
/// this binary with the environment variable `flag` set, and returns what it did.
pub fn run_alone(path: &str, flag: &str) -> std::process::Output {
    self_command()
        .args([path, "--exact", "--nocapture", "--test-threads=1"])
        .env(flag, "1")
        .output()
        .unwrap()
}

/// For a test that must own its process (a signal handler, a fork): `true` in that process;
/// elsewhere it runs the test there ([`run_alone`]), asserts that it passed and printed
/// `CHILD-OK`, and returns `false` (the caller returns).
pub fn in_own_process(path: &str, flag: &str) -> bool {
    if std::env::var_os(flag).is_some() {
        return true;
    }
    let out = run_alone(path, flag);
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && so.contains("CHILD-OK"), "{out:?}");
    false
}

/// `own_process!(test_fn, "FLAG")` at the top of unit test `test_fn`: the rest of the test runs
/// only in a process of its own ([`in_own_process`]).
macro_rules! own_process {
    ($test:ident, $flag:expr) => {
        let path = concat!(module_path!(), "::", stringify!($test));
        let path = path.split_once("::").map_or(path, |(_, p)| p);
        if !$crate::testutil::in_own_process(path, $flag) {
            return;
        }
    };
}
pub(crate) use own_process;

/// GLSL → SPIR-V with glslangValidator (`None` where it is not installed).
pub fn compile(src: &str) -> Option<Vec<u32>> {
    compile_for(src, "vulkan1.1")
}

pub fn compile_for(src: &str, env: &str) -> Option<Vec<u32>> {
    compile_with(src, env, "")
}

/// [`compile_for`] with one more glslangValidator flag (`""`: none).
pub fn compile_with(src: &str, env: &str, flag: &str) -> Option<Vec<u32>> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("echo-reflect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let comp = dir.join(format!("t{n}.comp"));
    let spv = dir.join(format!("t{n}.spv"));
    std::fs::write(&comp, src).ok()?;
    let ok = std::process::Command::new("glslangValidator")
        .args(["-V", "--target-env", env, "-o"])
        .arg(&spv)
        .args((!flag.is_empty()).then_some(flag))
        .arg(&comp)
        .output()
        .ok()?
        .status
        .success();
    if !ok {
        return None;
    }
    let bytes = std::fs::read(&spv).ok()?;
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}
