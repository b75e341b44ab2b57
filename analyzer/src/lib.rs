//! `echo_analyzer`: everything VK_LAYER_echo *decides*, with no Vulkan calls.
//!
//! - [`topology`]: is a device's memory unified (DESIGN §2)?
//! - [`trace`]: the trace format the layer writes in profile mode.
//! - [`plan`]: the plan format enforce mode reads.
//!
//! The layer links this crate; the `vkecho` CLI (`cli/`, crate `echo-cli`) is its front end.

pub mod analysis;
pub mod apply;
pub mod cache;
pub mod classes;
pub mod context;
pub mod fasthash;
pub mod model;
pub mod pairing;
pub mod plan;
pub mod program;
pub mod registry;
pub mod report;
pub mod safety;
pub mod sampling;
pub mod settings;
pub mod show;
pub mod stats;
pub mod thresholds;
pub mod timing;
pub mod topology;
pub mod trace;
pub mod words;
