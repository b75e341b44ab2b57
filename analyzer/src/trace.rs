//! The trace format (version 4): what the layer saw in `mode=profile`.
//!
//! A trace is JSON Lines: the first line is a [`Header`], every following line one [`Record`]
//! (an [`Event`] with its global sequence number `seq`). A truncated trace ends with
//! [`Event::Truncated`]. The layer writes it (`layer/src/profile/`), the analyzer reads it
//! ([`read_trace`]). Documented for people in `docs/trace-format.md`; keep the two in step.
//!
//! Handles are the opaque 64-bit values the application saw (dispatchable handles as their
//! pointer value): never dereferenced. Buffers and allocations also carry a stable
//! [`ObjectKey`] that is equal across runs of the same program.

use serde::{Deserialize, Serialize};
use std::io::BufRead;

/// The trace format version this build writes. Version 2 added the device index of every
/// record (`dev`) and, on `DeviceCreate`, the device's index, name and host-access validation;
/// version 1 traces (one device, validation unknown) are still read. Version 3 added sampled
/// host-access validation ([`Event::Watch`], [`Event::Window`]): a window a buffer was not watched
/// in holds no record of its accesses, so a reader that does not know these events must not read
/// the trace (it would take those windows as free of host access). Version 4 (issue 32) added
/// [`Event::Aside`] and [`Event::BindImage`]: a layer that wrote an older trace did not see the
/// commands it did not hook, so the analysis refuses every pair of such a trace (evidence).
/// Version 5 (issue 44) restates the descriptors of update-after-bind, update-unused-while-pending
/// and partially-bound bindings at every submission ([`Event::CmdLateUse`]): an older layer
/// recorded them as they stood at recording, which is not what the GPU reads when the set is
/// updated after the command buffer was recorded, so older traces are refused the same way.
pub const TRACE_VERSION: u32 = 5;
/// The first trace format version whose layer saw every command that can reach memory, and
/// every descriptor as the GPU reads it.
pub const TRACE_VERSION_COMPLETE: u32 = 5;
/// The oldest trace format version this build reads.
pub const TRACE_VERSION_MIN: u32 = 1;
/// The value of [`Header::format`].
pub const TRACE_FORMAT: &str = "vk-echo-trace";

/// The context a trace was recorded in; a plan made from it carries the same context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Context {
    /// Path of the executable.
    pub exe_path: String,
    /// GNU build-id of the executable in hex, or `sha256:`-less content hash (`fnv64:...`).
    pub exe_id: String,
    /// FNV-1a 64 over the program arguments (argv[1..]), hex.
    pub args_hash: String,
    /// Version of the layer that recorded the trace.
    pub layer_version: String,
    /// `VkPhysicalDeviceProperties::deviceName`.
    pub device_name: String,
    /// `VkPhysicalDeviceIDProperties::deviceUUID`, hex; empty when unknown.
    pub device_uuid: String,
    /// `VkPhysicalDeviceProperties::driverVersion`.
    pub driver_version: u32,
    /// `VkPhysicalDeviceProperties::vendorID` and `deviceID` (0 in older traces).
    #[serde(default)]
    pub vendor_id: u32,
    #[serde(default)]
    pub device_id: u32,
    /// The device's memory table as [`crate::context::memory_table_text`] writes it: heaps
    /// (size, flags) and types (flags, heap). Empty in older traces; a plan that has it is keyed by
    /// the device *model* (name, ids, driver, table), not by this board's `device_uuid`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory_table: String,
    /// `VkPhysicalDeviceProperties::pipelineCacheUUID`, hex (the driver build); empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pipeline_cache_uuid: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`TRACE_FORMAT`].
    pub format: String,
    pub version: u32,
    pub context: Context,
    /// Process id and wall-clock start (seconds since the epoch), for people.
    pub pid: u32,
    pub started_unix: u64,
    /// Settings in force (name → value) when the trace was recorded.
    #[serde(default)]
    pub settings: std::collections::BTreeMap<String, String>,
    /// The `CLOCK_MONOTONIC` reading (nanoseconds) at which the records' times ([`Record::t`])
    /// are 0: when the trace began. Absent in traces without times (before issue 47).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_origin_ns: Option<u64>,
}

/// Identity of a buffer or allocation that survives ASLR and is equal across runs:
/// FNV-1a 64 of the module-relative call stack at creation, plus size/usage/flags and the
/// ordinal among objects with the same (site, size, usage, flags).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectKey {
    /// Call-site hash, hex (`"a1b2…"`, 16 digits).
    pub site: String,
    pub size: u64,
    /// `VkBufferUsageFlags` for buffers, memory type index for allocations.
    pub usage: u32,
    /// `VkBufferCreateFlags` for buffers, `VkMemoryAllocateFlags` for allocations.
    pub flags: u32,
    pub ordinal: u32,
}

impl ObjectKey {
    /// The key of an object created below the size that needs an identity (profile mode's
    /// `min_bytes`): no call site was taken (that costs an unwind per creation), so it cannot be
    /// recognised in a later run and is never planned.
    pub fn anonymous(size: u64, usage: u32, flags: u32) -> ObjectKey {
        ObjectKey {
            site: String::new(),
            size,
            usage,
            flags,
            ordinal: 0,
        }
    }

    /// Created without an identity ([`ObjectKey::anonymous`]).
    pub fn is_anonymous(&self) -> bool {
        self.site.is_empty()
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{:#x}:{:#x}#{}",
            self.site, self.size, self.usage, self.flags, self.ordinal
        )
    }
}

/// One frame of a creation call stack: module (file name or build-id) and offset from its base.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub module: String,
    pub offset: u64,
}

/// Where a module named by [`Frame::module`] was loaded from, recorded once per module (in the
/// first `buffer_create` whose stack names it): what the analyzer needs to find its symbols from
/// any working directory. Absent in traces before issue 34.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// The name frames use ([`Frame::module`]: the file's basename).
    pub name: String,
    /// The file's full path as the process loaded it (relative names made absolute against the
    /// working directory when recorded).
    pub path: String,
    /// GNU build-id in hex, empty when the module has none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build_id: String,
}

/// `VkMemoryRequirements`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MemReq {
    pub size: u64,
    pub alignment: u64,
    pub type_bits: u32,
}

/// One region of a buffer-to-buffer copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyRegion {
    pub src_offset: u64,
    pub dst_offset: u64,
    pub size: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    pub fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// How a recorded command uses a buffer (other than buffer-to-buffer copies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UseKind {
    Fill,
    Update,
    Vertex,
    Index,
    Indirect,
    /// `vkCmdCopyBufferToImage` source.
    ToImage,
    /// `vkCmdCopyImageToBuffer` destination.
    FromImage,
    /// A storage/uniform/texel binding of a dispatch or draw.
    Descriptor,
    /// A use the layer cannot follow (descriptor buffers, acceleration structures, …).
    Untracked,
}

/// One buffer range used by a command, with the access SPIR-V reflection found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferUse {
    pub buffer: u64,
    pub offset: u64,
    /// `u64::MAX` for `VK_WHOLE_SIZE`.
    pub size: u64,
    pub access: Access,
    pub kind: UseKind,
}

/// One `VkSubmitInfo` (or `VkSubmitInfo2`) of a submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SubmitBatch {
    pub command_buffers: Vec<u64>,
    /// `(semaphore, value)`; value 0 for binary semaphores.
    pub waits: Vec<(u64, u64)>,
    pub signals: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// `vkCreateDevice` on a physical device; `class` is the topology class.
    DeviceCreate {
        device: u64,
        class: String,
        alias_type: Option<u32>,
        min_import_alignment: u64,
        /// Creation order of the device in the process (0, 1, …): the `dev` of its records.
        #[serde(default)]
        device_index: u32,
        /// `VkPhysicalDeviceProperties::deviceName`.
        #[serde(default)]
        name: String,
        /// How host access to candidate staging buffers was validated on this device:
        /// `double-map`, `driver-map`, or `off` (`""`: unknown, a version 1 trace).
        #[serde(default)]
        validation: String,
    },
    /// Host-access validation stopped on this device (e.g. the application replaced echo's
    /// SIGSEGV handler): from here on host accesses are not seen.
    ValidationLost {
        reason: String,
    },
    /// Host accesses to this candidate staging buffer cannot be seen (its allocation could not
    /// be double-mapped, or protecting it failed): its pairs lack evidence.
    Unvalidated {
        buffer: u64,
        reason: String,
    },
    DeviceDestroy {
        device: u64,
    },
    BufferCreate {
        buffer: u64,
        key: ObjectKey,
        usage: u32,
        flags: u32,
        size: u64,
        req: MemReq,
        /// Module-relative creation stack, innermost first (for symbolization by the analyzer).
        #[serde(default)]
        stack: Vec<Frame>,
        /// The modules of `stack` no earlier record of the trace described (each module once
        /// per trace). Added within version 3: absent in older traces, ignored by older readers.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modules: Vec<Module>,
    },
    BufferDestroy {
        buffer: u64,
    },
    MemoryAlloc {
        memory: u64,
        key: ObjectKey,
        type_index: u32,
        size: u64,
        /// `VkMemoryDedicatedAllocateInfo::buffer`, when set.
        dedicated_buffer: Option<u64>,
        host_visible: bool,
        /// Exported/imported external memory or device-address capture: not aliasable.
        #[serde(default)]
        external: bool,
        /// The application imported this allocation from its own pointer
        /// (`VkImportMemoryHostPointerInfoEXT`, VK_EXT_external_memory_host): host memory
        /// whose accesses echo does not see (issue 24). Absent in older traces: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        host_import: bool,
    },
    MemoryFree {
        memory: u64,
    },
    BindBuffer {
        buffer: u64,
        memory: u64,
        offset: u64,
    },
    MapMemory {
        memory: u64,
        offset: u64,
        size: u64,
    },
    UnmapMemory {
        memory: u64,
    },
    FlushRanges {
        ranges: Vec<(u64, u64, u64)>,
    },
    InvalidateRanges {
        ranges: Vec<(u64, u64, u64)>,
    },
    CmdBegin {
        cmd: u64,
        one_time: bool,
    },
    CmdEnd {
        cmd: u64,
    },
    /// `vkResetCommandBuffer`, or a reset of its pool.
    CmdReset {
        cmd: u64,
    },
    CmdFree {
        cmd: u64,
    },
    CmdCopyBuffer {
        cmd: u64,
        src: u64,
        dst: u64,
        regions: Vec<CopyRegion>,
    },
    /// Every other recorded command that touches buffers: fill/update, vertex/index/indirect
    /// binds, buffer-image copies, dispatches and draws (with the bound descriptors' buffers).
    CmdUse {
        cmd: u64,
        command: String,
        uses: Vec<BufferUse>,
        /// The command also reads descriptors of bindings the GPU takes as they stand at
        /// submission (update-after-bind, update-unused-while-pending, partially bound): a
        /// [`Event::CmdLateUse`] with this id before every submission of `cmd` says which
        /// buffers they name then. Added in version 5.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        late: Option<u64>,
    },
    /// Written right before a submission: the buffers the late bindings of the recorded command
    /// `late` (a [`Event::CmdUse`] of a submitted command buffer, or of a secondary it executes)
    /// name now — what the GPU reads when the submission runs.
    CmdLateUse {
        late: u64,
        uses: Vec<BufferUse>,
    },
    CmdBarrier {
        cmd: u64,
    },
    /// `vkCmdExecuteCommands`: the secondary command buffers' recordings (as they stand at this
    /// record) run here, in this order, when `cmd` is submitted.
    CmdExecute {
        cmd: u64,
        secondaries: Vec<u64>,
    },
    QueueSubmit {
        queue: u64,
        batches: Vec<SubmitBatch>,
        fence: Option<u64>,
    },
    /// The host observed these fences signaled (`vkWaitForFences` success, or `vkGetFenceStatus`
    /// returning `VK_SUCCESS`).
    FenceSignaled {
        fences: Vec<u64>,
    },
    FenceReset {
        fences: Vec<u64>,
    },
    QueueWaitIdle {
        queue: u64,
    },
    DeviceWaitIdle,
    /// The host observed these semaphore values reached (`vkWaitSemaphores`, or a counter read).
    SemaphoreReached {
        semaphores: Vec<(u64, u64)>,
    },
    /// The host signaled a timeline semaphore (`vkSignalSemaphore`).
    SemaphoreSignal {
        semaphore: u64,
        value: u64,
    },
    /// A command echo steps aside from (it can reach memory and echo does not follow it; the
    /// registry's classification, issue 32) was recorded (`cmd`: its command buffer) or
    /// called. Every buffer it names — directly, through `memory` (whatever is bound there)
    /// or through a descriptor set or buffer view, resolved by the layer into `buffers` — leaves
    /// every group; with `everything` (it runs work over what is bound to the command buffer,
    /// or names buffers through structures echo does not read), every buffer of the device does.
    Aside {
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cmd: Option<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        buffers: Vec<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        memory: Vec<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        everything: bool,
    },
    /// An image was bound to memory (`vkBindImageMemory*`): `size` bytes at `offset`. A buffer
    /// whose bytes lie under it is reached by the image, which echo does not follow as a use.
    BindImage {
        image: u64,
        memory: u64,
        offset: u64,
        size: u64,
    },
    /// `vkGetBufferDeviceAddress` (any alias) on this buffer.
    BufferAddress {
        buffer: u64,
    },
    /// From the next window on, the host's accesses to this candidate staging buffer are
    /// watched (its first arm). Written only with sampled validation (`validate_sample_every`
    /// above 1).
    Watch {
        buffer: u64,
    },
    /// A host-access window of this device begins (written at every window boundary, right after
    /// the submission or completion observation that opened it, when validation samples). The
    /// watched candidates listed in `unobserved` are not protected in this window: their host
    /// accesses in it may be missing (a fault on a protection left from an earlier window can
    /// still record one). Every other watched candidate is observed in the window.
    Window {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unobserved: Vec<u64>,
    },
    /// The host touched a protected staging buffer (page-protection fault). `access` is what the
    /// faulting instruction did; one record per buffer per protection window.
    HostAccess {
        buffer: u64,
        access: Access,
    },
    /// Exact host writes (issue 54): what the host's stores wrote of this staging buffer in the
    /// window now ending, written at the window's end for a buffer profiled exact in it (an
    /// upload-side member whose partner the GPU may change) that the host wrote. `write`: the
    /// `seq` of the window's `HostAccess` write record it belongs to. `ranges`: byte offsets
    /// `[from, to)` in the buffer, every byte some store wrote (a rewrite with the same bytes
    /// included), sorted and disjoint; `any`: the window could not be exact and says why (the
    /// write is then "any part", as a write without this record — older traces — always is).
    HostWrites {
        buffer: u64,
        write: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ranges: Vec<[u64; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        any: Option<String>,
    },
    /// From here on every host access to this buffer's bound range is observed (it is armed for
    /// host-access validation): written at its bind when its memory is mapped, or at the map
    /// that makes it reachable, so no host access since the bind went unseen. Before this
    /// record existed (older traces) only staging buffers copied to or from an unmapped buffer
    /// were watched, from their first copy.
    Watched {
        buffer: u64,
    },
    /// The trace was cut at the size limit; nothing after this is recorded.
    Truncated {
        dropped_after_bytes: u64,
    },
    /// GPU timestamps (issue 47) of one submission (`copy` absent) or of one copy in it
    /// (`copy`: the `seq` of its `CmdCopyBuffer` record), written when echo read them back —
    /// without waiting, after the host observed the submission complete, so this record's
    /// own `seq` and `t` come later than the work it times. `begin` and `end` are nanoseconds:
    /// on the trace's clock (the records' `t`) when `clock` is `host` (mapped with
    /// `VK_KHR/EXT_calibrated_timestamps`), or on the device's own clock (ticks × its
    /// `timestampPeriod`, any origin: comparable only with other `device` times of the same
    /// queue) when `clock` is `device`, which readers place by the host's observations.
    GpuTime {
        queue: u64,
        /// `seq` of the `QueueSubmit` record of the submission.
        submit: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        copy: Option<u64>,
        begin: u64,
        end: u64,
        clock: GpuClock,
    },
}

/// What the times of an [`Event::GpuTime`] are measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuClock {
    /// The trace's own clock (calibrated timestamps mapped them).
    Host,
    /// The device's clock in nanoseconds, origin unknown.
    Device,
}

/// One line after the header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    /// Thread that made the call (small integer), for people.
    #[serde(default)]
    pub thread: u32,
    /// Index of the device the event belongs to (`DeviceCreate::device_index`); 0 when absent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dev: u32,
    /// Host time of the event (issue 47): nanoseconds of `CLOCK_MONOTONIC` since the trace
    /// began ([`Header::clock_origin_ns`]), read once, with `seq`, so that the records of one
    /// thread in `seq` order have non-decreasing times. `None` in traces before issue 47.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<u64>,
    /// How long the call that made the record took, ending at `t` (nanoseconds): the host's
    /// waits (`vkWaitForFences`, `vkQueueWaitIdle`, `vkDeviceWaitIdle`, `vkWaitSemaphores`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur: Option<u64>,
    #[serde(flatten)]
    pub event: Event,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A whole trace in memory, records sorted by `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    pub header: Header,
    pub records: Vec<Record>,
    pub truncated: bool,
}

impl Trace {
    /// The records of device `dev` alone, as a trace of their own (same header).
    pub fn for_device(&self, dev: u32) -> Trace {
        Trace {
            header: self.header.clone(),
            records: self
                .records
                .iter()
                .filter(|r| r.dev == dev)
                .cloned()
                .collect(),
            truncated: self.truncated,
        }
    }

    /// The analysis thresholds: those given (`min_bytes`, `min_copies`), else the profile's
    /// settings in the header, else the defaults; a `min_copies` below 1 counts as not given.
    pub fn thresholds(
        &self,
        min_bytes: Option<u64>,
        min_copies: Option<u64>,
    ) -> crate::thresholds::Thresholds {
        let setting = |k: &str| {
            self.header
                .settings
                .get(k)
                .and_then(|v| crate::settings::parse_u64(v))
        };
        let d = crate::thresholds::Thresholds::default();
        crate::thresholds::Thresholds {
            min_bytes: min_bytes.or(setting("min_bytes")).unwrap_or(d.min_bytes),
            min_copies: min_copies
                .filter(|&k| k >= 1)
                .or(setting("min_copies").filter(|&k| k >= 1))
                .unwrap_or(d.min_copies),
        }
    }

    /// Every module the trace describes ([`Module`]), by the name its frames use; the first
    /// record of a name wins. Empty for traces written before module records existed.
    pub fn modules(&self) -> std::collections::BTreeMap<String, Module> {
        let mut out = std::collections::BTreeMap::new();
        for r in &self.records {
            if let Event::BufferCreate { modules, .. } = &r.event {
                for m in modules {
                    out.entry(m.name.clone()).or_insert_with(|| m.clone());
                }
            }
        }
        out
    }
}

/// Why a trace could not be read; always names the place.
#[derive(Debug)]
pub enum TraceError {
    Io(std::io::Error),
    Empty,
    /// Line `line` (1-based) is not what the format allows.
    Bad {
        line: usize,
        what: String,
    },
    /// The header names a version this build does not read.
    Version {
        found: u32,
    },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::Io(e) => write!(f, "cannot read trace: {e}"),
            TraceError::Empty => write!(f, "trace is empty (no header line)"),
            TraceError::Bad { line, what } => write!(f, "trace line {line}: {what}"),
            TraceError::Version { found } => write!(
                f,
                "trace format version {found} is not supported (this build reads versions {TRACE_VERSION_MIN} to {TRACE_VERSION}); re-profile with this layer"
            ),
        }
    }
}

impl std::error::Error for TraceError {}

/// Read a trace. A header that is not ours, a future version, or a malformed line is an error
/// naming the line. A file cut in the middle of its last line (a crash while writing) is an error
/// too, unless the layer marked the cut with [`Event::Truncated`].
pub fn read_trace<R: BufRead>(reader: R) -> Result<Trace, TraceError> {
    let mut lines = reader.lines().enumerate();
    let header: Header = loop {
        match lines.next() {
            None => return Err(TraceError::Empty),
            Some((_, Err(e))) => return Err(TraceError::Io(e)),
            Some((i, Ok(l))) => {
                if l.trim().is_empty() {
                    continue;
                }
                let v: serde_json::Value =
                    serde_json::from_str(&l).map_err(|e| TraceError::Bad {
                        line: i + 1,
                        what: format!("header is not JSON: {e}"),
                    })?;
                if v.get("format").and_then(|f| f.as_str()) != Some(TRACE_FORMAT) {
                    return Err(TraceError::Bad {
                        line: i + 1,
                        what: format!("not a {TRACE_FORMAT} header"),
                    });
                }
                if let Some(ver) = v.get("version").and_then(|x| x.as_u64()) {
                    if !(TRACE_VERSION_MIN as u64..=TRACE_VERSION as u64).contains(&ver) {
                        return Err(TraceError::Version {
                            found: ver.min(u32::MAX as u64) as u32,
                        });
                    }
                }
                break serde_json::from_value(v).map_err(|e| TraceError::Bad {
                    line: i + 1,
                    what: format!("bad header: {e}"),
                })?;
            }
        }
    };
    let mut records = Vec::new();
    let mut truncated = false;
    for (i, line) in lines {
        let line = line.map_err(TraceError::Io)?;
        if line.trim().is_empty() {
            continue;
        }
        if truncated {
            return Err(TraceError::Bad {
                line: i + 1,
                what: "record after the truncation marker".into(),
            });
        }
        let rec: Record = serde_json::from_str(&line).map_err(|e| TraceError::Bad {
            line: i + 1,
            what: format!("bad record: {e}"),
        })?;
        if matches!(rec.event, Event::Truncated { .. }) {
            truncated = true;
        }
        records.push(rec);
    }
    records.sort_by_key(|r| r.seq);
    Ok(Trace {
        header,
        records,
        truncated,
    })
}

/// Write a header line (used by the layer's trace sink and by tests that build synthetic traces).
pub fn header_line(h: &Header) -> String {
    serde_json::to_string(h).expect("header serializes")
}

/// Write one record line.
pub fn record_line(r: &Record) -> String {
    serde_json::to_string(r).expect("record serializes")
}

/// FNV-1a 64 over bytes: the hash used for call sites, argument hashes and content ids.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            format: TRACE_FORMAT.into(),
            version: TRACE_VERSION,
            context: Context::default(),
            pid: 1,
            started_unix: 0,
            settings: Default::default(),
            clock_origin_ns: None,
        }
    }

    #[test]
    fn round_trip_and_sort_by_seq() {
        let recs = [
            Record {
                seq: 2,
                thread: 0,
                dev: 0,
                t: None,
                dur: None,
                event: Event::DeviceWaitIdle,
            },
            Record {
                seq: 1,
                thread: 0,
                dev: 0,
                t: None,
                dur: None,
                event: Event::BufferAddress { buffer: 7 },
            },
        ];
        let mut text = header_line(&header());
        for r in &recs {
            text.push('\n');
            text.push_str(&record_line(r));
        }
        let t = read_trace(text.as_bytes()).unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.records[0].seq, 1);
        assert!(!t.truncated);
    }

    #[test]
    fn future_version_and_garbage_name_the_problem() {
        let mut h = header();
        h.version = 99;
        let e = read_trace(header_line(&h).as_bytes()).unwrap_err();
        assert!(e.to_string().contains("version 99"), "{e}");
        let text = format!(
            "{}\n{{\"seq\":1,\"ev\":\"nope\"}}\n",
            header_line(&header())
        );
        let e = read_trace(text.as_bytes()).unwrap_err();
        assert!(e.to_string().starts_with("trace line 2:"), "{e}");
        assert!(matches!(read_trace(&b""[..]), Err(TraceError::Empty)));
    }

    /// `buffer_create.modules` (issue 34) is optional both ways: a record without it (every
    /// trace before) reads with none, one with it reads them, the first record of a name wins, and
    /// a writer leaves the field out when there is nothing to say (so older readers see the same
    /// lines as before for every later record).
    #[test]
    fn module_records_are_optional_and_once_per_name() {
        let create = |buffer: u64, modules: &str| {
            format!(
                r#"{{"seq":{buffer},"ev":"buffer_create","buffer":{buffer},"key":{{"site":"00000000000000aa","size":4,"usage":1,"flags":0,"ordinal":0}},"usage":1,"flags":0,"size":4,"req":{{"size":4,"alignment":4,"type_bits":1}},"stack":[{{"module":"libdemo.so","offset":4466}}]{modules}}}"#
            )
        };
        let text = [
            header_line(&header()),
            create(1, ""),
            create(
                2,
                r#","modules":[{"name":"libdemo.so","path":"/opt/lib/libdemo.so","build_id":"ab12"}]"#,
            ),
            create(
                3,
                r#","modules":[{"name":"libdemo.so","path":"/elsewhere/libdemo.so"},{"name":"app","path":"/opt/app"}]"#,
            ),
        ]
        .join("\n");
        let t = read_trace(text.as_bytes()).unwrap();
        let m = t.modules();
        assert_eq!(m.len(), 2);
        assert_eq!(m["libdemo.so"].path, "/opt/lib/libdemo.so");
        assert_eq!(m["libdemo.so"].build_id, "ab12");
        assert_eq!(m["app"].build_id, "");
        let first = record_line(&t.records[0]);
        assert!(!first.contains("modules"), "{first}");
        assert!(!record_line(&t.records[2]).contains("build_id\":\"\""));
    }

    #[test]
    fn fnv_matches_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
