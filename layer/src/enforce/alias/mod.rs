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

use crate::dispatch::DeviceData;
use crate::dispatch::HandleMap;
use crate::log;
use crate::state::Mapping;
use ash::vk;
use echo_analyzer::apply::{check_redirect, PlanIndex, Role, Target};
use echo_analyzer::plan::Direction;
use echo_analyzer::stats::{NotApplied, Stats};
use echo_analyzer::topology::MemoryTable;
use echo_analyzer::trace::{MemReq, ObjectKey};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

const HOST_VISIBLE: u32 = vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw();

/// A key without its ordinal, for buffers (`true`) or allocations.
type Base = (bool, String, u64, u32, u32);

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
    virt: Option<virt::Virt>,
    /// Echo handed out this handle and made only a window of the allocation (`virt.rs`).
    block: Option<window::Block>,
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
    pub(super) elided_in: HandleMap<u64, super::copy::Elided>,
    /// Some copy was ever elided (`elided_in` is worth looking at).
    pub(super) any_elided: AtomicBool,
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
        let mut staging_memory = HashMap::new();
        let mut block_memory: HashMap<ObjectKey, Option<(u64, u64)>> = HashMap::new();
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
            bases: Mutex::new(HashMap::new()),
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
        dev: &DeviceData,
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
        (buffer, k.site.clone(), k.size, k.usage, k.flags)
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

    // ------------------------------------------------------------------ creation

    /// `vkCreateBuffer` succeeded with stable key `key`.
    pub fn buffer_created(&self, buffer: u64, key: &ObjectKey) {
        self.note_creator(true, key);
        let mut roles = self.index.roles(key).to_vec();
        if roles.is_empty() {
            roles = self.index.beyond_roles(key);
        }
        if roles.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let mut slots = Vec::new();
        let mut guest = None;
        for role in &roles {
            if !self.ensure_group(&mut inner, role.group()) {
                continue;
            }
            let Some(g) = inner.groups.get_mut(&role.group()) else {
                continue;
            };
            let slot = match *role {
                Role::Device { group, .. } => {
                    if g.device.is_some() || g.device_seen {
                        continue; // a second buffer with the key: not the planned one
                    }
                    g.device = Some(buffer);
                    g.device_seen = true;
                    Slot::Device(group)
                }
                Role::Staging { group, member, .. } => {
                    let Some(m) = g.members.get_mut(member) else {
                        continue;
                    };
                    if m.buffer.is_some() || m.seen {
                        continue;
                    }
                    m.buffer = Some(buffer);
                    m.seen = true;
                    Slot::Staging(group, member)
                }
            };
            if matches!(
                (slot, g.direction),
                (Slot::Staging(..), Direction::StagingIntoDevice)
                    | (Slot::Device(_), Direction::DeviceIntoStaging)
            ) {
                guest = Some(slot);
            }
            slots.push(slot);
        }
        if slots.is_empty() {
            return;
        }
        log::debug!("enforce: buffer {buffer:#x} ({key}) is {slots:?}");
        self.group_of
            .insert(buffer, slots.iter().map(|s| s.group()).collect());
        inner.bufs.insert(
            buffer,
            BufRt {
                slots,
                guest,
                bind: Bind::Unbound,
                key: key.clone(),
                early: None,
            },
        );
    }

    /// `vkAllocateMemory`: the memory type to allocate instead, when the allocation is dedicated
    /// to a `StagingIntoDevice` device buffer and its type is not host-visible (the staging
    /// buffers' maps will be served from it).
    pub fn allocation_type(
        &self,
        dedicated_to: Option<u64>,
        type_index: u32,
        dev: &DeviceData,
    ) -> Option<u32> {
        let d = dedicated_to?;
        if self.host_visible(type_index) {
            return None;
        }
        let inner = self.lock();
        let b = inner.bufs.get(&d)?;
        let g = b.slots.iter().find_map(|s| match s {
            Slot::Device(g) => Some(*g),
            _ => None,
        })?;
        if inner.groups.get(&g)?.direction != Direction::StagingIntoDevice {
            return None;
        }
        let t = self.alias_type?;
        let bits = dev.state.buffers.get(&d)?.requirements.memory_type_bits;
        if bits & (1 << t) == 0 {
            return None;
        }
        log::info!(
            "enforce: the allocation dedicated to device buffer {d:#x} (group {g}) gets host-visible memory type {t} instead of {type_index}"
        );
        Some(t)
    }

    /// `vkAllocateMemory` succeeded (state recorded, with the key of the application's request);
    /// `switched`: the type [`Self::allocation_type`] chose instead.
    pub fn memory_allocated(&self, dev: &DeviceData, memory: u64, switched: Option<u32>) {
        let key = {
            let Some(mut s) = dev.state.memory.get_mut(&memory) else {
                return;
            };
            if let Some(t) = switched {
                s.type_index = t;
            }
            s.key.clone()
        };
        if let Some(k) = &key {
            self.note_creator(false, k);
        }
        if let Some(owner) = key.and_then(|k| self.member_of_memory(&k)) {
            log::debug!(
                "enforce: allocation {memory:#x} is the own allocation of group {} member {}",
                owner.0,
                owner.1
            );
            let mut inner = self.lock();
            if self.ensure_group(&mut inner, owner.0) {
                inner.mems.entry(memory).or_default().owner = Some(owner);
            }
        }
    }

    // ------------------------------------------------------------------ binds

    /// `vkBindBufferMemory` (or one element of `vkBindBufferMemory2`). `down(memory, offset)`
    /// binds the application's buffer through the next layer; `has_next`: the bind carried
    /// extension structures (never deferred).
    pub fn bind(
        &self,
        dev: &DeviceData,
        buffer: u64,
        memory: u64,
        offset: u64,
        has_next: bool,
        down: &mut dyn FnMut(u64, u64) -> vk::Result,
    ) -> vk::Result {
        let mut inner = self.lock();
        let Some((slots, guest)) = inner.bufs.get(&buffer).map(|b| (b.slots.clone(), b.guest))
        else {
            if self.is_virtual(&inner, memory) {
                // A buffer the plan does not name, bound into an allocation echo did not make.
                return self.plain_bind(dev, &mut inner, buffer, memory, offset, down);
            }
            drop(inner);
            if let Some(g) = &self.guard {
                // Its host writes must reach the GPU as in the program: the guard lets go.
                g.foreign_bind(memory, buffer);
            }
            return plain_bind(dev, buffer, memory, offset, down);
        };
        match guest {
            // The owner of the shared range (of each of its groups): bind as asked, then the
            // guests waiting for it.
            None => {
                let r = self.plain_bind(dev, &mut inner, buffer, memory, offset, down);
                if let Some(b) = inner.bufs.get_mut(&buffer) {
                    b.bind = Bind::Done;
                }
                if r == vk::Result::SUCCESS {
                    for s in slots {
                        self.release_guests(dev, &mut inner, s.group());
                    }
                }
                r
            }
            Some(_) if inner.bufs.get(&buffer).and_then(|b| b.early).is_some() => {
                let expected = inner.bufs.get(&buffer).and_then(|b| b.early);
                if expected != Some((memory, offset)) {
                    log::error!(
                        "enforce: staging buffer {buffer:#x} is bound at offset {offset} of {memory:#x}, but echo had already bound it where the plan said (its map was served before the bind); the host's view of it may be wrong"
                    );
                }
                vk::Result::SUCCESS
            }
            Some(guest) => {
                let host_bound = self.host_binding(dev, &inner, guest).is_some();
                if !host_bound && !has_next {
                    if let Some(b) = inner.bufs.get_mut(&buffer) {
                        b.bind = Bind::Pending { memory, offset };
                    }
                    self.pending.fetch_add(1, Ordering::Relaxed);
                    log::debug!("enforce: bind of {buffer:#x} deferred until its partner is bound");
                    return vk::Result::SUCCESS;
                }
                if !host_bound {
                    self.set_outcome(
                        &mut inner,
                        guest,
                        Err(
                            "bound (with extension structures) before its partner was bound".into(),
                        ),
                    );
                    if let Some(b) = inner.bufs.get_mut(&buffer) {
                        b.bind = Bind::Done;
                    }
                    return self.plain_bind(dev, &mut inner, buffer, memory, offset, down);
                }
                self.alias(dev, &mut inner, guest, buffer, memory, offset, down)
            }
        }
    }

    /// Where the host of `guest`'s range is bound: `d` for a staging member of
    /// `StagingIntoDevice`, member 0 for the device buffer of `DeviceIntoStaging`.
    fn host_binding(&self, dev: &DeviceData, inner: &Inner, guest: Slot) -> Option<(u64, u64)> {
        let g = inner.groups.get(&guest.group())?;
        let host = match (guest, g.direction) {
            (Slot::Staging(..), Direction::StagingIntoDevice) => g.device?,
            (Slot::Device(_), Direction::DeviceIntoStaging) => g.members.first()?.buffer?,
            _ => return None,
        };
        if inner.bufs.get(&host)?.bind != Bind::Done {
            return None;
        }
        let bound = dev.state.buffers.get(&host)?.bound?;
        // A host bound into an allocation echo did not make (or made late) hosts no guest: the
        // shared range must be driver memory echo can map and bind into.
        if self.is_virtual(inner, bound.0) {
            return None;
        }
        Some(bound)
    }

    /// A `vkMapMemory` echo serves itself: the application gets `ptr`, and the allocation is
    /// recorded as mapped (by the application, at `offset`, `len` bytes).
    fn hand_out_map(
        dev: &DeviceData,
        inner: &mut Inner,
        memory: u64,
        ptr: usize,
        offset: u64,
        len: u64,
        data: *mut *mut c_void,
    ) -> vk::Result {
        // SAFETY: data is the application's out pointer.
        unsafe { *data = ptr as *mut c_void };
        inner.mems.entry(memory).or_default().app_mapped = true;
        if let Some(mut m) = dev.state.memory.get_mut(&memory) {
            m.mapped = Some(Mapping {
                ptr,
                offset,
                size: len,
            });
            m.host_mapped = true;
        }
        vk::Result::SUCCESS
    }

    fn set_outcome(&self, inner: &mut Inner, guest: Slot, outcome: Result<(), String>) {
        if let Err(why) = &outcome {
            log::info!("enforce: group {} not applied: {why}", guest.group());
        }
        let Some(g) = inner.groups.get_mut(&guest.group()) else {
            return;
        };
        let m = match guest {
            Slot::Staging(_, m) => m,
            Slot::Device(_) => 0,
        };
        if let Some(m) = g.members.get_mut(m) {
            m.outcome = Some(outcome);
        }
    }

    /// The host of group `g` was just bound: bind every guest that waited for it.
    fn release_guests(&self, dev: &DeviceData, inner: &mut Inner, g: u32) {
        let waiting: Vec<(u64, Slot, u64, u64)> = inner
            .bufs
            .iter()
            .filter_map(|(&h, b)| match (b.bind, b.guest) {
                (Bind::Pending { memory, offset }, Some(s)) if s.group() == g => {
                    Some((h, s, memory, offset))
                }
                _ => None,
            })
            .collect();
        for (h, slot, memory, offset) in waiting {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            let mut down = |m: u64, o: u64| fp_bind(dev, h, m, o);
            let r = self.alias(dev, inner, slot, h, memory, offset, &mut down);
            if r != vk::Result::SUCCESS {
                log::warn!("enforce: deferred bind of buffer {h:#x} failed: {r:?}");
            }
        }
    }

    /// Binds guest `buffer` into its host's memory when every check passes, else as the
    /// application asked (recording why).
    #[allow(clippy::too_many_arguments)]
    fn alias(
        &self,
        dev: &DeviceData,
        inner: &mut Inner,
        slot: Slot,
        buffer: u64,
        memory: u64,
        offset: u64,
        down: &mut dyn FnMut(u64, u64) -> vk::Result,
    ) -> vk::Result {
        if let Some(b) = inner.bufs.get_mut(&buffer) {
            b.bind = Bind::Done;
        }
        let plan = match slot {
            Slot::Staging(..) => self.plan_staging_alias(dev, inner, slot, buffer, memory, offset),
            Slot::Device(g) => {
                let proven = inner.groups.get(&g).is_some_and(|x| x.device_mapped);
                if proven {
                    Ok(())
                } else {
                    self.refuse_written_guest(dev, memory)
                }
                .and_then(|()| self.plan_device_alias(dev, inner, slot, buffer))
            }
        };
        let (target, at, redirect, carry) = match plan {
            Ok(p) => p,
            Err(why) => {
                self.set_outcome(inner, slot, Err(why));
                return self.plain_bind(dev, inner, buffer, memory, offset, down);
            }
        };
        let r = down(target, at);
        if r != vk::Result::SUCCESS {
            if let Some(c) = carry {
                c.abandon(dev);
            }
            self.set_outcome(
                inner,
                slot,
                Err(format!("the redirected bind failed ({r:?})")),
            );
            return self.plain_bind(dev, inner, buffer, memory, offset, down);
        }
        if let Some(c) = carry {
            let n = c.run(dev);
            self.c.bytes_carried.fetch_add(n, Ordering::Relaxed);
            log::debug!(
                "enforce: {n} bytes the host wrote into buffer {buffer:#x}'s own allocation before its bind carried into {target:#x} at {at}"
            );
        }
        if let Some(mut b) = dev.state.buffers.get_mut(&buffer) {
            b.bound = Some((target, at));
        }
        inner.mems.entry(target).or_default().guests.insert(buffer);
        if let Some(b) = inner.mems.get_mut(&memory).and_then(|m| m.block.as_mut()) {
            // A device buffer of an allocation made in part: its bytes live at `at` of `target`
            // now, which stays while the allocation lives (a late allocation takes them there).
            let len = dev
                .state
                .buffers
                .get(&buffer)
                .map_or(0, |b| b.requirements.size);
            b.aliased.push((offset, len, target, at));
            inner.mems.entry(target).or_default().guests.insert(memory);
        }
        if let Some(g) = &self.guard {
            g.aliased(target);
        }
        if let Some(rd) = redirect {
            inner.mems.entry(memory).or_default().redirect = Some(rd);
        }
        self.c.binds_redirected.fetch_add(1, Ordering::Relaxed);
        self.any_alias.store(true, Ordering::Release);
        log::debug!("enforce: buffer {buffer:#x} bound into {target:#x} at {at}");
        self.set_outcome(inner, slot, Ok(()));
        vk::Result::SUCCESS
    }

    /// `StagingIntoDevice`: where staging buffer `h` goes in `d`'s memory, and the map redirect
    /// of `h`'s own allocation `memory`.
    fn plan_staging_alias(
        &self,
        dev: &DeviceData,
        inner: &mut Inner,
        slot: Slot,
        h: u64,
        memory: u64,
        offset: u64,
    ) -> Result<(u64, u64, Option<Redirect>, Option<Carry>), String> {
        let Slot::Staging(g, m) = slot else {
            return Err("internal: not a staging member".into());
        };
        let delta = inner.groups[&g].members[m].delta;
        let d = inner.groups[&g].device.ok_or("its device buffer is gone")?;
        self.identities_ok(inner, h, d)?;
        let (dmem, doff) = self
            .host_binding(dev, inner, slot)
            .ok_or("its device buffer is not bound")?;
        let target_off = doff as i128 - delta as i128;
        let shift = target_off - offset as i128;
        self.check_staging_target(dev, inner, g, m, h, memory, dmem, target_off)?;
        if let Some(rd) = inner.mems.get(&memory).and_then(|x| x.redirect) {
            if rd
                != (Redirect {
                    target: dmem,
                    shift,
                })
            {
                log::error!(
                    "enforce: staging buffer {h:#x} is bound at offset {offset} of its allocation, not where the plan said; its allocation's map was already redirected, so the host's writes land in the device buffer's memory: results may be wrong"
                );
                return Err(format!(
                    "bound at offset {offset} of its allocation, not at {} as in the plan",
                    inner.groups[&g].members[m].memory_offset
                ));
            }
        }
        let (mapped_now, written) = dev
            .state
            .memory
            .get(&memory)
            .map_or((false, false), |s| (s.mapped.is_some(), s.host_mapped));
        let redirected = inner
            .mems
            .get(&memory)
            .is_some_and(|x| x.redirect.is_some());
        if !redirected && mapped_now {
            // The application still holds a pointer into its own allocation: later writes
            // through it would not reach the shared range.
            return Err(
                "its allocation is mapped by the application while the device buffer is bound, so host writes through that mapping would not reach the shared memory"
                    .into(),
            );
        }
        let dst = self.ensure_echo_map(dev, inner, dmem)?;
        // Never lose a byte (DESIGN §6): what the host wrote into the buffer's range of its own
        // allocation before this bind (map → memcpy → unmap → bind) moves with it, once.
        // An allocation echo made late holds its bytes in the real allocation; one it never made
        // was only ever mapped through the redirect (nothing to carry).
        let source = self.physical(inner, memory);
        let carry = if !redirected && written && !self.skip_carry && source.is_some() {
            let len = dev.state.buffers.get(&h).map_or(0, |b| b.size);
            Some(Carry::prepare(
                dev,
                (memory, source.unwrap_or(memory)),
                offset,
                len,
                (dmem, dst + target_off as usize),
                (self.coherent(dev, memory), self.coherent(dev, dmem)),
            )?)
        } else {
            None
        };
        Ok((
            dmem,
            target_off as u64,
            Some(Redirect {
                target: dmem,
                shift,
            }),
            carry,
        ))
    }

    /// `DeviceIntoStaging` binds the device buffer into the staging range, so bytes the host
    /// may have written into the device buffer's own allocation before its bind would not be
    /// where it reads them: refuse (nothing is lost; the group is not applied) — unless the plan
    /// says the device buffer lives in a mapped block whose bytes under it the host never
    /// touches and no GPU command reads before writing (`device_mapped`, issue 12).
    fn refuse_written_guest(&self, dev: &DeviceData, memory: u64) -> Result<(), String> {
        if dev.state.memory.get(&memory).is_some_and(|s| s.host_mapped) {
            return Err(
                "its own allocation was mapped by the host before the bind, and bytes written there would not be where the aliased buffer reads them"
                    .into(),
            );
        }
        Ok(())
    }

    fn coherent(&self, dev: &DeviceData, memory: u64) -> bool {
        let ty = dev.state.memory.get(&memory).map_or(0, |m| m.type_index);
        self.type_flags
            .get(ty as usize)
            .is_some_and(|f| f & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0)
    }

    /// The checks of a `StagingIntoDevice` alias of member `(g, m)` (buffer `h`, own allocation
    /// `memory`) into `dmem` at `target_off`.
    #[allow(clippy::too_many_arguments)]
    fn check_staging_target(
        &self,
        dev: &DeviceData,
        inner: &Inner,
        g: u32,
        m: usize,
        h: u64,
        memory: u64,
        dmem: u64,
        target_off: i128,
    ) -> Result<(), String> {
        if let Some(why) = self.guard_refuses(Some(dmem)) {
            return Err(why);
        }
        let (dtype, dsize) = {
            let s = dev
                .state
                .memory
                .get(&dmem)
                .ok_or("the device allocation is unknown")?;
            (s.type_index, s.size)
        };
        if !self.host_visible(dtype) {
            return Err(format!(
                "the device buffer's memory (type {dtype}) is not host-visible, so the staging maps cannot be served from it"
            ));
        }
        let req = req_of(
            &dev.state
                .buffers
                .get(&h)
                .ok_or("the staging buffer is unknown")?
                .requirements,
        );
        check_redirect(
            &req,
            &Target {
                memory_type: dtype,
                memory_size: dsize,
                offset: target_off,
            },
        )
        .map_err(|r| format!("staging buffer into the device allocation: {r}"))?;
        let (own, msize) = {
            let s = dev
                .state
                .memory
                .get(&memory)
                .ok_or("its allocation is unknown")?;
            let by_key = inner.mems.get(&memory).and_then(|x| x.owner) == Some((g, m))
                && s.key.as_ref().is_some_and(|k| !self.ambiguous(false, k));
            (s.dedicated_buffer == Some(h) || by_key, s.size)
        };
        if !own {
            return Err(
                "its allocation was not recognised as its own (sub-allocated, or another key than in the plan), so its map cannot be redirected"
                    .into(),
            );
        }
        // Every byte the app can map of its allocation must land inside the device allocation.
        let offset_in_own = match inner.bufs.get(&h).map(|b| b.bind) {
            Some(Bind::Pending { offset, .. }) => offset,
            _ => dev
                .state
                .buffers
                .get(&h)
                .and_then(|b| b.bound.map(|x| x.1))
                .unwrap_or(inner.groups[&g].members[m].memory_offset),
        };
        echo_analyzer::apply::check_map_redirect(target_off, offset_in_own, msize, dsize)?;
        Ok(())
    }

    /// `DeviceIntoStaging`: where device buffer `d` goes in member 0's memory.
    fn plan_device_alias(
        &self,
        dev: &DeviceData,
        inner: &mut Inner,
        slot: Slot,
        d: u64,
    ) -> Result<(u64, u64, Option<Redirect>, Option<Carry>), String> {
        if let Some(why) = self.guard_refuses(None) {
            return Err(why);
        }
        let g = slot.group();
        let first = inner.groups[&g].members.first().ok_or("no member")?;
        let delta = first.delta;
        self.identities_ok(inner, d, first.buffer.ok_or("its staging buffer is gone")?)?;
        let (hmem, hoff) = self
            .host_binding(dev, inner, slot)
            .ok_or("its staging buffer is not bound")?;
        let (htype, hsize) = {
            let s = dev
                .state
                .memory
                .get(&hmem)
                .ok_or("the staging allocation is unknown")?;
            (s.type_index, s.size)
        };
        let req = req_of(
            &dev.state
                .buffers
                .get(&d)
                .ok_or("the device buffer is unknown")?
                .requirements,
        );
        let at = hoff as i128 + delta as i128;
        check_redirect(
            &req,
            &Target {
                memory_type: htype,
                memory_size: hsize,
                offset: at,
            },
        )
        .map_err(|r| format!("device buffer into the staging allocation: {r}"))?;
        Ok((hmem, at as u64, None, None))
    }

    /// Maps `dmem` once through the next layer (or adopts the application's whole mapping).
    fn ensure_echo_map(
        &self,
        dev: &DeviceData,
        inner: &mut Inner,
        dmem: u64,
    ) -> Result<usize, String> {
        if let Some(p) = inner.mems.get(&dmem).and_then(|x| x.echo_map) {
            return Ok(p);
        }
        let (size, app) = {
            let s = dev
                .state
                .memory
                .get(&dmem)
                .ok_or("the device allocation is unknown")?;
            (s.size, s.mapped)
        };
        let ptr = match app {
            Some(Mapping {
                ptr,
                offset: 0,
                size: n,
            }) if n >= size => ptr,
            Some(_) => {
                return Err("the application maps part of the device allocation itself".into())
            }
            // dmem is a live host-visible allocation of this device the application does not map.
            None => map_whole(dev, dmem)
                .map_err(|r| format!("mapping the device allocation failed ({r:?})"))?,
        };
        let e = inner.mems.entry(dmem).or_default();
        e.echo_map = Some(ptr);
        e.app_mapped = app.is_some();
        Ok(ptr)
    }

    // ------------------------------------------------------------------ first use

    /// Some bind is held back until its partner is bound.
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed) > 0
    }

    /// A command, descriptor or map uses `buffer`: a bind still held back is done now, as the
    /// application asked.
    #[inline]
    pub fn touch(&self, dev: &DeviceData, buffer: u64) {
        if self.pending.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut inner = self.lock();
        self.force_pending(dev, &mut inner, |h, _, _| h == buffer);
    }

    /// Binds as asked every held-back guest `pick(buffer, memory, slot)` selects.
    fn force_pending(
        &self,
        dev: &DeviceData,
        inner: &mut Inner,
        pick: impl Fn(u64, u64, Slot) -> bool,
    ) {
        let due: Vec<(u64, Slot, u64, u64)> = inner
            .bufs
            .iter()
            .filter_map(|(&h, b)| match (b.bind, b.guest) {
                (Bind::Pending { memory, offset }, Some(s)) if pick(h, memory, s) => {
                    Some((h, s, memory, offset))
                }
                _ => None,
            })
            .collect();
        for (h, slot, memory, offset) in due {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            if let Some(b) = inner.bufs.get_mut(&h) {
                b.bind = Bind::Done;
            }
            self.set_outcome(
                inner,
                slot,
                Err("used before its partner was bound; bound as the application asked".into()),
            );
            let r = self.plain_bind(dev, inner, h, memory, offset, &mut |m, o| {
                fp_bind(dev, h, m, o)
            });
            if r != vk::Result::SUCCESS {
                log::warn!("enforce: held-back bind of buffer {h:#x} failed: {r:?}");
            }
        }
    }

    // ------------------------------------------------------------------ maps

    /// `vkMapMemory`. `down(memory)` maps that allocation through the next layer (with the
    /// application's offset, size and flags).
    pub fn map(
        &self,
        dev: &DeviceData,
        memory: u64,
        offset: u64,
        size: u64,
        data: *mut *mut c_void,
        down: &mut dyn FnMut(u64) -> vk::Result,
    ) -> vk::Result {
        let mut inner = self.lock();
        if self.pending.load(Ordering::Relaxed) > 0 {
            // A staging member still waiting for its device buffer stays held back: what the
            // host writes through this map lands in its own allocation and is carried into the
            // shared range when it is finally bound there (or, if the allocation is still
            // mapped then, it is bound as asked). So does a device buffer of a `device_mapped`
            // group (issue 12): the plan shows the host never touches its bytes in the mapped
            // block, so a map of that block before its partner is bound changes nothing it
            // relies on (VMA maps a second block for the readback buffer after the device
            // buffer in it was bound). Any other guest is bound as asked now.
            let proven: Vec<u32> = inner
                .groups
                .iter()
                .filter(|(_, x)| x.device_mapped)
                .map(|(&g, _)| g)
                .collect();
            self.force_pending(dev, &mut inner, |_, m, slot| {
                m == memory
                    && (self.skip_carry
                        || match slot {
                            Slot::Staging(..) => false,
                            Slot::Device(g) => !proven.contains(&g),
                        })
            });
        }
        let msize = dev.state.memory.get(&memory).map_or(0, |m| m.size);
        let len = if size == vk::WHOLE_SIZE {
            msize.saturating_sub(offset)
        } else {
            size
        };
        if self.is_virtual(&inner, memory) {
            return self.map_virtual(dev, &mut inner, memory, offset, len, data, down);
        }
        let mut redirect = inner.mems.get(&memory).and_then(|m| m.redirect);
        if redirect.is_none() {
            redirect = self.predict_redirect(dev, &mut inner, memory);
        }
        let served = match redirect {
            Some(rd) => match self.ensure_echo_map(dev, &mut inner, rd.target) {
                Ok(base) => {
                    let at = rd.shift + offset as i128;
                    let tsize = dev.state.memory.get(&rd.target).map_or(0, |m| m.size);
                    (at >= 0 && at + len as i128 <= tsize as i128).then(|| {
                        self.c.maps_redirected.fetch_add(1, Ordering::Relaxed);
                        base + at as usize
                    })
                }
                Err(_) => None,
            },
            None => inner
                .mems
                .get(&memory)
                .and_then(|m| m.echo_map)
                .map(|base| base + offset as usize),
        };
        if let Some(ptr) = served {
            return Self::hand_out_map(dev, &mut inner, memory, ptr, offset, len, data);
        }
        if redirect.is_some() {
            log::error!(
                "enforce: a map of redirected allocation {memory:#x} falls outside the device allocation; mapping it as asked (the aliased staging buffer will not see these bytes)"
            );
        }
        let r = down(memory);
        if r == vk::Result::SUCCESS {
            if let Some(mut m) = dev.state.memory.get_mut(&memory) {
                // SAFETY: the next layer filled *data.
                m.mapped = Some(Mapping {
                    ptr: unsafe { *data } as usize,
                    offset,
                    size: len,
                });
                m.host_mapped = true;
            }
        }
        r
    }

    /// A staging member's own allocation is mapped before the member is bound (allocate, map,
    /// bind): redirect it now, at the offset the plan recorded, when the device buffer is bound
    /// and every check passes.
    fn predict_redirect(
        &self,
        dev: &DeviceData,
        inner: &mut Inner,
        memory: u64,
    ) -> Option<Redirect> {
        let (g, m) = inner.mems.get(&memory)?.owner?;
        let grp = inner.groups.get(&g)?;
        if grp.direction != Direction::StagingIntoDevice || grp.members[m].outcome.is_some() {
            return None;
        }
        let h = grp.members[m].buffer?;
        if inner.bufs.get(&h)?.bind != Bind::Unbound {
            return None;
        }
        self.identities_ok(inner, h, grp.device?).ok()?;
        let delta = grp.members[m].delta;
        let at_in_own = grp.members[m].memory_offset;
        let (dmem, doff) = self.host_binding(dev, inner, Slot::Staging(g, m))?;
        let target_off = doff as i128 - delta as i128;
        if let Err(why) = self.check_staging_target(dev, inner, g, m, h, memory, dmem, target_off) {
            log::debug!("enforce: map of {memory:#x} not redirected ahead of the bind: {why}");
            return None;
        }
        self.ensure_echo_map(dev, inner, dmem).ok()?;
        // Bind the member now, before any pointer is handed out: if the redirected bind fails,
        // the map goes to the driver and everything stays as the application asked. Its own
        // vkBindBufferMemory later is then answered without going down.
        let r = fp_bind(dev, h, dmem, target_off as u64);
        if r != vk::Result::SUCCESS {
            log::warn_once(
                "enforce-early-bind",
                format_args!("enforce: a redirected bind failed ({r:?}); that staging buffer stays as the application binds it (further failures are in the statistics)"),
            );
            self.set_outcome(
                inner,
                Slot::Staging(g, m),
                Err(format!("the redirected bind failed ({r:?})")),
            );
            return None;
        }
        if let Some(mut b) = dev.state.buffers.get_mut(&h) {
            b.bound = Some((dmem, target_off as u64));
        }
        if let Some(b) = inner.bufs.get_mut(&h) {
            b.bind = Bind::Done;
            b.early = Some((memory, at_in_own));
        }
        inner.mems.entry(dmem).or_default().guests.insert(h);
        if let Some(g) = &self.guard {
            g.aliased(dmem);
        }
        self.c.binds_redirected.fetch_add(1, Ordering::Relaxed);
        self.any_alias.store(true, Ordering::Release);
        self.set_outcome(inner, Slot::Staging(g, m), Ok(()));
        let rd = Redirect {
            target: dmem,
            shift: target_off - at_in_own as i128,
        };
        inner.mems.entry(memory).or_default().redirect = Some(rd);
        log::debug!(
            "enforce: staging buffer {h:#x} bound into {dmem:#x} at {target_off} ahead of its map"
        );
        Some(rd)
    }

    /// `vkUnmapMemory`: whether echo serves the mapping (the call must not go down), or which
    /// allocation to unmap through the next layer.
    pub fn unmap(&self, dev: &DeviceData, memory: u64) -> Unmap {
        let mut inner = self.lock();
        if self.is_virtual(&inner, memory) {
            return self.unmap_virtual(dev, &mut inner, memory);
        }
        let Some(m) = inner.mems.get_mut(&memory) else {
            return Unmap::Down(memory);
        };
        if m.redirect.is_none() && m.echo_map.is_none() {
            return Unmap::Down(memory);
        }
        m.app_mapped = false;
        if let Some(mut s) = dev.state.memory.get_mut(&memory) {
            s.mapped = None;
        }
        Unmap::Served
    }

    /// Flush/invalidate ranges of redirected allocations, translated into the device
    /// allocation (offsets rounded down and ends up to `nonCoherentAtomSize`). `None`: unchanged.
    pub fn translate_ranges(
        &self,
        dev: &DeviceData,
        ranges: &[vk::MappedMemoryRange<'_>],
    ) -> Option<Vec<vk::MappedMemoryRange<'static>>> {
        if !self.any_alias.load(Ordering::Acquire) && !self.any_virtual.load(Ordering::Acquire) {
            return None;
        }
        let inner = self.lock();
        if !ranges.iter().any(|r| {
            inner
                .mems
                .get(&r.memory.as_raw())
                .is_some_and(|m| m.redirect.is_some() || m.virt.is_some() || m.block.is_some())
        }) {
            return None;
        }
        let out = ranges
            .iter()
            .filter_map(|r| {
                if let Some(b) = self.block_range(&inner, r) {
                    // An allocation made in part: the window or the overflow, or nothing.
                    return b;
                }
                let mut n = vk::MappedMemoryRange {
                    memory: r.memory,
                    offset: r.offset,
                    size: r.size,
                    ..Default::default()
                };
                // An allocation echo did not make: ranges of a mapping of the real allocation (made
                // late) go to it; the others to the shared range it is served from.
                let rt = inner.mems.get(&r.memory.as_raw());
                let virt = rt.and_then(|m| m.virt.as_ref());
                if let Some(real) = virt.and_then(|v| {
                    v.real
                        .filter(|_| v.real_mapped || rt.is_some_and(|m| m.redirect.is_none()))
                }) {
                    n.memory = vk::DeviceMemory::from_raw(real);
                    return Some(n);
                }
                let rd = rt
                    .and_then(|m| m.redirect)
                    .or_else(|| virt.map(|v| v.home()));
                if let Some(rd) = rd {
                    let tsize = dev.state.memory.get(&rd.target).map_or(0, |m| m.size);
                    let start = (rd.shift + r.offset as i128).max(0) as u64;
                    let aligned = start - start % self.atom;
                    n.memory = vk::DeviceMemory::from_raw(rd.target);
                    n.offset = aligned;
                    n.size = if r.size == vk::WHOLE_SIZE {
                        vk::WHOLE_SIZE
                    } else {
                        let end = (start + r.size).div_ceil(self.atom) * self.atom;
                        end.min(tsize).saturating_sub(aligned)
                    };
                }
                Some(n)
            })
            .collect();
        Some(out)
    }

    // ------------------------------------------------------------------ lifetime

    /// `vkFreeMemory`: whether to free through the next layer (and which allocation), to defer
    /// the free (a guest still lives in the memory), or nothing to free at the driver (an
    /// allocation echo never made).
    pub fn free(
        &self,
        dev: &DeviceData,
        memory: u64,
        alloc: *const vk::AllocationCallbacks<'_>,
    ) -> FreeAction {
        let mut inner = self.lock();
        if self.pending.load(Ordering::Relaxed) > 0 {
            // A held-back bind into memory that is going away will never happen.
            let dropped: Vec<(u64, Slot)> = inner
                .bufs
                .iter()
                .filter_map(|(&h, b)| match (b.bind, b.guest) {
                    (Bind::Pending { memory: m, .. }, Some(s)) if m == memory => Some((h, s)),
                    _ => None,
                })
                .collect();
            for (h, slot) in dropped {
                self.pending.fetch_sub(1, Ordering::Relaxed);
                if let Some(b) = inner.bufs.get_mut(&h) {
                    b.bind = Bind::Done;
                }
                self.set_outcome(
                    &mut inner,
                    slot,
                    Err("its memory was freed before its partner was bound".into()),
                );
            }
        }
        if self.is_virtual(&inner, memory) {
            return self.free_virtual(dev, &mut inner, memory);
        }
        if let Some(m) = inner.mems.get_mut(&memory) {
            if !m.guests.is_empty() {
                // SAFETY: alloc is null or the application's valid callbacks.
                let cb = unsafe { alloc.as_ref() }.map(|a| {
                    Callbacks(vk::AllocationCallbacks {
                        p_user_data: a.p_user_data,
                        pfn_allocation: a.pfn_allocation,
                        pfn_reallocation: a.pfn_reallocation,
                        pfn_free: a.pfn_free,
                        pfn_internal_allocation: a.pfn_internal_allocation,
                        pfn_internal_free: a.pfn_internal_free,
                        _marker: std::marker::PhantomData,
                    })
                });
                m.deferred_free = Some(cb);
                self.c.frees_deferred.fetch_add(1, Ordering::Relaxed);
                log::debug!(
                    "enforce: free of {memory:#x} deferred: {} buffer(s) or allocation(s) echo did not make still live in it",
                    m.guests.len()
                );
                return FreeAction::Deferred;
            }
        }
        inner.mems.remove(&memory);
        for m in inner.mems.values_mut() {
            if m.redirect.is_some_and(|r| r.target == memory) {
                m.redirect = None;
            }
        }
        FreeAction::Down { memory, then: None }
    }

    /// `vkDestroyBuffer` (before the call goes down): forget the buffer; the memory to free once
    /// the call went down, when it was the last guest of a deferred free.
    pub fn buffer_destroyed(&self, dev: &DeviceData, buffer: u64) -> Option<DeferredFree> {
        let bound = dev.state.buffers.get(&buffer).and_then(|b| b.bound);
        let mut inner = self.lock();
        if let Some(b) = inner.bufs.remove(&buffer) {
            self.group_of.remove(&buffer);
            if matches!(b.bind, Bind::Pending { .. }) {
                self.pending.fetch_sub(1, Ordering::Relaxed);
            }
            for slot in &b.slots {
                if let Some(g) = inner.groups.get_mut(&slot.group()) {
                    match *slot {
                        Slot::Device(_) => g.device = None,
                        Slot::Staging(_, m) => g.members[m].buffer = None,
                    }
                }
                if let (Slot::Staging(g, m), true) =
                    (*slot, self.any_virtual.load(Ordering::Acquire))
                {
                    self.member_gone(dev, &mut inner, (g, m));
                }
            }
        }
        let (mem, _) = bound?;
        let m = inner.mems.get_mut(&mem)?;
        if !m.guests.remove(&buffer) || !m.guests.is_empty() {
            return None;
        }
        let cb = m.deferred_free.take()?;
        inner.mems.remove(&mem);
        Some(DeferredFree(mem, cb))
    }

    /// Frees a memory whose free was deferred.
    pub fn free_now(&self, dev: &DeviceData, f: DeferredFree) {
        log::debug!("enforce: deferred free of {:#x} done", f.0);
        dev.state.memory.remove(&f.0);
        let cb = f.1.as_ref().map_or(std::ptr::null(), |c| &c.0 as *const _);
        // SAFETY: the application freed this memory; no buffer lives in it any more.
        let mapping = self.guard.as_ref().and_then(|g| g.before_free(f.0));
        unsafe { (dev.fp.free_memory)(dev.handle, vk::DeviceMemory::from_raw(f.0), cb) };
        drop(mapping); // unmapped only once the driver let go of it
    }

    /// `vkDestroyDevice` (before the call goes down): frees still deferred.
    pub fn device_destroyed(&self, dev: &DeviceData) {
        let due: Vec<DeferredFree> = {
            let mut inner = self.lock();
            let ids: Vec<u64> = inner
                .mems
                .iter()
                .filter(|(_, m)| m.deferred_free.is_some())
                .map(|(&k, _)| k)
                .collect();
            ids.into_iter()
                .filter_map(|k| {
                    let m = inner.mems.remove(&k)?;
                    Some(DeferredFree(k, m.deferred_free?))
                })
                .collect()
        };
        for f in due {
            self.free_now(dev, f);
        }
        if let Some(g) = &self.guard {
            g.device_destroyed(dev);
        }
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
            for (i, m) in g.members.iter().enumerate().take(used) {
                match &m.outcome {
                    Some(Ok(())) => {}
                    Some(Err(why)) => reasons.push((Some(i), why.clone())),
                    None if !m.seen => reasons.push((
                        Some(i),
                        "its staging buffer was not created in this run".into(),
                    )),
                    None => reasons.push((Some(i), "never bound".into())),
                }
            }
            if reasons.is_empty() && PlanIndex::is_beyond(*id) {
                s.class_instances_applied += 1;
            } else if reasons.is_empty() {
                s.groups_applied += 1;
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

/// Bytes of a staging buffer's own allocation to move into the shared range at its redirected
/// bind. Prepared (source mapped through the next layer) before the bind, so a failure leaves
/// the bind as the application asked; run only after the redirected bind succeeded.
pub(super) struct Carry {
    memory: u64,
    src: usize,
    len: usize,
    dst_memory: u64,
    dst: usize,
    /// The destination memory is host-coherent (else echo flushes what it wrote).
    dst_coherent: bool,
    src_coherent: bool,
}

impl Carry {
    /// `(memory, physical)`: the application's handle (its size is in the state) and the
    /// allocation that holds its bytes at the driver (the same, unless echo made it late).
    fn prepare(
        dev: &DeviceData,
        (memory, physical): (u64, u64),
        offset: u64,
        len: u64,
        (dst_memory, dst): (u64, usize),
        (src_coherent, dst_coherent): (bool, bool),
    ) -> Result<Carry, String> {
        let size = dev
            .state
            .memory
            .get(&memory)
            .map(|m| m.size)
            .ok_or("its allocation is unknown")?;
        let len = len.min(size.saturating_sub(offset));
        // The application does not map it now (checked by the caller); mapping the whole
        // allocation needs no atom alignment.
        let p = map_whole(dev, physical).map_err(|r| {
            format!(
                "the bytes written into its allocation before the bind could not be read to carry them over (map failed: {r:?})"
            )
        })?;
        Ok(Carry {
            memory: physical,
            src: p + offset as usize,
            len: len as usize,
            dst_memory,
            dst,
            dst_coherent,
            src_coherent,
        })
    }

    fn whole(memory: u64) -> vk::MappedMemoryRange<'static> {
        vk::MappedMemoryRange {
            memory: vk::DeviceMemory::from_raw(memory),
            offset: 0,
            size: vk::WHOLE_SIZE,
            ..Default::default()
        }
    }

    /// Copies the bytes and unmaps the source; returns the bytes moved.
    fn run(self, dev: &DeviceData) -> u64 {
        // SAFETY: src is inside echo's own mapping of the staging allocation, dst inside echo's
        // mapping of the device allocation (checked by check_redirect), len within both; no GPU
        // work can use the range yet: the buffer is only now bound there.
        unsafe {
            if !self.src_coherent {
                let r = Carry::whole(self.memory);
                let _ = (dev.fp.invalidate_mapped_memory_ranges)(dev.handle, 1, &r);
            }
            std::ptr::copy_nonoverlapping(self.src as *const u8, self.dst as *mut u8, self.len);
            if !self.dst_coherent {
                let r = Carry::whole(self.dst_memory);
                let _ = (dev.fp.flush_mapped_memory_ranges)(dev.handle, 1, &r);
            }
        }
        let n = self.len as u64;
        self.abandon(dev);
        n
    }

    /// Unmaps the source without copying (the redirected bind failed).
    fn abandon(self, dev: &DeviceData) {
        // SAFETY: echo mapped it in `prepare`.
        unsafe { (dev.fp.unmap_memory)(dev.handle, vk::DeviceMemory::from_raw(self.memory)) };
    }
}

/// Maps all of `memory` through the next layer (echo's own mapping); the host address.
fn map_whole(dev: &DeviceData, memory: u64) -> Result<usize, vk::Result> {
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

/// Binds through the next layer as asked and records where.
fn plain_bind(
    dev: &DeviceData,
    buffer: u64,
    memory: u64,
    offset: u64,
    down: &mut dyn FnMut(u64, u64) -> vk::Result,
) -> vk::Result {
    let r = down(memory, offset);
    if r == vk::Result::SUCCESS {
        if let Some(mut b) = dev.state.buffers.get_mut(&buffer) {
            b.bound = Some((memory, offset));
        }
    }
    r
}

/// Echo's own bind through the next layer (deferred binds).
fn fp_bind(dev: &DeviceData, buffer: u64, memory: u64, offset: u64) -> vk::Result {
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

use ash::vk::Handle;

mod virt;
mod window;
pub use virt::{FreeAction, Unmap};
