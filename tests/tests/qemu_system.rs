//! The aarch64 fault-direction path on a real Linux kernel (issue 27): the short form of
//! `scripts/qemu-system.sh` — Debian's arm64 kernel booted in qemu-system-aarch64 with the
//! cross-built unit tests as init (`--quick`: the guard's real-instruction test, with the ESR
//! required, then with the ESR ignored, which must be caught). Needs the aarch64 unit-test
//! binary of `scripts/cross.sh` (scripts/test.sh runs `scripts/cross.sh --qemu` first); the
//! script fetches the kernel, arm64 libc and busybox, and qemu-system-arm from the Debian
//! archive through apt on its first run (cached under target/qemu-system/). About 20 s warm,
//! 75 s cold on a 2-core machine. A missing piece fails the test, it never skips.

use echo_tests::world::repo_root;
use std::process::Command;

#[test]
fn aarch64_esr_path_classifies_every_access_on_a_real_kernel() {
    // target/<profile>/deps/qemu_system-<hash>: the target directory is three levels up (the
    // samples need not be built for this test).
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let unit = target.join("aarch64-unknown-linux-gnu/release/vk-layer-echo-unit-tests");
    assert!(
        unit.is_file(),
        "{} is missing: run scripts/cross.sh --qemu (scripts/test.sh does) or scripts/cross.sh --unit-tests",
        unit.display()
    );
    let out = Command::new(repo_root().join("scripts/qemu-system.sh"))
        .args(["--no-build", "--quick"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    let text = format!("{so}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && so.contains("QEMU-SYSTEM PASS"),
        "scripts/qemu-system.sh --quick failed ({:?}):\n{text}",
        out.status
    );
    // The table: every access class there, each classified by the ESR and right.
    let rows: Vec<&str> = so
        .lines()
        .skip_while(|l| !l.starts_with("access "))
        .skip(1)
        .take_while(|l| !l.starts_with("esr run:"))
        .collect();
    for kind in ["read", "write", "pair", "simd", "atomic", "dc-zva"] {
        assert!(
            rows.iter()
                .any(|r| r.get(21..).and_then(|k| k.split_whitespace().next()) == Some(kind)),
            "no {kind} access in the table:\n{text}"
        );
    }
    for r in &rows {
        assert!(
            r.contains(" esr ") && r.trim_end().ends_with("yes"),
            "{r}\n{text}"
        );
    }
    let esr = so.lines().find(|l| l.starts_with("esr run:")).unwrap();
    assert!(
        esr.contains("decoder 0, unclassified 0") && esr.ends_with("test exit status 0"),
        "{esr}"
    );
    let planted = so.lines().find(|l| l.starts_with("planted run")).unwrap();
    assert!(planted.ends_with(": caught"), "{planted}");
    eprintln!(
        "{}",
        so.lines()
            .skip_while(|l| !l.starts_with("QEMUSYS kernel"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
