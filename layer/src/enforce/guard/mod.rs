//! Guarded enforce (the `guard` setting; issue 16): copy-on-write split of host writes made while
//! the GPU may still use an aliased group.
//!
//! An aliased (`StagingIntoDevice`) group shares one range of the device buffer's allocation.
//! In the original program the staging buffer was separate, so a host write to it while GPU work
//! that reads the device buffer was pending did not reach the GPU. To keep that semantics:
//!
//! - **Double mapping.** The allocation the group lives in is backed by a memfd mapped twice
//!   ([`DoubleMap`], as in profile mode): view A is imported into Vulkan
//!   (`VkImportMemoryHostPointerInfoEXT`; lavapipe's CPU "GPU" threads use it), view B is what
//!   `vkMapMemory` hands the application (also for the redirected staging maps).
//! - **Windows, per allocation.** Command buffers record which guarded allocations their
//!   commands use (copies, fills, vertex/index/indirect buffers, bound descriptor sets; what echo
//!   cannot follow counts as all). From a `vkQueueSubmit` that uses an allocation until the host
//!   observes every pending submission that uses it complete (fence wait/status success, fence
//!   reset — legal only once its submission completed —, queue or device wait idle), its view B
//!   is `PROT_NONE`.
//! - **Reads** (issue 22). A host read inside a window cannot be made right after the fact: in
//!   the original program the staging buffer held its own (earlier) bytes, aliased it shows the
//!   GPU's. The handler counts it, opens the view read-only for the rest of the window (a write
//!   still faults and splits), and normal code warns once, in plain words, that this run's bytes
//!   may differ, counts it in the statistics (`guard_reads`) and marks the plan untrusted so
//!   auto mode profiles again. A fault whose direction the context does not give counts as a
//!   read.
//! - **Split.** A host write inside a window faults; the SIGSEGV handler re-maps the whole view B
//!   `MAP_FIXED | MAP_PRIVATE` over the memfd: the write (and later ones) go to private
//!   copy-on-write pages, view A keeps the bytes the GPU reads. Pages the host does not write
//!   keep showing the shared bytes. A view already split is only made writable again.
//! - **Merge** (normal code, [`Guard::before_submit`]): at the next submission whose command
//!   buffers hold an elided copy of that allocation, after the GPU work submitted earlier has
//!   completed (bounded wait; on timeout: warning, `guard_timeouts`, and the merge proceeds), the
//!   elided staging → device ranges are copied from view B into view A (the copy the program made
//!   there), then view B is mapped `MAP_SHARED` again. For a device → staging copy the GPU's bytes
//!   win: the view is only mapped shared again (the copy would have overwritten the host's bytes).
//!   Host writes to a split view outside the merged ranges are dropped at that moment (the group
//!   shares one range: the plan already accepted that its members do not hold different data).
//!
//! The handler is async-signal-safe: atomics, the fixed slot table, `mmap`/`mprotect` and
//! `sched_yield`; no allocation, no lock. A fault outside every slot goes to the handler
//! installed before this one (same rules as `profile/watch`). Slot transitions are CAS'd
//! through `BUSY`, so a handler and normal code never re-map a view at once.

mod guard_mode;
mod views;

use crate::hostmem::memfd::DoubleMap;
use crate::log;
use crate::records::Device;
use ash::vk;
use ash::vk::Handle;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
pub use views::{install, SLOTS};
use views::{is_split, merge, protect, register, release, unprotect, ANY_READ, TABLE};

/// How long echo waits for earlier GPU work before a merge.
const MERGE_WAIT_NS: u64 = 2_000_000_000;

// ---------------------------------------------------------------- per device

/// A guarded allocation.
struct GuardMem {
    slot: usize,
    map: DoubleMap,
    /// A group's staging buffer lives in it (a redirected bind): only then is it protected.
    aliased: bool,
}

/// An elided copy recorded in a command buffer: (memory, offset, size, staging → device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Elided {
    pub memory: u64,
    pub offset: u64,
    pub size: u64,
    pub upload: bool,
}

/// What a command buffer's commands use of guarded memory (since its last begin).
#[derive(Default)]
struct CbUse {
    /// Something echo cannot name: every guarded allocation.
    all: bool,
    mems: Vec<u64>,
    copies: Vec<Elided>,
}

#[derive(Default)]
struct State {
    mems: HashMap<u64, GuardMem>,
    /// Submissions not yet observed complete, per queue: (fence or 0, guarded allocations used).
    pending: HashMap<u64, Vec<(u64, Vec<u64>)>>,
    /// Guarded allocations in a window (protected) now.
    protected: HashSet<u64>,
    cbs: HashMap<u64, CbUse>,
    /// Buffers of each descriptor set (`None`: written in a way echo does not follow).
    sets: HashMap<u64, Option<Vec<u64>>>,
    /// Echo's fence for the bounded wait before a merge.
    fence: Option<u64>,
}

/// A double mapping waiting for its allocation (`vkAllocateMemory` in flight).
pub struct Import {
    alloc: Box<crate::hostmem::import::ImportInfo>,
    map: Option<DoubleMap>,
}

impl Import {
    pub fn info(&self) -> *const vk::MemoryAllocateInfo<'static> {
        self.alloc.info()
    }
}

/// Guarded enforce for one device.
pub struct Guard {
    host_ptr_props: vk::PFN_vkGetMemoryHostPointerPropertiesEXT,
    align: u64,
    st: Mutex<State>,
    /// Some allocation is guarded (else submits and waits skip the lock).
    any: AtomicBool,
    pub windows: AtomicU64,
    pub merges: AtomicU64,
    pub timeouts: AtomicU64,
    /// Splits and failed re-maps of slots already released.
    splits_done: AtomicU64,
    failed_done: AtomicU64,
    /// Host reads inside a window in slots already released, and how many were reported.
    reads_done: AtomicU64,
    reads_reported: AtomicU64,
    /// Allocations that stopped being guarded ([`Guard::foreign_bind`]).
    pub unguarded: AtomicU64,
    /// Written at the first timeout ([`untrusted_marker`] of the plan): auto mode profiles again.
    marker: std::path::PathBuf,
}

/// The file next to a plan that says a guarded run could not keep the program's semantics
/// (a bounded wait timed out): auto mode profiles again instead of enforcing it, and removes the
/// file once the new plan is written.
pub fn untrusted_marker(plan: &std::path::Path) -> std::path::PathBuf {
    let mut s = plan.as_os_str().to_owned();
    s.push(".untrusted");
    std::path::PathBuf::from(s)
}

/// Why guarded enforce cannot run on a device (`Err`), else the guard.
pub fn start(dev: &Device, plan: &std::path::Path) -> Result<Guard, String> {
    let ext = crate::hostmem::import::EXT_MEMORY_HOST;
    if !dev.extensions.contains(ext.to_str().unwrap_or_default()) {
        return Err(format!(
            "the device does not offer {} (needed to double-map guarded memory)",
            ext.to_string_lossy()
        ));
    }
    let props = dev
        .next_proc(c"vkGetMemoryHostPointerPropertiesEXT")
        .ok_or("vkGetMemoryHostPointerPropertiesEXT is missing")?;
    let align = crate::hostmem::import::import_alignment(dev);
    if !align.is_power_of_two() {
        return Err(format!(
            "minImportedHostPointerAlignment {align} is not a power of two"
        ));
    }
    install()?;
    Ok(Guard {
        // SAFETY: resolved by that name.
        host_ptr_props: unsafe { crate::records::typed(props) },
        align,
        st: Mutex::new(State::default()),
        any: AtomicBool::new(false),
        windows: AtomicU64::new(0),
        merges: AtomicU64::new(0),
        timeouts: AtomicU64::new(0),
        splits_done: AtomicU64::new(0),
        failed_done: AtomicU64::new(0),
        reads_done: AtomicU64::new(0),
        reads_reported: AtomicU64::new(0),
        unguarded: AtomicU64::new(0),
        marker: untrusted_marker(plan),
    })
}

impl Guard {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Some allocation is guarded: the hooks have work to do.
    #[inline]
    pub fn active(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// (splits, failed re-maps) so far.
    pub fn splits(&self) -> (u64, u64) {
        let st = self.lock();
        let (mut s, mut f) = (
            self.splits_done.load(Ordering::Relaxed),
            self.failed_done.load(Ordering::Relaxed),
        );
        for m in st.mems.values() {
            s += TABLE[m.slot].splits.load(Ordering::Relaxed);
            f += TABLE[m.slot].failed.load(Ordering::Relaxed);
        }
        (s, f)
    }

    /// Host reads of guarded memory inside a window so far.
    pub fn reads(&self) -> u64 {
        let st = self.lock();
        let live: u64 = st
            .mems
            .values()
            .filter(|m| m.slot != usize::MAX)
            .map(|m| TABLE[m.slot].reads.load(Ordering::Relaxed))
            .sum();
        self.reads_done.load(Ordering::Relaxed) + live
    }

    /// Normal code after the handler may have counted reads: the first time there are any, warn
    /// in plain words and mark the plan untrusted (auto mode profiles again).
    pub fn note_reads(&self) {
        if !ANY_READ.load(Ordering::Relaxed) {
            return;
        }
        let n = self.reads();
        if n == 0 || self.reads_reported.swap(n, Ordering::AcqRel) != 0 {
            return;
        }
        log::warn!(
            "guard: the program read memory echo shares between a staging buffer and its device buffer while the GPU may still have been using it; echo cannot make such a read right after the fact, so the bytes this run read may differ from what the program reads without echo (counted as guard_reads)"
        );
        self.mark_untrusted(
            "a guarded run saw the host read shared memory while the GPU may still have used it",
        );
    }

    // ------------------------------------------------------------ allocation

    /// Before `vkAllocateMemory` of an allocation a guarded group will live in: a double mapping
    /// to import instead (`None`: allocate as asked; the group is then refused at its bind).
    ///
    /// # Safety
    /// `info` is a valid allocate info.
    pub unsafe fn prepare_import(
        &self,
        dev: &Device,
        info: &vk::MemoryAllocateInfo<'_>,
    ) -> Option<Box<Import>> {
        let chain = crate::hostmem::import::importable_chain(info)?;
        if chain.priority.is_some() {
            return None; // not carried into guarded imports
        }
        let map = DoubleMap::new(info.allocation_size as usize, self.align as usize)
            .map_err(|e| log::warn!("guard: no double mapping ({e})"))
            .ok()?;
        let ptr = map.driver_ptr() as *const c_void;
        if let Err((r, _)) = crate::hostmem::import::can_import(
            self.host_ptr_props,
            dev.handle,
            ptr,
            info.memory_type_index,
        ) {
            log::warn!(
                "guard: memory type {} cannot import host pointers ({r:?}); its group is not guarded",
                info.memory_type_index
            );
            return None;
        }
        let alloc = crate::hostmem::import::ImportInfo::new(
            chain,
            map.driver_ptr() as *mut c_void,
            map.len() as u64,
            info.memory_type_index,
        );
        Some(Box::new(Import {
            alloc,
            map: Some(map),
        }))
    }

    /// After the import succeeded: the allocation is guarded; its view B (the application's
    /// mapping from now on), or `None` when no slot is left (the mapping is kept with the
    /// allocation, unguarded: its groups are refused at their bind).
    #[allow(clippy::boxed_local)] // the hook holds it boxed (its pointers must not move)
    pub fn imported(&self, memory: u64, mut import: Box<Import>) -> Option<usize> {
        let map = import.map.take()?;
        let b = map.app_ptr() as usize;
        let Some(slot) = register(b, map.len(), map.fd()) else {
            log::warn!("guard: more than {SLOTS} guarded allocations; this one is not guarded");
            // Keep the mapping alive with the allocation: it is the driver's memory.
            self.lock().mems.insert(
                memory,
                GuardMem {
                    slot: usize::MAX,
                    map,
                    aliased: false,
                },
            );
            return None;
        };
        self.lock().mems.insert(
            memory,
            GuardMem {
                slot,
                map,
                aliased: false,
            },
        );
        self.any.store(true, Ordering::Release);
        Some(b)
    }

    /// Whether `memory` is guarded (double-mapped with a slot).
    pub fn guarded(&self, memory: u64) -> bool {
        self.lock()
            .mems
            .get(&memory)
            .is_some_and(|m| m.slot != usize::MAX)
    }

    /// A buffer the plan does not name is bound into guarded memory: host writes to it in a
    /// window would be split away from the GPU, so the allocation stops being guarded (a split
    /// view is merged whole first: only the pages the host wrote are private). Reported as an
    /// error in the statistics: its groups run unguarded from now on.
    pub fn foreign_bind(&self, memory: u64, buffer: u64) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        let Some(m) = st.mems.get_mut(&memory) else {
            return;
        };
        if m.slot == usize::MAX {
            return;
        }
        let slot = m.slot;
        if is_split(slot) {
            let len = m.map.len() as u64;
            merge(slot, m.map.driver_ptr(), &[(0, len)]);
        }
        let (s, f, r) = release(slot);
        m.slot = usize::MAX;
        st.protected.remove(&memory);
        self.splits_done.fetch_add(s, Ordering::Relaxed);
        self.failed_done.fetch_add(f, Ordering::Relaxed);
        self.reads_done.fetch_add(r, Ordering::Relaxed);
        self.unguarded.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "guard: buffer {buffer:#x}, which the plan does not name, is bound into guarded memory {memory:#x}; that allocation is no longer guarded"
        );
    }

    /// Before `vkFreeMemory` goes down: the double mapping to drop once the driver let go.
    pub fn before_free(&self, memory: u64) -> Option<DoubleMapOwned> {
        let mut st = self.lock();
        st.protected.remove(&memory);
        let m = st.mems.remove(&memory)?;
        drop(st);
        if m.slot != usize::MAX {
            let (s, f, r) = release(m.slot);
            self.splits_done.fetch_add(s, Ordering::Relaxed);
            self.failed_done.fetch_add(f, Ordering::Relaxed);
            self.reads_done.fetch_add(r, Ordering::Relaxed);
        }
        Some(DoubleMapOwned(m.map))
    }

    // ------------------------------------------------------------ recording

    /// The guarded allocation `buffer` is bound into, if any (double-mapped, with a slot, and
    /// a group aliased into it).
    fn memory_of(&self, dev: &Device, st: &State, buffer: u64) -> Option<u64> {
        let (m, _) = dev.state.buffers.get(&buffer).and_then(|b| b.bound)?;
        st.mems
            .get(&m)
            .is_some_and(|g| g.slot != usize::MAX && g.aliased)
            .then_some(m)
    }

    /// A group's staging buffer was bound into guarded `memory`: its windows start.
    pub fn aliased(&self, memory: u64) {
        if let Some(m) = self.lock().mems.get_mut(&memory) {
            m.aliased = true;
        }
    }

    /// `vkBeginCommandBuffer`: what the command buffer held is gone.
    pub fn begin(&self, cb: u64) {
        if !self.active() {
            return;
        }
        self.lock().cbs.remove(&cb);
    }

    /// A recorded command of `cb` uses these buffers (copies, fills, vertex/index/indirect
    /// buffers, image copies).
    pub fn use_buffers(&self, dev: &Device, cb: u64, buffers: &[u64]) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        let mems: Vec<u64> = buffers
            .iter()
            .filter_map(|b| self.memory_of(dev, &st, *b))
            .collect();
        if !mems.is_empty() {
            st.cbs.entry(cb).or_default().mems.extend(mems);
        }
    }

    /// `cb` uses memory echo cannot name (a descriptor set echo did not see written, a push
    /// descriptor template, secondary command buffers): every guarded allocation.
    pub fn use_all(&self, cb: u64) {
        if !self.active() {
            return;
        }
        self.lock().cbs.entry(cb).or_default().all = true;
    }

    /// `vkUpdateDescriptorSets`: the buffers each written set holds (copies make the
    /// destination unknown).
    ///
    /// # Safety
    /// The application's valid arguments.
    pub unsafe fn sets_updated(
        &self,
        writes: &[vk::WriteDescriptorSet<'_>],
        copies: &[vk::CopyDescriptorSet<'_>],
    ) {
        let mut st = self.lock();
        for w in writes {
            let set = w.dst_set.as_raw();
            if w.p_buffer_info.is_null() && holds_buffers(w.descriptor_type) {
                st.sets.insert(set, None); // texel buffer views: not followed
                continue;
            }
            let buffers: Vec<u64> = if w.p_buffer_info.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(w.p_buffer_info, w.descriptor_count as usize)
                    .iter()
                    .map(|b| b.buffer.as_raw())
                    .collect()
            };
            match st.sets.entry(set) {
                std::collections::hash_map::Entry::Occupied(mut o) => {
                    if let Some(v) = o.get_mut() {
                        v.extend(buffers);
                    }
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Some(buffers));
                }
            }
        }
        for c in copies {
            st.sets.insert(c.dst_set.as_raw(), None);
        }
    }

    /// A set written some other way (templates): unknown from now on.
    pub fn set_unknown(&self, set: u64) {
        self.lock().sets.insert(set, None);
    }

    /// `vkCmdBindDescriptorSets`: the memory of each bound set's buffers.
    pub fn bind_sets(&self, dev: &Device, cb: u64, sets: &[u64]) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        let mut all = false;
        let mut mems = Vec::new();
        for set in sets {
            match st.sets.get(set) {
                Some(Some(bufs)) => {
                    mems.extend(bufs.iter().filter_map(|b| self.memory_of(dev, &st, *b)))
                }
                _ => all = true,
            }
        }
        let u = st.cbs.entry(cb).or_default();
        u.all |= all;
        u.mems.extend(mems);
    }

    /// `vkCmdExecuteCommands`: the secondaries' uses and elided copies become the primary's.
    pub fn execute(&self, cb: u64, secondaries: &[u64]) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        let mut add = CbUse::default();
        for s in secondaries {
            if let Some(u) = st.cbs.get(s) {
                add.all |= u.all;
                add.mems.extend(&u.mems);
                add.copies.extend(&u.copies);
            }
        }
        let u = st.cbs.entry(cb).or_default();
        u.all |= add.all;
        u.mems.extend(add.mems);
        u.copies.extend(add.copies);
    }

    /// A copy region into guarded memory was elided while recording `cb`.
    pub(super) fn elided(&self, cb: u64, e: Elided) {
        let mut st = self.lock();
        if st
            .mems
            .get(&e.memory)
            .is_none_or(|m| m.slot == usize::MAX || !m.aliased)
        {
            return;
        }
        let u = st.cbs.entry(cb).or_default();
        u.mems.push(e.memory);
        u.copies.push(e);
    }

    // ------------------------------------------------------------ submissions and waits

    /// Before a submission goes down: merge split views this submission's elided copies use
    /// (after the earlier GPU work on them completed), then protect every guarded view the
    /// submission uses. Returns the allocations it uses (for [`Guard::after_submit`]).
    pub fn before_submit(&self, dev: &Device, queue: u64, cbs: &[u64]) -> Vec<u64> {
        if !self.active() {
            return Vec::new();
        }
        self.note_reads();
        let mut st = self.lock();
        let mut due: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        let mut used: HashSet<u64> = HashSet::new();
        let mut all = false;
        for cb in cbs {
            let Some(u) = st.cbs.get(cb) else { continue };
            all |= u.all;
            used.extend(&u.mems);
            for e in &u.copies {
                let Some(m) = st.mems.get(&e.memory) else {
                    continue;
                };
                if m.slot == usize::MAX || !is_split(m.slot) {
                    continue;
                }
                let r = due.entry(e.memory).or_default();
                if e.upload {
                    r.push((e.offset, e.size));
                }
            }
        }
        if all {
            used.extend(
                st.mems
                    .iter()
                    .filter(|(_, m)| m.slot != usize::MAX && m.aliased)
                    .map(|(k, _)| *k),
            );
        }
        if !due.is_empty() {
            let mems: HashSet<u64> = due.keys().copied().collect();
            self.wait_earlier(dev, queue, &mut st, &mems);
            for (mem, ranges) in &due {
                let Some(m) = st.mems.get(mem) else { continue };
                if merge(m.slot, m.map.driver_ptr(), ranges) {
                    self.merges.fetch_add(1, Ordering::Relaxed);
                    log::debug!(
                        "guard: split view of {mem:#x} merged ({} range(s) copied)",
                        ranges.len()
                    );
                } else {
                    log::warn!("guard: the split view of {mem:#x} could not be mapped shared again; it stays split");
                }
            }
        }
        let mut used: Vec<u64> = used.into_iter().collect();
        used.sort_unstable();
        for m in &used {
            let Some(slot) = st.mems.get(m).map(|g| g.slot) else {
                continue;
            };
            protect(slot);
            if st.protected.insert(*m) {
                self.windows.fetch_add(1, Ordering::Relaxed);
            }
        }
        used
    }

    /// After the submission went down: it is pending until observed complete (a failed one is
    /// not).
    pub fn after_submit(&self, queue: u64, fence: u64, ok: bool, used: Vec<u64>) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        if ok {
            st.pending.entry(queue).or_default().push((fence, used));
        } else {
            Self::close_done(&mut st);
        }
    }

    /// Ends the window of every protected allocation no pending submission uses.
    fn close_done(st: &mut State) {
        let live: HashSet<u64> = st
            .pending
            .values()
            .flatten()
            .flat_map(|(_, m)| m.iter().copied())
            .collect();
        let done: Vec<u64> = st
            .protected
            .iter()
            .filter(|m| !live.contains(m))
            .copied()
            .collect();
        for m in done {
            st.protected.remove(&m);
            if let Some(g) = st.mems.get(&m).filter(|g| g.slot != usize::MAX) {
                unprotect(g.slot);
            }
        }
    }

    /// The host observed these fences signalled (or reset them, which is legal only once their
    /// submissions completed): each one's submission and everything before it on its queue
    /// is complete.
    pub fn fences_done(&self, fences: &[u64]) {
        if !self.active() || fences.is_empty() {
            return;
        }
        let mut st = self.lock();
        for v in st.pending.values_mut() {
            if let Some(i) = v.iter().rposition(|(f, _)| *f != 0 && fences.contains(f)) {
                v.drain(..=i);
            }
        }
        Self::close_done(&mut st);
        drop(st);
        self.note_reads();
    }

    /// `vkQueueWaitIdle` succeeded.
    pub fn queue_idle(&self, queue: u64) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        st.pending.remove(&queue);
        Self::close_done(&mut st);
        drop(st);
        self.note_reads();
    }

    /// `vkDeviceWaitIdle` succeeded.
    pub fn device_idle(&self) {
        if !self.active() {
            return;
        }
        let mut st = self.lock();
        st.pending.clear();
        Self::close_done(&mut st);
        drop(st);
        self.note_reads();
    }

    /// Waits (bounded) until the GPU work submitted so far that uses `mems` completed: the
    /// application's last fence of such a queue, or an empty batch with echo's fence on this
    /// queue (which echo may submit to: the application is inside its `vkQueueSubmit`). On
    /// timeout, or when a queue's last submissions have no fence, warns and counts a timeout;
    /// the merge proceeds.
    fn wait_earlier(&self, dev: &Device, queue: u64, st: &mut State, mems: &HashSet<u64>) {
        let mut ok = true;
        let queues: Vec<u64> = st
            .pending
            .iter()
            .filter(|(_, v)| v.iter().any(|(_, m)| m.iter().any(|x| mems.contains(x))))
            .map(|(q, _)| *q)
            .collect();
        for q in queues {
            let done = if q == queue {
                self.drain_own_queue(dev, q, st)
            } else {
                match st.pending[&q].last() {
                    Some(&(f, _)) if f != 0 => wait_fence(dev, f, MERGE_WAIT_NS),
                    _ => false,
                }
            };
            if done {
                st.pending.remove(&q);
            } else {
                ok = false;
            }
        }
        if !ok {
            let first = self.timeouts.fetch_add(1, Ordering::Relaxed) == 0;
            log::warn!(
                "guard: GPU work submitted before a merge did not complete within {} ms (or could not be waited for); merging anyway: the result may differ from the program's, and this plan should not be trusted (profile again)",
                MERGE_WAIT_NS / 1_000_000
            );
            if first {
                self.mark_untrusted("a guarded run timed out waiting for GPU work before a merge");
            }
        }
    }

    /// Writes the untrusted marker next to the plan (0600; best effort, logged).
    fn mark_untrusted(&self, why: &str) {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let r = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.marker)
            .and_then(|mut f| f.write_all(format!("{why}; auto mode profiles again\n").as_bytes()));
        match r {
            Ok(()) => log::warn!(
                "guard: plan marked untrusted ({}); auto mode profiles this program again",
                self.marker.display()
            ),
            Err(e) => log::warn!(
                "guard: cannot write {} ({e}); the plan stays as it is",
                self.marker.display()
            ),
        }
    }

    fn drain_own_queue(&self, dev: &Device, q: u64, st: &mut State) -> bool {
        let f = match st.fence {
            Some(f) => f,
            None => {
                let info = vk::FenceCreateInfo::default();
                let mut f = vk::Fence::null();
                // SAFETY: valid create info; the fence is echo's own.
                let r =
                    unsafe { (dev.fp.create_fence)(dev.handle, &info, std::ptr::null(), &mut f) };
                if r != vk::Result::SUCCESS {
                    return false;
                }
                st.fence = Some(f.as_raw());
                f.as_raw()
            }
        };
        // SAFETY: the application is inside vkQueueSubmit on q (externally synchronized by
        // it); an empty batch with echo's unsignalled fence is valid.
        let r = unsafe {
            (dev.fp.queue_submit)(
                vk::Queue::from_raw(q),
                0,
                std::ptr::null(),
                vk::Fence::from_raw(f),
            )
        };
        if r != vk::Result::SUCCESS {
            return false;
        }
        let done = wait_fence(dev, f, MERGE_WAIT_NS);
        if done {
            let fv = vk::Fence::from_raw(f);
            // SAFETY: echo's fence, signalled: not in use by any queue.
            let _ = unsafe { (dev.fp.reset_fences)(dev.handle, 1, &fv) };
        } else {
            // Still pending in the queue: never reuse it.
            st.fence = None;
        }
        done
    }

    /// `vkDestroyDevice`: every guarded view open again, echo's fence destroyed. The double
    /// mappings are dropped with their allocations (or with the guard).
    pub fn device_destroyed(&self, dev: &Device) {
        self.note_reads();
        let mut st = self.lock();
        for m in st.mems.values() {
            if m.slot != usize::MAX {
                let (s, f, r) = release(m.slot);
                self.splits_done.fetch_add(s, Ordering::Relaxed);
                self.failed_done.fetch_add(f, Ordering::Relaxed);
                self.reads_done.fetch_add(r, Ordering::Relaxed);
            }
        }
        for m in st.mems.values_mut() {
            m.slot = usize::MAX;
        }
        if let Some(f) = st.fence.take() {
            // SAFETY: echo's fence; the device is idle or being destroyed (the app's duty).
            unsafe { (dev.fp.destroy_fence)(dev.handle, vk::Fence::from_raw(f), std::ptr::null()) };
        }
        // The driver still owns the imported memory until the device goes: keep the mappings.
        let keep: Vec<GuardMem> = st.mems.drain().map(|(_, m)| m).collect();
        LEAKED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(keep.into_iter().map(|m| DoubleMapOwned(m.map)));
    }
}

/// Mappings of allocations still alive when their device was destroyed (the driver frees the
/// imports with the device; echo never unmaps memory the driver may still touch).
static LEAKED: Mutex<Vec<DoubleMapOwned>> = Mutex::new(Vec::new());

/// A double mapping to drop after its allocation was freed at the driver.
pub struct DoubleMapOwned(#[allow(dead_code)] DoubleMap);

/// Descriptor types that reach buffer memory (texel buffers through views).
pub fn holds_buffers(t: vk::DescriptorType) -> bool {
    matches!(
        t,
        vk::DescriptorType::UNIFORM_BUFFER
            | vk::DescriptorType::STORAGE_BUFFER
            | vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC
            | vk::DescriptorType::STORAGE_BUFFER_DYNAMIC
            | vk::DescriptorType::UNIFORM_TEXEL_BUFFER
            | vk::DescriptorType::STORAGE_TEXEL_BUFFER
    )
}

fn wait_fence(dev: &Device, f: u64, timeout: u64) -> bool {
    let fv = vk::Fence::from_raw(f);
    // SAFETY: a fence of this device (the application's or echo's); waiting needs no external
    // synchronization.
    unsafe {
        (dev.fp.wait_for_fences)(dev.handle, 1, &fv, vk::TRUE, timeout) == vk::Result::SUCCESS
    }
}

/// The fences of a `vkWaitForFences` that are signalled now: all of them after a successful
/// wait-all, else those whose status says so.
pub fn signalled(dev: &Device, fences: &[vk::Fence], wait_all: bool) -> Vec<u64> {
    fences
        .iter()
        .filter(|f| {
            wait_all
                // SAFETY: the application's fences of this device.
                || unsafe { (dev.fp.get_fence_status)(dev.handle, **f) } == vk::Result::SUCCESS
        })
        .map(|f| f.as_raw())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// The split in isolation: a write to a protected view goes to private pages (view A keeps
    /// the old bytes), the merge copies the range into view A and shares the view again.
    #[test]
    fn write_in_window_splits_and_merge_brings_it_back() {
        // In a child process: other tests of this binary replace the SIGSEGV handler.
        crate::testutil::own_process!(
            write_in_window_splits_and_merge_brings_it_back,
            "ECHO_GUARD_CHILD"
        );
        // A handler the application installed before echo's still gets the faults that are not
        // echo's.
        static APP_SAW: AtomicUsize = AtomicUsize::new(0);
        extern "C" fn app_handler(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
            unsafe {
                let a = (*info).si_addr() as usize & !4095;
                APP_SAW.store(a, Ordering::SeqCst);
                libc::mprotect(a as *mut c_void, 4096, libc::PROT_READ | libc::PROT_WRITE);
            }
        }
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = app_handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
        }
        install().unwrap();
        let other = DoubleMap::new(4096, 4096).unwrap();
        unsafe {
            let p = other.app_ptr();
            assert_eq!(libc::mprotect(p as *mut c_void, 4096, libc::PROT_NONE), 0);
            std::ptr::write_volatile(p, 1);
            assert_eq!(APP_SAW.load(Ordering::SeqCst), p as usize, "chained");
        }
        let m = DoubleMap::new(3 * 4096, 4096).unwrap();
        let (a, b) = (m.driver_ptr(), m.app_ptr());
        unsafe {
            *b = 1;
            *b.add(5000) = 2;
        }
        let i = register(b as usize, m.len(), m.fd()).unwrap();
        assert!(protect(i));
        assert!(!protect(i), "a second protect makes no syscall");
        unsafe {
            std::ptr::write_volatile(b, 7); // faults: split
            assert_eq!(std::ptr::read_volatile(a), 1, "view A keeps the old byte");
            assert_eq!(std::ptr::read_volatile(b), 7);
            // A page the host did not write still shows view A's bytes.
            std::ptr::write_volatile(a.add(5000), 3);
            assert_eq!(std::ptr::read_volatile(b.add(5000)), 3);
        }
        assert!(is_split(i));
        assert_eq!(TABLE[i].splits.load(Ordering::Relaxed), 1);
        // Protected again while split: the next write only re-opens the private view.
        assert!(protect(i));
        unsafe { std::ptr::write_volatile(b.add(1), 8) };
        assert_eq!(TABLE[i].splits.load(Ordering::Relaxed), 1);
        unprotect(i);
        assert!(merge(i, a, &[(0, 16)]));
        assert!(!is_split(i));
        unsafe {
            assert_eq!(std::ptr::read_volatile(a), 7);
            assert_eq!(std::ptr::read_volatile(a.add(1)), 8);
            // Shared again: writes through B reach A.
            std::ptr::write_volatile(b.add(100), 9);
            assert_eq!(std::ptr::read_volatile(a.add(100)), 9);
        }
        // A read inside a window (issue 22): the view takes no access while protected, so the
        // read faults and is counted; the view is readable then, and a write still splits.
        assert!(protect(i));
        assert_eq!(unsafe { std::ptr::read_volatile(b.add(100)) }, 9);
        assert_eq!(TABLE[i].reads.load(Ordering::Relaxed), 1);
        assert!(!is_split(i), "a read does not split");
        assert_eq!(
            unsafe { std::ptr::read_volatile(b.add(101)) },
            0,
            "readable now"
        );
        assert_eq!(
            TABLE[i].reads.load(Ordering::Relaxed),
            1,
            "one fault per window"
        );
        unsafe { std::ptr::write_volatile(b.add(200), 4) };
        assert!(is_split(i));
        assert_eq!(TABLE[i].splits.load(Ordering::Relaxed), 2);
        assert_eq!(
            unsafe { std::ptr::read_volatile(a.add(200)) },
            0,
            "view A untouched"
        );
        // Split and protected again: a read is counted again, and the merge still reads view B.
        unprotect(i);
        assert!(protect(i));
        assert_eq!(unsafe { std::ptr::read_volatile(b.add(200)) }, 4);
        assert_eq!(TABLE[i].reads.load(Ordering::Relaxed), 2);
        unprotect(i);
        assert!(protect(i));
        assert!(merge(i, a, &[(200, 1)]), "merge of a protected split view");
        assert_eq!(unsafe { std::ptr::read_volatile(a.add(200)) }, 4);
        assert_eq!(
            TABLE[i].reads.load(Ordering::Relaxed),
            2,
            "echo's own copy is no read"
        );
        assert_eq!(release(i), (2, 0, 2));
        // A guarded fault is not passed on.
        assert_eq!(APP_SAW.load(Ordering::SeqCst), other.app_ptr() as usize);
        println!("CHILD-OK");
    }
}
