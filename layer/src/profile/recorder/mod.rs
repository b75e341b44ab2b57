//! Profile mode wired into the hooks: one [`Profiler`] per device records the trace events
//! of DESIGN §4 and runs host-access validation (see `mod.rs` for how the pieces fit).
//!
//! Every hook makes one call here (`if let Some(p) = cx.dev.profile() { p.on_…(…) }`); the
//! methods never call Vulkan except echo's own queries (fence status, semaphore counters,
//! host-pointer properties) through the next layer.
//!
//! Over 1,000 lines: one method per event the hooks report (each a few lines that turn a call
//! into trace records), the host-access windows that every submission and completion closes, and
//! the device's end; descriptor sets and pipelines are in `descriptors.rs`.

use super::sink::{self, Sink};
use super::watch::{self as guard, GuardError};
use crate::hostmem::import::{import_alignment, EXT_MEMORY_HOST};
use crate::hostmem::memfd::{BufferPatch, DoubleMap};
use crate::log;
use crate::records::{raw, Device};
use crate::records::{HandleMap, HandleSet};
use crate::reflect;
use crate::state::{UpdateTemplate, Written};
use ash::vk;
use echo_analyzer::trace::{
    Access, BufferUse, CopyRegion, Event, Header, MemReq, ObjectKey, SubmitBatch, UseKind,
    TRACE_FORMAT, TRACE_VERSION,
};
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

mod descriptors;
use descriptors::{CmdBinds, Late, SetContents};

/// Test-only switch (environment only, never a setting): turn the double mapping off so the
/// driver's own mapping is protected, as on a device without `VK_EXT_external_memory_host`.
/// On lavapipe the driver's CPU threads then fault too ("the detector has teeth" test).
pub const TEST_NO_DOUBLE_MAP: &str = "VK_ECHO_TEST_NO_DOUBLE_MAP";

/// Test-only switch (environment only): no GPU timestamps (`gputime/`), to measure what they
/// cost against the same profile run without them.
pub const TEST_NO_GPU_TIME: &str = "VK_ECHO_TEST_NO_GPU_TIME";

/// Test-only switch (environment only): take every descriptor as it stood at recording, as echo
/// did before issue 44 — the planted fault that shows `c_gpu_reads`'s test can fail.
pub const TEST_LATE_AT_RECORD: &str = "VK_ECHO_TEST_LATE_AT_RECORD";

/// Live profilers in the process; the sink is finished when the last one goes.
static LIVE: AtomicUsize = AtomicUsize::new(0);

pub struct Profiler {
    sink: &'static Sink,
    device: u64,
    /// The device's creation index in the process: the `dev` of its trace records.
    index: u32,
    /// Host-access validation on (the `validate` setting).
    validate: bool,
    /// Sampled validation: every window until the host was seen touching a candidate in
    /// `full_windows` windows, then one in `sample_every` (1: every window; no
    /// `Watch`/`Window` records).
    full_windows: u64,
    sample_every: u64,
    /// Candidate → (windows it has been armable in so far, windows in which its full
    /// validation saw an access) (sampled validation only).
    windows: HandleMap<u64, (u64, u64)>,
    /// Sampled candidates left unprotected in the current window (its `Window` record lists
    /// them): a map in this window must not arm them, or the trace would hold accesses in a
    /// window it calls unobserved.
    unwatched_now: crate::records::HandleSet<u64>,
    /// Buffers a recorded copy names: a candidate's sampling starts only once its loop has
    /// begun (armed from its bind, the setup's writes would otherwise count toward the first
    /// `full_windows` and sampling would start before the loop's pattern was seen).
    copied: crate::records::HandleSet<u64>,
    /// Windows of this device so far: one sampling decision per window for every sampled
    /// candidate, so the analyzer finds windows where all of a group's buffers were watched.
    window_count: AtomicU64,
    /// Host-visible allocations are backed by a double mapping.
    double_map: bool,
    /// How (`Some` exactly when `double_map`): echo's memfd imported, or the driver's memory
    /// exported as an fd (issue 49, hostmem/export.rs).
    backing: Option<crate::hostmem::export::Backing>,
    /// `vkGetMemoryFdKHR`, for the fd way.
    get_fd: Option<vk::PFN_vkGetMemoryFdKHR>,
    /// False once the guard cannot be used (the app replaced our SIGSEGV handler).
    guard_ok: AtomicBool,
    min_bytes: u64,
    min_import_alignment: u64,
    host_ptr_props: Option<vk::PFN_vkGetMemoryHostPointerPropertiesEXT>,
    counter_value: Option<vk::PFN_vkGetSemaphoreCounterValue>,
    /// Shader module → reflection (`None`: could not be reflected).
    modules: HandleMap<u64, Option<Arc<reflect::Module>>>,
    /// Pipeline → merged bindings of its stages (`None`: unknown, be conservative).
    pipelines: HandleMap<u64, Option<Arc<reflect::Bindings>>>,
    /// Shader object (`VK_EXT_shader_object`) → its bindings (`None`: a binary, or SPIR-V that
    /// could not be reflected: unknown).
    shaders: HandleMap<u64, Option<Arc<reflect::Bindings>>>,
    sets: HandleMap<u64, SetContents>,
    /// Texel buffer view → (buffer, offset, range), so texel descriptors resolve to a buffer.
    views: HandleMap<u64, (u64, u64, u64)>,
    cmds: HandleMap<u64, CmdBinds>,
    /// Descriptors read at submission (update-after-bind and the like): `descriptors.rs`.
    late: Late,
    /// Buffers ≥ `min_bytes` armed for host-access validation: every one bound into mapped
    /// memory (from its bind or map, `Watched`), and — as before — any that took part in a
    /// copy with an unmapped buffer while mapped.
    candidates: HandleSet<u64>,
    /// Memory → its double mapping.
    doubles: HandleMap<u64, DoubleMap>,
    /// Double mappings handed to the driver whose allocation has not returned yet, by driver
    /// view address. Owned here (not by the call) so that a panic between the driver's import
    /// and `on_allocate` leaks the mapping instead of unmapping memory the driver uses.
    importing: HandleMap<usize, DoubleMap>,
    /// Candidates ever noted (for the closing log line).
    candidates_total: AtomicUsize,
    /// Candidates whose host accesses cannot be seen (their allocation could not be
    /// double-mapped, or protecting them failed): recorded once each as `Unvalidated`.
    unvalidated: HandleSet<u64>,
    /// GPU timestamps (issue 47), where the device has them.
    gpu: Option<super::gputime::GpuTimer>,
    /// Candidates a fault echo could not explain or finish left open for good
    /// (`guard::Seen::Lost`): never armed again.
    lost: HandleSet<u64>,
    /// Exact host writes (issue 54): mapped buffer → the buffers recorded copies took its bytes
    /// into.
    uploads: HandleMap<u64, Vec<u64>>,
    /// Buffer → what else recorded commands may write into it: the sources of copies into it,
    /// `u64::MAX` for a dispatch, draw, fill or update that writes it.
    writers: HandleMap<u64, Vec<u64>>,
    /// Candidates armed exact, with the buffer offset their armed range starts at.
    exact_base: HandleMap<u64, u64>,
    /// Candidate → bytes its exact windows saw written before any recorded copy read it (it
    /// stays exact until they reach [`EXACT_UNKNOWN`] times its size: a program fills an upload
    /// before it records the copy, in as many windows as other threads' submissions cut it
    /// into; a buffer the GPU reads in place is not paid for longer).
    unknown_writes: HandleMap<u64, u64>,

    /// `host_writes=whole`: the user vouches that every host write is whole, so exact host
    /// writes are not needed (nor paid for).
    whole_vouched: bool,
}

/// Candidate buffer → creation index of its device: the guard's records are process-wide, and
/// whichever profiler drains them files each under the device the buffer belongs to.
fn owners() -> &'static HandleMap<u64, u32> {
    static M: std::sync::OnceLock<HandleMap<u64, u32>> = std::sync::OnceLock::new();
    M.get_or_init(HandleMap::default)
}

fn default_trace_path(dev: &Device) -> PathBuf {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "app".into());
    dev.settings
        .cache_dir
        .join("traces")
        .join(format!("{exe}-{}.jsonl", std::process::id()))
}

/// Start profiling `dev` (an active device): open the trace (the `trace` setting, else
/// `<cache_dir>/traces/<exe>-<pid>.jsonl`, or `trace` when given), record `DeviceCreate`.
/// An unwritable trace is one warning and no profiling: the application runs unchanged.
/// Returns the recorder when profiling started (the coordinator keeps it in the device's
/// record). Auto mode calls this too.
pub fn start(dev: &Device, trace: Option<&Path>) -> Option<Profiler> {
    let sink: &'static Sink = match sink::global() {
        Some(s) => s,
        None => {
            let path = trace
                .map(Path::to_path_buf)
                .or_else(|| dev.settings.trace.clone())
                .unwrap_or_else(|| default_trace_path(dev));
            // A trace in the cache counts against its limit (issue 16): it is cut there too, and
            // the cache is bounded when this process exits.
            let mut max_bytes = dev.settings.trace_max_bytes;
            if path.starts_with(&dev.settings.cache_dir) {
                crate::lifetime::note_cache_write(&dev.settings, &[&path]);
                if dev.settings.cache_max_bytes > 0 {
                    max_bytes = max_bytes.min(dev.settings.cache_max_bytes.max(4096));
                }
            }
            let context = match &dev.instance {
                Some(i) => crate::context::gather(i, dev.physical_device),
                None => Default::default(),
            };
            let header = Header {
                format: TRACE_FORMAT.into(),
                version: TRACE_VERSION,
                context,
                pid: std::process::id(),
                started_unix: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                settings: dev.settings.to_pairs().into_iter().collect(),
                clock_origin_ns: Some(sink::start_clock()),
            };
            let (s, warning) = Sink::open_or_disabled(&path, &header, max_bytes);
            if let Some(w) = warning {
                log::warn!("{w}; profile mode records nothing, the application runs unchanged");
                return None;
            }
            sink::install_global(s);
            match sink::global() {
                Some(s) => {
                    log::info!("profile: writing trace {}", path.display());
                    s
                }
                None => return None,
            }
        }
    };
    if !sink.is_active() {
        log::warn!(
            "profile: the trace {} is no longer written (cut at trace_max_bytes, or a write failed); device '{}' is not traced",
            sink.path().map_or("?".into(), |p| p.display().to_string()),
            dev.decision.name
        );
        return None;
    }
    let env = crate::settings::env_lookup(crate::settings::secure_execution());
    let ext = dev
        .extensions
        .contains(EXT_MEMORY_HOST.to_str().unwrap_or_default());
    let test_off = env(TEST_NO_DOUBLE_MAP).is_some_and(|v| v == "1");
    if test_off {
        log::warn!("{TEST_NO_DOUBLE_MAP}=1 (test only): the driver's own mapping is protected");
    }
    let late_at_record = env(TEST_LATE_AT_RECORD).is_some_and(|v| v == "1");
    if late_at_record {
        log::warn!("{TEST_LATE_AT_RECORD}=1 (test only): descriptors are taken as recorded, not as submitted");
    }
    // Issue 49: the way of double-mapping (hostmem/export.rs) — the driver's exported fd where
    // echo enabled VK_KHR_external_memory_fd for it (images cannot follow host imports there)
    // and the device shows that a mapping of the fd is the driver's memory.
    use crate::hostmem::export::{self, Backing};
    let fd_ext = dev
        .extensions
        .contains(export::KHR_MEMORY_FD.to_str().unwrap_or_default());
    let images_follow_host = dev
        .instance
        .as_ref()
        .is_some_and(|i| export::images_follow(i, dev.physical_device, Backing::HostImport));
    let mut get_fd: Option<vk::PFN_vkGetMemoryFdKHR> = None;
    let cpu = dev.decision.table.device_type == echo_analyzer::topology::DeviceType::Cpu;
    if dev.settings.validate && cpu && fd_ext && !test_off && !(ext && images_follow_host) {
        let get = dev
            .next_proc(c"vkGetMemoryFdKHR")
            // SAFETY: resolved by that name.
            .map(|f| unsafe { crate::records::typed::<vk::PFN_vkGetMemoryFdKHR>(f) });
        let ty = dev
            .decision
            .table
            .types
            .iter()
            .position(|t| t.flags & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() != 0);
        match (get, ty) {
            (Some(get), Some(ty)) => {
                match export::aliases(dev, get, ty as u32) {
                    Ok(()) => get_fd = Some(get),
                    Err(e) => {
                        log::info!(
                    "profile: the driver's exported memory cannot be double-mapped ({e}); {}",
                    if ext { "importing host memory instead" } else { "no double mapping" }
                )
                    }
                }
            }
            _ => log::info!("profile: vkGetMemoryFdKHR or a host-visible memory type is missing"),
        }
    }
    let min_import_alignment = if ext { import_alignment(dev) } else { 0 };
    let host_ptr_props = if ext {
        dev.next_proc(c"vkGetMemoryHostPointerPropertiesEXT")
            // SAFETY: resolved by that name.
            .map(|f| unsafe { crate::records::typed(f) })
    } else {
        None
    };
    let counter_value = dev
        .next_proc(c"vkGetSemaphoreCounterValue")
        .or_else(|| dev.next_proc(c"vkGetSemaphoreCounterValueKHR"))
        // SAFETY: resolved by that name.
        .map(|f| unsafe { crate::records::typed(f) });
    let validate = dev.settings.validate;
    let host_way = validate
        && ext
        && !test_off
        && host_ptr_props.is_some()
        && min_import_alignment.is_power_of_two();
    let backing = match (get_fd.is_some() && validate, host_way) {
        (true, _) => Some(Backing::FdExport),
        (false, true) => Some(Backing::HostImport),
        _ => None,
    };
    let double_map = backing.is_some();
    if validate {
        log::info!(
            "profile: host-access validation on; {}",
            if let Some(b) = backing {
                format!("host-visible memory is double-mapped ({})", b.name())
            } else {
                "the driver's mapping is protected (no double mapping)".to_string()
            }
        );
    }
    let p = Profiler {
        sink,
        device: raw(dev.handle),
        index: dev.index,
        validate,
        full_windows: dev.settings.validate_full_windows,
        sample_every: dev.settings.validate_sample_every.max(1),
        windows: HandleMap::default(),
        unwatched_now: Default::default(),
        copied: Default::default(),
        window_count: AtomicU64::new(0),
        double_map,
        backing,
        get_fd,
        guard_ok: AtomicBool::new(true),
        min_bytes: dev.settings.min_bytes,
        min_import_alignment,
        host_ptr_props,
        counter_value,
        modules: HandleMap::default(),
        pipelines: HandleMap::default(),
        shaders: HandleMap::default(),
        sets: HandleMap::default(),
        views: HandleMap::default(),
        cmds: HandleMap::default(),
        late: Late::new(late_at_record),
        candidates: HandleSet::default(),
        doubles: HandleMap::default(),
        importing: HandleMap::default(),
        candidates_total: AtomicUsize::new(0),
        unvalidated: HandleSet::default(),
        gpu: if env(TEST_NO_GPU_TIME).is_some_and(|v| v == "1") {
            log::warn!("{TEST_NO_GPU_TIME}=1 (test only): no GPU timestamps");
            None
        } else {
            super::gputime::GpuTimer::new(dev, sink, dev.index)
        },
        lost: HandleSet::default(),
        uploads: HandleMap::default(),
        writers: HandleMap::default(),
        exact_base: HandleMap::default(),
        unknown_writes: HandleMap::default(),

        whole_vouched: dev.settings.whole_host_writes,
    };
    let validation = match (validate, double_map) {
        (false, _) => "off",
        (true, true) => "double-map",
        (true, false) => "driver-map",
    };
    sink.record(
        p.index,
        Event::DeviceCreate {
            device: p.device,
            class: dev.decision.topology.class.to_string(),
            alias_type: dev.decision.topology.alias_type,
            min_import_alignment,
            device_index: p.index,
            name: dev.decision.name.clone(),
            validation: validation.into(),
        },
    );
    LIVE.fetch_add(1, Ordering::Relaxed);
    Some(p)
}

/// A patched `vkAllocateMemory` that imports a double mapping's driver view (the mapping
/// itself waits in `Profiler::importing`).
pub struct Import {
    way: Way,
    driver_ptr: usize,
    len: usize,
}

/// The patched allocate info of each way of double-mapping.
enum Way {
    Host(Box<crate::hostmem::import::ImportInfo>),
    Export(Box<crate::hostmem::export::ExportInfo>),
}

impl Import {
    /// The allocate info to pass down (valid while `self` lives).
    pub fn info(&self) -> *const vk::MemoryAllocateInfo<'static> {
        match &self.way {
            Way::Host(i) => i.info(),
            Way::Export(e) => e.info(),
        }
    }
}

impl Profiler {
    /// GPU timestamps (issue 47), where the device has them.
    #[inline]
    pub fn gpu(&self) -> Option<&super::gputime::GpuTimer> {
        self.gpu.as_ref()
    }

    #[inline]
    fn on(&self) -> bool {
        self.sink.is_active()
    }

    /// Record `e` now; its sequence number (0: dropped).
    #[inline]
    fn rec(&self, e: Event) -> u64 {
        self.note_writers(&e);
        self.sink.record(self.index, e)
    }

    // ------------------------------------------------------------------------------ memory

    /// Before `vkAllocateMemory`: a double mapping to import instead, when this allocation
    /// qualifies (host-visible, no external/import/dedicated-image structures).
    ///
    /// # Safety
    /// `info` must be a valid allocate info.
    pub unsafe fn prepare_import(
        &self,
        dev: &Device,
        info: &vk::MemoryAllocateInfo<'_>,
    ) -> Option<Box<Import>> {
        if !self.double_map || !self.guard_ok.load(Ordering::Relaxed) {
            return None;
        }
        let ty = dev
            .decision
            .table
            .types
            .get(info.memory_type_index as usize)?;
        if ty.flags & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() == 0 {
            return None;
        }
        if self.backing == Some(crate::hostmem::export::Backing::FdExport) {
            let e = crate::hostmem::export::ExportInfo::new(info)?;
            return Some(Box::new(Import {
                way: Way::Export(e),
                driver_ptr: 0,
                len: info.allocation_size as usize,
            }));
        }
        let chain = crate::hostmem::import::importable_chain(info)?;
        let map = DoubleMap::new(
            info.allocation_size as usize,
            self.min_import_alignment as usize,
        )
        .map_err(|e| log::debug!("profile: no double mapping ({e})"))
        .ok()?;
        let get = self.host_ptr_props?;
        let ptr = map.driver_ptr() as *const c_void;
        if let Err((r, bits)) =
            crate::hostmem::import::can_import(get, dev.handle, ptr, info.memory_type_index)
        {
            log::debug!(
                "profile: memory type {} cannot import host pointers ({r:?}, bits {bits:#x}); plain allocation",
                info.memory_type_index
            );
            return None;
        }
        let b = Box::new(Import {
            way: Way::Host(crate::hostmem::import::ImportInfo::new(
                chain,
                map.driver_ptr() as *mut c_void,
                map.len() as u64,
                info.memory_type_index,
            )),
            driver_ptr: map.driver_ptr() as usize,
            len: map.len(),
        });
        self.importing.insert(b.driver_ptr, map);
        Some(b)
    }

    /// Whether host-visible allocations may be imported (the double mapping is on and the
    /// guard still works): images then need the host-allocation handle type (hooks/image.rs).
    #[inline]
    pub fn may_import(&self) -> bool {
        self.double_map && self.guard_ok.load(Ordering::Relaxed)
    }

    /// How this device's double mappings are made (`None`: none are).
    #[inline]
    pub fn backing(&self) -> Option<crate::hostmem::export::Backing> {
        self.backing
    }

    /// The import was refused by the driver: drop its double mapping.
    #[allow(clippy::boxed_local)] // the hook holds it boxed (its pointers must not move)
    pub fn import_failed(&self, import: Box<Import>) {
        self.importing.remove(&import.driver_ptr);
    }

    /// Before `vkCreateBuffer` with the double mapping on: the application's create info with
    /// `VkExternalMemoryBufferCreateInfo { HOST_ALLOCATION_EXT }` in front, unless the
    /// application chained its own external-memory info (its buffer then is not bound into
    /// echo's imports: such memory is external and is left alone).
    ///
    /// # Safety
    /// `info` must be a valid create info.
    pub unsafe fn patch_buffer_info(
        &self,
        info: &vk::BufferCreateInfo<'_>,
    ) -> Option<Box<BufferPatch>> {
        if !self.guard_ok.load(Ordering::Relaxed) {
            return None;
        }
        BufferPatch::external(info, self.backing?.handle_type())
    }

    /// After a successful `vkAllocateMemory` (`import`: the double mapping it used, if any).
    ///
    /// # Safety
    /// `info` must be the application's valid allocate info.
    pub unsafe fn on_allocate(
        &self,
        dev: &Device,
        memory: u64,
        info: &vk::MemoryAllocateInfo<'_>,
        import: Option<Box<Import>>,
    ) {
        if let Some(i) = import {
            match &i.way {
                Way::Host(_) => {
                    if let Some((_, map)) = self.importing.remove(&i.driver_ptr) {
                        self.doubles.insert(memory, map);
                    }
                }
                Way::Export(_) => match self.export_map(dev, memory, i.len) {
                    Ok(map) => {
                        self.doubles.insert(memory, map);
                    }
                    // No double mapping: its candidates are refused (`import_missing`).
                    Err(e) => log::debug!("profile: no double mapping of {memory:#x} ({e})"),
                },
            }
        }
        if !self.on() {
            return;
        }
        let Some(m) = dev.state.memory.get(&memory) else {
            return;
        };
        let host_visible = dev
            .decision
            .table
            .types
            .get(info.memory_type_index as usize)
            .is_some_and(|t| t.flags & vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw() != 0);
        let key = m
            .key
            .clone()
            .unwrap_or_else(|| ObjectKey::anonymous(m.size, m.type_index, m.alloc_flags));
        self.rec(Event::MemoryAlloc {
            memory,
            key,
            type_index: info.memory_type_index,
            size: info.allocation_size,
            dedicated_buffer: m.dedicated_buffer,
            host_visible,
            external: is_external(info, m.alloc_flags),
            host_import: is_host_import(info),
        });
    }

    /// The two views of exported allocation `memory` (`len` bytes).
    fn export_map(&self, dev: &Device, memory: u64, len: usize) -> Result<DoubleMap, String> {
        use ash::vk::Handle;
        let get = self.get_fd.ok_or("vkGetMemoryFdKHR is missing")?;
        let fd = crate::hostmem::export::memory_fd(
            get,
            dev.handle,
            vk::DeviceMemory::from_raw(memory),
            len as u64,
        )?;
        // The map owns the fd from here on (closed on drop, also when mapping fails).
        DoubleMap::from_fd(fd, len).map_err(|e| e.to_string())
    }

    /// Before `vkFreeMemory`: disarm what lives in it, record. Returns the double mapping to
    /// drop AFTER the call went down.
    pub fn before_free_memory(&self, dev: &Device, memory: u64) -> Option<DoubleMap> {
        // vkFreeMemory(VK_NULL_HANDLE) is a valid no-op (ffmpeg's Vulkan filters do it).
        if memory == 0 {
            return None;
        }
        self.disarm_memory(dev, memory);
        if self.on() {
            self.rec(Event::MemoryFree { memory });
        }
        self.doubles.remove(&memory).map(|(_, m)| m)
    }

    /// After a successful `vkMapMemory`: hand out the application's view of a double mapping
    /// (rewrites `*data`), record.
    ///
    /// # Safety
    /// `data` must point at the pointer the next layer returned.
    pub unsafe fn on_map(&self, memory: u64, offset: u64, size: u64, data: *mut *mut c_void) {
        if let Some(m) = self.doubles.get(&memory) {
            if !data.is_null() && (offset as usize) < m.len() {
                *data = m.app_ptr().add(offset as usize) as *mut c_void;
            }
        }
        if self.on() {
            self.rec(Event::MapMemory {
                memory,
                offset,
                size,
            });
        }
    }

    /// Before `vkUnmapMemory`.
    pub fn before_unmap(&self, dev: &Device, memory: u64) {
        self.disarm_memory(dev, memory);
        if self.on() {
            self.rec(Event::UnmapMemory { memory });
        }
    }

    /// `vkFlushMappedMemoryRanges` (`flush`) or `vkInvalidateMappedMemoryRanges`.
    ///
    /// # Safety
    /// `ranges` must hold `count` valid ranges.
    pub unsafe fn on_ranges(
        &self,
        flush: bool,
        count: u32,
        ranges: *const vk::MappedMemoryRange<'_>,
    ) {
        if !self.on() || count == 0 || ranges.is_null() {
            return;
        }
        let v: Vec<(u64, u64, u64)> = std::slice::from_raw_parts(ranges, count as usize)
            .iter()
            .map(|r| (raw(r.memory), r.offset, r.size))
            .collect();
        self.rec(if flush {
            Event::FlushRanges { ranges: v }
        } else {
            Event::InvalidateRanges { ranges: v }
        });
    }

    // ----------------------------------------------------------------------------- buffers

    /// After a successful `vkCreateBuffer` (state already recorded).
    pub fn on_create_buffer(&self, dev: &Device, buffer: u64) {
        if !self.on() {
            return;
        }
        let Some(b) = dev.state.buffers.get(&buffer) else {
            return;
        };
        // Below min_bytes no call site was taken: traced (S4 sees every bind) without identity.
        let key = b
            .key
            .clone()
            .unwrap_or_else(|| ObjectKey::anonymous(b.size, b.usage.as_raw(), b.flags.as_raw()));
        self.rec(Event::BufferCreate {
            buffer,
            key,
            usage: b.usage.as_raw(),
            flags: b.flags.as_raw(),
            size: b.size,
            req: MemReq {
                size: b.requirements.size,
                alignment: b.requirements.alignment,
                type_bits: b.requirements.memory_type_bits,
            },
            stack: b.stack.clone(),
            modules: crate::callsite::announce(&b.stack),
        });
    }

    /// Before `vkDestroyBuffer`.
    pub fn before_destroy_buffer(&self, buffer: u64) {
        if buffer == 0 {
            return;
        }
        if self.candidates.remove(&buffer).is_some() {
            guard::disarm(buffer);
            self.close_writes(buffer);
        }
        if self.on() {
            self.rec(Event::BufferDestroy { buffer });
        }
    }

    /// After a successful bind (the buffer's state already says where it is bound).
    pub fn on_bind(&self, dev: &Device, buffer: u64, memory: u64, offset: u64) {
        if self.on() {
            self.rec(Event::BindBuffer {
                buffer,
                memory,
                offset,
            });
        }
        if Self::mapped(dev, buffer) {
            self.watch(dev, buffer);
        }
    }

    /// After a successful `vkMapMemory` (the memory's state already holds the mapping): every
    /// buffer ≥ `min_bytes` bound into it is armed now — before the application can touch the
    /// new mapping, not at the next window.
    pub fn after_map(&self, dev: &Device, memory: u64) {
        if !self.validate || !self.guard_ok.load(Ordering::Relaxed) {
            return;
        }
        let bound: Vec<u64> = dev
            .state
            .buffers
            .iter()
            .filter(|e| e.value().bound.is_some_and(|(m, _)| m == memory))
            .map(|e| *e.key())
            .collect();
        for b in bound {
            if self.candidates.contains(&b) {
                // Sampled validation left it unwatched in this window: armed at the next
                // window it watches, like every unwatched candidate.
                if !self.unwatched_now.contains(&b) {
                    self.arm_one(dev, b);
                }
            } else {
                self.watch(dev, b);
            }
        }
    }

    /// Roles come from behaviour (DESIGN §5): a buffer ≥ `min_bytes` that the host can reach
    /// (bound into mapped memory) is armed from its bind, or from the map that makes it
    /// reachable, so the trace holds every host access to it since its bind, and says so with
    /// a `Watched` record — for the staging side and for a partner that lives in mapped memory
    /// too (allocators map whole blocks).
    fn watch(&self, dev: &Device, buffer: u64) {
        if !self.validate || !self.guard_ok.load(Ordering::Relaxed) {
            return;
        }
        let big = dev
            .state
            .buffers
            .get(&buffer)
            .is_some_and(|b| b.size >= self.min_bytes);
        if !big || !self.candidates.insert(buffer) {
            return;
        }
        owners().insert(buffer, self.index);
        self.candidates_total.fetch_add(1, Ordering::Relaxed);
        if self.on() {
            self.rec(Event::Watched { buffer });
        }
        self.arm_one(dev, buffer);
    }

    /// A command echo steps aside from (`hooks/aside.rs`): the buffers it names, with those of
    /// the descriptor sets and buffer views it names resolved now.
    #[allow(clippy::too_many_arguments)]
    pub fn on_aside(
        &self,
        cmd: Option<u64>,
        command: &str,
        everything: bool,
        buffers: &[u64],
        views: &[u64],
        memory: &[u64],
        sets: &[u64],
    ) {
        if !self.on() {
            return;
        }
        let mut buffers = buffers.to_vec();
        for v in views {
            if let Some(r) = self.views.get(v) {
                buffers.push(r.0);
            }
        }
        for s in sets {
            if let Some(c) = self.sets.get(s) {
                buffers.extend(c.values().map(|d| d.buffer));
            }
        }
        buffers.sort_unstable();
        buffers.dedup();
        self.rec(Event::Aside {
            command: command.into(),
            cmd,
            buffers,
            memory: memory.to_vec(),
            everything,
        });
    }

    /// After a successful image bind: `size` bytes of `memory` at `offset`.
    pub fn on_bind_image(&self, image: u64, memory: u64, offset: u64, size: u64) {
        if self.on() {
            self.rec(Event::BindImage {
                image,
                memory,
                offset,
                size,
            });
        }
    }

    pub fn on_device_address(&self, buffer: u64) {
        if self.on() {
            self.rec(Event::BufferAddress { buffer });
        }
    }

    // --------------------------------------------------------------------- command buffers

    pub fn on_begin(&self, cmd: u64, one_time: bool) {
        self.cmds.insert(cmd, CmdBinds::default());
        self.late.forget(cmd);
        if self.on() {
            self.rec(Event::CmdBegin { cmd, one_time });
        }
    }

    pub fn on_end(&self, cmd: u64) {
        if self.on() {
            self.rec(Event::CmdEnd { cmd });
        }
    }

    pub fn on_reset(&self, cmds: &[u64]) {
        if let Some(g) = &self.gpu {
            g.on_reset(cmds);
        }
        for c in cmds {
            self.cmds.remove(c);
            self.late.forget(*c);
            if self.on() {
                self.rec(Event::CmdReset { cmd: *c });
            }
        }
    }

    pub fn on_free(&self, cmds: &[u64]) {
        if let Some(g) = &self.gpu {
            g.on_reset(cmds);
        }
        for c in cmds {
            self.cmds.remove(c);
            self.late.forget(*c);
            if self.on() {
                self.rec(Event::CmdFree { cmd: *c });
            }
        }
    }

    /// Whether `buffer` is bound to memory that is mapped now.
    fn mapped(dev: &Device, buffer: u64) -> bool {
        let Some(mem) = dev.state.buffers.get(&buffer).and_then(|b| b.bound) else {
            return false;
        };
        dev.state
            .memory
            .get(&mem.0)
            .is_some_and(|m| m.mapped.is_some())
    }

    /// `vkCmdCopyBuffer`/`vkCmdCopyBuffer2`: record, and note candidate staging buffers.
    /// Returns the record's sequence number (0: not recorded).
    pub fn on_copy(
        &self,
        dev: &Device,
        cmd: u64,
        src: u64,
        dst: u64,
        regions: Vec<CopyRegion>,
    ) -> u64 {
        if self.validate && self.guard_ok.load(Ordering::Relaxed) {
            if self.sample_every > 1 {
                self.copied.insert(src);
                self.copied.insert(dst);
            }
            let (ms, md) = (Self::mapped(dev, src), Self::mapped(dev, dst));
            if ms {
                let mut e = self.uploads.entry(src).or_default();
                if !e.contains(&dst) {
                    e.push(dst);
                }
            }
            let mut w = self.writers.entry(dst).or_default();
            if !w.contains(&src) {
                w.push(src);
            }
            drop(w);
            if ms != md {
                let h = if ms { src } else { dst };
                let big = dev
                    .state
                    .buffers
                    .get(&h)
                    .is_some_and(|b| b.size >= self.min_bytes);
                if big && !self.candidates.contains(&h) && self.candidates.insert(h) {
                    owners().insert(h, self.index);
                    self.candidates_total.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if self.on() {
            return self.rec(Event::CmdCopyBuffer {
                cmd,
                src,
                dst,
                regions,
            });
        }
        0
    }

    /// Any other command that touches buffers directly.
    pub fn on_use(&self, cmd: u64, command: &str, uses: Vec<BufferUse>) {
        if self.on() && !uses.is_empty() {
            self.rec(Event::CmdUse {
                cmd,
                command: command.into(),
                uses,
                late: None,
            });
        }
    }

    /// `vkCmdExecuteCommands`: the secondaries' recorded uses run here when `cmd` is submitted.
    pub fn on_execute(&self, cmd: u64, secondaries: Vec<u64>) {
        if let Some(g) = &self.gpu {
            g.on_execute(cmd, &secondaries);
        }
        self.late.executes(cmd, &secondaries);
        if self.on() && !secondaries.is_empty() {
            self.rec(Event::CmdExecute { cmd, secondaries });
        }
    }

    pub fn on_barrier(&self, cmd: u64) {
        if self.on() {
            self.rec(Event::CmdBarrier { cmd });
        }
    }

    // ------------------------------------------------------------------ queues and waits

    /// Before `vkQueueSubmit*` goes down: the late descriptor uses of `cmds` resolved now
    /// (`descriptors.rs`), then close the host window (drain), open the GPU window (arm).
    /// Returns the sequence number (and host time) the submission is recorded at.
    pub fn before_submit(&self, dev: &Device, cmds: impl Iterator<Item = u64>) -> sink::Stamp {
        self.late_at_submit(cmds);
        // The submission's number first: the window it opens (and its `Window` record) follows it.
        let seq = sink::stamp();
        self.window(dev);
        seq
    }

    /// After a successful submission.
    pub fn on_submit(&self, seq: sink::Stamp, queue: u64, batches: Vec<SubmitBatch>, fence: u64) {
        if self.on() {
            self.sink.record_at(
                seq,
                self.index,
                Event::QueueSubmit {
                    queue,
                    batches,
                    fence: (fence != 0).then_some(fence),
                },
            );
        }
    }

    /// A host completion observation (`event`), then a new window.
    pub fn observed(&self, dev: &Device, event: Event) {
        self.observed_after(dev, event, None);
    }

    /// A host completion observation made by a wait that took `waited` nanoseconds (`None`:
    /// not a wait), then a new window.
    pub fn observed_after(&self, dev: &Device, event: Event, waited: Option<u64>) {
        // The submissions it shows complete have their GPU times read (after its record).
        let seen = self
            .gpu
            .as_ref()
            .filter(|g| g.watching())
            .map(|_| event.clone());
        if self.on() {
            match waited {
                Some(d) => {
                    self.sink.record_timed(self.index, event, d);
                }
                None => {
                    self.rec(event);
                }
            }
        }
        if let (Some(g), Some(e)) = (&self.gpu, &seen) {
            g.observed(e);
        }
        self.window(dev);
    }

    /// A host event that is no completion observation (fence reset).
    pub fn observed_no_window(&self, event: Event) {
        if self.on() {
            self.rec(event);
        }
    }

    /// `vkWaitForFences` returned success after `waited` ns: which fences the host now knows
    /// are signaled.
    ///
    /// # Safety
    /// `fences` must hold `count` fences.
    pub unsafe fn on_fences_waited(
        &self,
        dev: &Device,
        count: u32,
        fences: *const vk::Fence,
        wait_all: bool,
        waited: u64,
    ) {
        if count == 0 || fences.is_null() {
            return;
        }
        let all = std::slice::from_raw_parts(fences, count as usize);
        let signaled: Vec<u64> = if wait_all || count == 1 {
            all.iter().map(|f| raw(*f)).collect()
        } else {
            all.iter()
                .filter(|f| (dev.fp.get_fence_status)(dev.handle, **f) == vk::Result::SUCCESS)
                .map(|f| raw(*f))
                .collect()
        };
        self.observed_after(dev, Event::FenceSignaled { fences: signaled }, Some(waited));
    }

    /// `vkWaitSemaphores` returned success.
    ///
    /// # Safety
    /// `info` must be valid.
    pub unsafe fn on_semaphores_waited(
        &self,
        dev: &Device,
        info: &vk::SemaphoreWaitInfo<'_>,
        waited: u64,
    ) {
        let n = info.semaphore_count as usize;
        if n == 0 || info.p_semaphores.is_null() || info.p_values.is_null() {
            return;
        }
        let sems = std::slice::from_raw_parts(info.p_semaphores, n);
        let vals = std::slice::from_raw_parts(info.p_values, n);
        let any = info.flags.contains(vk::SemaphoreWaitFlags::ANY) && n > 1;
        let mut reached = Vec::new();
        for (s, v) in sems.iter().zip(vals) {
            if !any {
                reached.push((raw(*s), *v));
            } else if let Some(get) = self.counter_value {
                let mut now = 0u64;
                if get(dev.handle, *s, &mut now) == vk::Result::SUCCESS && now >= *v {
                    reached.push((raw(*s), now));
                }
            }
        }
        self.observed_after(
            dev,
            Event::SemaphoreReached {
                semaphores: reached,
            },
            Some(waited),
        );
    }

    pub fn on_host_signal(&self, semaphore: u64, value: u64) {
        if self.on() {
            self.rec(Event::SemaphoreSignal { semaphore, value });
        }
    }

    // ----------------------------------------------------------------- host-access guard

    /// Close the current window: each access the guard caught becomes a `HostAccess` event at
    /// the sequence number taken at the fault; then re-arm every candidate that is mapped.
    fn window(&self, dev: &Device) {
        if !self.validate || !self.guard_ok.load(Ordering::Relaxed) {
            return;
        }
        self.drain();
        let sampling = self.sample_every > 1;
        if sampling {
            // Buffers watched from this window on: their `Watch` precedes the window's record.
            // Only here does a candidate get its counters (with its `Watch`, once, whichever
            // thread wins); one that became a candidate since is armed from the next window.
            for b in self.candidates.iter() {
                if self.windows.contains_key(&*b)
                    || !self.copied.contains(&*b)
                    || self.range_of(dev, *b).is_none()
                {
                    continue;
                }
                let mut new = false;
                self.windows.entry(*b).or_insert_with(|| {
                    new = true;
                    (0, 0)
                });
                if new && self.on() {
                    self.rec(Event::Watch { buffer: *b });
                }
            }
        }
        // The window's number, taken before any arm: a fault in it sorts after its record (its
        // time only when the record is written: one clock read per record).
        let mark = if sampling {
            sink::stamp()
        } else {
            sink::Stamp {
                seq: sink::next_seq(),
                t: 0,
            }
        };
        let this_window = self.window_count.fetch_add(1, Ordering::Relaxed);
        let mut unobserved = Vec::new();
        let all: Vec<u64> = self.candidates.iter().map(|b| *b).collect();
        for b in all {
            let Some((ptr, len)) = self.range_of(dev, b) else {
                if self.import_missing(dev, b) {
                    self.unvalidated(b, "its allocation could not be double-mapped");
                }
                continue;
            };
            if sampling {
                let seen = {
                    // No `Watch` yet (its loop has not begun): watched in every window.
                    let Some(mut e) = self.windows.get_mut(&b) else {
                        if !self.arm_one(dev, b) {
                            return;
                        }
                        continue;
                    };
                    if e.0 > 0 && e.1 < self.full_windows && guard::was_touched(b) {
                        e.1 += 1; // the window now closing, watched, saw the host touch it
                    }
                    e.0 += 1;
                    e.1
                };
                if !watched(this_window, seen < self.full_windows, self.sample_every)
                    && !guard::still_armed(b, ptr as *const u8, len)
                {
                    // Left as it is (open, or readable after a read fault): not observed.
                    guard::note_unwatched();
                    unobserved.push(b);
                    continue;
                }
            }
            if !self.arm_one(dev, b) {
                return;
            }
        }
        if sampling {
            self.unwatched_now.clear();
            for b in &unobserved {
                self.unwatched_now.insert(*b);
            }
            if self.on() {
                self.sink
                    .record_at(mark, self.index, Event::Window { unobserved });
            }
        }
    }

    /// Arms candidate `b`'s range in the current mapping (nothing when it is not mapped);
    /// `false` when validation stopped for good.
    fn arm_one(&self, dev: &Device, b: u64) -> bool {
        if self.lost.contains(&b) {
            return true;
        }
        let Some((ptr, len)) = self.range_of(dev, b) else {
            if self.import_missing(dev, b) {
                self.unvalidated(b, "its allocation could not be double-mapped");
            }
            return true;
        };
        let shadow = self.shadow_of(dev, b, ptr, len).map(|p| p as *const u8);
        let exact = self.exact_wanted(b, len);
        let base = if exact { self.armed_base(dev, b) } else { None };
        let armed = guard::arm_exact(b, ptr as *const u8, len, shadow, exact);
        // The window this arm closed gives up what it saw written (at its own range's base).
        self.close_writes(b);
        if let Some(base) = base {
            self.exact_base.insert(b, base);
        }
        if let Err(e) = armed {
            match e {
                GuardError::Replaced => {
                    if log::first_time("guard-replaced") {
                        log::warn!("profile: {e}; host accesses are no longer recorded");
                    }
                    self.stop_guard(&e.to_string());
                    return false;
                }
                other => {
                    if log::first_time(&format!("guard-arm-{other:?}")) {
                        log::warn!("profile: cannot protect a buffer: {other}");
                    }
                    self.unvalidated(b, &format!("protecting it failed: {other}"));
                }
            }
        }
        true
    }

    /// Exact host writes (issue 54) for candidate `b` in the coming window? Where the bytes the
    /// host does not rewrite could differ once shared: `b` is a mapped buffer whose bytes a
    /// recorded copy took into a partner that some other recorded command may write (a
    /// dispatch, draw, fill or update; a copy from another buffer). A candidate no recorded copy
    /// has read yet is exact until its windows saw [`EXACT_UNKNOWN`] times its size written:
    /// programs fill an upload before they record its copy (and other threads' submissions may
    /// cut that fill into many windows), and a setup write next to another member's bytes
    /// carried at a bind needs it. Only where every window is
    /// watched (sampled validation refuses on unwatched windows anyway), not under the user's
    /// vouch `host_writes=whole` (then the analysis needs no exact bytes), and not with
    /// `VK_ECHO_EXACT_WRITES=0` (a diagnostic). A command recorded after the host's write
    /// leaves that write "any part": fail closed, never more than was seen. The cost is bounded
    /// (one fault per store): not once the run's store budget is spent
    /// (`VK_ECHO_EXACT_WRITES_MAX_STORES`, 2,097,152), and a window that would take more than
    /// an eighth of it at the rate of its first stores gives up after them (`guard::too_dear`).
    fn exact_wanted(&self, b: u64, len: usize) -> bool {
        static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if self.sample_every > 1
            || self.whole_vouched
            || *OFF.get_or_init(|| {
                let env = crate::settings::env_lookup(crate::settings::secure_execution());
                // The store budget of one window (0: none); a value that is not a number keeps
                // the default.
                if let Some(n) = env("VK_ECHO_EXACT_WRITES_MAX_STORES")
                    .and_then(|v| v.trim().parse::<u64>().ok())
                {
                    guard::MAX_STORES.store(n, std::sync::atomic::Ordering::Relaxed);
                }
                env("VK_ECHO_EXACT_WRITES").is_some_and(|v| v == "0")
            })
        {
            return false;
        }
        // The run's store budget spent: not exact, so what exact writes add to a profiled run
        // stays bounded (issue 54). A window whose stores are too small for its buffer gives
        // up by itself after a few of them (`guard::too_dear`), whatever the buffer's size.
        if guard::exact_budget_spent() {
            return false;
        }
        let Some(partners) = self.uploads.get(&b).map(|p| p.clone()) else {
            let seen = self.unknown_writes.get(&b).map_or(0, |n| *n);
            return seen < EXACT_UNKNOWN.saturating_mul(len as u64);
        };
        partners.iter().any(|d| {
            self.writers
                .get(d)
                .is_some_and(|w| w.iter().any(|x| *x != b))
        })
    }

    /// Exact host writes (issue 54): the buffers a recorded command (other than a copy, which
    /// `on_copy` notes with its source) may write — every record that names buffer uses passes
    /// here, descriptor uses resolved at recording or at submission, and what echo steps aside
    /// from.
    fn note_writers(&self, e: &Event) {
        let note = |b: u64| {
            let mut w = self.writers.entry(b).or_default();
            if !w.contains(&u64::MAX) {
                w.push(u64::MAX);
            }
        };
        match e {
            Event::CmdUse { uses, .. } | Event::CmdLateUse { uses, .. } => {
                for u in uses.iter().filter(|u| u.access.writes()) {
                    note(u.buffer);
                }
            }
            Event::Aside { buffers, .. } => {
                for b in buffers {
                    note(*b);
                }
            }
            _ => {}
        }
    }

    /// The offset in buffer `b` where its armed range (`range_of`) starts.
    fn armed_base(&self, dev: &Device, b: u64) -> Option<u64> {
        let st = dev.state.buffers.get(&b)?;
        let (mem, off) = st.bound?;
        drop(st);
        let m = dev.state.memory.get(&mem)?;
        let map = m.mapped?;
        Some(off.max(map.offset) - off)
    }

    /// Record what the guard saw the host write into candidate `b` in the window its last arm
    /// or disarm closed (else, at exit, in the window still open), when it was armed exact and
    /// written: a `HostWrites` record naming the window's write record. Call after every arm
    /// and disarm of a candidate.
    fn close_writes(&self, b: u64) {
        let Some((write, seen)) = guard::take_writes_at(b) else {
            return;
        };
        if !self.uploads.contains_key(&b) {
            let n = match &seen {
                Ok(r) => r.iter().map(|(f, t)| (t - f) as u64).sum(),
                Err(_) => u64::MAX / 4,
            };
            let mut e = self.unknown_writes.entry(b).or_insert(0);
            *e = e.saturating_add(n);
        }
        if !self.on() || write == 0 {
            return;
        }
        let base = self.exact_base.get(&b).map(|x| *x);
        let (ranges, any) = match (seen, base) {
            (Ok(r), Some(base)) => (
                r.into_iter()
                    .map(|(f, t)| [base + f as u64, base + t as u64])
                    .collect(),
                None,
            ),
            (Ok(_), None) => (
                vec![],
                Some("where the armed range lies in the buffer is not known".to_string()),
            ),
            (Err(why), _) => (vec![], Some(why.text().to_string())),
        };
        let dev = owners().get(&b).map_or(self.index, |d| *d);
        self.sink.record(
            dev,
            Event::HostWrites {
                buffer: b,
                write,
                ranges,
                any,
            },
        );
    }

    fn drain(&self) {
        let sink = self.sink;
        let on = self.on();
        let own = self.index;
        let mut lost = Vec::new();
        guard::drain(|id, seen, seq, thread| match seen {
            guard::Seen::Access(access) => {
                if on {
                    let dev = owners().get(&id).map_or(own, |d| *d);
                    sink.record_for(seq, thread, dev, Event::HostAccess { buffer: id, access });
                }
            }
            guard::Seen::Lost => lost.push(id),
        });
        for id in lost {
            // Whichever profiler drains files it under the buffer's device; the set that stops
            // re-arming is this device's (a buffer of another device is refused there by the
            // record, and that device's own arms stop at its next failed fault).
            if self.lost.insert(id) {
                let pc = guard::last_lost_pc();
                let level = if log::first_time("guard-lost") {
                    echo_analyzer::settings::LogLevel::Warn
                } else {
                    echo_analyzer::settings::LogLevel::Debug
                };
                log::write(
                    level,
                    format_args!("profile: a fault at pc {pc:#x}, in code that is not the program's (a Vulkan driver's module or JIT-compiled code), touched buffer {id:#x}'s protected memory; its range stays open and its pairs are refused for missing evidence (the program runs on)")
                );
                if on {
                    let dev = owners().get(&id).map_or(own, |d| *d);
                    sink.record(
                        dev,
                        Event::Unvalidated {
                            buffer: id,
                            reason: format!(
                                "a fault echo cannot explain (code that is not the program's: a Vulkan driver's module or JIT-compiled code, pc {pc:#x}) opened its memory; its host accesses are not seen from then on"
                            ),
                        },
                    );
                }
            }
        }
    }

    /// Validation stopped for the rest of the run: the trace says so, and the analyzer refuses
    /// this device's candidates (fail closed).
    fn stop_guard(&self, why: &str) {
        self.guard_ok.store(false, Ordering::Relaxed);
        for b in self.candidates.iter() {
            guard::disarm(*b);
            self.close_writes(*b);
        }
        if self.on() {
            self.rec(Event::ValidationLost {
                reason: why.to_string(),
            });
        }
    }

    /// Candidate `b` is mapped, but its allocation has no double mapping (the import failed):
    /// its host accesses cannot be seen.
    fn import_missing(&self, dev: &Device, b: u64) -> bool {
        if !self.double_map {
            return false;
        }
        let Some(mem) = dev.state.buffers.get(&b).and_then(|s| s.bound.map(|x| x.0)) else {
            return false;
        };
        !self.doubles.contains_key(&mem)
            && dev
                .state
                .memory
                .get(&mem)
                .is_some_and(|m| m.mapped.is_some())
    }

    /// Records once that candidate `b`'s host accesses are not seen (the analyzer refuses its
    /// pairs: missing evidence).
    fn unvalidated(&self, b: u64, why: &str) {
        if self.on() && self.unvalidated.insert(b) {
            self.rec(Event::Unvalidated {
                buffer: b,
                reason: why.to_string(),
            });
        }
    }

    /// The host address range of buffer `b` that may be armed: its bytes inside the current
    /// mapping, in the application's view of a double mapping, or in the driver's mapping
    /// where there is no double mapping and the device has no import extension (a real GPU
    /// does not use the CPU page tables). `None`: nothing to arm.
    /// Where candidate `b`'s bytes `[ptr, ptr + len)` (the application's view) are in the
    /// driver's view of their double mapping, if they have one.
    fn shadow_of(&self, dev: &Device, b: u64, ptr: usize, len: usize) -> Option<usize> {
        let mem = dev.state.buffers.get(&b)?.bound?.0;
        let m = self.doubles.get(&mem)?;
        let off = ptr.checked_sub(m.app_ptr() as usize)?;
        (off.checked_add(len)? <= m.len()).then(|| m.driver_ptr() as usize + off)
    }

    fn range_of(&self, dev: &Device, b: u64) -> Option<(usize, usize)> {
        let st = dev.state.buffers.get(&b)?;
        let (mem, off) = st.bound?;
        let size = st.size;
        drop(st);
        if self.double_map && !self.doubles.contains_key(&mem) {
            // Import failed for this allocation: the driver's mapping is all there is, and on
            // a CPU driver protecting it would fault the driver's own threads.
            return None;
        }
        let m = dev.state.memory.get(&mem)?;
        let map = m.mapped?;
        let lo = off.max(map.offset);
        let hi = (off + size).min(map.offset.saturating_add(map.size));
        if hi <= lo {
            return None;
        }
        Some((map.ptr + (lo - map.offset) as usize, (hi - lo) as usize))
    }

    fn disarm_memory(&self, dev: &Device, memory: u64) {
        if !self.validate {
            return;
        }
        for b in self.candidates.iter() {
            let bound = dev.state.buffers.get(&*b).and_then(|s| s.bound);
            if bound.is_some_and(|(m, _)| m == memory) {
                guard::disarm(*b);
                self.close_writes(*b);
            }
        }
    }

    /// `vkDestroyDevice`: last window, disarm, log the guard's counters; the last profiler of
    /// the process finishes the trace.
    pub fn on_destroy_device(&self, dev: &Device) {
        if self.validate {
            self.drain();
            for b in self.candidates.iter() {
                guard::disarm(*b);
                self.close_writes(*b);
            }
            let s = guard::stats();
            log::info!(
                "profile: host-access validation: {} watched buffers, {} faults ({} collateral, {} accesses on shared pages emulated, {} stepped, {} buffers reached by an access that began outside them, {} buffers taken as touched through a shared page, {} chained to the application, {} dropped, {} unexplained (driver or JIT code: ranges left open, buffers refused), {} handler panics contained); read/write from the fault context: {}, from the decoded instruction: {}, unknown (taken as writes): {}; {} mprotect calls ({:.1} ms), {} arms parked ({} moved back; moves {:.1} ms), {} re-arms skipped, {} windows unwatched (sampling), {} stores recorded byte for byte (exact host writes)",
                self.candidates_total.load(Ordering::Relaxed),
                s.faults,
                s.collateral,
                s.emulated,
                s.stepped,
                s.reached,
                s.shared_page,
                s.chained,
                s.dropped,
                s.lost,
                s.panics,
                s.by_context,
                s.by_instruction,
                s.unclassified,
                s.mprotects,
                s.mprotect_ns as f64 / 1e6,
                s.parked,
                s.unparked,
                s.move_ns as f64 / 1e6,
                s.rearms_skipped,
                s.unwatched,
                s.exact_stores
            );
        }
        if let Some(g) = &self.gpu {
            g.on_destroy_device();
        }
        if self.on() {
            self.rec(Event::DeviceDestroy {
                device: self.device,
            });
        }
        for b in self.candidates.iter() {
            owners().remove(&*b);
        }
        let _ = dev;
        // The trace stays open for the process's later devices; it is finished at exit
        // (`crate::coordinator`).
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }

    /// The process is exiting with the device still alive (many programs never destroy it):
    /// the accesses of the last window go into the trace. No Vulkan call, no disarm (the
    /// application's other threads may still run; faults stay ours).
    pub fn on_exit(&self) {
        if self.validate && self.guard_ok.load(Ordering::Relaxed) {
            self.drain();
            for b in self.candidates.iter() {
                self.close_writes(*b);
            }
        }
    }
}

/// Exact host writes (issue 54): a candidate no recorded copy has read yet is exact until its
/// windows saw this many times its size written (`Profiler::exact_wanted`).
const EXACT_UNKNOWN: u64 = 2;

/// Sampled validation: is a candidate protected in its window `n` (0-based)? Every window
/// while `full` (its first `validate_full_windows` windows with a host access are not seen yet);
/// after that one window in `every` on average, chosen by a fixed hash of `n` (splitmix64) — not
/// a fixed stride, which a program whose windows repeat with a period that shares a factor with
/// it would see only some phases of: so every phase of any period is watched again (tested for
/// periods up to 16), and the trace is the same for the same run.
pub fn watched(n: u64, full: bool, every: u64) -> bool {
    if every <= 1 || full {
        return true;
    }
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z % every == 0 // every > 1 here; `is_multiple_of` would need Rust 1.87
}

/// Exported/imported memory or capture-replay addresses: never aliasable.
unsafe fn is_external(info: &vk::MemoryAllocateInfo<'_>, alloc_flags: u32) -> bool {
    if alloc_flags & vk::MemoryAllocateFlags::DEVICE_ADDRESS_CAPTURE_REPLAY.as_raw() != 0 {
        return true;
    }
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        match (*p).s_type {
            vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO
            | vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO
            | vk::StructureType::MEMORY_PRIORITY_ALLOCATE_INFO_EXT => {}
            _ => return true,
        }
        p = (*p).p_next;
    }
    false
}

/// Whether the application's allocate info imports its own host pointer
/// (`VkImportMemoryHostPointerInfoEXT`).
///
/// # Safety
/// `info` and its `pNext` chain must be valid.
unsafe fn is_host_import(info: &vk::MemoryAllocateInfo<'_>) -> bool {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::IMPORT_MEMORY_HOST_POINTER_INFO_EXT {
            return true;
        }
        p = (*p).p_next;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::watched;

    #[test]
    fn sampling_watches_the_first_windows_then_one_in_n() {
        assert!((0..100).all(|n| watched(n, true, 8)), "full: every window");
        let later = (0..8000).filter(|&n| watched(n, false, 8)).count();
        assert!(
            (900..1100).contains(&later),
            "about one window in eight: {later} of 8000"
        );
        assert!(
            (0..100).all(|n| watched(n, false, 1)),
            "1 watches every window"
        );
        assert!((0..100).all(|n| watched(n, false, 0)), "0 is taken as 1");
    }

    /// Whatever the period of the program's windows, every phase of it is watched again: a
    /// change in any phase that persists is seen.
    #[test]
    fn sampling_rotates_through_every_phase_of_any_period() {
        for every in 2..=16u64 {
            for period in 1..=16u64 {
                let mut seen = vec![false; period as usize];
                for n in 8..8 + 32 * every * period {
                    if watched(n, false, every) {
                        seen[(n % period) as usize] = true;
                    }
                }
                assert!(
                    seen.iter().all(|s| *s),
                    "every {every}, period {period}: phases {seen:?}"
                );
            }
        }
    }
}
