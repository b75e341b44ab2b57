//! The plan reader never panics on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = echo_analyzer::plan::parse_plan(text);
    }
});
