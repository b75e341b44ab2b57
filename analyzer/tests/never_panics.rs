//! The property the fuzz targets check, as a stable, bounded, deterministic test: the trace and
//! plan readers, and the analyzer on whatever the reader accepts, never panic on any input.
//! (`fuzz/` runs the same entry points under libFuzzer where nightly + cargo-fuzz exist.)

mod common;
use common::*;
use echo_analyzer::analysis::explain;
use echo_analyzer::plan::{parse_plan, Thresholds};
use echo_analyzer::trace::read_trace;

/// Cases per test: `VKECHO_FUZZ_ITERS` (for a longer soak), else 800.
fn iterations() -> usize {
    std::env::var("VKECHO_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(800)
}

/// `VKECHO_FUZZ_SEED` varies the run; the default keeps CI reproducible.
fn seed_value(default: u64) -> u64 {
    std::env::var("VKECHO_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        | 1
}

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "0",
    "1",
    "-1",
    "18446744073709551615",
    "1e400",
    "null",
    "true",
    "\"\"",
    "[]",
    "{}",
    ",",
    ":",
    "\"seq\"",
    "\"ev\"",
    "\"buffer\"",
    "\"size\"",
    "\"regions\"",
    "\"host_access\"",
    "\"truncated\"",
    "\"queue_submit\"",
    "\"cmd_copy_buffer\"",
    "\"fence_signaled\"",
    "\n",
    "\"version\"",
    "2",
    "\u{1F600}",
    "\\u0000",
    "\"memory\"",
    "\"offset\"",
];

/// One mutation of a byte string: flip, delete, duplicate, splice a token, or cut.
fn mutate(rng: &mut Rng, s: &mut Vec<u8>) {
    if s.is_empty() {
        s.extend_from_slice(TOKENS[rng.below(TOKENS.len())].as_bytes());
        return;
    }
    let i = rng.below(s.len());
    match rng.below(6) {
        0 => s[i] ^= 1 << rng.below(8),
        1 => {
            let n = rng.below(16).min(s.len() - i);
            s.drain(i..i + n);
        }
        2 => {
            let n = rng.below(64).min(s.len() - i);
            let chunk: Vec<u8> = s[i..i + n].to_vec();
            let j = rng.below(s.len());
            s.splice(j..j, chunk);
        }
        3 | 4 => {
            let tok = TOKENS[rng.below(TOKENS.len())].as_bytes();
            s.splice(i..i, tok.iter().copied());
        }
        _ => s.truncate(i),
    }
}

/// A realistic seed trace with every kind of event the builder makes.
fn seed() -> String {
    let mut t = T::new();
    let h_in = t.staging(MIB);
    let d = t.device(MIB);
    let h_out = t.staging(MIB);
    let pool = t.pool(8 * MIB);
    let p = t.sub_staging(pool, MIB, MIB);
    let d2 = t.device(MIB);
    t.address(d2.buf);
    for i in 0..3 {
        t.host_write(h_in.buf);
        t.host_write(p.buf);
        let (_, f) = t.submit(&[
            Cmd::Copy(h_in.buf, d.buf, MIB),
            Cmd::ReadWrite(d.buf),
            Cmd::Copy(d.buf, h_out.buf, MIB),
            Cmd::CopyAt(p.buf, d2.buf, i * 4096, 0, MIB / 2),
            Cmd::Untracked(d2.buf),
        ]);
        t.host_read(h_out.buf);
        t.wait(f);
    }
    t.destroy(p.buf);
    t.free(pool);
    t.push(echo_analyzer::trace::Event::DeviceWaitIdle);
    t.text()
}

/// A second seed with the events [`seed`] lacks: sampled validation (`watch`, `window`),
/// `watched`, secondary command buffers, timeline semaphores, resets, flushes, external memory,
/// a second device whose validation is lost, an unvalidated buffer, and the truncation marker.
fn seed_sampled_two_devices() -> String {
    use echo_analyzer::trace::{Access, BufferUse, CopyRegion, Event, SubmitBatch, UseKind};
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    let r = t.staging(MIB);
    let pool = t.pool(4 * MIB);
    let w = t.sub_watched(pool, MIB, MIB, 0x3);
    t.push(Event::Watch { buffer: h.buf });
    let sem = t.handle();
    let sec = t.handle();
    t.push(Event::CmdBegin {
        cmd: sec,
        one_time: false,
    });
    t.push(Event::CmdUse {
        cmd: sec,
        command: "vkCmdFillBuffer".into(),
        uses: vec![BufferUse {
            buffer: w.buf,
            offset: 0,
            size: 4096,
            access: Access::Write,
            kind: UseKind::Fill,
        }],
        late: None,
    });
    t.push(Event::CmdEnd { cmd: sec });
    for i in 0..4u64 {
        t.host_write(h.buf);
        t.push(Event::FlushRanges {
            ranges: vec![(h.mem, 0, MIB)],
        });
        let cmd = t.handle();
        t.push(Event::CmdBegin {
            cmd,
            one_time: true,
        });
        t.push(Event::CmdCopyBuffer {
            cmd,
            src: h.buf,
            dst: d.buf,
            regions: vec![CopyRegion {
                src_offset: 0,
                dst_offset: 0,
                size: MIB,
            }],
        });
        t.push(Event::CmdBarrier { cmd });
        t.push(Event::CmdUse {
            cmd,
            command: "vkCmdDrawIndexedIndirect".into(),
            uses: vec![
                BufferUse {
                    buffer: d.buf,
                    offset: 0,
                    size: u64::MAX,
                    access: Access::Read,
                    kind: UseKind::Index,
                },
                BufferUse {
                    buffer: d.buf,
                    offset: 256,
                    size: 64,
                    access: Access::Read,
                    kind: UseKind::Indirect,
                },
                BufferUse {
                    buffer: d.buf,
                    offset: 0,
                    size: 4096,
                    access: Access::ReadWrite,
                    kind: UseKind::Descriptor,
                },
            ],
            late: None,
        });
        t.push(Event::CmdExecute {
            cmd,
            secondaries: vec![sec],
        });
        t.push(Event::CmdCopyBuffer {
            cmd,
            src: d.buf,
            dst: r.buf,
            regions: vec![
                CopyRegion {
                    src_offset: 0,
                    dst_offset: 0,
                    size: MIB / 2,
                },
                CopyRegion {
                    src_offset: MIB / 2,
                    dst_offset: MIB / 2,
                    size: MIB / 2,
                },
            ],
        });
        t.push(Event::CmdEnd { cmd });
        let queue = t.queue;
        t.push(Event::QueueSubmit {
            queue,
            batches: vec![SubmitBatch {
                command_buffers: vec![cmd],
                waits: vec![(sem, i)],
                signals: vec![(sem, i + 1)],
            }],
            fence: None,
        });
        t.push(Event::Window {
            unobserved: if i % 2 == 1 { vec![h.buf] } else { vec![] },
        });
        t.push(Event::SemaphoreReached {
            semaphores: vec![(sem, i + 1)],
        });
        t.push(Event::Window { unobserved: vec![] });
        t.push(Event::InvalidateRanges {
            ranges: vec![(r.mem, 0, u64::MAX)],
        });
        t.host_read(r.buf);
        t.push(Event::CmdReset { cmd });
    }
    t.push(Event::SemaphoreSignal {
        semaphore: sem,
        value: 100,
    });
    t.push(Event::QueueWaitIdle { queue: t.queue });
    t.push(Event::CmdFree { cmd: sec });
    t.push(Event::UnmapMemory { memory: h.mem });
    t.push(Event::Unvalidated {
        buffer: r.buf,
        reason: "mprotect failed".into(),
    });
    // A second device, with handles that collide with the first one's.
    t.new_device(1, "driver-map");
    let h2 = t.staging(MIB);
    let d2 = t.device(MIB);
    let ext = t.handle();
    t.push(Event::MemoryAlloc {
        memory: ext,
        key: echo_analyzer::trace::ObjectKey::anonymous(MIB, 1, 0),
        type_index: 1,
        size: MIB,
        dedicated_buffer: None,
        host_visible: false,
        external: true,
        host_import: false,
    });
    for _ in 0..3 {
        t.host_write(h2.buf);
        let (_, f) = t.submit(&[Cmd::Copy(h2.buf, d2.buf, MIB), Cmd::Read(d2.buf)]);
        t.push(Event::FenceSignaled { fences: vec![f] });
        t.push(Event::FenceReset { fences: vec![f] });
    }
    t.push(Event::ValidationLost {
        reason: "SIGSEGV handler replaced".into(),
    });
    t.push(Event::DeviceWaitIdle);
    t.push(Event::DeviceDestroy { device: 0xd0 });
    t.push(Event::Truncated {
        dropped_after_bytes: 1 << 30,
    });
    t.text()
}

/// [`seed`] as a version 1 trace (one device, no `dev`, validation unknown).
fn seed_v1() -> String {
    let text = seed();
    let mut lines = text.lines();
    let mut h: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    h["version"] = 1.into();
    let mut out = h.to_string();
    for l in lines {
        let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
        if let Some(o) = r.as_object_mut() {
            o.remove("dev");
            o.remove("device_index");
            o.remove("name");
            o.remove("validation");
            o.remove("external");
            o.remove("stack");
        }
        out.push('\n');
        out.push_str(&r.to_string());
    }
    out.push('\n');
    out
}

/// Structural mutations that keep each line JSON: drop, duplicate or swap lines, or replace a
/// number somewhere in a record with an interesting value (0, max, another line's handle …).
fn mutate_lines(rng: &mut Rng, lines: &mut Vec<String>) {
    if lines.len() < 3 {
        return;
    }
    let i = 1 + rng.below(lines.len() - 1);
    match rng.below(4) {
        0 => {
            lines.remove(i);
        }
        1 => {
            let l = lines[i].clone();
            let j = 1 + rng.below(lines.len() - 1);
            lines.insert(j, l);
        }
        2 => {
            let j = 1 + rng.below(lines.len() - 1);
            lines.swap(i, j);
        }
        _ => {
            let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&lines[i]) else {
                return;
            };
            let mut nums: Vec<*mut serde_json::Value> = Vec::new();
            fn walk(v: &mut serde_json::Value, out: &mut Vec<*mut serde_json::Value>) {
                match v {
                    serde_json::Value::Number(_) => out.push(v as *mut _),
                    serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(x, out)),
                    serde_json::Value::Object(o) => o.values_mut().for_each(|x| walk(x, out)),
                    _ => {}
                }
            }
            walk(&mut v, &mut nums);
            if nums.is_empty() {
                return;
            }
            let k = rng.below(nums.len());
            let new: u64 = match rng.below(5) {
                0 => 0,
                1 => u64::MAX,
                2 => rng.next() % 0x2000,
                3 => 1 << rng.below(64),
                _ => rng.next(),
            };
            // SAFETY: the pointers come from `v`, which is alive and not otherwise borrowed.
            unsafe { *nums[k] = serde_json::Value::from(new) };
            lines[i] = v.to_string();
        }
    }
}

#[test]
fn trace_reader_and_analyzer_never_panic() {
    let seed = seed().into_bytes();
    let mut rng = Rng(seed_value(0x9E37_79B9_7F4A_7C15));
    let mut accepted = 0;
    for _ in 0..iterations() {
        let mut s = seed.clone();
        if rng.below(2) == 0 {
            for _ in 0..1 + rng.below(8) {
                mutate(&mut rng, &mut s);
            }
        } else {
            let text = String::from_utf8(s).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            for _ in 0..1 + rng.below(12) {
                mutate_lines(&mut rng, &mut lines);
            }
            s = lines.join("\n").into_bytes();
        }
        if let Ok(t) = read_trace(&s[..]) {
            accepted += 1;
            let a = explain(&t, Thresholds::default(), &|_| String::new());
            let _ = echo_analyzer::report::table(&a, "fuzz");
            let _ = echo_analyzer::report::json(&a);
            parse_plan(&a.plan.to_json()).expect("the analyzer writes valid plans");
        }
    }
    // The mutations must leave some traces readable, or the analyzer is not exercised.
    assert!(
        accepted > iterations() / 3,
        "only {accepted} mutated traces were readable"
    );
}

#[test]
fn plan_reader_never_panics() {
    let mut t = T::new();
    let h = t.staging(MIB);
    let d = t.device(MIB);
    for _ in 0..3 {
        t.host_write(h.buf);
        t.run(&[Cmd::Copy(h.buf, d.buf, MIB), Cmd::ReadWrite(d.buf)]);
    }
    let plan = t.analyze().plan.to_json().into_bytes();
    let mut rng = Rng(seed_value(42));
    for _ in 0..iterations() {
        let mut s = plan.clone();
        for _ in 0..1 + rng.below(8) {
            mutate(&mut rng, &mut s);
        }
        let _ = parse_plan(&String::from_utf8_lossy(&s));
    }
}

/// A realistic `vk_layer_settings.txt`: every echo setting, another layer's, comments, junk.
fn settings_seed() -> String {
    let mut s = String::from("# vk_layer_settings.txt\nkhronos_validation.enables = X\n");
    for (name, value) in [
        ("mode", "enforce"),
        ("plan", "~/plans/$USER/${XDG_CACHE_HOME}/p.json"),
        ("trace", "$XDG_CACHE_HOME/vk-echo/t.jsonl"),
        ("cache_dir", "${HOME}/.cache/vk-echo"),
        ("stats", "/tmp/stats.jsonl"),
        ("log", "debug"),
        ("topology", "integrated"),
        ("min_bytes", "256K"),
        ("min_copies", "2"),
        ("stack_depth", "16"),
        ("trace_max_bytes", "1GiB"),
        ("validate", "false"),
    ] {
        s.push_str(&format!("echo.{name} = {value} # comment\n"));
    }
    s.push_str("echo.unknown = 1\nnot a setting line\necho.mode=\n= \n");
    s
}

/// The settings parser and resolver (the layer's and vkecho's) never panic: mutated settings
/// files, whose lines are also fed in as environment values and application settings.
#[test]
fn settings_parser_never_panics() {
    use echo_analyzer::settings::{expand_path, parse_settings_file, parse_u64, resolve};
    let seed = settings_seed().into_bytes();
    let mut rng = Rng(seed_value(7));
    let mut resolved = 0;
    for _ in 0..iterations() * 4 {
        let mut s = seed.clone();
        for _ in 0..1 + rng.below(8) {
            mutate(&mut rng, &mut s);
        }
        let text = String::from_utf8_lossy(&s);
        let mut warnings = Vec::new();
        let file = parse_settings_file(&text, &mut warnings);
        let values: Vec<String> = text.lines().map(str::to_string).collect();
        let pick = rng.next() as usize;
        let env = |k: &str| -> Option<String> {
            let i = k
                .bytes()
                .fold(pick, |a, b| a.wrapping_mul(31).wrapping_add(b as usize));
            values.get(i % values.len().max(1)).cloned()
        };
        let app: Vec<(String, String)> = file.iter().rev().cloned().collect();
        let (settings, _) = resolve(&env, &file, &app);
        let _ = settings.to_pairs();
        let _ = resolve(&|_| None, &[], &file);
        for v in &values {
            let _ = parse_u64(v);
            let _ = expand_path(v, &env);
        }
        if !file.is_empty() {
            resolved += 1;
        }
    }
    assert!(
        resolved > iterations(),
        "only {resolved} mutated files still held echo settings"
    );
}

/// Not a check: writes fuzz seeds when `VKECHO_WRITE_SEEDS=DIR` is set (scripts/fuzz.sh).
#[test]
fn write_seeds() {
    let Ok(dir) = std::env::var("VKECHO_WRITE_SEEDS") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir.join("trace_reader")).unwrap();
    std::fs::create_dir_all(dir.join("plan_reader")).unwrap();
    let trace = seed();
    for (name, trace) in [
        ("seed", trace),
        ("seed-sampled-two-devices", seed_sampled_two_devices()),
        ("seed-v1", seed_v1()),
    ] {
        std::fs::write(dir.join(format!("trace_reader/{name}.jsonl")), &trace).unwrap();
        let t = read_trace(trace.as_bytes()).unwrap();
        let mut plan = explain(&t, Thresholds::default(), &|_| String::new()).plan;
        if name == "seed" {
            // The optional parts an analyzed trace leaves out: calibration, program evidence.
            plan.calibration = Some(echo_analyzer::plan::Calibration {
                trials: 3,
                baseline_ms_median: 12.5,
                plan_ms_median: 9.25,
                enabled: true,
            });
            plan.evidence = Some(echo_analyzer::plan::Evidence {
                profiles: vec!["00000000deadbeef".into(), "0123456789abcdef".into()],
                stable: true,
            });
        }
        std::fs::write(dir.join(format!("plan_reader/{name}.json")), plan.to_json()).unwrap();
    }
    std::fs::create_dir_all(dir.join("settings")).unwrap();
    std::fs::write(dir.join("settings/seed.txt"), settings_seed()).unwrap();
    // The settings `settings_seed` leaves out, in other spellings (suffixes, cases, `${}`).
    let rest = "echo.cache_max_bytes = 512MiB\necho.keep_traces = Yes\necho.context = program\n\
                echo.guard = auto\necho.validate_full_windows = 0\necho.validate_sample_every = 8\n\
                echo.mode = PROFILE\necho.log = warning\necho.cache_dir = ~\necho.plan = ${HOME\n\
                echo.stats = $XDG_DATA_HOME/$/s.json\necho.min_bytes = 18446744073709551615G\n";
    std::fs::write(dir.join("settings/seed-rest.txt"), rest).unwrap();
}
