//! Marking (issue 35): the recorded commands echo neither follows nor steps aside from (they
//! cannot reach memory: viewport, push constants, queries, render pass boundaries, labels …)
//! get a generated hook (`mark_gen.rs`, from `vk.xml` by `layer/registry`) on a device that
//! enforces a plan. Each notes that its command buffer records real work, then calls down
//! unchanged. With the followed hooks (`Call::down` marks) and the aside hooks
//! (`aside::called` marks), every command recorded into a command buffer marks it, except a
//! copy whose every region echo dropped: a command buffer that holds nothing but those needs
//! no driver work (`enforce/empty.rs`).
//!
//! On a device that does not enforce, `vkGetDeviceProcAddr` hands out the next layer's
//! pointers for these commands: they cost nothing there.

use crate::dispatch::{self, typed};
use crate::log;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use super::mark_gen::MARK;

/// The index of `name` in [`MARK`].
pub fn index_of(name: &[u8]) -> Option<usize> {
    MARK.iter().position(|(n, _)| n.as_bytes() == name)
}

/// Echo's marking hook for `name`.
pub fn hook_of(name: &[u8]) -> Option<unsafe extern "system" fn()> {
    index_of(name).map(|i| MARK[i].1)
}

/// Every marking hook's body: the next layer's function for command `idx` of the device behind
/// command buffer `cb`, after marking `cb` (active enforcing devices only). `None` when echo does
/// not know the device or the next layer lacks the command.
///
/// # Safety
/// `cb` is the call's command buffer.
#[inline]
pub unsafe fn marked<F: Copy>(cb: usize, idx: usize) -> Option<F> {
    let found = catch_unwind(AssertUnwindSafe(|| {
        let dev = dispatch::device_for_call(dispatch::key_of(cb as u64))?;
        let next = dev.mark_next.get(idx).copied().flatten()?;
        if dev.is_active() {
            if let Some(e) = dev.enforce() {
                e.mark_content(cb as u64);
            }
        }
        Some(next)
    }))
    .ok()
    .flatten();
    match found {
        // SAFETY: mark_next[idx] was resolved for exactly this command.
        Some(p) => Some(typed(p)),
        None => {
            let name = MARK[idx].0;
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
