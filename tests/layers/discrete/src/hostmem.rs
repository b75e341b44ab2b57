//! Echo's `layer/src/hostmem/memfd.rs`, compiled into the test layer for jetson mode.

#[allow(dead_code)]
#[path = "../../../../layer/src/hostmem/memfd.rs"]
pub mod memfd;
