//! Per-instance and per-device records, keyed by dispatch key, with the next layer's tables.
//!
//! The dispatch key is the first pointer-sized word of a dispatchable handle: the loader's
//! dispatch table, shared by an instance and its physical devices, and by a device and its
//! queues and command buffers. Non-dispatchable handles are opaque `u64`s and never dereferenced
//! (a layer below may wrap them).

use crate::hook_id::{HookId, HOOK_COUNT};
use ash::vk;
use std::sync::{Arc, OnceLock};

pub use crate::records::*;

#[derive(Clone, Copy, Debug)]
pub struct PanicAt {
    pub hook: HookId,
    /// Panic after the call went down to the next layer instead of before.
    pub after: bool,
}

/// The hooks' record of a device: the device as below sees it ([`Device`]), the next layer's
/// pointer for every hooked name, and the modes' state — above profile and enforce, which take
/// the [`Device`] only.
pub struct DeviceData {
    pub device: Device,
    /// The next layer's pointer for every hooked name (followed, stepped aside from, marked), by
    /// [`HookId`]: the one table of the next layer's functions. `None` where the next layer has
    /// none (then echo hands out no intercept for it either).
    pub next: [vk::PFN_vkVoidFunction; HOOK_COUNT],
    pub panic_at: Option<PanicAt>,
    /// Profile mode's recorder, once `profile::start` ran for this device.
    pub profile: OnceLock<crate::profile::Profiler>,
    /// What enforce/auto start-up decided for this device (`enforce::start`), once it ran.
    pub enforce: OnceLock<crate::enforce::Start>,
}

impl std::ops::Deref for DeviceData {
    type Target = Device;
    #[inline]
    fn deref(&self) -> &Device {
        &self.device
    }
}

impl DeviceData {
    /// The profiler, when this device is being profiled.
    #[inline]
    pub fn profile(&self) -> Option<&crate::profile::Profiler> {
        self.profile.get()
    }

    /// The call site of an object this device creates now (`callsite::site`): with its frames
    /// when profile mode writes them into the trace.
    #[inline]
    pub fn site(&self) -> (u64, Vec<echo_analyzer::trace::Frame>) {
        crate::callsite::site(self.settings.stack_depth as usize, self.profile().is_some())
    }

    /// The enforcer, when this device applies a plan.
    #[inline]
    pub fn enforce(&self) -> Option<&crate::enforce::Enforcer> {
        match self.enforce.get() {
            Some(crate::enforce::Start::Enforce(e)) => Some(e),
            _ => None,
        }
    }
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
