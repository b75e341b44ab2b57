//! echo-samples on lavapipe: `list` names all eleven samples; every sample prints one JSON line with
//! every key; its staging and zero-copy variants give the same checksum; it runs under the Khronos
//! validation layer with synchronization validation without a single message; and that validation
//! check can fail: an injected missing barrier is reported as a SYNC hazard.

use echo_tests::samples::{run_sample, validation_env, ALL};

/// Small and quick: the CI machine has 2 cores and runs everyone's tests.
const SIZE_KIB: &str = "256";
const VALIDATION_SIZE_KIB: &str = "64";
const ITERS: &str = "2";

const KEYS: [&str; 8] = [
    "sample",
    "variant",
    "size_bytes",
    "iters",
    "checksum",
    "iter_ms_median",
    "iter_ms_mean",
    "bytes_copied_per_iter",
];

fn agree(sample: &str) {
    let mut sums = Vec::new();
    for variant in ["staging", "zero-copy"] {
        let run = run_sample(
            &[
                sample,
                "--size-kib",
                SIZE_KIB,
                "--iters",
                ITERS,
                "--variant",
                variant,
            ],
            &[],
        );
        let v = run.json();
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "stdout must hold exactly one line:\n{}",
            run.stdout
        );
        for k in KEYS {
            assert!(
                v.get(k).is_some(),
                "{sample} {variant}: key {k} missing in {v}"
            );
        }
        assert_eq!(v["sample"], sample);
        assert_eq!(v["variant"], variant);
        assert_eq!(v["iters"], 2);
        assert!(v["size_bytes"].as_u64().unwrap() > 0);
        let checksum = v["checksum"].as_str().unwrap();
        assert!(
            checksum.len() == 16 && checksum.chars().all(|c| c.is_ascii_hexdigit()),
            "{checksum}"
        );
        assert!(v["iter_ms_median"].as_f64().unwrap() > 0.0);
        let copied = v["bytes_copied_per_iter"].as_u64().unwrap();
        match variant {
            "staging" => assert!(copied > 0, "{sample}: the staging variant copies"),
            _ => assert_eq!(copied, 0, "{sample}: the zero-copy variant copies nothing"),
        }
        sums.push(checksum.to_string());
    }
    assert_eq!(
        sums[0], sums[1],
        "{sample}: staging and zero-copy checksums differ"
    );
}

fn validation_clean(sample: &str) {
    for variant in ["staging", "zero-copy"] {
        let args = [
            sample,
            "--size-kib",
            VALIDATION_SIZE_KIB,
            "--iters",
            ITERS,
            "--variant",
            variant,
        ];
        let run = run_sample(&args, &validation_env());
        run.json(); // succeeded and reported
        let msgs = run.validation_messages();
        assert!(
            msgs.is_empty(),
            "{sample} {variant}: validation reported:\n{}",
            msgs.join("\n")
        );
    }
}

macro_rules! per_sample {
    ($($name:ident),*) => {
        mod checksums_agree {
            $(#[test] fn $name() { super::agree(stringify!($name)) })*
        }
        mod validation_is_silent {
            $(#[test] fn $name() { super::validation_clean(stringify!($name)) })*
        }
        #[test]
        fn every_sample_is_tested() {
            let mut tested = vec![$(stringify!($name)),*];
            let mut all = ALL.to_vec();
            tested.sort();
            all.sort();
            assert_eq!(tested, all);
        }
    };
}

per_sample!(saxpy, sgemm, conv2d, pipeline, suballoc, multiqueue, threads, race, stale, reuse, bda);

#[test]
fn list_names_all_eleven() {
    let run = run_sample(&["list"], &[]);
    assert!(run.status.success());
    let names: Vec<&str> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ALL.to_vec());
}

/// The validation check above can fail: saxpy without its upload → compute barrier is reported.
#[test]
fn validation_catches_injected_hazard() {
    let args = [
        "saxpy",
        "--size-kib",
        VALIDATION_SIZE_KIB,
        "--iters",
        ITERS,
        "--inject-hazard",
    ];
    let run = run_sample(&args, &validation_env());
    let msgs = run.validation_messages();
    assert!(
        msgs.iter()
            .any(|m| m.contains("SYNC-HAZARD-READ-AFTER-WRITE")),
        "no SYNC hazard reported for the missing barrier:\n{}{}",
        run.stdout,
        run.stderr
    );
    // Without the validation layer the same run is silent: the hazard is found by validation,
    // not by something else in the environment.
    let plain = run_sample(&args, &[]);
    assert!(plain.validation_messages().is_empty());
}

#[test]
fn threads_count_is_honoured() {
    let a = run_sample(
        &[
            "threads",
            "--size-kib",
            "96",
            "--iters",
            "1",
            "--threads",
            "3",
        ],
        &[],
    );
    let b = run_sample(
        &[
            "threads",
            "--size-kib",
            "96",
            "--iters",
            "1",
            "--threads",
            "3",
            "--variant",
            "zero-copy",
        ],
        &[],
    );
    assert_eq!(a.json()["threads"], 3);
    assert_eq!(a.checksum(), b.checksum());
}

#[test]
fn timing_reports_copy_fraction() {
    for sample in ["saxpy", "multiqueue", "threads"] {
        let run = run_sample(
            &[sample, "--size-kib", SIZE_KIB, "--iters", ITERS, "--timing"],
            &[],
        );
        let v = run.json();
        let f = v["f_copy"]
            .as_f64()
            .unwrap_or_else(|| panic!("{sample}: no f_copy in {v}"));
        assert!(f > 0.0 && f < 1.0, "{sample}: f_copy {f}");
        assert!(v["copy_ms_median"].as_f64().unwrap() > 0.0);
        let zero = run_sample(
            &[
                sample,
                "--size-kib",
                SIZE_KIB,
                "--iters",
                ITERS,
                "--timing",
                "--variant",
                "zero-copy",
            ],
            &[],
        );
        assert_eq!(zero.json()["f_copy"].as_f64(), Some(0.0));
        // Timing must not change the result.
        let untimed = run_sample(&[sample, "--size-kib", SIZE_KIB, "--iters", ITERS], &[]);
        assert_eq!(run.checksum(), untimed.checksum());
    }
}

#[test]
fn different_seeds_give_different_checksums() {
    let a = run_sample(
        &["saxpy", "--size-kib", "64", "--iters", "1", "--seed", "1"],
        &[],
    );
    let b = run_sample(
        &["saxpy", "--size-kib", "64", "--iters", "1", "--seed", "2"],
        &[],
    );
    assert_ne!(a.checksum(), b.checksum());
}

#[test]
fn bad_arguments_fail_clearly() {
    let run = run_sample(&["nosuch"], &[]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("unknown sample"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    let run = run_sample(&["saxpy", "--variant", "fast"], &[]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("unknown variant"), "{}", run.stderr);
    let run = run_sample(&["saxpy", "--iters"], &[]);
    assert!(!run.status.success());
}

/// `--per-iter` (issue 15's measures): one entry per timed iteration in every per-iteration
/// array, and the counters are consistent with each other — the process's CPU time includes the
/// calling thread's, the time inside `Stream::run` is part of the iteration's, the first timed
/// iteration first-touches 2 MiB of buffers (≥ 512 faults of 4 KiB pages) and CPU time is spent.
#[test]
fn per_iter_counters() {
    let run = run_sample(
        &["saxpy", "--size-kib", "2048", "--iters", "3", "--per-iter"],
        &[],
    );
    let v = run.json();
    let arr = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .unwrap_or_else(|| panic!("{k} missing in {v}"))
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let keys = [
        "iter_ms",
        "iter_minflt",
        "iter_run_ms",
        "iter_cpu_ms",
        "iter_main_cpu_ms",
        "iter_sys_ms",
        "iter_vcsw",
        "iter_ivcsw",
        "iter_steal_ms",
    ];
    for k in keys {
        assert_eq!(arr(k).len(), 3, "{k}: one entry per timed iteration in {v}");
    }
    let (ms, run_ms) = (arr("iter_ms"), arr("iter_run_ms"));
    let (cpu, main) = (arr("iter_cpu_ms"), arr("iter_main_cpu_ms"));
    for i in 0..3 {
        assert!(cpu[i] > 0.0, "iteration {i}: no CPU time in {v}");
        // Clock reads are not simultaneous: allow 0.5 ms.
        assert!(
            main[i] <= cpu[i] + 0.5,
            "iteration {i}: thread CPU > process CPU in {v}"
        );
        assert!(
            run_ms[i] > 0.0 && run_ms[i] <= ms[i] + 0.5,
            "iteration {i}: run time outside the iteration in {v}"
        );
    }
    assert!(
        arr("iter_minflt")[0] >= 512.0,
        "first iteration first-touches its buffers: {v}"
    );
}
