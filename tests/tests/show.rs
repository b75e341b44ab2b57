//! `vkecho show` (issue 36) in a real browser: samples profiled on lavapipe, their plan enforced
//! with statistics, the page written and opened in headless Chromium (Debian's `chromium`,
//! installed by scripts/deps.sh). The page's script writes what it drew into `#echo-status`; the
//! test reads the rendered DOM (`--dump-dom`) — every candidate pair with the verdict
//! `vkecho analyze` gives it, elided copies drawn as such, no script error — and a 1280×800
//! screenshot, which must not be blank. The Perfetto export of the same run parses and holds
//! events of each kind.
//!
//! Issue 47: the page opens on the time axis (ms/µs) with the event order as a toggle; the
//! self-test drives the toggle and checks a submission is drawn as long as it lasted; a planted
//! fault (the trace's clock slowed tenfold) draws every span ten times longer; a trace without
//! times opens in event order.

use echo_analyzer::analysis::{explain, plain_site, Decision};
use echo_analyzer::plan::Thresholds;
use echo_analyzer::report;
use echo_analyzer::trace::read_trace;
use echo_tests::world::{artifact, World};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARGS: [&str; 7] = [
    "",
    "--size-mib",
    "1",
    "--iters",
    "10",
    "--variant",
    "staging",
];

/// A sample profiled, analyzed, and enforced with statistics: (world, trace, plan, stats).
fn run_sample(name: &str) -> (World, PathBuf, PathBuf, PathBuf) {
    let mut args = ARGS;
    args[0] = name;
    let w = World::echo(Some("enforce"));
    let plan = w.make_plan(&args);
    let trace = w.dir.join("trace.jsonl");
    let stats = w.dir.join("stats.json");
    let w = w
        .set("VK_ECHO_PLAN", plan.display().to_string())
        .set("VK_ECHO_STATS", stats.display().to_string());
    let run = w.sample(&args);
    assert!(
        run.status.success(),
        "{name} under enforce:\n{}",
        run.stderr
    );
    assert!(stats.is_file(), "enforce wrote no statistics");
    (w, trace, plan, stats)
}

fn vkecho_show(trace: &Path, plan: &Path, stats: &Path, extra: &[&str], out: &Path) {
    let o = Command::new(artifact("vkecho"))
        .arg("show")
        .arg(trace)
        .arg("--plan")
        .arg(plan)
        .arg("--stats")
        .arg(stats)
        .args(extra)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run vkecho show");
    assert!(
        o.status.success(),
        "vkecho show failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `chromium --headless` with the flags this closed network needs (no first-run, no
/// background or component networking, no QUIC) and a fresh profile directory.
fn chromium(dir: &Path, args: &[&str], page: &Path) -> std::process::Output {
    let profile = dir.join(format!(
        "chromium-profile-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    if let Err(e) = Command::new("chromium").arg("--version").output() {
        panic!(
            "cannot run chromium ({e}): the browser test needs Debian's `chromium` package \
             (scripts/deps.sh installs it; or apt-get install -y chromium)"
        );
    }
    // Bounded: a browser that hangs on a loaded machine fails the test instead of stalling it.
    let mut c = Command::new("timeout");
    c.args(["120", "chromium"]);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(format!("file://{}", page.display()))
    .env("HOME", dir);
    let out = c.output().expect("run timeout(1) chromium");
    let _ = std::fs::remove_dir_all(&profile);
    out
}

/// The `data-*` attributes of the page's `#echo-status` element in a dumped DOM.
fn status(dom: &str) -> std::collections::BTreeMap<String, String> {
    let start = dom.find("id=\"echo-status\"").unwrap_or_else(|| {
        panic!(
            "no #echo-status in the DOM:\n{}",
            &dom[..dom.len().min(2000)]
        )
    });
    let tag_start = dom[..start].rfind('<').unwrap();
    let tag_end = start + dom[start..].find('>').unwrap();
    let tag = &dom[tag_start..tag_end];
    let mut m = std::collections::BTreeMap::new();
    for part in tag.split(" data-").skip(1) {
        if let Some((k, v)) = part.split_once("=\"") {
            m.insert(k.to_string(), v.split('"').next().unwrap_or("").to_string());
        }
    }
    m
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Checks the page of one sample in the browser; returns the DOM's status.
fn check_page(dir: &Path, page: &Path, trace: &Path) -> std::collections::BTreeMap<String, String> {
    let size = std::fs::metadata(page).unwrap().len();
    assert!(
        size < 1 << 20,
        "the page of a 10-iteration trace is {size} bytes (want well under 1 MiB)"
    );
    let html = std::fs::read_to_string(page).unwrap();
    for net in ["http://", "https://", "<link ", "src=\""] {
        let allowed = net == "http://" && html.contains("http://www.w3.org/2000/svg");
        let n = html.matches(net).count();
        let svg_ns = html.matches("http://www.w3.org/2000/svg").count();
        assert!(
            n == 0 || (allowed && n == svg_ns),
            "the page must not load anything ({net} found {n} times)"
        );
    }
    let out = chromium(dir, &["--dump-dom", "--virtual-time-budget=5000"], page);
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "chromium --dump-dom failed:\n{log}");
    let st = status(&dom);
    assert_eq!(
        st.get("state").map(String::as_str),
        Some("ok"),
        "the page's script did not finish cleanly: {st:?}\nchromium's log:\n{log}"
    );
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .collect();
    assert!(
        console_errors.is_empty(),
        "console errors: {console_errors:?}"
    );

    // Every candidate pair of `vkecho analyze`, with its verdict, in the rendered table.
    let t = read_trace(std::io::BufReader::new(std::fs::File::open(trace).unwrap())).unwrap();
    let a = explain(&t, Thresholds::default(), &plain_site);
    assert_eq!(
        st["pairs"],
        a.candidates.len().to_string(),
        "pair rows drawn: {st:?}"
    );
    assert_eq!(st["verdicts"], a.candidates.len().to_string(), "{st:?}");
    let dom_text = unescape(&dom);
    for (i, c) in a.candidates.iter().enumerate() {
        let row_at = dom_text
            .find(&format!("id=\"pair-{}\"", i + 1))
            .unwrap_or_else(|| panic!("no row for pair {}", i + 1));
        let row = &dom_text[row_at..row_at + dom_text[row_at..].find("</tr>").unwrap()];
        let verdict = report::decision(c);
        assert!(
            row.contains(&verdict),
            "pair {}: no '{verdict}' in {row}",
            i + 1
        );
        if let Decision::Rejected {
            plain,
            event: Some(e),
            ..
        } = &c.decision
        {
            assert!(
                row.contains(plain.as_str()),
                "pair {}: plain words missing",
                i + 1
            );
            assert!(
                row.contains(&format!("href=\"#ev-{e}\"")),
                "pair {}: no link to event {e}",
                i + 1
            );
            assert!(
                dom.contains(&format!("id=\"ev-{e}\"")),
                "event {e} is not on the timeline"
            );
        }
    }
    // Issue 47: a trace with times opens on the time axis, in a unit of time.
    if t.records.iter().all(|r| r.t.is_some()) {
        assert_eq!(st["axis"], "time", "{st:?}");
        assert!(
            ["ms", "µs", "s"].contains(&st["unit-iter"].as_str()),
            "{st:?}"
        );
        assert!(st["waits-drawn"].parse::<u64>().unwrap() > 0, "{st:?}");
        assert!(st["gpu-timed"].parse::<u64>().unwrap() > 0, "{st:?}");
    } else {
        assert_eq!(
            (st["axis"].as_str(), st["timed"].as_str()),
            ("events", "false")
        );
    }
    // The page drives its own controls (keys, wheel, an event link, the axis toggle) when opened
    // at #selftest.
    let selftest = PathBuf::from(format!("{}#selftest", page.display()));
    let out = chromium(
        dir,
        &["--dump-dom", "--virtual-time-budget=5000"],
        &selftest,
    );
    let st_self = status(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        st_self.get("selftest").map(String::as_str),
        Some("ok"),
        "zoom, pan or links do not work: {st_self:?}"
    );
    st
}

/// Decodes a PNG screenshot: (width, height, distinct colours, pixels that are not the
/// background).
fn screenshot_stats(png_path: &Path) -> (u32, u32, usize, usize) {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("one frame");
    let bpp = info.color_type.samples();
    let px: Vec<&[u8]> = buf[..info.buffer_size()]
        .chunks(bpp)
        .map(|p| &p[..3.min(bpp)])
        .collect();
    let mut counts: std::collections::HashMap<&[u8], usize> = Default::default();
    for p in &px {
        *counts.entry(p).or_default() += 1;
    }
    let background = counts.values().copied().max().unwrap_or(0);
    (info.width, info.height, counts.len(), px.len() - background)
}

#[test]
fn show_page_renders_every_pair_and_the_elided_copies_in_chromium() {
    // saxpy: every copy elided (accepted pairs); race: a pair refused by S2 at an event.
    let (w, trace, plan, stats) = run_sample("saxpy");
    let page = w.dir.join("saxpy.html");
    let bench = w.dir.join("bench.json");
    std::fs::write(&bench, r#"[{"sample":"saxpy","recovered":0.973}]"#).unwrap();
    vkecho_show(
        &trace,
        &plan,
        &stats,
        &["--bench", &bench.display().to_string()],
        &page,
    );
    let st = check_page(&w.dir, &page, &trace);
    assert!(
        st["elided-drawn"].parse::<u64>().unwrap() > 0
            && st["elided-iter"].parse::<u64>().unwrap() > 0,
        "saxpy's elided copies are not drawn: {st:?}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("memory not allocated (enforce run)"),
        "the stats were not read"
    );
    assert!(
        html.contains("recovered fraction (saxpy)") && html.contains("97.3 %"),
        "the benchmark result was not read"
    );

    let png_path = w.dir.join("saxpy.png");
    let out = chromium(
        &w.dir,
        &[
            &format!("--screenshot={}", png_path.display()),
            "--window-size=1280,800",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ],
        &page,
    );
    assert!(
        png_path.is_file(),
        "no screenshot:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (width, height, colours, drawn) = screenshot_stats(&png_path);
    assert_eq!((width, height), (1280, 800));
    assert!(
        colours >= 16 && drawn > (width * height / 10) as usize,
        "the screenshot is (nearly) blank: {colours} colours, {drawn} non-background pixels"
    );

    let (w2, trace2, plan2, stats2) = run_sample("race");
    let page2 = w2.dir.join("race.html");
    vkecho_show(&trace2, &plan2, &stats2, &[], &page2);
    let st2 = check_page(&w2.dir, &page2, &trace2);
    assert!(
        st2["decided-drawn"].parse::<u64>().unwrap() > 0
            && st2["kept-drawn"].parse::<u64>().unwrap() > 0,
        "race's deciding event and kept copies are not drawn: {st2:?}"
    );
}

#[test]
fn show_exports_chrome_trace_events_for_perfetto() {
    let (w, trace, plan, stats) = run_sample("saxpy");
    let out = w.dir.join("saxpy.perfetto.json");
    vkecho_show(&trace, &plan, &stats, &["--format", "perfetto"], &out);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("the export is JSON");
    let ev = v["traceEvents"].as_array().expect("traceEvents");
    let has = |ph: &str, name: &str| {
        ev.iter()
            .any(|e| e["ph"] == ph && e["name"].as_str().unwrap_or("").contains(name))
    };
    for (ph, name) in [
        ("M", "process_name"),
        ("M", "thread_name"),
        ("X", "submission"),
        ("X", "copy (elided)"),
        ("X", "vkCmdDispatch"),
        ("X", "host write"),
        ("X", "host read"),
        ("i", "fence"),
    ] {
        assert!(has(ph, name), "no {ph} event named {name}");
    }
    for e in ev {
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        if e["ph"] == "X" {
            assert!(
                e["ts"].is_number() && e["dur"].as_f64().unwrap() >= 0.0,
                "{e}"
            );
        }
    }
    // One thread for the queue and one for the host's waits at least.
    let threads = ev.iter().filter(|e| e["name"] == "thread_name").count();
    assert!(threads >= 2, "{threads} threads");
}

#[test]
fn report_holds_the_page_of_the_newest_cached_trace() {
    let mut args = ARGS;
    args[0] = "saxpy";
    let w = World::echo(Some("auto")).set("VK_ECHO_KEEP_TRACES", "1");
    let run = w.sample(&args);
    assert!(run.status.success(), "{}", run.stderr);
    let tar = w.dir.join("report.tar");
    let out = w
        .command(
            &artifact("vkecho"),
            &["report", "-o", &tar.display().to_string()],
        )
        .output()
        .expect("run vkecho report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = Command::new("tar")
        .arg("-xOf")
        .arg(&tar)
        .arg("vkecho-report/show.html")
        .output()
        .unwrap();
    assert!(
        page.status.success(),
        "no show.html in the report: {page:?}"
    );
    let html = String::from_utf8_lossy(&page.stdout);
    assert!(
        html.contains("id=\"echo-data\"") && html.contains("id=\"pairs-table\""),
        "show.html is not the page"
    );
}

/// Rewrites a trace line by line (`f` gets each record as JSON; `None` drops it).
fn rewrite(from: &Path, to: &Path, f: impl Fn(&mut Value) -> bool) {
    let mut out = String::new();
    for (i, line) in std::fs::read_to_string(from).unwrap().lines().enumerate() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if i == 0 || f(&mut v) {
            out.push_str(&v.to_string());
            out.push('\n');
        }
    }
    std::fs::write(to, out).unwrap();
}

/// The page draws real lengths from the trace's times: with the clock slowed tenfold (a planted
/// fault: every `t`, `dur` and GPU time × 10) the widest submission of the iteration is drawn ten
/// times longer. A trace without times (recorded before issue 47: no `t`, `dur`, `gpu_time`)
/// still opens, in event order, its toggle off.
#[test]
fn show_draws_real_lengths_and_old_traces_in_event_order() {
    let (w, trace, plan, stats) = run_sample("saxpy");
    let page = w.dir.join("saxpy.html");
    vkecho_show(&trace, &plan, &stats, &[], &page);
    let st = check_page(&w.dir, &page, &trace);
    let widest = |st: &std::collections::BTreeMap<String, String>| {
        st["widest-submit-ns"]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{st:?}"))
    };
    let base = widest(&st);
    assert!(base > 0.0, "{st:?}");

    let slow = w.dir.join("slow.jsonl");
    rewrite(&trace, &slow, |v| {
        for k in ["t", "dur", "begin", "end"] {
            if let Some(x) = v.get(k).and_then(Value::as_u64) {
                v[k] = (x * 10).into();
            }
        }
        true
    });
    let slow_page = w.dir.join("slow.html");
    vkecho_show(&slow, &plan, &stats, &[], &slow_page);
    let st_slow = check_page(&w.dir, &slow_page, &slow);
    let ratio = widest(&st_slow) / base;
    assert!(
        (9.0..11.0).contains(&ratio),
        "the clock slowed tenfold, the widest submission is drawn {ratio:.2} times longer: {st:?} {st_slow:?}"
    );

    let old = w.dir.join("old.jsonl");
    rewrite(&trace, &old, |v| {
        if v["ev"] == "gpu_time" {
            return false;
        }
        let o = v.as_object_mut().unwrap();
        o.remove("t");
        o.remove("dur");
        true
    });
    let old_page = w.dir.join("old.html");
    vkecho_show(&old, &plan, &stats, &[], &old_page);
    let st_old = check_page(&w.dir, &old_page, &old);
    assert!(
        st_old["elided-drawn"].parse::<u64>().unwrap() > 0,
        "{st_old:?}"
    );
    let html = std::fs::read_to_string(&old_page).unwrap();
    assert!(html.contains("this trace holds no times"));
}
