//! The analysis thresholds (how large and how often a copy must be to count), which both formats
//! carry: a plan records those it was made with (`crate::plan`), a trace's header the profile's
//! settings (`crate::trace`). A leaf, so neither format imports the other for them.

use serde::{Deserialize, Serialize};

/// Thresholds the plan was made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    pub min_bytes: u64,
    pub min_copies: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_bytes: 256 * 1024,
            min_copies: 2,
        }
    }
}
