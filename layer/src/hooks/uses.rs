//! What a recorded command uses, described once (`events::Cmd::Uses`) and handed to the
//! chassis with the call down: profile records it (`cmd_use`, or with a dispatch's or draw's
//! bound state), enforce binds any of its buffers still held back (no command may name a buffer
//! without memory), and the runtime guard of guarded enforce counts their memory as used by the
//! command buffer — each in its own `impl Mode`.

use crate::chassis::{self, Outcome};
use crate::dispatch::{raw, DeviceData};
pub use crate::events::Work;
use ash::vk;
use echo_analyzer::trace::{Access, BufferUse, UseKind};

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

/// Whether any mode consumes what recorded commands use on this device (a caller that must
/// allocate to describe them need not otherwise).
#[inline]
pub fn wanted(dev: &DeviceData) -> bool {
    chassis::wanted(dev)
}

/// Command buffer `cb` records `command`, which uses `buffers` (null handles left out) and runs
/// `work`; `down()` records it at the next layer.
///
/// # Safety
/// The application's valid arguments.
#[inline]
pub unsafe fn uses<R: Outcome>(
    dev: &DeviceData,
    cb: u64,
    command: &'static str,
    work: Work,
    buffers: &[BufferUse],
    down: impl FnOnce() -> R,
) -> R {
    let cmd = crate::events::Cmd::Uses {
        cb,
        command,
        work,
        buffers,
    };
    chassis::call(dev, &cmd, down)
}
