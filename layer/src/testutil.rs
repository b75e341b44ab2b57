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
