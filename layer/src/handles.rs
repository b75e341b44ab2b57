//! The bottom of the layer: handles, dispatch keys, the concurrent maps every room keeps its
//! per-handle records in, and the small helpers for raw API arrays and pointers. It names no
//! other module of the layer.

use ash::vk;
use dashmap::DashMap;
use std::ffi::{c_char, CStr};

pub type Key = usize;

/// Hashes handle keys: opaque 64-bit handles and dispatch keys, values the driver and loader
/// choose (no attacker picks them, so SipHash's flood resistance buys nothing, while it cost
/// about 450 instructions per `vkCreateBuffer`+`vkDestroyBuffer` in the per-handle maps): the
/// analyzer's [`echo_analyzer::fasthash::FastHasher`], one multiply per word.
pub use echo_analyzer::fasthash::FastHasher as HandleHasher;

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

/// A next-layer pointer, typed.
///
/// # Safety
/// `F` must be the function-pointer type of the command `p` was resolved for.
#[inline]
pub unsafe fn typed<F: Copy>(p: unsafe extern "system" fn()) -> F {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    std::mem::transmute_copy(&p)
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
