//! The plan format (version 2; version 1 plans, which have no classes, are read too): which buffers may share memory, and why every other candidate was
//! rejected. The analyzer writes it; the layer's enforce mode reads it. Documented for people in
//! `docs/plan-format.md`; keep the two in step.

pub use crate::thresholds::Thresholds;
use crate::trace::{Context, ObjectKey};
use serde::{Deserialize, Serialize};

pub const PLAN_VERSION: u32 = 2;
/// The oldest plan version this build reads (version 1 has no `classes`).
pub const PLAN_VERSION_MIN: u32 = 1;
pub const PLAN_FORMAT: &str = "vk-echo-plan";

/// A buffer as the plan names it: its stable key plus what a person needs to find it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferRef {
    pub key: ObjectKey,
    pub usage: u32,
    /// Where it was created: `function (file:line)` when debug info allowed, else `module+0xoffset`.
    #[serde(default)]
    pub created_at: String,
}

/// How the group shares memory (DESIGN §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The device buffer is bound into the staging buffer's memory range (works for sub-allocated
    /// staging memory; one member only).
    DeviceIntoStaging,
    /// Every staging buffer of the group is bound into the device buffer's memory, and maps of the
    /// staging allocations are redirected there (needs dedicated staging allocations).
    StagingIntoDevice,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Copies staging → device only.
    Upload,
    /// Copies device → staging only.
    Readback,
    /// Both.
    Both,
}

/// A direction in the report's words: `device into staging`.
pub fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::DeviceIntoStaging => "device into staging",
        Direction::StagingIntoDevice => "staging into device",
    }
}

/// A role in the report's words: `upload`, `readback`, `upload+readback`.
pub fn role_words(r: Role) -> &'static str {
    match r {
        Role::Upload => "upload",
        Role::Readback => "readback",
        Role::Both => "upload+readback",
    }
}

/// A staging buffer of a group: byte `i` of the device buffer is byte `i + delta` of this one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub staging: BufferRef,
    pub delta: i64,
    pub role: Role,
    /// Copies between this member and the device buffer seen in the trace, and bytes they moved.
    pub copies: u64,
    pub bytes: u64,
    /// One upload or download, then the staging buffer is freed (weights, a result read back
    /// once): the direction keeps the long-lived allocation.
    #[serde(default)]
    pub one_time: bool,
    /// Key of the staging buffer's own allocation (the only buffer bound to it in the trace) and
    /// the buffer's offset in it: enforce recognises that allocation at `vkAllocateMemory` and can
    /// redirect a map made before the buffer is bound. Absent (older plans, or sub-allocated
    /// staging): maps are redirected only once the buffer is bound.
    #[serde(default)]
    pub memory: Option<ObjectKey>,
    #[serde(default)]
    pub memory_offset: u64,
    /// Enforce need not make the staging buffer's own allocation (`memory`) at the driver: every
    /// byte the trace saw of it belongs to this member, whose bytes live in the device buffer's
    /// memory (DESIGN §6 "Memory"). Enforce then hands the application a handle of its own and
    /// serves that allocation from the device buffer's memory; any use the plan did not foresee
    /// makes it for real at that moment, with its bytes. Absent in older plans: false.
    #[serde(default)]
    pub skip_allocation: bool,
    /// Why the member's own allocation is still made (for people); empty when it is skipped or
    /// when the member has no allocation of its own.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub allocation_note: String,
}

/// The synchronization that replaces a dropped copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubstituteSync {
    /// Upload: host writes are made visible by the submission itself; the app's own
    /// transfer→shader barrier still orders the consumers. A memory barrier is still recorded in
    /// the copy's place so every ordering the copy took part in holds.
    MemoryBarrier,
}

/// An accepted group: one device buffer and every staging buffer that only exchanges data with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub id: u32,
    /// The device of the profiled process whose traffic the group came from (creation order,
    /// 0-based): enforce applies it to that device only.
    #[serde(default)]
    pub device_index: u32,
    pub device: BufferRef,
    pub members: Vec<Member>,
    pub direction: Direction,
    pub sync: SubstituteSync,
    /// Bytes of copies between the group's buffers that enforce drops per loop iteration (the
    /// steady-state iteration: total bytes / repetitions seen).
    pub bytes_saved_per_iter: u64,
    /// Total copies and bytes the trace saw between these buffers.
    pub copies_total: u64,
    pub bytes_total: u64,
    /// Bytes of buffer memory enforce does not need (the partner's range is shared).
    pub memory_saved: u64,
    /// `device_into_staging`: the device buffer's allocation, when enforce need not make all of
    /// it (DESIGN §6 "Memory"): every buffer the trace bound into it is the device buffer of a
    /// `device_into_staging` group (its bytes live in the staging memory), except buffers that
    /// lie in `window`; and the host never mapped it. Enforce then allocates only the window at
    /// the driver (nothing when it is empty) and makes the whole allocation late for anything
    /// the plan did not foresee. Absent in older plans, and for other groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_memory: Option<DeviceMemory>,
    /// The device buffer lives in memory the host maps (an allocator's mapped block, issue 12):
    /// the trace showed the host never touch it (watched since its bind) and no GPU command read
    /// what it held before its bind, so enforce may bind it elsewhere although its own
    /// allocation is mapped. `false` in older plans: such a device buffer is then not moved.
    #[serde(default)]
    pub device_mapped: bool,
    /// Whether enforce may apply the group to behaviour no profile observed (`context=program`
    /// under an argument list no profile saw; `crate::safety::extrapolate`): only where every
    /// unseen hazard is a host write the runtime guard catches, or cannot occur in a correct
    /// program. `false` in older plans.
    #[serde(default)]
    pub extrapolable: bool,
    /// Why not, when `extrapolable` is `false` (one sentence).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_extrapolable: String,
}

/// A per-call pair class (issue 24): one call site that makes a fresh pair on every call
/// (downloads per call, per-frame uploads). Its instances are groups of the plan, instance `n` =
/// `groups[n]`, and each names the keys of instance 0 with every ordinal (device buffer, each
/// member, each member's allocation, the device buffer's allocation) moved up by `n`. Formed
/// only when every instance the trace holds of those keys (but for the ordinal) was accepted
/// alike: same direction, sizes, usage, flags, offsets (delta, memory offset), roles.
///
/// Enforce matches instance `n ≥ groups.len()` (past those profiled) by the same rule, only
/// where `beyond` is true: every instance is `extrapolable` (issue 22), and, where
/// `guard_needed`, with the runtime guard on. Instances the profile saw are matched by their
/// groups as always.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Class {
    pub id: u32,
    #[serde(default)]
    pub device_index: u32,
    /// Group ids of the profiled instances, in instance order (at least 2).
    pub groups: Vec<u32>,
    /// Whether enforce applies the class to instances past those profiled.
    pub beyond: bool,
    /// Why not, when `beyond` is false (one sentence).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_beyond: String,
    /// Past those profiled only with the runtime guard on: some member is not a one-time
    /// download (whose unseen hazards cannot occur in a correct program).
    #[serde(default)]
    pub guard_needed: bool,
}

/// The allocation of a `device_into_staging` group's device buffer that enforce makes only in
/// part: bytes `[window_lo, window_hi)` (empty: none at all).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    pub key: ObjectKey,
    pub window_lo: u64,
    pub window_hi: u64,
}

/// The condition that refused a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Condition {
    /// Fewer than `min_copies` copies, or copies smaller than `min_bytes`.
    Threshold,
    /// Copies between the two buffers do not keep one constant offset.
    Offset,
    /// The staging buffer exchanges data with more than one device buffer over time.
    Reuse,
    S1,
    S2,
    S3,
    S4,
    /// Memory type bits, alignment, size, or a use of a buffer the layer cannot follow.
    Compat,
    /// The evidence a condition needs is missing (host-access validation off or lost, a
    /// truncated trace): refused, never accepted with a warning (fail closed).
    Evidence,
}

impl Condition {
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Threshold => "threshold",
            Condition::Offset => "offset",
            Condition::Reuse => "reuse",
            Condition::S1 => "S1",
            Condition::S2 => "S2",
            Condition::S3 => "S3",
            Condition::S4 => "S4",
            Condition::Compat => "compat",
            Condition::Evidence => "evidence",
        }
    }
}

/// A candidate pair the analyzer refused, with the evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// As [`Group::device_index`].
    #[serde(default)]
    pub device_index: u32,
    pub device: BufferRef,
    pub staging: BufferRef,
    pub condition: Condition,
    /// The trace event that showed it (its `seq`), when one did.
    pub event: Option<u64>,
    /// A sentence a person can act on.
    pub message: String,
    /// The same in plain words, for someone who has not read the trace: what the program does
    /// and what sharing memory would change. Absent in older plans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plain: String,
    pub copies: u64,
    pub bytes: u64,
}

/// Calibration results (`vkecho calibrate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub trials: u32,
    pub baseline_ms_median: f64,
    pub plan_ms_median: f64,
    /// Whether enforce should apply the plan.
    pub enabled: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: String,
    pub version: u32,
    pub context: Context,
    pub analyzer_version: String,
    pub thresholds: Thresholds,
    pub groups: Vec<Group>,
    pub rejected: Vec<Rejection>,
    #[serde(default)]
    pub calibration: Option<Calibration>,
    /// `context=program` (issue 16): the argument lists whose profiles this plan merges, and
    /// whether the last profiles agreed. Absent in plans made under `context=arguments`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// Per-call pair classes (version 2; absent in version 1 plans).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<Class>,
}

/// The profiles a `context=program` plan merges (`crate::program`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Argument hashes of the profiled runs, in order (one per profile).
    pub profiles: Vec<String>,
    /// The plan stopped changing: a profile under new arguments left its groups as they were.
    /// Auto mode then enforces it under any arguments instead of profiling them.
    pub stable: bool,
}

impl Plan {
    /// An empty plan for a context (accepts nothing; still a valid plan).
    pub fn empty(context: Context, thresholds: Thresholds) -> Plan {
        Plan {
            format: PLAN_FORMAT.into(),
            version: PLAN_VERSION,
            context,
            analyzer_version: env!("CARGO_PKG_VERSION").into(),
            thresholds,
            groups: Vec::new(),
            rejected: Vec::new(),
            calibration: None,
            evidence: None,
            classes: Vec::new(),
        }
    }

    /// Whether enforce should apply this plan at all (calibration may have turned it off).
    pub fn enabled(&self) -> bool {
        self.calibration.as_ref().is_none_or(|c| c.enabled)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plan serializes")
    }
}

#[derive(Debug)]
pub enum PlanError {
    /// Not JSON, or not a plan (with serde's position).
    Bad(String),
    Version {
        found: u32,
    },
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Bad(w) => write!(f, "not a valid plan: {w}"),
            PlanError::Version { found } => write!(
                f,
                "plan format version {found} is not supported (this build reads versions {PLAN_VERSION_MIN} to {PLAN_VERSION}); analyze the trace again"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// Parse a plan; never panics on any input.
pub fn parse_plan(text: &str) -> Result<Plan, PlanError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| PlanError::Bad(e.to_string()))?;
    if v.get("format").and_then(|f| f.as_str()) != Some(PLAN_FORMAT) {
        return Err(PlanError::Bad(format!("no \"format\": \"{PLAN_FORMAT}\"")));
    }
    match v.get("version").and_then(|x| x.as_u64()) {
        Some(x) if (PLAN_VERSION_MIN as u64..=PLAN_VERSION as u64).contains(&x) => {}
        Some(x) => {
            return Err(PlanError::Version {
                found: x.min(u32::MAX as u64) as u32,
            })
        }
        None => return Err(PlanError::Bad("no \"version\"".into())),
    }
    serde_json::from_value(v).map_err(|e| PlanError::Bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_plan_round_trips() {
        let p = Plan::empty(Context::default(), Thresholds::default());
        let q = parse_plan(&p.to_json()).unwrap();
        assert_eq!(p, q);
        assert!(q.enabled());
    }

    #[test]
    fn bad_plans_are_errors_not_panics() {
        assert!(parse_plan("").is_err());
        assert!(parse_plan("{}").is_err());
        let mut p = Plan::empty(Context::default(), Thresholds::default());
        p.version = 7;
        let e = parse_plan(&p.to_json()).unwrap_err();
        assert!(e.to_string().contains("version 7"));
        // A version 1 plan (no classes) still reads.
        p.version = 1;
        let q = parse_plan(&p.to_json()).unwrap();
        assert!(q.classes.is_empty());
    }
}
