//! Stepping aside (issue 32): the commands the registry says can reach memory and echo does not
//! follow get a generated hook (`aside_gen.rs`, from `vk.xml` by `layer/registry`) on an active
//! device, so none reaches the driver unseen. Each hook reports what it names here, then calls
//! down unchanged:
//!
//! - profile records an `aside` event (the command, its command buffer, the buffers, memory,
//!   views and descriptor sets it names, or `everything` when it runs work over bound state or
//!   names buffers through structures echo does not read); the analysis takes those buffers out
//!   of every group, saying which command made them leave;
//! - enforce binds any of them still held back (a command may not name a buffer with no memory
//!   bound) and says once when a command the plan never saw reaches a buffer it aliased.
//!
//! A command that names nothing echo could alias (only images, or device addresses, which S3
//! already keeps apart) leaves every group where it was and costs one lookup.

use crate::dispatch::{self, typed, DeviceData};
use crate::log;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use super::aside_gen::ASIDE;

/// What a handle argument is (`View`: no aside command of today's registry takes one directly).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    Buffer,
    View,
    Memory,
    Set,
}

/// A handle argument of an aside command: one, or an array with its count.
#[derive(Clone, Copy, Debug)]
pub enum Named {
    One(What, u64),
    Array(What, *const u64, u32),
}

/// The handles an aside call names, by kind (null handles left out).
#[derive(Default, Debug)]
pub struct Names {
    pub buffers: Vec<u64>,
    pub views: Vec<u64>,
    pub memory: Vec<u64>,
    pub sets: Vec<u64>,
}

impl Names {
    /// # Safety
    /// Arrays must hold their count of handles (or be null).
    unsafe fn of(named: &[Named]) -> Names {
        let mut n = Names::default();
        let mut put = |w: What, h: u64| {
            if h == 0 {
                return;
            }
            match w {
                What::Buffer => n.buffers.push(h),
                What::View => n.views.push(h),
                What::Memory => n.memory.push(h),
                What::Set => n.sets.push(h),
            }
        };
        for x in named {
            match *x {
                Named::One(w, h) => put(w, h),
                Named::Array(w, p, c) => {
                    for h in dispatch::slice(p, c) {
                        put(w, *h);
                    }
                }
            }
        }
        n
    }
}

/// The index of `name` in [`ASIDE`], if echo steps aside from it.
pub fn index_of(name: &[u8]) -> Option<usize> {
    ASIDE.iter().position(|(n, _, _)| n.as_bytes() == name)
}

/// Echo's hook for aside command `name`.
pub fn hook_of(name: &[u8]) -> Option<unsafe extern "system" fn()> {
    index_of(name).map(|i| ASIDE[i].2)
}

/// Every aside hook's body: the next layer's function for command `idx` of the device behind
/// the dispatchable handle `first`, after reporting what the call names (active devices only).
/// `None` when echo does not know the device or the next layer lacks the command.
///
/// # Safety
/// `first` is the call's dispatchable handle; `named` arrays hold their counts.
#[inline]
pub unsafe fn called<F: Copy>(
    first: usize,
    idx: usize,
    first_is_cb: bool,
    everything: bool,
    named: &[Named],
) -> Option<F> {
    let name = ASIDE[idx].0;
    let found = catch_unwind(AssertUnwindSafe(|| {
        let dev = dispatch::device_for_call(dispatch::key_of(first as u64))?;
        let next = dev.aside_next.get(idx).copied().flatten()?;
        if first_is_cb && dev.is_active() {
            if let Some(e) = dev.enforce() {
                e.mark_content(first as u64); // issue 35: real work (`enforce/empty.rs`)
            }
        }
        if dev.is_active() && (everything || !named.is_empty()) {
            let cmd = first_is_cb.then_some(first as u64);
            if catch_unwind(AssertUnwindSafe(|| {
                report(&dev, cmd, name, everything, named)
            }))
            .is_err()
            {
                dev.fail(name);
            }
        }
        Some(next)
    }))
    .ok()
    .flatten();
    match found {
        // SAFETY: aside_next[idx] was resolved for exactly this command.
        Some(p) => Some(typed(p)),
        None => {
            log::warn_once(
                name,
                format_args!(
                    "{name} called on a device echo does not know, or missing in the next layer"
                ),
            );
            None
        }
    }
}

unsafe fn report(
    dev: &DeviceData,
    cmd: Option<u64>,
    name: &'static str,
    everything: bool,
    named: &[Named],
) {
    let names = Names::of(named);
    if let Some(p) = dev.profile() {
        p.on_aside(
            cmd,
            name,
            everything,
            &names.buffers,
            &names.views,
            &names.memory,
            &names.sets,
        );
    }
    if let Some(e) = dev.enforce() {
        e.on_aside(dev, cmd, name, everything, &names.buffers);
    }
}
