//! Stepping aside (issue 32): the commands the registry says can reach memory and echo does not
//! follow get a generated intercept (`intercept_gen.rs`, from `vk.xml` by `layer/registry`) on an
//! active device, so none reaches the driver unseen. Each reports what it names here
//! ([`report`]), then calls down unchanged:
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

use crate::dispatch;
use crate::ffi_guard::Call;

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

/// What an aside call names, told to the modes (profile records it, enforce binds what it held
/// back and lets the groups it reaches go): `cmd` is its command buffer (a recorded
/// command), `everything` that it reaches every buffer of the device (it runs work over bound
/// state, or names buffers through structures echo does not read), `named` the handles among
/// its arguments. A call that names nothing and not everything tells no one.
///
/// # Safety
/// `named` arrays hold their counts of handles (or are null).
pub unsafe fn report<F: Copy, R: Copy>(
    cx: &Call<'_, F, R>,
    cmd: Option<u64>,
    everything: bool,
    named: &[Named],
) {
    if !everything && named.is_empty() {
        return;
    }
    let dev = cx.dev;
    let name = cx.id.name();
    let names = Names::of(named);
    let aside = crate::events::Cmd::Aside {
        cb: cmd,
        command: name,
        everything,
        buffers: &names.buffers,
        views: &names.views,
        memory: &names.memory,
        sets: &names.sets,
    };
    crate::chassis::before(dev, &aside);
}
