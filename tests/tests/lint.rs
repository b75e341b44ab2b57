//! Issue 57: `vkecho lint` names, as compiler diagnostics, the lines of the program's own code
//! that create staging buffers copying DRAM to the same DRAM — on the real loader and lavapipe.
//!
//! - saxpy (samples/src/samples/saxpy.rs): the two `ctx.io(…)` lines that create its staging
//!   buffers, found by the helper rule through `Ctx::io` and `create_buffer`; each pair's
//!   change is the one `vkecho analyze` gives (a refusal's own "to change"), or, accepted, the
//!   DEVICE_LOCAL|HOST_VISIBLE memory type to allocate the device buffer from; `--deny warnings`
//!   gates; `--format sarif` validates against the SARIF 2.1.0 schema (read from the `serde-sarif`
//!   package's source, which generates its types from it) with one result per site;
//! - the C corpus: c_vkfft (built with `-g`, tests/c/c_vkfft.c) at its two `transfer(…)` calls,
//!   the staging helper's frames as a note; c_upload (no debug info) by module and symbol, with
//!   how to get lines;
//! - bad input: a missing or corrupt trace, a program that fails or writes no trace, `--trace`
//!   without a program.

use echo_tests::samples::samples_bin;
use echo_tests::world::{artifact, c_spv, program, repo_root, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `vkecho ARGS` run from the repository root (so source paths read `samples/src/…`).
fn vkecho(args: &[&str]) -> Output {
    Command::new(artifact("vkecho"))
        .args(args)
        .current_dir(repo_root())
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .output()
        .expect("run vkecho")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The 1-based line of the first line of the repository file `file` that contains `needle`.
fn line_of(file: &str, needle: &str) -> u32 {
    let src = std::fs::read_to_string(repo_root().join(file)).unwrap();
    src.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{file} has no line with {needle:?}")) as u32
        + 1
}

/// The warning lines of text output.
fn warnings(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.contains(": warning: ")).collect()
}

/// One profiled saxpy run for every test of this file (through `vkecho lint -- …`, text form):
/// the trace and what lint printed.
fn saxpy() -> &'static (PathBuf, Output) {
    static RUN: OnceLock<(PathBuf, Output)> = OnceLock::new();
    RUN.get_or_init(|| {
        let trace = scratch("saxpy").join("saxpy.trace");
        let bin = samples_bin().display().to_string();
        let out = vkecho(&[
            "lint",
            "--trace",
            trace.to_str().unwrap(),
            "--",
            &bin,
            "saxpy",
            "--size-mib",
            "1",
            "--iters",
            "3",
        ]);
        (trace, out)
    })
}

#[test]
fn saxpy_sites_are_the_lines_that_ask_for_its_staging_buffers() {
    let (trace, out) = saxpy();
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "vkecho lint -- saxpy: {}\n{stdout}",
        text(&out.stderr)
    );
    // The program's own output went to stderr: stdout holds diagnostics only.
    assert!(text(&out.stderr).contains("\"sample\":\"saxpy\""));
    let file = "samples/src/samples/saxpy.rs";
    let x = line_of(file, "let x = ctx.io(");
    let y = line_of(file, "let y = ctx.io(");
    let w = warnings(&stdout);
    assert_eq!(w.len(), 2, "one warning per site:\n{stdout}");
    assert!(w[0].starts_with(&format!("{file}:{x}:")), "{}", w[0]);
    assert!(w[1].starts_with(&format!("{file}:{y}:")), "{}", w[1]);
    assert!(w.iter().all(|l| l.ends_with("[uma-self-copy]")));
    assert!(
        w[1].contains("2 staging buffers created here"),
        "y's upload and readback staging buffers share its line: {}",
        w[1]
    );
    // The device buffers' sites, the helpers, the change.
    assert!(stdout.contains(&format!("{file}:{x}:")) && stdout.contains("is created here"));
    assert!(
        stdout.contains("is created through ") && stdout.contains("Ctx::io (samples/src/vk.rs:")
    );
    assert!(
        stdout
            .lines()
            .filter(|l| l.starts_with("note: to change"))
            .count()
            >= 3
    );

    // The same pairs as `vkecho analyze`, each with its change.
    let json = vkecho(&["lint", trace.to_str().unwrap(), "--format", "json"]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let lint: Value = serde_json::from_slice(&json.stdout).expect("lint JSON");
    let an = vkecho(&["analyze", trace.to_str().unwrap(), "--json"]);
    let an: Value = serde_json::from_slice(&an.stdout).expect("analyze JSON");
    let diags = lint["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 2);
    assert_eq!(diags[0]["location"]["file"], file);
    assert_eq!(diags[0]["location"]["line"], x);
    assert_eq!(diags[1]["location"]["line"], y);
    assert_eq!(diags[0]["pairs"].as_array().unwrap().len(), 1);
    assert_eq!(diags[1]["pairs"].as_array().unwrap().len(), 2);
    let pairs: Vec<&Value> = diags
        .iter()
        .flat_map(|d| d["pairs"].as_array().unwrap())
        .collect();
    let rows = an["candidates"].as_array().unwrap();
    assert_eq!(
        pairs.len(),
        rows.len(),
        "every pair of saxpy is above the thresholds"
    );
    for row in rows {
        let n = &row["staging"]["number"];
        let p = pairs
            .iter()
            .find(|p| &p["staging"] == n)
            .unwrap_or_else(|| panic!("staging #{n} is in no diagnostic"));
        let change = p["change"].as_str().unwrap();
        assert!(p["bytes_per_iter"].as_u64().unwrap() >= 1 << 20);
        if row["decision"] == "accepted" {
            assert_eq!(p["accepted"], true);
            assert!(
                change.contains("memory type 0 (DEVICE_LOCAL|HOST_VISIBLE"),
                "an accepted pair names the memory type echo saw: {change}"
            );
        } else {
            let want = format!(
                "to change ({}): {}",
                row["reason"].as_str().unwrap(),
                row["remedy"].as_str().unwrap()
            );
            assert_eq!(
                change, want,
                "a refused pair gives the refusal's own change"
            );
        }
    }

    // --deny warnings: the same output, a failing status.
    let denied = vkecho(&["lint", trace.to_str().unwrap(), "--deny", "warnings"]);
    assert_eq!(denied.status.code(), Some(1), "{}", text(&denied.stderr));
    assert_eq!(text(&denied.stdout), stdout);
}

/// The SARIF 2.1.0 schema, from the source of the `serde-sarif` package the CLI builds with
/// (the crate generates its types from this file, OASIS's `sarif-schema-2.1.0.json`): the
/// version Cargo.lock holds, in Cargo's registry sources (`$CARGO_HOME/registry/src/*/`).
fn sarif_schema() -> Value {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let version = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"serde-sarif\""))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .expect("serde-sarif in Cargo.lock")
        .trim_matches('"')
        .to_string();
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let src = home.join("registry/src");
    let file = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .filter_map(|e| e.ok())
        .map(|e| {
            e.path()
                .join(format!("serde-sarif-{version}/src/schema.json"))
        })
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "serde-sarif {version}'s source is not under {}",
                src.display()
            )
        });
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, log: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(log)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "SARIF schema errors:\n{}",
        errors.join("\n")
    );
}

#[test]
fn sarif_validates_against_the_schema_with_one_result_per_site() {
    let (trace, text_out) = saxpy();
    let out = vkecho(&["lint", trace.to_str().unwrap(), "--format", "sarif"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    let schema = sarif_schema();
    assert!(
        schema["title"]
            .as_str()
            .unwrap()
            .contains("SARIF) Version 2.1.0"),
        "{}",
        schema["title"]
    );
    let validator = jsonschema::draft7::new(&schema).expect("the schema compiles");
    assert_valid(&validator, &log);
    // A log the validator refuses, so that the check above can fail.
    let mut bad = log.clone();
    bad["runs"][0]["results"][0]["level"] = "loud".into();
    assert!(!validator.is_valid(&bad));

    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["rules"][0]["id"], "uma-self-copy");
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), warnings(&text(&text_out.stdout)).len());
    let file = "samples/src/samples/saxpy.rs";
    let lines = [
        line_of(file, "let x = ctx.io("),
        line_of(file, "let y = ctx.io("),
    ];
    for (r, line) in results.iter().zip(lines) {
        assert_eq!(r["ruleId"], "uma-self-copy");
        assert_eq!(r["level"], "warning");
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], file);
        assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
        assert_eq!(loc["region"]["startLine"], line);
        assert!(r["message"]["text"].as_str().unwrap().contains("to change"));
        assert!(!r["relatedLocations"].as_array().unwrap().is_empty());
    }
}

#[test]
fn c_vkfft_sites_are_its_transfer_calls() {
    let exe = program("c_vkfft").display().to_string();
    let out = vkecho(&["lint", "--", &exe, "staging", "2", "small"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let file = "tests/c/c_vkfft.c";
    let up = line_of(file, "transfer(g, pool, fence, b.buf, in, size, 1);");
    let down = line_of(file, "transfer(g, pool, fence, b.buf, out, size, 0);");
    let device = line_of(file, "struct buffer b = buffer_create(g,");
    let w = warnings(&stdout);
    assert_eq!(w.len(), 2, "{stdout}");
    assert!(w[0].starts_with(&format!("{file}:{up}:")), "{}", w[0]);
    assert!(w[1].starts_with(&format!("{file}:{down}:")), "{}", w[1]);
    assert!(
        stdout.contains(&format!("{file}:{device}:")) && stdout.contains("is created here"),
        "the device buffer's line: {stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "transfer ({file}:{})",
            line_of(file, "struct buffer s = buffer_create(")
        )),
        "the staging buffer's helper as a note: {stdout}"
    );
    assert!(!stdout.contains("no line information"), "{stdout}");
}

#[test]
fn without_debug_info_the_module_and_symbol_are_named_with_how_to_get_lines() {
    let exe = program("c_upload").display().to_string();
    let spv = c_spv();
    let out = vkecho(&["lint", "--format", "json", "--", &exe, "3", &spv]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["diagnostics"][0];
    assert_eq!(d["location"]["module"], "c_upload", "{d}");
    assert!(d["location"].get("line").is_none());
    assert!(
        d["location"]["function"].is_string(),
        "named by its symbol: {d}"
    );
    let notes: Vec<&str> = d["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["message"].as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("no line information") && n.contains("`-g`")),
        "{notes:?}"
    );
    let trace = scratch("upload").join("upload.trace");
    let t = vkecho(&[
        "lint",
        "--trace",
        trace.to_str().unwrap(),
        "--",
        &exe,
        "3",
        &spv,
    ]);
    let first = warnings(&text(&t.stdout))[0].to_string();
    assert!(
        first.starts_with("c_upload(") && first.contains("+0x"),
        "{first}"
    );
    // In SARIF: the module's file and a logical location naming the function, still valid.
    let s = vkecho(&["lint", trace.to_str().unwrap(), "--format", "sarif"]);
    let log: Value = serde_json::from_slice(&s.stdout).expect("SARIF is JSON");
    let validator = jsonschema::draft7::new(&sarif_schema()).expect("the schema compiles");
    assert_valid(&validator, &log);
    let loc = &log["runs"][0]["results"][0]["locations"][0];
    assert_eq!(
        loc["physicalLocation"]["artifactLocation"]["uri"],
        format!("file://{exe}")
    );
    assert!(loc["physicalLocation"].get("region").is_none());
    assert_eq!(loc["logicalLocations"][0]["kind"], "function");
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let dir = scratch("bad");
    let missing = dir.join("missing.trace");
    let corrupt = dir.join("corrupt.trace");
    std::fs::write(&corrupt, "this is not a trace\n").unwrap();
    for (args, says) in [
        (vec!["lint", missing.to_str().unwrap()], "cannot open"),
        (
            vec!["lint", corrupt.to_str().unwrap()],
            "not a trace echo can read",
        ),
        (
            vec!["lint", "--", "false"],
            "the program exited with status 1",
        ),
        (vec!["lint", "--", "true"], "wrote no trace"),
        (
            vec!["lint", "--trace", "t.jsonl", corrupt.to_str().unwrap()],
            "give the program after `--`",
        ),
    ] {
        let out = vkecho(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
