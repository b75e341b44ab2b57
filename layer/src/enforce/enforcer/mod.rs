//! The `Enforcer`: enforce mode's state for one device and everything it does, in this folder
//! (issue 56): this file holds the type, its constructor and the runtime state aliasing shares;
//! `binding.rs`, `mapping.rs`, `release.rs`, `virt.rs`, `window.rs` are aliasing (below),
//! `copy.rs` copy elision, `empty.rs` command buffers left out of their submission, and
//! `enforce_mode.rs` the enforcer at each event of the chassis (`crate::events::Mode`).
//!
//! Aliasing (DESIGN §6): binds redirected into a partner's memory, deferred binds, redirected
//! maps, translated flush/invalidate ranges, deferred frees.
//!
//! `StagingIntoDevice` (groups `h_in → d → h_out`, one-time uploads): each staging buffer `h` is
//! bound into `d`'s memory at `d`'s offset − δ, and `vkMapMemory` of `h`'s own allocation `M`
//! returns echo's mapping of `d`'s memory, shifted so byte `i` of `h` in the app's view is byte
//! `i` of `h` where it really lives. `M` is `h`'s own when the plan names its key (recognised at
//! `vkAllocateMemory`) or when it is dedicated to `h`; then a map made *before* `h` is bound is
//! redirected too, at the offset the plan recorded. `d`'s memory is mapped once, through the next
//! layer; if the application maps it too it gets the same mapping, and its unmap is a no-op.
//!
//! `DeviceIntoStaging` (sub-allocated staging): `d` is bound into `h`'s memory at `h`'s offset + δ.
//!
//! A guest whose host is not bound yet is deferred (`VK_SUCCESS` to the app) until the host is
//! bound, and bound as the application asked at its first use at the latest (that member is then
//! "not applied", with the reason). Every redirected bind passes `echo_analyzer::apply::
//! check_redirect` first: the driver may accept a wrong one silently. `vkFreeMemory` of memory a
//! guest still lives in is deferred until the last guest is destroyed (S4).
//!
//! Locking: one mutex (`Inner`) for binds, maps and frees (never on the recording hot path
//! unless a bind is held back); `DeviceState`'s maps are only touched while it is held, never the
//! other way round (hooks clone what they need out of `DeviceState` before calling in here).

use crate::log;
use crate::records::Device;
use crate::records::HandleMap;
use ash::vk;
use ash::vk::Handle;
use echo_analyzer::apply::{check_redirect, PlanIndex, Target};
use echo_analyzer::fasthash::{FastMap as HashMap, FastSet as HashSet};
use echo_analyzer::plan::Direction;
use echo_analyzer::stats::{MemberStatus, NotApplied, PartlyApplied, Stats};
use echo_analyzer::topology::MemoryTable;
use echo_analyzer::trace::{MemReq, ObjectKey};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

const HOST_VISIBLE: u32 = vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw();

/// A key without its ordinal, for buffers or allocations, as a 64-bit fingerprint (no string
/// copied per lookup). Two bases that share a fingerprint share one entry: then both count as
/// made on several threads as soon as either is, which refuses more, never less.
type Base = u64;

#[derive(Default)]
pub(super) struct Counters {
    pub copies_elided: AtomicU64,
    pub regions_elided: AtomicU64,
    pub bytes_elided: AtomicU64,
    /// The same, counted per submission (what ran).
    pub copies_elided_run: AtomicU64,
    pub regions_elided_run: AtomicU64,
    pub bytes_elided_run: AtomicU64,
    pub regions_passed: AtomicU64,
    pub barriers_inserted: AtomicU64,
    pub command_buffers_dropped: AtomicU64,
    pub submissions_emptied: AtomicU64,
    pub binds_redirected: AtomicU64,
    pub maps_redirected: AtomicU64,
    pub frees_deferred: AtomicU64,
    pub bytes_carried: AtomicU64,
    /// Bytes of allocations echo never made at the driver (skipped, not made late since).
    pub bytes_not_allocated: AtomicU64,
    pub allocations_skipped: AtomicU64,
    /// Skipped allocations made at the driver after all (an unforeseen use).
    pub allocations_made_late: AtomicU64,
    /// Bytes copied into allocations made late (what they held, and what their member left).
    pub bytes_carried_late: AtomicU64,
    /// Allocations made only in part (`virt.rs`, `Block`), and maps refused across a window.
    pub allocations_windowed: AtomicU64,
    pub maps_refused: AtomicU64,
}

/// The part a live buffer plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Device(u32),
    Staging(u32, usize),
}

impl Slot {
    fn group(self) -> u32 {
        match self {
            Slot::Device(g) | Slot::Staging(g, _) => g,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bind {
    Unbound,
    /// The application bound it; echo holds the bind until the partner is bound.
    Pending {
        memory: u64,
        offset: u64,
    },
    Done,
}

struct BufRt {
    /// Every group the buffer is in: one, except a staging buffer hosting several
    /// `DeviceIntoStaging` groups.
    slots: Vec<Slot>,
    /// The slot in which the buffer is bound into a partner's memory, if any.
    guest: Option<Slot>,
    bind: Bind,
    key: ObjectKey,
    /// Bound by echo when its allocation was mapped before the bind: the (memory, offset) the
    /// application's own bind is expected to name.
    early: Option<(u64, u64)>,
}

struct MemberRt {
    delta: i64,
    /// The plan lets enforce leave this member's own allocation unmade.
    skip_allocation: bool,
    buffer: Option<u64>,
    seen: bool,
    /// `Some(Ok)`: aliased; `Some(Err(why))`: not applied.
    outcome: Option<Result<(), String>>,
    memory_offset: u64,
}

struct GroupRt {
    direction: Direction,
    /// The plan's `device_mapped`: the device buffer may be moved out of a mapped allocation.
    device_mapped: bool,
    device: Option<u64>,
    device_seen: bool,
    members: Vec<MemberRt>,
}

/// Maps of this allocation are served from `target`'s mapping: app offset `x` ↔ `target` offset
/// `shift + x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Redirect {
    target: u64,
    shift: i128,
}

/// `VkAllocationCallbacks` kept for a deferred `vkFreeMemory` (copied: the app's struct may be
/// gone by then).
#[derive(Clone, Copy)]
struct Callbacks(vk::AllocationCallbacks<'static>);
// SAFETY: the callbacks are only passed back to the next layer, as the application allowed.
unsafe impl Send for Callbacks {}

#[derive(Default)]
struct MemRt {
    /// A staging member's own allocation, recognised by the key the plan recorded.
    owner: Option<(u32, usize)>,
    redirect: Option<Redirect>,
    /// The application has this allocation mapped through echo (redirected or echo's mapping).
    app_mapped: bool,
    /// Echo's mapping of the whole allocation.
    echo_map: Option<usize>,
    /// Buffers bound into this allocation by a redirected bind, still alive.
    guests: HashSet<u64>,
    /// The application freed it while guests lived in it.
    deferred_free: Option<Option<Callbacks>>,
    /// Echo handed out this handle without making the allocation (`virt.rs`).
    virt: Option<Virt>,
    /// Echo handed out this handle and made only a window of the allocation (`virt.rs`).
    block: Option<Block>,
}

#[derive(Default)]
struct Inner {
    groups: BTreeMap<u32, GroupRt>,
    bufs: HashMap<u64, BufRt>,
    mems: HashMap<u64, MemRt>,
}

/// A memory to free after the buffer that was its last guest is destroyed.
pub struct DeferredFree(u64, Option<Callbacks>);

pub struct Enforcer {
    pub plan_path: PathBuf,
    index: PlanIndex,
    /// Key of a staging member's own allocation → (group, member).
    staging_memory: HashMap<ObjectKey, (u32, usize)>,
    /// Key of a `DeviceIntoStaging` device buffer's allocation made only in part → its window.
    block_memory: HashMap<ObjectKey, (u64, u64)>,
    type_flags: Vec<u32>,
    alias_type: Option<u32>,
    atom: u64,
    inner: Mutex<Inner>,
    /// Groups of each live planned buffer (hot path: copies).
    group_of: HandleMap<u64, Vec<u32>>,
    /// Per command buffer: the copies dropped while recording it (`copy.rs`).
    pub(super) elided_in: HandleMap<u64, Elided>,
    /// Some copy was ever elided (`elided_in` is worth looking at).
    pub(super) any_elided: AtomicBool,
    /// Command buffers that recorded real work since their last begin (`empty.rs`): any
    /// command but a copy whose every region was dropped.
    pub(super) content: crate::handles::HandleSet<u64>,
    /// Per creation key without its ordinal (buffers and allocations): the thread that created
    /// the first one, and whether another thread created one too. Ordinals count creations, so
    /// when several threads create objects with the same key concurrently the ordinals follow
    /// the scheduler, not the program: such identities are not trusted.
    bases: Mutex<HashMap<Base, (std::thread::ThreadId, bool)>>,
    /// Some buffer was bound into its partner's memory (else copies pass untouched).
    pub(super) any_alias: AtomicBool,
    /// Binds held back until a partner is bound.
    pending: AtomicUsize,
    pub(super) c: Counters,
    /// Test-only (`VK_ECHO_TEST_KEEP_SELF_COPIES`): forward self-copies instead of dropping them,
    /// so a test can show the validation layer sees the aliasing (VUID-vkCmdCopyBuffer-pRegions-00117).
    pub(super) keep_self_copies: bool,
    /// Test-only (`VK_ECHO_TEST_NO_CARRY`): do not carry bytes written before a redirected bind,
    /// nor the bytes of an allocation echo makes late (the planted fault that shows the tests
    /// catch lost bytes).
    pub(super) skip_carry: bool,
    /// Whether allocations may be left unmade on this device (`apply::memory_commands_followed`).
    memory_ok: Result<(), String>,
    /// Some allocation was left unmade: hooks that take memory look it up only then.
    any_virtual: AtomicBool,
    /// Test-only (`VK_ECHO_TEST_LEAK_HANDLE`): an unmap of an allocation echo did not make goes
    /// down with echo's own handle (the planted fault that shows the test layer catches it).
    pub(super) leak_handle: bool,
    /// Guarded enforce (`guard.rs`): `Some` when the `guard` setting is on and the device can
    /// double-map; `guard_refused` says why it cannot when the setting is on (fail closed: every
    /// group is then refused).
    pub(super) guard: Option<super::guard::Guard>,
    pub(super) guard_refused: Option<String>,
    /// Groups of the plan left out before enforce began (`echo_analyzer::program::extrapolate`:
    /// behaviour no profile observed), reported as planned and not applied.
    pub(super) left_out: Vec<NotApplied>,
}

/// The runtime state of a planned group, before any of its buffers exists.
fn group_rt(g: &echo_analyzer::plan::Group) -> GroupRt {
    GroupRt {
        direction: g.direction,
        device_mapped: g.device_mapped,
        device: None,
        device_seen: false,
        members: g
            .members
            .iter()
            .map(|m| MemberRt {
                delta: m.delta,
                skip_allocation: m.skip_allocation,
                buffer: None,
                seen: false,
                outcome: None,
                memory_offset: m.memory_offset,
            })
            .collect(),
    }
}

fn req_of(r: &vk::MemoryRequirements) -> MemReq {
    MemReq {
        size: r.size,
        alignment: r.alignment,
        type_bits: r.memory_type_bits,
    }
}

impl Enforcer {
    pub fn new(plan_path: PathBuf, index: PlanIndex, table: &MemoryTable, atom: u64) -> Enforcer {
        let mut groups = BTreeMap::new();
        let mut staging_memory = HashMap::default();
        let mut block_memory: HashMap<ObjectKey, Option<(u64, u64)>> = HashMap::default();
        for g in &index.plan.groups {
            if index.role(&g.device.key).is_none() {
                continue; // left out by PlanIndex (a key in two groups)
            }
            if let (Direction::DeviceIntoStaging, Some(dm)) = (g.direction, &g.device_memory) {
                // Groups that share the allocation must agree on its window, else none is used.
                let w = (dm.window_lo, dm.window_hi);
                let e = block_memory.entry(dm.key.clone()).or_insert(Some(w));
                if *e != Some(w) {
                    *e = None;
                }
            }
            for (i, m) in g.members.iter().enumerate() {
                if let (Direction::StagingIntoDevice, Some(k)) = (g.direction, &m.memory) {
                    staging_memory.insert(k.clone(), (g.id, i));
                }
            }
            groups.insert(g.id, group_rt(g));
        }
        let alias_type = echo_analyzer::topology::classify(table).alias_type;
        Enforcer {
            plan_path,
            index,
            staging_memory,
            block_memory: block_memory
                .into_iter()
                .filter_map(|(k, w)| Some((k, w?)))
                .collect(),
            type_flags: table.types.iter().map(|t| t.flags).collect(),
            alias_type,
            atom: atom.max(1),
            inner: Mutex::new(Inner {
                groups,
                ..Default::default()
            }),
            group_of: HandleMap::default(),
            elided_in: HandleMap::default(),
            any_elided: AtomicBool::new(false),
            content: Default::default(),
            bases: Mutex::new(HashMap::default()),
            any_alias: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            c: Counters::default(),
            keep_self_copies: false,
            skip_carry: false,
            memory_ok: Err("not decided yet".into()),
            any_virtual: AtomicBool::new(false),
            leak_handle: false,
            guard: None,
            guard_refused: None,
            left_out: Vec::new(),
        }
    }

    /// The guard, when guarded enforce runs on this device.
    #[inline]
    pub fn guard(&self) -> Option<&super::guard::Guard> {
        self.guard.as_ref()
    }

    /// Why a group may not alias into `target` under the `guard` setting (fail closed): the
    /// guard is unavailable, or the allocation is not double-mapped. `None`: guard off, or fine.
    fn guard_refuses(&self, target: Option<u64>) -> Option<String> {
        if let Some(why) = &self.guard_refused {
            return Some(format!("guard: unavailable ({why}); not applied"));
        }
        let g = self.guard.as_ref()?;
        match target {
            None => Some("guard: the device-into-staging direction cannot be guarded (the staging memory is the application's own); not applied".into()),
            Some(m) if !g.guarded(m) => Some("guard: the device buffer's allocation is not double-mapped (it was not recognised at vkAllocateMemory, or could not be imported); not applied".into()),
            Some(_) => None,
        }
    }

    /// `vkAllocateMemory` with the guard on: whether this allocation is where a guarded group
    /// will live (dedicated to a planned `StagingIntoDevice` device buffer, or large enough for
    /// one that is created and not bound yet, in a type it allows).
    pub fn guard_wants(
        &self,
        dev: &Device,
        info: &vk::MemoryAllocateInfo<'_>,
        dedicated: Option<u64>,
    ) -> bool {
        if self.guard.is_none() || !self.host_visible(info.memory_type_index) {
            return false;
        }
        let inner = self.lock();
        inner.groups.values().any(|g| {
            g.direction == Direction::StagingIntoDevice
                && g.device.is_some_and(|d| {
                    let unbound = inner.bufs.get(&d).is_some_and(|b| b.bind == Bind::Unbound);
                    let fits = dev.state.buffers.get(&d).is_some_and(|b| {
                        b.bound.is_none()
                            && b.requirements.size <= info.allocation_size
                            && b.requirements.memory_type_bits & (1 << info.memory_type_index) != 0
                    });
                    dedicated == Some(d) || (dedicated.is_none() && unbound && fits)
                })
        })
    }

    /// Whether `buffer` is a staging member of a planned group (guard: an elided copy out of it
    /// is an upload).
    pub(super) fn is_staging_member(&self, buffer: u64) -> bool {
        self.lock()
            .bufs
            .get(&buffer)
            .is_some_and(|b| b.slots.iter().any(|s| matches!(s, Slot::Staging(..))))
    }

    /// After a guarded import succeeded: the application's mappings of `memory` are view B.
    pub fn guard_imported(&self, memory: u64, import: Box<super::guard::Import>) {
        let Some(g) = self.guard.as_ref() else { return };
        if let Some(b) = g.imported(memory, import) {
            self.lock().mems.entry(memory).or_default().echo_map = Some(b);
        }
    }

    /// The smallest buffer the plan names: smaller buffers need no key (`u64::MAX`: no group).
    pub fn smallest_planned_size(&self) -> u64 {
        self.index
            .plan
            .groups
            .iter()
            .flat_map(|g| {
                std::iter::once(g.device.key.size)
                    .chain(g.members.iter().map(|m| m.staging.key.size))
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    pub fn groups_planned(&self) -> u32 {
        (self.index.plan.groups.len() + self.left_out.len()) as u32
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn host_visible(&self, type_index: u32) -> bool {
        self.type_flags
            .get(type_index as usize)
            .is_some_and(|f| f & HOST_VISIBLE != 0)
    }

    /// Whether two live buffers are in one planned group (hot path).
    #[inline]
    pub(super) fn same_group(&self, a: u64, b: u64) -> bool {
        let Some(ga) = self.group_of.get(&a) else {
            return false;
        };
        self.group_of
            .get(&b)
            .is_some_and(|gb| ga.iter().any(|g| gb.contains(g)))
    }

    /// A class instance past those profiled (issue 24) gets its group's runtime state when its
    /// first buffer or allocation appears; whether `id` now has one.
    fn ensure_group(&self, inner: &mut Inner, id: u32) -> bool {
        if inner.groups.contains_key(&id) {
            return true;
        }
        let Some(g) = self.index.beyond_group(id) else {
            return false;
        };
        log::debug!(
            "enforce: group {id:#x} is an instance of a per-call class past those profiled (device {})",
            g.device.key
        );
        inner.groups.insert(id, group_rt(&g));
        true
    }

    /// The (group, member) whose own allocation has key `k`: a planned member's, or a class
    /// instance's past those profiled.
    fn member_of_memory(&self, k: &ObjectKey) -> Option<(u32, usize)> {
        self.staging_memory
            .get(k)
            .copied()
            .or_else(|| self.index.beyond_memory(k))
    }

    fn base(buffer: bool, k: &ObjectKey) -> Base {
        use std::hash::BuildHasher;
        echo_analyzer::fasthash::FastBuild::default().hash_one((
            buffer,
            k.site.as_str(),
            k.size,
            k.usage,
            k.flags,
        ))
    }

    /// Notes that the calling thread created an object with key `k`.
    fn note_creator(&self, buffer: bool, k: &ObjectKey) {
        let me = std::thread::current().id();
        let mut b = self.bases.lock().unwrap_or_else(|p| p.into_inner());
        let e = b.entry(Self::base(buffer, k)).or_insert((me, false));
        if e.0 != me && !e.1 {
            e.1 = true;
            log::debug!("enforce: objects with key {k} are created on several threads; their ordinals are not trusted");
        }
    }

    /// Whether objects with `k`'s key (but for the ordinal) were created on several threads.
    fn ambiguous(&self, buffer: bool, k: &ObjectKey) -> bool {
        let b = self.bases.lock().unwrap_or_else(|p| p.into_inner());
        b.get(&Self::base(buffer, k)).is_none_or(|e| e.1)
    }

    /// The identity check before any alias: neither buffer's key may be ambiguous.
    fn identities_ok(&self, inner: &Inner, a: u64, b: u64) -> Result<(), String> {
        for x in [a, b] {
            let k = &inner.bufs.get(&x).ok_or("a partner is gone")?.key;
            if self.ambiguous(true, k) {
                return Err(format!(
                    "buffers with key {k} (but for the ordinal) were created on several threads in this run, so which is which depends on the scheduler"
                ));
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ statistics

    /// The statistics so far (mode, device and plan fields filled by the caller).
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            groups_planned: self.groups_planned(),
            ..Default::default()
        };
        self.count(&mut s);
        // At exit the thread that calls exit() may be inside a callback while echo holds the lock
        // further up its own stack: wait a bounded time, then report the counters alone.
        let inner = if crate::lifetime::exiting() {
            let mut got = None;
            for _ in 0..100 {
                match self.inner.try_lock() {
                    Ok(g) => got = Some(g),
                    Err(std::sync::TryLockError::Poisoned(p)) => got = Some(p.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        continue;
                    }
                }
                break;
            }
            match got {
                Some(g) => g,
                None => {
                    s.errors
                        .push("at exit the enforcer was busy: groups not itemized".into());
                    return s;
                }
            }
        } else {
            self.lock()
        };
        for (id, g) in &inner.groups {
            let mut reasons: Vec<(Option<usize>, String)> = Vec::new();
            if !g.device_seen {
                reasons.push((
                    None,
                    "its device buffer was not created in this run".to_string(),
                ));
            }
            let used = match g.direction {
                Direction::StagingIntoDevice => g.members.len(),
                Direction::DeviceIntoStaging => g.members.len().min(1),
            };
            let planned = if PlanIndex::is_beyond(*id) {
                self.index.beyond_group(*id)
            } else {
                self.index.plan.groups.iter().find(|x| x.id == *id).cloned()
            };
            let mut applied: Vec<u32> = Vec::new();
            for (i, m) in g.members.iter().enumerate().take(used) {
                let why = match &m.outcome {
                    Some(Ok(())) => None,
                    Some(Err(why)) => Some(why.clone()),
                    None if !m.seen => {
                        Some("its staging buffer was not created in this run".into())
                    }
                    None => Some("never bound".into()),
                };
                let pm = planned.as_ref().and_then(|p| p.members.get(i));
                s.members.push(MemberStatus {
                    device_index: 0,
                    group: *id,
                    member: Some(i as u32),
                    staging: pm.map_or(String::new(), |p| p.staging.key.to_string()),
                    role: pm.map_or(String::new(), |p| {
                        echo_analyzer::report::role_words(p.role).to_string()
                    }),
                    applied: why.is_none(),
                    reason: why.clone().unwrap_or_default(),
                });
                match why {
                    None => applied.push(i as u32),
                    Some(why) => reasons.push((Some(i), why)),
                }
            }
            if reasons.is_empty() && PlanIndex::is_beyond(*id) {
                s.class_instances_applied += 1;
            } else if reasons.is_empty() {
                s.groups_applied += 1;
            } else if g.device_seen && !applied.is_empty() {
                // Issue 36: some members share the device buffer's memory (their copies are
                // elided, their allocations maybe skipped); the group is not "not applied".
                if !PlanIndex::is_beyond(*id) {
                    s.groups_partly_applied += 1;
                }
                s.partly_applied.push(PartlyApplied {
                    group: *id,
                    applied,
                    reason: echo_analyzer::apply::summarize_reasons(&reasons, 240),
                });
            } else {
                s.not_applied.push(NotApplied {
                    group: *id,
                    // One line, however many members (issue 23: a 1,164-character line a run).
                    reason: echo_analyzer::apply::summarize_reasons(&reasons, 240),
                });
            }
        }
        for (id, _) in self
            .index
            .plan
            .groups
            .iter()
            .map(|g| (g.id, ()))
            .filter(|(id, _)| !inner.groups.contains_key(id))
        {
            s.not_applied.push(NotApplied {
                group: id,
                reason: "a buffer of this group is also in another group; left out".into(),
            });
        }
        s.not_applied.extend(self.left_out.iter().cloned());
        s
    }

    /// The counters (atomics: no lock).
    fn count(&self, s: &mut Stats) {
        let c = &self.c;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.copies_elided = ld(&c.copies_elided);
        s.regions_elided = ld(&c.regions_elided);
        s.bytes_elided = ld(&c.bytes_elided);
        s.copies_elided_run = ld(&c.copies_elided_run);
        s.regions_elided_run = ld(&c.regions_elided_run);
        s.bytes_elided_run = ld(&c.bytes_elided_run);
        s.regions_passed = ld(&c.regions_passed);
        s.barriers_inserted = ld(&c.barriers_inserted);
        s.command_buffers_dropped = ld(&c.command_buffers_dropped);
        s.submissions_emptied = ld(&c.submissions_emptied);
        s.binds_redirected = ld(&c.binds_redirected);
        s.maps_redirected = ld(&c.maps_redirected);
        s.frees_deferred = ld(&c.frees_deferred);
        s.bytes_carried = ld(&c.bytes_carried);
        s.memory_not_allocated = ld(&c.bytes_not_allocated);
        s.allocations_skipped = ld(&c.allocations_skipped);
        s.allocations_made_late = ld(&c.allocations_made_late);
        s.bytes_carried_late = ld(&c.bytes_carried_late);
        s.allocations_windowed = ld(&c.allocations_windowed);
        s.maps_refused = ld(&c.maps_refused);
        if let Some(g) = &self.guard {
            let (splits, failed) = g.splits();
            s.guard_windows = ld(&g.windows);
            s.guard_splits = splits;
            s.guard_merges = ld(&g.merges);
            s.guard_timeouts = ld(&g.timeouts);
            g.note_reads();
            s.guard_reads = g.reads();
            let unguarded = ld(&g.unguarded);
            if unguarded > 0 {
                s.errors.push(format!("guard: {unguarded} guarded allocation(s) had a buffer the plan does not name bound into them; their groups ran unguarded from then on"));
            }
            if failed > 0 {
                s.errors.push(format!(
                    "guard: {failed} split(s) failed (the host write reached the GPU's bytes)"
                ));
            }
        }
    }
}

// ---------------------------------------------------------------- shared by the files below
//
// Types and calls the files of this folder (and `copy.rs`) share, defined here so that they
// name this file and it names none of them.

/// What `vkFreeMemory` does.
pub enum FreeAction {
    /// Free this allocation through the next layer, then `then` (a free that waited for it).
    Down {
        memory: u64,
        then: Option<DeferredFree>,
    },
    /// A guest still lives in the memory: the free waits for it.
    Deferred,
    /// Nothing to free at the driver (echo never made it); then `then`.
    Skip { then: Option<DeferredFree> },
}

/// What `vkUnmapMemory` does.
pub enum Unmap {
    /// Echo serves the mapping: nothing goes down.
    Served,
    /// Unmap this allocation through the next layer.
    Down(u64),
}

/// Elided copies recorded in one command buffer since its last begin (`copy.rs` counts them).
#[derive(Clone, Copy, Debug, Default)]
pub struct Elided {
    pub(super) copies: u64,
    pub(super) regions: u64,
    pub(super) bytes: u64,
}

/// An allocation echo did not make.
pub(super) struct Virt {
    /// The plan member (group, member) whose own allocation it is.
    member: (u32, usize),
    type_index: u32,
    size: u64,
    /// `VkMemoryDedicatedAllocateInfo::buffer` (the member), recreated when made late.
    dedicated: Option<u64>,
    /// `VkMemoryPriorityAllocateInfoEXT::priority` (bits), recreated when made late.
    priority: Option<u32>,
    /// The application's allocation callbacks (the late allocation uses them, so that its
    /// `vkFreeMemory` with them is valid).
    callbacks: Option<Callbacks>,
    /// The device buffer's memory that holds its bytes (it is a guest there until freed) and
    /// where: byte `x` of this allocation is byte `shift + x` there.
    target: u64,
    shift: i128,
    /// The member's range in this allocation.
    range: (u64, u64),
    /// Made at the driver after all: the real handle.
    pub(super) real: Option<u64>,
    /// The application's current mapping is of `real`, made through the next layer.
    pub(super) real_mapped: bool,
    /// Keeps the handle's value (this cell's address) unique while the handle lives.
    _cell: Box<u64>,
}

/// An allocation echo made only in part.
pub(super) struct Block {
    type_index: u32,
    size: u64,
    /// `VkMemoryDedicatedAllocateInfo::buffer` (a planned device buffer; the window is empty).
    dedicated: Option<u64>,
    priority: Option<u32>,
    callbacks: Option<Callbacks>,
    /// The window `[lo, hi)`, its allocation and echo's mapping of it (none when empty).
    lo: u64,
    hi: u64,
    window: Option<(u64, usize)>,
    /// Device buffers the application bound into it that live in their staging memory: (offset
    /// the application named, bytes, the memory they live in, offset there). That memory is not
    /// freed while this allocation lives (this handle is a guest there), so the bytes a device
    /// buffer left are there for a late allocation even after the buffer is destroyed.
    pub(super) aliased: Vec<(u64, u64, u64, u64)>,
    /// The whole allocation, made at the driver after all.
    pub(super) overflow: Option<u64>,
    /// The application's current mapping is of the overflow (through the next layer).
    overflow_mapped: bool,
    /// A resource was bound across the window's edge (warned once per allocation).
    straddled: bool,
    _cell: Box<u64>,
}

/// Echo's own bind through the next layer (deferred binds).
pub(super) fn fp_bind(dev: &Device, buffer: u64, memory: u64, offset: u64) -> vk::Result {
    // SAFETY: live handles of this device; the application asked for (or echo checked) the bind.
    unsafe {
        (dev.fp.bind_buffer_memory)(
            dev.handle,
            vk::Buffer::from_raw(buffer),
            vk::DeviceMemory::from_raw(memory),
            offset,
        )
    }
}

/// Maps all of `memory` through the next layer (echo's own mapping); the host address.
pub(super) fn map_whole(dev: &Device, memory: u64) -> Result<usize, vk::Result> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: callers pass a live host-visible allocation of this device that nobody maps now.
    let r = unsafe {
        (dev.fp.map_memory)(
            dev.handle,
            vk::DeviceMemory::from_raw(memory),
            0,
            vk::WHOLE_SIZE,
            vk::MemoryMapFlags::empty(),
            &mut p,
        )
    };
    match r {
        vk::Result::SUCCESS if !p.is_null() => Ok(p as usize),
        vk::Result::SUCCESS => Err(vk::Result::ERROR_MEMORY_MAP_FAILED),
        e => Err(e),
    }
}

mod binding;
mod copy;
mod empty;
mod enforce_mode;
mod mapping;
mod release;
mod virt;
mod window;
