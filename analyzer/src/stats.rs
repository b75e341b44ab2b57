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

/// A planned group that enforce applied only in part (issue 36): some members share the device
/// buffer's memory, the others do not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartlyApplied {
    pub group: u32,
    /// The plan's indices of the members applied.
    pub applied: Vec<u32>,
    /// Why the others were not (`member N: why`, as in [`NotApplied::reason`]).
    pub reason: String,
}

/// What became of one staging member of a group (issue 36): in a run, whether enforce applied it
/// (and why not); in an analysis ([`crate::analysis::Analysis::member_statuses`]), whether the
/// plan holds it (and why not). A plain record, so that enforce's log, the statistics, `vkecho
/// analyze` and any other report say the same thing member by member, in the same words.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// As [`crate::plan::Group::device_index`] (in a run's statistics: the device's index).
    #[serde(default)]
    pub device_index: u32,
    pub group: u32,
    /// The member's index in the plan's group; absent for a staging buffer the analysis refused
    /// (it is not in the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<u32>,
    /// The staging buffer's key (`site:size:usage:flags#ordinal`, as in the plan).
    #[serde(default)]
    pub staging: String,
    /// `upload` or `readback`.
    #[serde(default)]
    pub role: String,
    pub applied: bool,
    /// Why not (empty when applied): the words enforce uses; the analysis's sentence for the same
    /// cause contains them.
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
    /// `destroyed` (written at `vkDestroyDevice`), `instance destroyed` (its instance was
    /// destroyed first) or `exit` (the program exited with the device alive).
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
    /// Instances of per-call classes past those profiled (issue 24) that were applied: groups
    /// the plan does not list one by one, so not in `groups_planned`/`groups_applied`.
    #[serde(default)]
    pub class_instances_applied: u32,
    /// Groups none of whose members was applied (or whose device buffer did not appear).
    #[serde(default)]
    pub not_applied: Vec<NotApplied>,
    /// Groups applied only in part (issue 36): counted neither in `groups_applied` nor in
    /// `not_applied`.
    #[serde(default)]
    pub groups_partly_applied: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partly_applied: Vec<PartlyApplied>,
    /// Every planned member of the groups enforce tracked, applied or not and why (issue 36).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberStatus>,
    /// `vkCmdCopyBuffer*` calls whose every region was a self-copy (and so dropped).
    pub copies_elided: u64,
    /// Regions dropped as self-copies, and their bytes.
    pub regions_elided: u64,
    pub bytes_elided: u64,
    /// The same counted per submission: what did not run (a command buffer recorded once and
    /// submitted N times elides N times). The fields above count what was recorded.
    #[serde(default)]
    pub copies_elided_run: u64,
    #[serde(default)]
    pub regions_elided_run: u64,
    #[serde(default)]
    pub bytes_elided_run: u64,
    /// Copy regions between planned buffers that still ran (not self-copies).
    pub regions_passed: u64,
    /// Substitute barriers recorded in place of dropped copies.
    pub barriers_inserted: u64,
    /// Command buffers left out of a submission because every command recorded in them was a
    /// copy echo dropped (issue 35), counted per submission.
    #[serde(default)]
    pub command_buffers_dropped: u64,
    /// Batches (`VkSubmitInfo`, `VkSubmitInfo2`) whose every command buffer was left out: they
    /// went down with their semaphores only (the submission and its fence kept).
    #[serde(default)]
    pub submissions_emptied: u64,
    /// Binds redirected into a partner's memory, and maps redirected to a partner's mapping.
    pub binds_redirected: u64,
    pub maps_redirected: u64,
    /// Bytes the host wrote into a staging buffer's own allocation before its bind, moved into
    /// the shared range at the redirected bind (DESIGN §6 "never lose a byte").
    #[serde(default)]
    pub bytes_carried: u64,
    /// `vkFreeMemory` calls deferred until a partner was gone.
    pub frees_deferred: u64,
    /// Bytes of device memory enforce never allocated at the driver: staging allocations whose
    /// every buffer lives in its partner's memory (plan `skip_allocation`), less those it had
    /// to make after all.
    pub memory_not_allocated: u64,
    /// Allocations echo answered with a handle of its own instead of making them.
    #[serde(default)]
    pub allocations_skipped: u64,
    /// Of those, allocations made at the driver after all, when the application used one in a
    /// way the plan did not foresee (their bytes carried over).
    #[serde(default)]
    pub allocations_made_late: u64,
    /// Bytes copied into the allocations made late: what they held (their range of the device
    /// buffer's memory) and, when their staging buffer was destroyed later, what it left there.
    #[serde(default)]
    pub bytes_carried_late: u64,
    /// Allocations echo made only in part at the driver (a window of the device buffer's
    /// allocation that holds the buffers no group names; plan `device_memory`).
    #[serde(default)]
    pub allocations_windowed: u64,
    /// `vkMapMemory` calls echo refused with `VK_ERROR_MEMORY_MAP_FAILED`: a range across the
    /// window of an allocation made in part and the rest (which cannot be one mapping).
    #[serde(default)]
    pub maps_refused: u64,
    /// Guarded enforce (`guard` setting): windows opened (a submission that uses a guarded
    /// allocation not already in a window; counted per allocation),
    /// host writes split copy-on-write inside a window, splits merged back at an elided copy,
    /// and bounded waits for earlier GPU work that timed out (the plan is then not trusted).
    #[serde(default)]
    pub guard_windows: u64,
    #[serde(default)]
    pub guard_splits: u64,
    #[serde(default)]
    pub guard_merges: u64,
    #[serde(default)]
    pub guard_timeouts: u64,
    /// Guarded enforce: host reads of shared memory inside a window (they may have read other
    /// bytes than without echo; the plan is then marked untrusted).
    #[serde(default)]
    pub guard_reads: u64,
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
    /// The whole process: the sums over its devices' records (`device` says how many devices).
    pub fn total(all: &[Stats]) -> Stats {
        // The distinct values of one text field, joined: "enforce+off".
        let distinct = |f: fn(&Stats) -> &str| {
            let mut v: Vec<&str> = all.iter().map(f).collect();
            v.sort_unstable();
            v.dedup();
            v.join("+")
        };
        let mut t = Stats {
            mode: distinct(|s| &s.mode),
            device: format!(
                "{} device{}",
                all.len(),
                if all.len() == 1 { "" } else { "s" }
            ),
            class: distinct(|s| &s.class),
            active: all.iter().any(|s| s.active),
            ..Default::default()
        };
        for s in all {
            t.groups_planned += s.groups_planned;
            t.groups_applied += s.groups_applied;
            t.groups_partly_applied += s.groups_partly_applied;
            t.class_instances_applied += s.class_instances_applied;
            t.copies_elided += s.copies_elided;
            t.regions_elided += s.regions_elided;
            t.bytes_elided += s.bytes_elided;
            t.copies_elided_run += s.copies_elided_run;
            t.regions_elided_run += s.regions_elided_run;
            t.bytes_elided_run += s.bytes_elided_run;
            t.regions_passed += s.regions_passed;
            t.barriers_inserted += s.barriers_inserted;
            t.command_buffers_dropped += s.command_buffers_dropped;
            t.submissions_emptied += s.submissions_emptied;
            t.binds_redirected += s.binds_redirected;
            t.maps_redirected += s.maps_redirected;
            t.bytes_carried += s.bytes_carried;
            t.frees_deferred += s.frees_deferred;
            t.memory_not_allocated += s.memory_not_allocated;
            t.allocations_skipped += s.allocations_skipped;
            t.allocations_made_late += s.allocations_made_late;
            t.bytes_carried_late += s.bytes_carried_late;
            t.allocations_windowed += s.allocations_windowed;
            t.maps_refused += s.maps_refused;
            t.guard_windows += s.guard_windows;
            t.guard_splits += s.guard_splits;
            t.guard_merges += s.guard_merges;
            t.guard_timeouts += s.guard_timeouts;
            t.guard_reads += s.guard_reads;
            t.trace_events += s.trace_events;
        }
        t
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        let carried = if self.bytes_carried > 0 {
            format!(
                ", {} bytes written before a bind carried over",
                self.bytes_carried
            )
        } else {
            String::new()
        };
        let late = if self.allocations_made_late > 0 {
            format!(
                ", {} made late with {} bytes carried",
                self.allocations_made_late, self.bytes_carried_late
            )
        } else {
            String::new()
        };
        let late = if self.allocations_windowed > 0 {
            format!(", {} made in part{late}", self.allocations_windowed)
        } else {
            late
        };
        let late = if self.maps_refused > 0 {
            format!(
                "{late}, {} across a window refused",
                crate::words::plural(self.maps_refused, "map", "maps")
            )
        } else {
            late
        };
        let guard = if self.guard_windows > 0 {
            format!(
                ", guard: {}, {}, {}, {}, {} inside a window",
                crate::words::plural(self.guard_windows, "window", "windows"),
                crate::words::plural(self.guard_splits, "split", "splits"),
                crate::words::plural(self.guard_merges, "merge", "merges"),
                crate::words::plural(self.guard_timeouts, "timeout", "timeouts"),
                crate::words::plural(self.guard_reads, "read", "reads")
            )
        } else {
            String::new()
        };
        let part = if self.groups_partly_applied > 0 {
            format!(" in full, {} in part", self.groups_partly_applied)
        } else {
            String::new()
        };
        let dropped = if self.command_buffers_dropped > 0 {
            format!(
                ", {} left out of submissions ({} emptied)",
                crate::words::plural(
                    self.command_buffers_dropped,
                    "command buffer",
                    "command buffers"
                ),
                crate::words::plural(self.submissions_emptied, "batch", "batches")
            )
        } else {
            String::new()
        };
        format!(
            "{} on {} ({}): {}/{} groups applied{part}, {} copies ({} bytes) elided as run ({} copies and {} regions, {} bytes, as recorded), {} barriers inserted{dropped}, {} bytes not allocated ({} skipped{late}){carried}{guard}",
            self.mode,
            self.device,
            self.class,
            self.groups_applied,
            self.groups_planned,
            self.copies_elided_run,
            self.bytes_elided_run,
            self.copies_elided,
            self.regions_elided,
            self.bytes_elided,
            self.barriers_inserted,
            self.memory_not_allocated,
            crate::words::plural(self.allocations_skipped, "allocation", "allocations")
        )
    }
}

impl Stats {
    /// One line per group not applied in full, after [`Stats::summary`]: `group 1 not applied:
    /// member 0: why`, `group 2 applied in part: member 1 applied; not applied: member 0: why`.
    pub fn group_lines(&self) -> Vec<String> {
        let mut out: Vec<(u32, String)> = self
            .partly_applied
            .iter()
            .map(|p| {
                let applied: Vec<String> = p.applied.iter().map(u32::to_string).collect();
                (
                    p.group,
                    format!(
                        "group {} applied in part: {} {} applied; not applied: {}",
                        p.group,
                        if applied.len() == 1 {
                            "member"
                        } else {
                            "members"
                        },
                        applied.join(", "),
                        p.reason
                    ),
                )
            })
            .collect();
        out.extend(self.not_applied.iter().map(|n| {
            (
                n.group,
                format!("group {} not applied: {}", n.group, n.reason),
            )
        }));
        out.sort_by_key(|x| x.0);
        out.into_iter().map(|x| x.1).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_was_not_allocated() {
        let s = Stats {
            memory_not_allocated: 4096,
            allocations_skipped: 2,
            allocations_windowed: 1,
            allocations_made_late: 1,
            bytes_carried_late: 64,
            maps_refused: 1,
            ..Default::default()
        };
        let line = s.summary();
        assert!(
            line.contains("4096 bytes not allocated (2 allocations skipped, 1 made in part, 1 made late with 64 bytes carried, 1 map across a window refused)"),
            "{line}"
        );
    }

    #[test]
    fn a_group_applied_in_part_is_said_so() {
        let s = Stats {
            groups_planned: 2,
            groups_applied: 0,
            groups_partly_applied: 1,
            partly_applied: vec![PartlyApplied {
                group: 1,
                applied: vec![1],
                reason: "member 0: because".into(),
            }],
            not_applied: vec![NotApplied {
                group: 2,
                reason: "member 0: why".into(),
            }],
            ..Default::default()
        };
        assert!(
            s.summary()
                .contains(": 0/2 groups applied in full, 1 in part, "),
            "{}",
            s.summary()
        );
        assert_eq!(
            s.group_lines(),
            [
                "group 1 applied in part: member 1 applied; not applied: member 0: because",
                "group 2 not applied: member 0: why"
            ]
        );
        // Older statistics (no per-member fields) still read.
        let old: Stats = serde_json::from_str(
            r#"{"mode":"enforce","device":"d","class":"c","active":true,"groups_planned":1,"groups_applied":1,"copies_elided":0,"regions_elided":0,"bytes_elided":0,"regions_passed":0,"barriers_inserted":0,"binds_redirected":0,"maps_redirected":0,"frees_deferred":0,"memory_not_allocated":0}"#,
        )
        .unwrap();
        assert!(old.members.is_empty() && old.groups_partly_applied == 0);
    }

    #[test]
    fn total_sums_every_device() {
        let a = Stats {
            mode: "enforce".into(),
            class: "uma-strict".into(),
            groups_applied: 2,
            bytes_elided: 10,
            bytes_carried: 3,
            ..Default::default()
        };
        let mut b = a.clone();
        b.mode = "off".into();
        b.groups_applied = 1;
        let t = Stats::total(&[a, b]);
        assert_eq!(t.device, "2 devices");
        assert_eq!(t.mode, "enforce+off");
        assert_eq!(t.class, "uma-strict");
        assert_eq!(
            (t.groups_applied, t.bytes_elided, t.bytes_carried),
            (3, 20, 6)
        );
    }
}
