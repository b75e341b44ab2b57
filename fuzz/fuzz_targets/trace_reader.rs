//! The trace reader, and the analyzer and reports on whatever the reader accepts, never panic.
#![no_main]
use echo_analyzer::analysis::explain;
use echo_analyzer::plan::{parse_plan, Thresholds};
use echo_analyzer::trace::read_trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = read_trace(data) {
        let a = explain(&trace, Thresholds::default(), &|_| String::new());
        let _ = echo_analyzer::report::table(&a, "fuzz");
        let _ = echo_analyzer::report::json(&a);
        // What the analyzer writes, enforce must be able to read.
        parse_plan(&a.plan.to_json()).expect("the analyzer writes valid plans");
    }
});
