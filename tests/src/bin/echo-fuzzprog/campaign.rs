//! The oracle loop: each program runs without the layer, under profile, under enforce with the
//! plan `vkecho analyze` made of the profile, and twice in auto mode (profile, then enforce of
//! the plan auto mode wrote); every run's output (one hash per host read, the digest) must be
//! the no-layer run's, its exit status 0, within the time limit. A divergence is shrunk (delta
//! debugging, echo_tests::fuzzprog::shrink) and both programs are written to the output
//! directory. Coverage: the Vulkan commands the programs called and the analyzer's causes their
//! profiles reached, and the followed commands (the registry's table) no program called.

use echo_analyzer::registry::{core_version, Class, COMMANDS};
use echo_tests::fuzzprog::{gen, rng::program_seed, shrink, Caps, Program};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args, Clone)]
pub struct FuzzArgs {
    /// Stop starting programs after this many seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// lavapipe (the default ICD), swiftshader, or mesa25 (already inside the Debian 13 root).
    #[arg(long, default_value = "lavapipe")]
    driver: String,
    /// Programs run at once.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// At most this many programs (0: no limit).
    #[arg(long, default_value_t = 0)]
    programs: u64,
    #[arg(long)]
    out: PathBuf,
    /// Only run each program once without echo, under the Khronos validation layer with
    /// synchronization validation, and count its messages.
    #[arg(long)]
    validate: bool,
    /// Do not shrink divergences.
    #[arg(long)]
    no_shrink: bool,
    /// Shrink at most this many divergences (the first ones found); the others are kept whole.
    #[arg(long, default_value_t = 3)]
    shrink_max: u64,
    /// Seconds one shrink may take (then the smallest program found so far is kept).
    #[arg(long, default_value_t = 120)]
    shrink_seconds: u64,
    /// Set VK_ECHO_TEST_NO_CARRY=1 in the enforcing runs (a planted fault: the oracle must
    /// catch it).
    #[arg(long)]
    plant_no_carry: bool,
    /// VAR=VALUE set in every run with echo (never in the runs without it): a planted fault,
    /// e.g. `--plant VK_ECHO_TEST_LATE_AT_RECORD=1`. Repeatable.
    #[arg(long, value_parser = parse_plant)]
    plant: Vec<(String, String)>,
}

fn parse_plant(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("--plant {s}: VAR=VALUE expected")),
    }
}

#[derive(clap::Args, Clone)]
pub struct CheckArgs {
    #[arg(long)]
    file: PathBuf,
    #[arg(long, default_value = "lavapipe")]
    driver: String,
    #[arg(long)]
    out: PathBuf,
    /// Shrink it when it diverges.
    #[arg(long)]
    shrink: bool,
    /// The planted fault of `fuzz --plant-no-carry`.
    #[arg(long)]
    plant_no_carry: bool,
    /// As `fuzz --plant`.
    #[arg(long, value_parser = parse_plant)]
    plant: Vec<(String, String)>,
}

/// Where the binaries are: this one, the layer and vkecho beside it (or ECHO_FUZZ_BIN_DIR).
struct Tools {
    me: PathBuf,
    layer: PathBuf,
    vkecho: PathBuf,
    manifest: PathBuf,
}

impl Tools {
    fn find() -> Tools {
        let me = std::env::current_exe().expect("current_exe");
        let dir = std::env::var_os("ECHO_FUZZ_BIN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| me.parent().unwrap().to_path_buf());
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let manifest = echo_tests::world::repo_root().join("manifest/VkLayer_echo.json");
        Tools {
            layer: dir.join("libVkLayer_echo.so"),
            vkecho: dir.join("vkecho"),
            manifest,
            me,
        }
    }
}

/// A private world for one campaign: the implicit manifest pointing at this build's layer.
struct World {
    dir: PathBuf,
    base_env: Vec<(String, String)>,
    tools: Tools,
    plant: bool,
    /// Set in every run with echo (`--plant`).
    plants: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
struct RunOut {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

impl RunOut {
    fn ok(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
    fn verdict(&self) -> String {
        if self.timed_out {
            "timed out (a hang)".into()
        } else {
            match self.code {
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".into(),
            }
        }
    }
}

fn run_limited(mut cmd: Command, limit: Duration) -> RunOut {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return RunOut {
                code: Some(127),
                stdout: String::new(),
                stderr: e.to_string(),
                timed_out: false,
            }
        }
    };
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let t_err = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            timed_out = true;
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(3));
    };
    RunOut {
        code: status.and_then(|s| s.code()),
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
        timed_out,
    }
}

const MODES: [&str; 5] = ["none", "profile", "enforce", "auto1", "auto2"];
const LIMIT: Duration = Duration::from_secs(60);

/// One program's runs.
#[derive(Default, Debug)]
struct Outcome {
    /// "unsupported", "error: …" (the no-layer run failed), or None.
    skipped: Option<String>,
    divergent: Vec<(String, String)>,
    group_applied: bool,
    auto_applied: bool,
    commands: Vec<String>,
    causes: Vec<String>,
}

impl World {
    fn new(dir: &Path, driver: &str, plant: bool, plants: Vec<(String, String)>) -> World {
        let tools = Tools::find();
        for t in [&tools.layer, &tools.vkecho] {
            if !t.exists() {
                eprintln!("echo-fuzzprog: {} is missing (build the layer and vkecho, or set ECHO_FUZZ_BIN_DIR)", t.display());
                std::process::exit(2);
            }
        }
        for d in ["data/vulkan/implicit_layer.d", "home", "cache"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let text = std::fs::read_to_string(&tools.manifest).expect("manifest/VkLayer_echo.json");
        let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
        m["layer"]["library_path"] = tools.layer.display().to_string().into();
        std::fs::write(
            dir.join("data/vulkan/implicit_layer.d/VkLayer_echo.json"),
            m.to_string(),
        )
        .unwrap();
        let s = |p: &Path| p.display().to_string();
        let mut env = vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            ),
            ("HOME".into(), s(&dir.join("home"))),
            ("XDG_RUNTIME_DIR".into(), "/tmp".into()),
            ("XDG_DATA_HOME".into(), s(&dir.join("data"))),
            ("XDG_DATA_DIRS".into(), "/usr/local/share:/usr/share".into()),
            ("XDG_CONFIG_HOME".into(), s(&dir.join("home"))),
            ("XDG_CACHE_HOME".into(), s(&dir.join("cache"))),
            ("VK_ECHO_MIN_BYTES".into(), "4K".into()),
        ];
        if driver == "swiftshader" {
            env.push((
                "VK_DRIVER_FILES".into(),
                "/usr/lib/chromium/vk_swiftshader_icd.json".into(),
            ));
        } else if let Ok(v) = std::env::var("VK_DRIVER_FILES") {
            env.push(("VK_DRIVER_FILES".into(), v));
        }
        // A planted fault for the oracle's own test: the program's output varies without the
        // layer (`run` prints a line that changes every run).
        if let Ok(v) = std::env::var("ECHO_FUZZPROG_TEST_UNSTABLE") {
            env.push(("ECHO_FUZZPROG_TEST_UNSTABLE".into(), v));
        }
        World {
            dir: dir.to_path_buf(),
            base_env: env,
            tools,
            plant,
            plants,
        }
    }

    fn cmd(&self, program: &Path, args: &[&str], extra: &[(&str, String)]) -> Command {
        let mut c = Command::new(program);
        c.env_clear().args(args).current_dir(&self.dir);
        for (k, v) in &self.base_env {
            c.env(k, v);
        }
        for (k, v) in extra {
            c.env(k, v);
        }
        c
    }

    /// The device's API version and extensions (`echo-fuzzprog device`).
    fn device(&self) -> Result<(u32, Vec<String>), String> {
        let o = run_limited(
            self.cmd(
                &self.tools.me,
                &["device"],
                &[("VK_ECHO_DISABLE", "1".into())],
            ),
            LIMIT,
        );
        if !o.ok() {
            return Err(format!("device: {} {}", o.verdict(), o.stderr));
        }
        let v: serde_json::Value =
            serde_json::from_str(o.stdout.trim()).map_err(|e| format!("device: {e}"))?;
        let api = v["api_version"].as_u64().unwrap_or(0) as u32;
        let exts = v["extensions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Ok((api, exts))
    }

    fn caps(&self) -> Result<Caps, String> {
        let o = run_limited(
            self.cmd(
                &self.tools.me,
                &["caps"],
                &[("VK_ECHO_DISABLE", "1".into())],
            ),
            LIMIT,
        );
        if !o.ok() {
            return Err(format!("caps: {} {}", o.verdict(), o.stderr));
        }
        serde_json::from_str(o.stdout.trim()).map_err(|e| format!("caps: {e}"))
    }

    /// Runs program file `prog` in `mode`, files in `dir`.
    fn run_mode(&self, prog: &Path, dir: &Path, mode: &str, validate: bool) -> RunOut {
        let p = |n: &str| dir.join(n).display().to_string();
        let mut extra: Vec<(&str, String)> = vec![];
        match mode {
            "none" => extra.push(("VK_ECHO_DISABLE", "1".into())),
            "profile" => {
                extra.push(("VK_ECHO_ENABLE", "1".into()));
                extra.push(("VK_ECHO_MODE", "profile".into()));
                extra.push(("VK_ECHO_TRACE", p("trace.jsonl")));
            }
            "enforce" => {
                extra.push(("VK_ECHO_ENABLE", "1".into()));
                extra.push(("VK_ECHO_MODE", "enforce".into()));
                extra.push(("VK_ECHO_PLAN", p("plan.json")));
                extra.push(("VK_ECHO_STATS", p("stats-enforce.json")));
            }
            _ => {
                extra.push(("VK_ECHO_ENABLE", "1".into()));
                extra.push(("VK_ECHO_MODE", "auto".into()));
                extra.push(("VK_ECHO_CACHE_DIR", p("auto-cache")));
                extra.push(("VK_ECHO_STATS", p(&format!("stats-{mode}.json"))));
            }
        }
        if self.plant && (mode == "enforce" || mode == "auto2") {
            extra.push(("VK_ECHO_TEST_NO_CARRY", "1".into()));
        }
        if mode != "none" {
            for (k, v) in &self.plants {
                extra.push((k.as_str(), v.clone()));
            }
        }
        if validate {
            extra.push(("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation".into()));
            extra.push((
                "VK_LAYER_ENABLES",
                "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT:VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT".into(),
            ));
        }
        let prog = prog.display().to_string();
        let mut args = vec!["run", "--file", prog.as_str()];
        let cover = p("cover.txt");
        if mode == "none" {
            args.extend(["--cover", cover.as_str()]);
        }
        run_limited(self.cmd(&self.tools.me, &args, &extra), LIMIT)
    }

    /// Every mode of one program (its directory is made fresh). `stop_at`: a mode after which
    /// to stop (shrinking needs only the runs up to the failing one).
    fn oracle(&self, p: &Program, dir: &Path, stop_at: Option<&str>) -> Outcome {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let prog = dir.join("program.json");
        std::fs::write(&prog, p.to_json()).unwrap();
        let mut o = Outcome::default();
        let none = self.run_mode(&prog, dir, "none", false);
        if none.code == Some(3) {
            o.skipped = Some("unsupported".into());
            return o;
        }
        if !none.ok() {
            o.skipped = Some(format!(
                "error without the layer: {}: {}",
                none.verdict(),
                last_line(&none.stderr)
            ));
            return o;
        }
        o.commands = std::fs::read_to_string(dir.join("cover.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        for mode in &MODES[1..] {
            if *mode == "enforce" {
                // The plan of the profile.
                let trace = dir.join("trace.jsonl");
                let a = run_limited(
                    self.cmd(
                        &self.tools.vkecho,
                        &[
                            "analyze",
                            &trace.display().to_string(),
                            "-o",
                            &dir.join("plan.json").display().to_string(),
                            "--no-symbolize",
                            "--json",
                        ],
                        &[],
                    ),
                    LIMIT,
                );
                if !a.ok() {
                    o.divergent.push((
                        "analyze".into(),
                        format!("vkecho analyze: {}: {}", a.verdict(), last_line(&a.stderr)),
                    ));
                    return o;
                }
                o.causes = causes(&a.stdout);
            }
            let r = self.run_mode(&prog, dir, mode, false);
            if !r.ok() {
                o.divergent.push((
                    mode.to_string(),
                    format!("{}: {}", r.verdict(), last_line(&r.stderr)),
                ));
            } else if r.stdout != none.stdout {
                o.divergent
                    .push((mode.to_string(), first_difference(&none.stdout, &r.stdout)));
            }
            if stop_at == Some(*mode) {
                break;
            }
        }
        // A different output is a divergence only where the program has one output without the
        // layer: two more runs without it must print what the first printed (a program whose
        // output varies without echo has no oracle; lavapipe 22.3 gave two of those in the long
        // run, every echo mode printing one and the same output).
        if o.divergent.iter().any(|(m, _)| m != "analyze") {
            for _ in 0..2 {
                let again = self.run_mode(&prog, dir, "none", false);
                if !again.ok() || again.stdout != none.stdout {
                    eprintln!(
                        "echo-fuzzprog: not deterministic without the layer ({}): no oracle",
                        first_difference(&none.stdout, &again.stdout)
                    );
                    o.skipped = Some("not deterministic without the layer".into());
                    o.divergent.clear();
                    return o;
                }
            }
        }
        o.group_applied = groups_applied(&dir.join("stats-enforce.json"));
        o.auto_applied = groups_applied(&dir.join("stats-auto2.json"));
        o
    }
}

fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(300)
        .collect()
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}: expected `{x}`, got `{y}`", i + 1);
        }
    }
    format!(
        "{} lines expected, {} got",
        a.lines().count(),
        b.lines().count()
    )
}

fn groups_applied(stats: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(stats) else {
        return false;
    };
    text.lines().any(|l| {
        serde_json::from_str::<serde_json::Value>(l)
            .ok()
            .and_then(|v| v["groups_applied"].as_u64())
            .is_some_and(|n| n > 0)
    })
}

/// The analyzer's causes an analysis reached: its reasons, and "accepted" for a plan group.
fn causes(analysis: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(analysis) else {
        return vec![];
    };
    let mut out: Vec<String> = v["copies"]["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["reason"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if v["plan"]["groups"]
        .as_array()
        .is_some_and(|g| !g.is_empty())
    {
        out.push("accepted".into());
    }
    out
}

/// Shrinks a program whose `mode` diverged, keeping programs that still diverge there, within
/// `budget` oracle runs and `seconds`.
fn shrink_divergence(
    w: &World,
    p: &Program,
    mode: &str,
    dir: &Path,
    budget: usize,
    seconds: u64,
) -> Program {
    let n = AtomicU64::new(0);
    let until = Instant::now() + Duration::from_secs(seconds);
    shrink::shrink(
        p,
        |cand| {
            if Instant::now() >= until {
                return false;
            }
            let i = n.fetch_add(1, Ordering::Relaxed);
            let o = w.oracle(cand, &dir.join(format!("try-{}", i % 2)), Some(mode));
            o.divergent.iter().any(|(m, _)| m == mode)
        },
        budget,
    )
}

#[derive(Default)]
struct Tally {
    programs: u64,
    applied: u64,
    auto_applied: u64,
    divergences: Vec<String>,
    skipped: BTreeMap<String, u64>,
    commands: BTreeMap<String, u64>,
    causes: BTreeMap<String, u64>,
    validation_messages: u64,
    validation_programs: Vec<String>,
}

pub fn fuzz(a: FuzzArgs) -> i32 {
    std::fs::create_dir_all(&a.out).unwrap();
    let out = std::fs::canonicalize(&a.out).unwrap();
    let world = Arc::new(World::new(
        &out.join("world"),
        &a.driver,
        a.plant_no_carry,
        a.plant.clone(),
    ));
    let caps = match world.caps() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("echo-fuzzprog fuzz: {e}");
            return 2;
        }
    };
    eprintln!(
        "echo-fuzzprog fuzz: driver {}, caps {}",
        a.driver,
        serde_json::to_string(&caps).unwrap()
    );
    let device = match world.device() {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("echo-fuzzprog fuzz: {e} (no coverage by class)");
            None
        }
    };
    let stream = match a.driver.as_str() {
        "lavapipe" => 1,
        "swiftshader" => 2,
        _ => 3,
    };
    let next = Arc::new(AtomicU64::new(0));
    let shrunk = Arc::new(AtomicU64::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + Duration::from_secs(a.seconds);
    let threads: Vec<_> = (0..a.jobs.max(1))
        .map(|job| {
            let (world, next, tally, a, out) = (
                world.clone(),
                next.clone(),
                tally.clone(),
                a.clone(),
                out.clone(),
            );
            let shrunk = shrunk.clone();
            std::thread::spawn(move || loop {
                if Instant::now() >= deadline {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if a.programs > 0 && i >= a.programs {
                    break;
                }
                let seed = program_seed(a.seed, stream, i);
                let p = gen::generate(seed, caps);
                let dir = out.join(format!("job{job}"));
                if a.validate {
                    let _ = std::fs::remove_dir_all(&dir);
                    std::fs::create_dir_all(&dir).unwrap();
                    let f = dir.join("program.json");
                    std::fs::write(&f, p.to_json()).unwrap();
                    let r = world.run_mode(&f, &dir, "none", true);
                    let msgs: Vec<&str> = r
                        .stdout
                        .lines()
                        .chain(r.stderr.lines())
                        .filter(|l| {
                            l.contains("Validation Error")
                                || l.contains("Validation Warning")
                                || l.contains("SYNC-HAZARD")
                        })
                        .collect();
                    let mut t = tally.lock().unwrap();
                    t.programs += 1;
                    if !r.ok() {
                        *t.skipped
                            .entry(format!("failed: {}", r.verdict()))
                            .or_default() += 1;
                    }
                    if !msgs.is_empty() {
                        t.validation_messages += msgs.len() as u64;
                        let keep = out.join(format!("invalid-{}-{seed}.json", a.driver));
                        std::fs::write(&keep, p.to_json()).unwrap();
                        std::fs::write(
                            keep.with_extension("log"),
                            format!("{}\n{}", r.stdout, r.stderr),
                        )
                        .unwrap();
                        t.validation_programs.push(format!(
                            "seed {seed}: {}",
                            msgs[0].chars().take(400).collect::<String>()
                        ));
                    }
                    continue;
                }
                let o = world.oracle(&p, &dir, None);
                let mut found = None;
                {
                    let mut t = tally.lock().unwrap();
                    if let Some(s) = &o.skipped {
                        *t.skipped.entry(s.chars().take(120).collect()).or_default() += 1;
                        continue;
                    }
                    t.programs += 1;
                    t.applied += o.group_applied as u64;
                    t.auto_applied += o.auto_applied as u64;
                    for c in &o.commands {
                        *t.commands.entry(c.clone()).or_default() += 1;
                    }
                    for c in o.causes.iter().collect::<std::collections::BTreeSet<_>>() {
                        *t.causes.entry(c.clone()).or_default() += 1;
                    }
                    if let Some((mode, why)) = o.divergent.first() {
                        let line = format!("driver {} seed {seed}: {mode}: {why}", a.driver);
                        eprintln!("DIVERGENCE {line}");
                        t.divergences.push(line);
                        found = Some(mode.clone());
                    }
                }
                if let Some(mode) = found {
                    let keep = out.join(format!("div-{}-{seed}.json", a.driver));
                    std::fs::write(&keep, p.to_json()).unwrap();
                    if !a.no_shrink && shrunk.fetch_add(1, Ordering::Relaxed) < a.shrink_max {
                        let small = shrink_divergence(
                            &world,
                            &p,
                            &mode,
                            &out.join(format!("shrink{job}")),
                            300,
                            a.shrink_seconds,
                        );
                        let f = out.join(format!("div-{}-{seed}-min.json", a.driver));
                        std::fs::write(&f, small.to_json()).unwrap();
                        eprintln!(
                            "shrunk: {} → {} ops+commands: {}",
                            p.size(),
                            small.size(),
                            f.display()
                        );
                    }
                }
            })
        })
        .collect();
    // Progress on a long run: one line a minute (the script's log), then the report.
    let start = Instant::now();
    let mut tick = start;
    while !threads.iter().all(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(200));
        if tick.elapsed() >= PROGRESS_EVERY {
            tick = Instant::now();
            let t = tally.lock().unwrap();
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "progress: {:.0} s of {}, {} programs ({:.1}/s), {} with a group applied, {} divergences, {} skipped",
                secs,
                a.seconds,
                t.programs,
                t.programs as f64 / secs.max(1.0),
                t.applied,
                t.divergences.len(),
                t.skipped.values().sum::<u64>()
            );
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let t = tally.lock().unwrap();
    report(&a, &out, &t, device.as_ref())
}

/// How often a fuzz run says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

/// A command of the registry (vk.xml) that records into a command buffer or reaches memory:
/// its name, its aliases, the core versions and extensions that provide it.
struct XmlCommand {
    name: String,
    aliases: Vec<String>,
    requires: Vec<String>,
}

/// Every `vkCmd*` of `layer/registry/vk.xml` (aliases folded into the command they alias) with
/// what provides it: the numbered `<feature>`s and the `<extension>`s whose `<require>` names
/// it. A text scan: vk.xml's layout is one element a line.
fn xml_commands(xml: &str) -> Vec<XmlCommand> {
    let attr = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!(" {key}=\""))? + key.len() + 3;
        let end = line[at..].find('"')? + at;
        Some(line[at..end].to_string())
    };
    let mut alias_of: BTreeMap<String, String> = BTreeMap::new();
    let mut requires: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in xml.lines() {
        let l = line.trim();
        if l.starts_with("<feature ") && l.contains(" number=") {
            current = attr(l, "name");
        } else if l.starts_with("<extension ") && !l.ends_with("/>") {
            current = attr(l, "name").filter(|_| {
                attr(l, "supported").is_none_or(|s| s.split(',').any(|x| x == "vulkan"))
            });
        } else if l.starts_with("</feature>") || l.starts_with("</extension>") {
            current = None;
        } else if l.starts_with("<command ") {
            let Some(name) = attr(l, "name") else {
                continue;
            };
            if !name.starts_with("vkCmd") {
                continue;
            }
            if let Some(target) = attr(l, "alias") {
                if current.is_none() {
                    alias_of.insert(name, target);
                    continue;
                }
            }
            if let Some(c) = &current {
                requires.entry(name).or_default().push(c.clone());
            }
        }
    }
    let mut out: BTreeMap<String, XmlCommand> = BTreeMap::new();
    for (name, reqs) in requires {
        let canon = alias_of.get(&name).cloned().unwrap_or_else(|| name.clone());
        let e = out.entry(canon.clone()).or_insert_with(|| XmlCommand {
            name: canon.clone(),
            aliases: vec![],
            requires: vec![],
        });
        if name != canon {
            e.aliases.push(name);
        }
        e.requires.extend(reqs);
    }
    out.into_values().collect()
}

/// A command of one class for the coverage: name, aliases, what provides it.
type Row<'a> = (&'a str, Vec<&'a str>, Vec<String>);

/// Whether a device with API version `api` and `exts` has a command that `requires` provide.
fn has(requires: &[String], api: u32, exts: &[String]) -> bool {
    let (major, minor) = (api >> 22 & 0x7f, api >> 12 & 0x3ff);
    requires.iter().any(|r| match core_version(r) {
        Some(v) => {
            let mut it = v.split('_').map(|x| x.parse::<u32>().unwrap_or(u32::MAX));
            let (a, b) = (it.next().unwrap_or(u32::MAX), it.next().unwrap_or(u32::MAX));
            (a, b) <= (major, minor)
        }
        None => exts.iter().any(|e| e == r),
    })
}

/// Coverage by class (issue 53): for followed, aside and marked commands (and inert ones), the
/// ones the driver has and no program called. Followed, aside and inert: the registry's table
/// (`COMMANDS`); marked: every other `vkCmd*` of vk.xml. Lines for the report, and the summary.
fn class_coverage(t: &Tally, api: u32, exts: &[String]) -> (Vec<String>, String) {
    let called = |name: &str, aliases: &[&str]| {
        t.commands
            .keys()
            .any(|k| k == name || aliases.contains(&k.as_str()))
    };
    let mut lines = vec![];
    let mut summary = vec![];
    let table: Vec<(&str, Vec<Row>)> = ["followed", "aside", "inert"]
        .iter()
        .map(|&class| {
            let cmds = COMMANDS
                .iter()
                .filter(|c| match class {
                    "followed" => c.class == Class::Followed,
                    "aside" => c.class == Class::Aside,
                    _ => matches!(c.class, Class::Inert(_)),
                })
                .map(|c| {
                    (
                        c.name,
                        c.aliases.to_vec(),
                        c.requires.iter().map(|r| r.to_string()).collect(),
                    )
                })
                .collect();
            (class, cmds)
        })
        .collect();
    let xml = std::fs::read_to_string(echo_tests::world::repo_root().join("layer/registry/vk.xml"))
        .unwrap_or_default();
    let marked: Vec<XmlCommand> = xml_commands(&xml)
        .into_iter()
        .filter(|x| {
            !COMMANDS.iter().any(|c| {
                c.name == x.name
                    || x.aliases
                        .iter()
                        .any(|a| c.aliases.contains(&a.as_str()) || c.name == a)
            })
        })
        .collect();
    let marked_rows: Vec<Row> = marked
        .iter()
        .map(|x| {
            (
                x.name.as_str(),
                x.aliases.iter().map(String::as_str).collect(),
                x.requires.clone(),
            )
        })
        .collect();
    let mut all = table;
    all.insert(2, ("marked", marked_rows));
    for (class, cmds) in &all {
        let have: Vec<&Row> = cmds.iter().filter(|c| has(&c.2, api, exts)).collect();
        let gaps: Vec<&str> = have
            .iter()
            .filter(|c| !called(c.0, &c.1))
            .map(|c| c.0)
            .collect();
        lines.push(format!(
            "{class} commands the driver has that no program called ({} of {}):",
            gaps.len(),
            have.len()
        ));
        for g in &gaps {
            lines.push(format!("  {g}"));
        }
        summary.push(format!(
            "{class} {} of {}",
            have.len() - gaps.len(),
            have.len()
        ));
    }
    (lines, summary.join(", "))
}

fn report(a: &FuzzArgs, out: &Path, t: &Tally, device: Option<&(u32, Vec<String>)>) -> i32 {
    if a.validate {
        for s in &t.skipped {
            println!("  {}: {}", s.0, s.1);
        }
        for v in &t.validation_programs {
            println!("  {v}");
        }
        println!(
            "validate {}: {} programs, {} validation messages in {} programs",
            a.driver,
            t.programs,
            t.validation_messages,
            t.validation_programs.len()
        );
        return (t.validation_messages > 0 || !t.skipped.is_empty()) as i32;
    }
    // Coverage.
    let mut lines = vec![
        format!("coverage of {} programs on {}", t.programs, a.driver),
        "Vulkan commands called (programs):".into(),
    ];
    for (c, n) in &t.commands {
        lines.push(format!("  {c}: {n}"));
    }
    lines.push("analyzer causes reached (programs):".into());
    for (c, n) in &t.causes {
        lines.push(format!("  {c}: {n}"));
    }
    let gaps: Vec<&str> = COMMANDS
        .iter()
        .filter(|c| c.class == Class::Followed)
        .filter(|c| {
            !t.commands
                .keys()
                .any(|k| k == c.name || c.aliases.contains(&k.as_str()))
        })
        .map(|c| c.name)
        .collect();
    let followed = COMMANDS
        .iter()
        .filter(|c| c.class == Class::Followed)
        .count();
    lines.push(format!(
        "followed commands no program called ({} of {followed}):",
        gaps.len()
    ));
    for g in &gaps {
        lines.push(format!("  {g}"));
    }
    let mut by_class = String::new();
    if let Some((api, exts)) = device {
        let (more, summary) = class_coverage(t, *api, exts);
        lines.push(format!(
            "by class, of what this driver has (Vulkan {}.{}, {} device extensions):",
            api >> 22 & 0x7f,
            api >> 12 & 0x3ff,
            exts.len()
        ));
        lines.extend(more);
        by_class = summary;
    }
    let text = lines.join("\n") + "\n";
    std::fs::write(out.join(format!("coverage-{}.txt", a.driver)), &text).unwrap();
    println!(
        "{}: commands called {}, followed commands reached {} of {followed}, causes reached {}: {}",
        a.driver,
        t.commands.len(),
        followed - gaps.len(),
        t.causes.len(),
        t.causes.keys().cloned().collect::<Vec<_>>().join(" ")
    );
    if !by_class.is_empty() {
        println!(
            "{}: called of what the driver has, by class: {by_class}",
            a.driver
        );
    }
    for (s, n) in &t.skipped {
        println!("  skipped {n}: {s}");
    }
    for d in &t.divergences {
        println!("  divergence: {d}");
    }
    println!(
        "result {} {} {} {} {}",
        a.driver,
        t.programs,
        t.applied,
        t.divergences.len(),
        t.auto_applied
    );
    println!(
        "{} programs, {} with a group applied, {} divergences",
        t.programs,
        t.applied,
        t.divergences.len()
    );
    (!t.divergences.is_empty()) as i32
}

pub fn check(a: CheckArgs) -> i32 {
    std::fs::create_dir_all(&a.out).unwrap();
    let out = std::fs::canonicalize(&a.out).unwrap();
    let world = World::new(
        &out.join("world"),
        &a.driver,
        a.plant_no_carry,
        a.plant.clone(),
    );
    let text =
        std::fs::read_to_string(&a.file).unwrap_or_else(|e| panic!("{}: {e}", a.file.display()));
    let p = Program::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", a.file.display()));
    if let Err((i, e)) = echo_tests::fuzzprog::model::validate(&p) {
        println!("invalid program: op {i}: {e}");
        return 2;
    }
    let o = world.oracle(&p, &out.join("run"), None);
    if let Some(s) = o.skipped {
        println!("skipped: {s}");
        return 2;
    }
    println!(
        "group applied: {}, auto: {}",
        o.group_applied, o.auto_applied
    );
    for (m, why) in &o.divergent {
        println!("divergence: {m}: {why}");
    }
    if let (true, Some((mode, _))) = (a.shrink, o.divergent.first()) {
        let small = shrink_divergence(&world, &p, mode, &out.join("shrink"), 300, 600);
        let f = out.join("min.json");
        std::fs::write(&f, small.to_json()).unwrap();
        println!("shrunk: {} → {}: {}", p.size(), small.size(), f.display());
    }
    (!o.divergent.is_empty()) as i32
}
