//! Per-instance and per-device records, keyed by dispatch key, with the next layer's tables.
//!
//! The dispatch key is the first pointer-sized word of a dispatchable handle: the loader's
//! dispatch table, shared by an instance and its physical devices, and by a device and its
//! queues and command buffers. Non-dispatchable handles are opaque `u64`s and never dereferenced
//! (a layer below may wrap them).

use crate::hooks::{HookId, HOOK_COUNT};
use crate::log;
use crate::state::DeviceState;
use ash::vk;
use dashmap::DashMap;
use echo_analyzer::settings::{Mode, Settings};
use echo_analyzer::topology::{MemoryTable, Topology};
use std::collections::HashSet;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub type Key = usize;

/// Hashes handle keys: opaque 64-bit handles and dispatch keys, values the driver and loader
/// choose (no attacker picks them, so SipHash's flood resistance buys nothing, while it cost
/// about 450 instructions per `vkCreateBuffer`+`vkDestroyBuffer` in the per-handle maps). One
/// multiply spreads the pointer-like bits over the word; the fold feeds the high bits (DashMap's
/// shard choice) into the low ones (hashbrown's bucket).
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(29) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

pub type HandleBuild = std::hash::BuildHasherDefault<HandleHasher>;
/// A concurrent map keyed by handles (the state tracker's one map per handle type).
pub type HandleMap<K, V> = DashMap<K, V, HandleBuild>;
/// A concurrent set of handles.
pub type HandleSet<K> = dashmap::DashSet<K, HandleBuild>;

/// The dispatch key of a dispatchable handle.
///
/// # Safety
/// `raw` must be a live dispatchable handle (instance, physical device, device, queue, command
/// buffer) created through the loader.
#[inline]
pub unsafe fn key_of(raw: u64) -> Key {
    *(raw as usize as *const usize)
}

#[inline]
pub fn raw<H: vk::Handle>(h: H) -> u64 {
    h.as_raw()
}

#[allow(dead_code)] // fields read by profile and enforce mode
pub struct InstanceData {
    pub handle: vk::Instance,
    pub next_gipa: vk::PFN_vkGetInstanceProcAddr,
    /// The next layer's Vulkan 1.0 instance commands.
    pub fp: ash::InstanceFnV1_0,
    /// `vkGetPhysicalDeviceProperties2` (1.1) or its KHR alias, only where the instance makes
    /// it legal (`apiVersion` ≥ 1.1, or the KHR extension enabled) and the next layer has it.
    pub get_physical_device_properties2: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    /// `vkGetPhysicalDeviceImageFormatProperties2` (1.1) or its KHR alias, under the same rule,
    /// the KHR one only with `VK_KHR_external_memory_capabilities` enabled too (echo asks it with
    /// `VkPhysicalDeviceExternalImageFormatInfo`). Resolved at `vkCreateInstance`: resolved later,
    /// the loader's terminator answers with the top of the chain's entry, which a layer above
    /// (RenderDoc) may not have filled for an extension only echo enabled.
    pub get_physical_device_image_format_properties2:
        Option<vk::PFN_vkGetPhysicalDeviceImageFormatProperties2>,
    pub settings: Settings,
    /// The application's `apiVersion` (1.0 when it gave none).
    pub api_version: u32,
    /// Instance extensions enabled: the application's plus any echo added for itself.
    pub extensions: HashSet<String>,
}

impl InstanceData {
    /// The next layer's instance-level command `name`, if it has one.
    pub fn next_proc(&self, name: &CStr) -> vk::PFN_vkVoidFunction {
        // SAFETY: next_gipa comes from the loader's link info for this instance.
        unsafe { (self.next_gipa)(self.handle, name.as_ptr()) }
    }

    /// `vkGetPhysicalDeviceProperties2` for `pd` when calling it is legal: the instance allows
    /// it (see the field) and, for the core command, the physical device supports 1.1 too.
    pub fn properties2(
        &self,
        pd: vk::PhysicalDevice,
    ) -> Option<vk::PFN_vkGetPhysicalDeviceProperties2> {
        let f = self.get_physical_device_properties2?;
        if self.api_version >= vk::API_VERSION_1_1 {
            let mut props = vk::PhysicalDeviceProperties::default();
            // SAFETY: pd belongs to this instance; the out struct is valid.
            unsafe { (self.fp.get_physical_device_properties)(pd, &mut props) };
            if props.api_version < vk::API_VERSION_1_1
                && !self
                    .extensions
                    .contains("VK_KHR_get_physical_device_properties2")
            {
                return None;
            }
        }
        Some(f)
    }

    /// `vkGetPhysicalDeviceImageFormatProperties2` (or its KHR alias) for `pd`, where asking it
    /// with `VkPhysicalDeviceExternalImageFormatInfo` is legal: the properties2 query is (see
    /// [`InstanceData::properties2`]) and external-memory capabilities are core (1.1) or enabled.
    pub fn image_format_properties2(
        &self,
        pd: vk::PhysicalDevice,
    ) -> Option<vk::PFN_vkGetPhysicalDeviceImageFormatProperties2> {
        // The same legality as the properties2 query (core needs a 1.1 physical device too).
        self.properties2(pd)?;
        self.get_physical_device_image_format_properties2
    }

    /// The physical device's memory table and type, read through the next layer (so a layer
    /// below can present another table), plus its name.
    pub fn memory_table(
        &self,
        pd: vk::PhysicalDevice,
    ) -> (MemoryTable, String, vk::PhysicalDeviceProperties) {
        let mut props = vk::PhysicalDeviceProperties::default();
        let mut mem = vk::PhysicalDeviceMemoryProperties::default();
        // SAFETY: pd belongs to this instance; the out structs are valid.
        unsafe {
            (self.fp.get_physical_device_properties)(pd, &mut props);
            (self.fp.get_physical_device_memory_properties)(pd, &mut mem);
        }
        let name = props
            .device_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let table = MemoryTable::from_raw(
            props.device_type.as_raw(),
            mem.memory_heaps_as_slice()
                .iter()
                .map(|h| (h.size, h.flags.as_raw())),
            mem.memory_types_as_slice()
                .iter()
                .map(|t| (t.heap_index, t.property_flags.as_raw())),
        );
        (table, name, props)
    }
}

/// Why a device is (in)active, decided once at `vkCreateDevice`.
#[derive(Clone, Debug)]
#[allow(dead_code)] // fields read by profile and enforce mode
pub struct Decision {
    pub name: String,
    pub table: MemoryTable,
    pub topology: Topology,
    pub mode: Mode,
    pub active: bool,
    pub why: String,
}

/// A test-only panic injection point (`VK_ECHO_TEST_PANIC=<command>[@after]`).
#[derive(Clone, Copy, Debug)]
pub struct PanicAt {
    pub hook: HookId,
    /// Panic after the call went down to the next layer instead of before.
    pub after: bool,
}

#[allow(dead_code)] // fields read by profile and enforce mode
pub struct DeviceData {
    pub handle: vk::Device,
    /// Creation index in the process (`crate::lifetime`): traces and plans name devices by it.
    pub index: u32,
    /// Its statistics were written (at `vkDestroyDevice` or at exit): once only.
    pub stats_written: AtomicBool,
    /// The smallest buffer or allocation size that gets a stable key (`u64::MAX`: none).
    pub key_floor: std::sync::atomic::AtomicU64,
    pub physical_device: vk::PhysicalDevice,
    pub instance: Option<Arc<InstanceData>>,
    pub next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    /// The next layer's Vulkan 1.0 device commands, for echo's own calls.
    pub fp: ash::DeviceFnV1_0,
    /// The next layer's pointer for every hooked command, by [`HookId`]; `None` where the next
    /// layer has none (then echo hands out no hook for it either).
    pub next: [vk::PFN_vkVoidFunction; HOOK_COUNT],
    /// The next layer's pointer for every command echo steps aside from, by its index in
    /// `hooks::aside::ASIDE`; `None` where the next layer has none.
    pub aside_next: Vec<vk::PFN_vkVoidFunction>,
    pub settings: Settings,
    pub decision: Decision,
    /// Extensions enabled on the device: the application's plus any echo added.
    pub extensions: HashSet<String>,
    /// Extensions echo added for itself (not visible to the application's requests).
    pub added_extensions: Vec<String>,
    /// The application enabled `sparseBinding` (`vkQueueBindSparse` may name memory).
    pub sparse_binding: bool,
    /// The device's effective API version: the lower of the application's and the device's.
    pub api_version: u32,
    /// Set when echo hit an internal error on this device: passthrough from then on.
    pub failed: AtomicBool,
    pub panic_at: Option<PanicAt>,
    pub state: DeviceState,
    /// Profile mode's recorder, once `profile::start` ran for this device.
    pub profile: OnceLock<crate::profile::Profiler>,
    /// What enforce/auto start-up decided for this device (`enforce::start`), once it ran.
    pub enforce: OnceLock<crate::enforce::Start>,
}

impl DeviceData {
    /// Whether echo's hooks do anything for this device.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.decision.active && !self.failed.load(Ordering::Relaxed)
    }

    /// The profiler, when this device is being profiled.
    #[inline]
    pub fn profile(&self) -> Option<&crate::profile::Profiler> {
        self.profile.get()
    }

    /// The enforcer, when this device applies a plan.
    #[inline]
    pub fn enforce(&self) -> Option<&crate::enforce::Enforcer> {
        match self.enforce.get() {
            Some(crate::enforce::Start::Enforce(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether a buffer or allocation of `size` bytes gets a stable key (call site + ordinal).
    /// Taking the call site unwinds the stack, the main cost of `vkCreateBuffer` in these modes,
    /// so only objects that can matter get one: in profile mode those of at least `min_bytes`
    /// (smaller ones can never be candidates; they are traced without identity), in enforce mode
    /// those at least as large as the smallest buffer the plan names (none without a plan).
    #[inline]
    pub fn wants_key(&self, size: u64) -> bool {
        size >= self.key_floor.load(Ordering::Relaxed)
    }

    /// Sets the key floor once profile/enforce start-up decided (see [`DeviceData::wants_key`]).
    pub fn set_key_floor(&self, floor: u64) {
        self.key_floor.store(floor, Ordering::Relaxed);
    }

    /// The next layer's device-level command `name`.
    pub fn next_proc(&self, name: &CStr) -> vk::PFN_vkVoidFunction {
        // SAFETY: next_gdpa comes from the loader's link info for this device.
        unsafe { (self.next_gdpa)(self.handle, name.as_ptr()) }
    }

    /// Marks the device failed after an internal error in `what`; logs once per device.
    pub fn fail(&self, what: &str) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            log::error!(
                "internal error in {what} on device '{}'; echo falls back to passthrough for this device",
                self.decision.name
            );
        }
    }
}

/// A next-layer pointer, typed.
///
/// # Safety
/// `F` must be the function-pointer type of the command `p` was resolved for.
#[inline]
pub unsafe fn typed<F: Copy>(p: unsafe extern "system" fn()) -> F {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    std::mem::transmute_copy(&p)
}

fn instances() -> &'static HandleMap<Key, Arc<InstanceData>> {
    static M: OnceLock<HandleMap<Key, Arc<InstanceData>>> = OnceLock::new();
    M.get_or_init(HandleMap::default)
}

fn devices() -> &'static HandleMap<Key, Arc<DeviceData>> {
    static M: OnceLock<HandleMap<Key, Arc<DeviceData>>> = OnceLock::new();
    M.get_or_init(HandleMap::default)
}

/// The next layer's `vkGetDeviceProcAddr` of every device echo saw created, recorded before
/// anything that could fail, so `vkGetDeviceProcAddr` can always answer.
fn device_links() -> &'static HandleMap<Key, vk::PFN_vkGetDeviceProcAddr> {
    static M: OnceLock<HandleMap<Key, vk::PFN_vkGetDeviceProcAddr>> = OnceLock::new();
    M.get_or_init(HandleMap::default)
}

pub fn insert_instance(key: Key, data: InstanceData) {
    instances().insert(key, Arc::new(data));
}
pub fn instance(key: Key) -> Option<Arc<InstanceData>> {
    instances().get(&key).map(|r| Arc::clone(r.value()))
}
pub fn remove_instance(key: Key) -> Option<Arc<InstanceData>> {
    instances().remove(&key).map(|(_, v)| v)
}

pub fn insert_device_link(key: Key, gdpa: vk::PFN_vkGetDeviceProcAddr) {
    device_links().insert(key, gdpa);
}
pub fn device_link(key: Key) -> Option<vk::PFN_vkGetDeviceProcAddr> {
    device_links().get(&key).map(|r| *r.value())
}
pub fn insert_device(key: Key, data: DeviceData) {
    let data = Arc::new(data);
    let ptr = Arc::as_ptr(&data).cast_mut();
    // A slot never outlives the map entry that owns its device: cleared before the entry goes.
    fast::clear(key);
    devices().insert(key, data);
    fast::claim(key, ptr);
}

/// The device a hook runs on: a lock-free borrow from [`fast`] for the first devices, a shared
/// reference from the map for the others.
pub enum DeviceRef {
    /// Owned by `devices()`: its entry outlives every call on the device (the application may
    /// not call a device while or after destroying it).
    Fast(std::ptr::NonNull<DeviceData>),
    Shared(Arc<DeviceData>),
}

impl std::ops::Deref for DeviceRef {
    type Target = DeviceData;
    #[inline]
    fn deref(&self) -> &DeviceData {
        match self {
            // SAFETY: see the variant: the map entry that owns it is alive for this call.
            DeviceRef::Fast(p) => unsafe { p.as_ref() },
            DeviceRef::Shared(a) => a,
        }
    }
}

/// The device behind dispatch key `key`, for the duration of one call on it.
#[inline]
pub fn device_for_call(key: Key) -> Option<DeviceRef> {
    match fast::find(key) {
        Some(p) => Some(DeviceRef::Fast(p)),
        None => device(key).map(DeviceRef::Shared),
    }
}

#[inline]
pub fn device(key: Key) -> Option<Arc<DeviceData>> {
    devices().get(&key).map(|r| Arc::clone(r.value()))
}

/// A few fixed slots `(key, device)` read without a lock on every hooked call: the map's lookup
/// (hash, shard lock, probe, reference count) was half of a hook's cost (bench/RESULTS.md, per
/// call costs). A slot is written only when a device is created or destroyed, which the
/// application may not do concurrently with calls on that device (`vkDestroyDevice`'s external
/// synchronization); devices beyond the slots use the map.
mod fast {
    use super::{DeviceData, Key};
    use std::ptr::NonNull;
    use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

    const SLOTS: usize = 8;

    struct Slot {
        /// 0 when free; set after `ptr`, cleared before it.
        key: AtomicUsize,
        ptr: AtomicPtr<DeviceData>,
    }

    static FAST: [Slot; SLOTS] = [const {
        Slot {
            key: AtomicUsize::new(0),
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }; SLOTS];

    #[inline]
    pub(super) fn find(key: Key) -> Option<NonNull<DeviceData>> {
        if key == 0 {
            return None;
        }
        FAST.iter()
            .find(|s| s.key.load(Ordering::Acquire) == key)
            .and_then(|s| NonNull::new(s.ptr.load(Ordering::Acquire)))
    }

    /// Takes a free slot for `key` (none when all are taken: the map serves it).
    pub(super) fn claim(key: Key, ptr: *mut DeviceData) {
        if key == 0 {
            return;
        }
        for s in &FAST {
            if s.ptr
                .compare_exchange(
                    std::ptr::null_mut(),
                    ptr,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                s.key.store(key, Ordering::Release);
                return;
            }
        }
    }

    /// Frees `key`'s slot, if it has one.
    pub(super) fn clear(key: Key) {
        if key == 0 {
            return;
        }
        for s in &FAST {
            if s.key.load(Ordering::Acquire) == key {
                s.key.store(0, Ordering::Release);
                s.ptr.store(std::ptr::null_mut(), Ordering::Release);
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn slots_are_found_cleared_and_reused() {
            // Keys no real dispatch table has (odd), so parallel tests cannot collide.
            let (a, b) = (0x1001, 0x2001);
            let (pa, pb) = (0x10 as *mut DeviceData, 0x20 as *mut DeviceData);
            claim(a, pa);
            claim(b, pb);
            assert_eq!(find(a).map(|p| p.as_ptr()), Some(pa));
            assert_eq!(find(b).map(|p| p.as_ptr()), Some(pb));
            clear(a);
            assert_eq!(find(a), None);
            assert_eq!(find(b).map(|p| p.as_ptr()), Some(pb));
            claim(a, pb);
            assert_eq!(find(a).map(|p| p.as_ptr()), Some(pb));
            clear(a);
            clear(b);
            assert_eq!((find(a), find(b)), (None, None));
        }
    }
}
/// Every live device, in no particular order (for the exit-time path).
pub fn live_devices() -> Vec<Arc<DeviceData>> {
    devices().iter().map(|r| Arc::clone(r.value())).collect()
}

/// Live instances.
pub fn instance_count() -> usize {
    instances().len()
}

pub fn remove_device(key: Key) -> Option<Arc<DeviceData>> {
    fast::clear(key);
    device_links().remove(&key);
    devices().remove(&key).map(|(_, v)| v)
}

/// The `n` elements at `p` of an API array (`pXs` / `xCount`), empty when `p` is null or `n` 0.
///
/// # Safety
/// `p` must be null or point to `n` valid elements that outlive `'a`.
#[inline]
pub unsafe fn slice<'a, T>(p: *const T, n: u32) -> &'a [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n as usize)
    }
}

/// Name of a C string for messages.
///
/// # Safety
/// `p` must be null or a valid C string.
pub unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a CStr> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p))
    }
}
