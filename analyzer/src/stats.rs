//! What the layer reports at `vkDestroyDevice` (the `stats` setting writes it as JSON; at `log`
//! level `info` a summary line goes to stderr). Shared by the layer (writer) and `vkecho run`,
//! `vkecho demo` and the bench (readers).

use serde::{Deserialize, Serialize};

/// A planned group that enforce did not apply, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotApplied {
    pub group: u32,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// `off`, `profile` or `enforce` (what the layer actually did on this device).
    pub mode: String,
    pub device: String,
    /// The device's creation index in the process (0, 1, …).
    #[serde(default)]
    pub device_index: u32,
    /// `destroyed` (written at `vkDestroyDevice`) or `exit` (the program exited with the device
    /// alive).
    #[serde(default)]
    pub ended: String,
    /// Topology class (`uma-strict`, …).
    pub class: String,
    /// Whether echo's hooks were in the call path for this device.
    pub active: bool,
    /// Plan file used by enforce, if any, and whether it was accepted.
    #[serde(default)]
    pub plan: Option<String>,
    /// `applied`, `none`, or `refused: <reason>`.
    #[serde(default)]
    pub plan_status: String,
    pub groups_planned: u32,
    pub groups_applied: u32,
    #[serde(default)]
    pub not_applied: Vec<NotApplied>,
    /// `vkCmdCopyBuffer*` calls whose every region was a self-copy (and so dropped).
    pub copies_elided: u64,
    /// Regions dropped as self-copies, and their bytes.
    pub regions_elided: u64,
    pub bytes_elided: u64,
    /// Copy regions between planned buffers that still ran (not self-copies).
    pub regions_passed: u64,
    /// Substitute barriers recorded in place of dropped copies.
    pub barriers_inserted: u64,
    /// Binds redirected into a partner's memory, and maps redirected to a partner's mapping.
    pub binds_redirected: u64,
    pub maps_redirected: u64,
    /// Bytes the host wrote into a staging buffer's own allocation before its bind, moved into
    /// the shared range at the redirected bind (DESIGN §6 "never lose a byte").
    #[serde(default)]
    pub bytes_carried: u64,
    /// `vkFreeMemory` calls deferred until a partner was gone.
    pub frees_deferred: u64,
    /// Bytes of device memory enforce did not need to allocate.
    pub memory_not_allocated: u64,
    /// Profile mode: trace events written, and the trace path.
    #[serde(default)]
    pub trace_events: u64,
    #[serde(default)]
    pub trace: Option<String>,
    /// Internal errors that turned this device to passthrough.
    #[serde(default)]
    pub errors: Vec<String>,
}

impl Stats {
    /// One line for people.
    pub fn summary(&self) -> String {
        format!(
            "{} on {} ({}): {}/{} groups applied, {} copies and {} regions elided ({} bytes), {} barriers inserted, {} bytes not allocated",
            self.mode,
            self.device,
            self.class,
            self.groups_applied,
            self.groups_planned,
            self.copies_elided,
            self.regions_elided,
            self.bytes_elided,
            self.barriers_inserted,
            self.memory_not_allocated
        )
    }
}
