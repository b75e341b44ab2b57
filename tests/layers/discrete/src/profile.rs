//! Echo's `layer/src/profile/memfd.rs`, compiled into the test layer for jetson mode.

#[allow(dead_code)]
#[path = "../../../../layer/src/profile/memfd.rs"]
pub mod memfd;
