//! `vkecho selftest [--quick] [--out DIR] [--workloads a,b]`: the field kit (issue 46). It needs
//! only `vkecho` and the layer library — no samples, no shader compiler, no source tree — and
//! answers one question for the machine it runs on: can echo be enabled here?
//!
//! For every device echo would act on, each built-in workload ([`workloads`], SPIR-V embedded)
//! runs as a child process of vkecho ([`worker`]): without echo (twice: the reference, and a
//! check that the workload is deterministic here), profiled, analyzed (in this process, by the
//! analyzer library), enforced, and in auto mode twice with a private cache. Every output is
//! compared with the reference byte for byte; the hazards' pairs must be refused for the
//! condition that must refuse them; the clean workloads are timed in interleaved rounds
//! (staging, echo, the zero-copy twin) and echo's statistics say how much memory it did not
//! allocate. Where the Khronos validation layer is installed, the workloads run once more
//! without echo, profiled and enforced with synchronization validation, and echo must not add a
//! message. Devices echo stays out of get one check: with echo enabled, the output is the same
//! and nothing is recorded.
//!
//! It prints the verdict first ([`verdict`]), then the evidence, and writes the report bundle
//! `selftest-<device>-<date>.tar.gz` ([`bundle`]) into `--out` (default: here). Exit status: 0
//! safe or inactive, 1 unsafe, 2 could not run.
//!
//! `VKECHO_SELFTEST_RUNNER` (tests) names an emulator to start the children with (under
//! qemu-user a foreign binary cannot start another: `qemu-aarch64-static -L /`).
//!
//! The user's own echo settings (`VK_ECHO_*`, other than `VK_ECHO_TOPOLOGY`, `VK_ECHO_LIBRARY`
//! and the test layer's `VK_ECHO_TEST_*`) and an echo named in `VK_INSTANCE_LAYERS` are left out
//! of the children; the user's cache is never touched.

mod bundle;
mod check;
mod exec;
mod verdict;
mod vk;
pub mod worker;
mod workloads;

use check::{stays_out, test_workload};
use echo_analyzer::words::human_bytes;
use exec::{params, vkecho_argv, worker_argv, Echo, Params, Place};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use verdict::{DeviceReport, Finding, Level, Report};
use workloads::Workload;

/// `vkecho selftest [--quick] [--out DIR] [--workloads a,b]`.
#[derive(clap::Args)]
#[command(
    long_about = "Checks echo on this machine with built-in workloads (clean uploads and \
readbacks, dedicated and sub-allocated; a graphics frame; two hazards echo must refuse): each runs \
without echo, profiled, analyzed, enforced and in auto mode twice on every device echo acts on, \
outputs compared byte for byte, timed against the zero-copy way of writing it, and under the \
validation layer when it is installed. Prints a verdict first and writes a report bundle \
(selftest-<device>-<date>.tar.gz) to send. Needs only vkecho and the layer library. Exit status: \
0 safe (or echo stays out here), 1 unsafe, 2 could not run."
)]
pub struct Args {
    /// A first look: small buffers (scaled to the device's memory), fewer iterations and rounds
    #[arg(long)]
    pub quick: bool,
    /// Where the report bundle goes (default: the current directory)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only these workloads (comma-separated; default: all — upload, suballoc, graphics, race,
    /// early-read)
    #[arg(long, value_name = "a,b,...", value_delimiter = ',')]
    pub workloads: Option<Vec<String>>,
    /// Interleaved timed rounds per clean workload (default: 3 with --quick, else 5)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: Option<u64>,
}

pub fn main(a: &Args) -> i32 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("vkecho selftest: cannot locate vkecho itself: {e}");
            return 2;
        }
    };
    let chosen: Vec<&'static Workload> = match &a.workloads {
        None => workloads::ALL.iter().collect(),
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                match workloads::find(n.trim()) {
                    Some(w) => v.push(w),
                    None => {
                        eprintln!(
                            "vkecho selftest: unknown workload '{n}' (known: {})",
                            workloads::ALL
                                .iter()
                                .map(|w| w.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                        return 2;
                    }
                }
            }
            v
        }
    };
    let out_dir = a.out.clone().unwrap_or_else(|| PathBuf::from("."));
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("vkecho selftest: cannot create {}: {e}", out_dir.display());
        return 2;
    }
    // `vkecho doctor --json` of the user's environment, before this process narrows it.
    let doctor = doctor_json(&exe);
    narrow_environment();
    let work =
        std::env::temp_dir().join(format!("vkecho-selftest-{}-{}", std::process::id(), unix));
    if let Err(e) = make_private_dir(&work) {
        eprintln!("vkecho selftest: {e}");
        return 2;
    }
    let mut report = Report {
        vkecho_version: env!("CARGO_PKG_VERSION").into(),
        quick: a.quick,
        ..Default::default()
    };
    let devices = test_all(
        &exe,
        &work,
        (a.quick, a.rounds),
        &chosen,
        &doctor,
        &mut report,
    );
    report.verdict = report.verdict();
    report.exit_status = report.exit_status();

    // The bundle: the report, doctor, versions, and every file the runs left.
    let device_name = report
        .devices
        .iter()
        .find(|d| d.active)
        .or(report.devices.first())
        .map(|d| d.name.clone())
        .unwrap_or_else(|| "no-device".into());
    let name = bundle::file_name(&device_name, unix);
    let bundle_path = out_dir.join(&name);
    let text = report.render(Some(&bundle_path.display().to_string()));
    let home = std::env::var("HOME").ok();
    let redact = bundle::Redact::new(&work, home.as_deref());
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let _ = std::fs::write(work.join("verdict.txt"), &text);
    let _ = std::fs::write(
        work.join("selftest.json"),
        pretty(&serde_json::to_value(&report).unwrap_or_default()),
    );
    let _ = std::fs::write(work.join("doctor.json"), pretty(&doctor));
    let _ = std::fs::write(
        work.join("versions.json"),
        pretty(&crate::report::versions(&doctor)),
    );
    let _ = std::fs::write(work.join("devices.json"), pretty(&devices));
    let _ = std::fs::write(work.join("README.txt"), readme(&report, &name));
    let root = name.trim_end_matches(".tar.gz").to_string();
    let files: Vec<(String, Vec<u8>)> = bundle::files(&work)
        .into_iter()
        .filter_map(|(rel, bytes)| Some((format!("{root}/{rel}"), redact.bytes(&bytes)?)))
        .collect();
    let written = crate::report::archive(&files, unix, true)
        .and_then(|b| crate::files::write_private_bytes(&bundle_path, &b));
    let bundle_note = match &written {
        Ok(()) => None,
        Err(e) => Some(format!("the report bundle could not be written: {e}")),
    };
    print!(
        "{}",
        if bundle_note.is_some() {
            report.render(None)
        } else {
            text
        }
    );
    if let Some(n) = bundle_note {
        eprintln!("vkecho selftest: {n}");
    }
    let _ = std::fs::remove_dir_all(&work);
    report.exit_status
}

/// Every device: tested when echo acts on it, checked for staying out otherwise. Returns what
/// the device listing said.
fn test_all(
    exe: &Path,
    work: &Path,
    (quick, rounds): (bool, Option<u64>),
    chosen: &[&'static Workload],
    doctor: &Value,
    report: &mut Report,
) -> Value {
    let stop = |report: &mut Report, text: String| {
        report.findings.push(Finding::new(Level::CouldNotRun, text));
    };
    if let Err(e) = crate::launch::layer_library() {
        stop(report, e);
        return Value::Null;
    }
    let place = match Place::new(work.join("devices")) {
        Ok(p) => p,
        Err(e) => {
            stop(report, e);
            return Value::Null;
        }
    };
    let argv = worker_argv(exe, "devices", &[]);
    let listing = place.run(
        &argv,
        "devices",
        &Echo::Off,
        false,
        Duration::from_secs(120),
    );
    let Some(devices) = listing.result.clone().filter(|_| listing.ok()) else {
        stop(
            report,
            format!(
                "the Vulkan devices could not be listed ({})",
                listing.failed.unwrap_or_default()
            ),
        );
        return Value::Null;
    };
    let list = devices["devices"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        stop(
            report,
            "the loader lists no Vulkan device (`vkecho doctor` says why)".into(),
        );
        return devices;
    }
    let topology = doctor["settings"]["values"]["topology"]
        .as_str()
        .unwrap_or("strict")
        .to_string();
    let validation = devices["validation_layer"] == true;
    if !validation && devices["validation_layer_listed"] == true {
        report.findings.push(Finding::new(
            Level::Note,
            "the loader lists VK_LAYER_KHRONOS_validation but cannot load it here (another architecture's package?): no validation runs",
        ));
    }
    let active_of = |d: &Value| match d["class"].as_str() {
        Some("uma-strict") => true,
        Some("uma-integrated") => topology == "integrated",
        _ => false,
    };
    let runs_per_workload = |p: &Params| 6 + 3 * p.rounds as u64 + if validation { 3 } else { 0 };
    let total: u64 = list
        .iter()
        .map(|d| {
            if active_of(d) {
                chosen.len() as u64 * runs_per_workload(&params(quick, heap(d), rounds))
            } else {
                2
            }
        })
        .sum();
    let pb = echo_progress::bar(total, "vkecho selftest", " runs");
    for (i, d) in list.iter().enumerate() {
        let p = params(quick, heap(d), rounds);
        let mut dev = DeviceReport {
            index: i,
            name: d["name"].as_str().unwrap_or("?").into(),
            class: d["class"].as_str().unwrap_or("?").into(),
            active: active_of(d),
            driver: driver(d),
            api_version: d["api_version"].as_str().unwrap_or("?").into(),
            buffer_bytes: p.size,
            iterations: p.iters,
            rounds: p.rounds,
            validation_layer: validation,
            ..Default::default()
        };
        let dir = work.join(format!("device-{i}"));
        if dev.active {
            echo_progress::say(
                &pb,
                &format!(
                    "vkecho selftest: device {i}: {} ({}): {} workloads, buffers of {}",
                    dev.name,
                    dev.class,
                    chosen.len(),
                    human_bytes(p.size)
                ),
            );
            for w in chosen {
                if w.graphics && d["graphics_queue"] == false {
                    dev.findings.push(Finding::new(
                        Level::Note,
                        format!("{}: not run (no queue family that draws)", w.name),
                    ));
                    continue;
                }
                let r = test_workload(exe, &dir.join(w.name), i, w, &p, validation, &pb);
                dev.workloads.push(r);
            }
        } else {
            echo_progress::say(
                &pb,
                &format!(
                    "vkecho selftest: device {i}: {} ({}): echo stays out; checking that it does",
                    dev.name, dev.class
                ),
            );
            dev.findings = stays_out(exe, &dir.join("stays-out"), i, &p, &pb);
        }
        report.devices.push(dev);
    }
    pb.finish_and_clear();
    devices
}

fn heap(d: &Value) -> u64 {
    d["heaps"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .filter(|h| {
                    h["flags"]
                        .as_array()
                        .is_some_and(|f| f.iter().any(|x| x == "DEVICE_LOCAL"))
                })
                .filter_map(|h| h["size"].as_u64())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

fn driver(d: &Value) -> String {
    let name = d["driver_name"].as_str().unwrap_or("");
    let info = d["driver_info"].as_str().unwrap_or("");
    let version = d["driver_version"].as_str().unwrap_or("?");
    match (name.is_empty(), info.is_empty()) {
        (false, false) => format!("{name} {info}"),
        (false, true) => format!("{name} {version}"),
        _ => format!("driver {version}"),
    }
}

/// `vkecho doctor --json` of this environment, from a child (doctor adjusts its own process's
/// environment).
fn doctor_json(exe: &Path) -> Value {
    let argv = vkecho_argv(exe);
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .args(["doctor", "--json"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) => serde_json::from_slice(&o.stdout).unwrap_or_else(
            |e| json!({"error": format!("vkecho doctor --json printed no JSON: {e}")}),
        ),
        Err(e) => json!({"error": format!("cannot run vkecho doctor: {e}")}),
    }
}

/// Leaves the user's echo settings and an echo named in `VK_INSTANCE_LAYERS` out of this process
/// (and so of its children): the selftest sets what each run needs.
fn narrow_environment() {
    let keep = |k: &str| {
        k.starts_with("VK_ECHO_TEST_") || k == "VK_ECHO_LIBRARY" || k == "VK_ECHO_TOPOLOGY"
    };
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if k.starts_with("VK_ECHO_") && !keep(k) {
            std::env::remove_var(k);
        }
    }
    if let Ok(layers) = std::env::var("VK_INSTANCE_LAYERS") {
        let rest: Vec<&str> = layers
            .split(':')
            .filter(|l| !l.is_empty() && *l != crate::paths::LAYER_NAME)
            .collect();
        if rest.is_empty() {
            std::env::remove_var("VK_INSTANCE_LAYERS");
        } else {
            std::env::set_var("VK_INSTANCE_LAYERS", rest.join(":"));
        }
    }
}

fn make_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

fn readme(r: &Report, name: &str) -> String {
    format!(
        "VK_LAYER_echo selftest bundle ({name}), made by vkecho {}{}.\n\
         \n\
         {}\n\
         \n\
         verdict.txt             what `vkecho selftest` printed: the verdict first\n\
         selftest.json           every run, pair, check, timing and finding, per device and workload\n\
         doctor.json             `vkecho doctor --json` on this machine\n\
         versions.json           echo, Vulkan loader, drivers, kernel, glibc\n\
         devices.json            the devices as the selftest's runs saw them\n\
         device-N/WORKLOAD/      one built-in workload on device N:\n\
           profile.trace.jsonl     the profile run's trace\n\
           plan.json, analyze.txt  the plan made from it, and `vkecho analyze`'s table\n\
           show.html               `vkecho show`'s page of that run\n\
           *.stats.jsonl           the layer's statistics of each enforce and auto run\n\
           cache/                  auto mode's cache of this workload (plan, trace, run records)\n\
           logs/, results/         each run's stderr and its result (times, validation messages)\n\
         \n\
         Everything here comes from the selftest's own built-in workloads: nothing of your\n\
         programs, no environment dump; home-directory paths read ~ and the selftest's scratch\n\
         directory <selftest>.\n",
        env!("CARGO_PKG_VERSION"),
        if r.quick { " (--quick)" } else { "" },
        r.verdict
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SPIR-V vkecho embeds is what scripts/gen-selftest-spirv.sh makes of the GLSL beside
    /// it (glslangValidator: scripts/deps.sh installs glslang-tools).
    #[test]
    fn committed_spirv_is_current() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gen-selftest-spirv.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("--check")
            .output()
            .expect("run scripts/gen-selftest-spirv.sh");
        assert!(
            out.status.success(),
            "{}{}\nrun scripts/gen-selftest-spirv.sh and commit the result",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn sizes_follow_the_device_memory() {
        let gib = 1u64 << 30;
        assert_eq!(params(true, 4 * gib, None).size, 2 << 20);
        assert_eq!(params(true, 256 << 20, None).size, 256 << 10);
        assert_eq!(params(true, 0, None).rounds, 3);
        assert_eq!(params(false, 4 * gib, None).size, 16 << 20);
        assert_eq!(params(false, gib, Some(2)).size, 4 << 20);
        assert_eq!(params(false, gib, Some(2)).rounds, 2);
        assert_eq!(params(false, 0, None).size, 1 << 20);
    }

    #[test]
    fn multisets() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            check::multiset_minus(&s(&["a", "a", "b"]), &s(&["a"])),
            s(&["a", "b"])
        );
        assert!(check::multiset_minus(&s(&["a"]), &s(&["a", "c"])).is_empty());
    }
}
