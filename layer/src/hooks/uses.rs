//! What a recorded command uses, described once and told to each consumer in one place: profile
//! records it (`cmd_use`, or with a dispatch's or draw's bound state), enforce binds any of its
//! buffers still held back (no command may name a buffer without memory), and the runtime guard
//! of guarded enforce counts their memory as used by the command buffer.

use crate::dispatch::{raw, DeviceData};
use ash::vk;
use echo_analyzer::trace::{Access, BufferUse, UseKind};

/// The work a recorded command runs over the state bound to its command buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// None: it touches only the buffers it names (fills, updates, copies to or from images,
    /// vertex and index buffers bound).
    Names,
    /// A dispatch: the compute bind point's descriptors too.
    Dispatch,
    /// A draw: the graphics bind point's descriptors too.
    Draw,
}

/// One buffer use.
pub fn buffer_use(
    buffer: vk::Buffer,
    offset: u64,
    size: u64,
    access: Access,
    kind: UseKind,
) -> BufferUse {
    BufferUse {
        buffer: raw(buffer),
        offset,
        size,
        access,
        kind,
    }
}

/// Whether anyone consumes what recorded commands use on this device: profile, or enforce with
/// binds held back or the guard on (a caller that must allocate to describe them need not).
#[inline]
pub fn wanted(dev: &DeviceData) -> bool {
    dev.profile().is_some()
        || dev
            .enforce()
            .is_some_and(|e| e.has_pending() || e.guard().is_some())
}

/// Command buffer `cb` records `command`, which uses `buffers` (null handles left out) and runs
/// `work`.
pub fn uses(dev: &DeviceData, cb: u64, command: &'static str, work: Work, buffers: &[BufferUse]) {
    if let Some(p) = dev.profile() {
        match work {
            Work::Names => p.on_use(cb, command, buffers.to_vec()),
            Work::Dispatch => p.on_dispatch_or_draw(cb, false, command, buffers.to_vec()),
            Work::Draw => p.on_dispatch_or_draw(cb, true, command, buffers.to_vec()),
        }
    }
    if buffers.is_empty() {
        return;
    }
    if let Some(e) = dev.enforce() {
        for b in buffers {
            e.touch(dev, b.buffer); // a bind still held back happens now
        }
        if let Some(g) = e.guard() {
            let ids: Vec<u64> = buffers.iter().map(|b| b.buffer).collect();
            g.use_buffers(dev, cb, &ids);
        }
    }
}
