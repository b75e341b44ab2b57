//! S3 pointer: nothing may be able to tell the two buffers apart or pin their memory: no device
//! address taken of either, no sparse, protected or capture-replay buffers, no external memory.

use super::{upper, Cause, Ctx, Verdict};
use crate::model::BufId;

pub const SPARSE_BINDING: u32 = 0x1;
pub const SPARSE_RESIDENCY: u32 = 0x2;
pub const SPARSE_ALIASED: u32 = 0x4;
pub const PROTECTED: u32 = 0x8;
pub const DEVICE_ADDRESS_CAPTURE_REPLAY: u32 = 0x10;
/// `VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_CAPTURE_REPLAY_BIT` (allocation flags).
pub const MEM_CAPTURE_REPLAY: u32 = 0x4;

pub fn check(ctx: &Ctx, staging: BufId, device: BufId) -> Result<(), Verdict> {
    for (b, role) in [(device, "device"), (staging, "staging")] {
        let buf = &ctx.m.buffers[b];
        if let Some(seq) = buf.address_taken {
            return Err(Verdict {
                cause: Cause::S3Address,
                event: Some(seq),
                message: format!(
                    "S3: the application took the device address of {} at event {seq} (vkGetBufferDeviceAddress); code holding that address can tell the two buffers apart, so they must stay distinct",
                    ctx.name(b, role)
                ),
                plain: format!(
                    "The program asks for the GPU address of {} (vkGetBufferDeviceAddress). Shaders that use that address could tell the two buffers apart, so they must stay separate.",
                    ctx.short(b, role)
                ),
            });
        }
        let bad = [
            (SPARSE_BINDING | SPARSE_RESIDENCY | SPARSE_ALIASED, "sparse"),
            (PROTECTED, "protected"),
            (
                DEVICE_ADDRESS_CAPTURE_REPLAY,
                "device-address capture-replay",
            ),
        ];
        for (bits, what) in bad {
            if buf.flags & bits != 0 {
                return Err(Verdict {
                    cause: Cause::S3Special,
                    event: Some(buf.created),
                    message: format!(
                        "S3: {} is a {what} buffer (create flags {:#x}); its memory cannot be shared",
                        ctx.name(b, role),
                        buf.flags
                    ),
                    plain: format!(
                        "{} is a {what} buffer: Vulkan gives it memory rules echo cannot share.",
                        upper(&ctx.short(b, role))
                    ),
                });
            }
        }
        if let Some(bind) = &buf.bind {
            let mem = &ctx.m.memories[bind.memory];
            if mem.external || mem.key.flags & MEM_CAPTURE_REPLAY != 0 {
                let what = if mem.external {
                    "external (exported or imported) memory"
                } else {
                    "capture-replay memory"
                };
                return Err(Verdict {
                    cause: Cause::S3Special,
                    event: Some(mem.allocated),
                    message: format!(
                        "S3: {} lives in {what} allocated at event {}; another process or API may see its bytes, so it must stay as it is",
                        ctx.name(b, role),
                        mem.allocated
                    ),
                    plain: format!(
                        "{} lives in memory another process or graphics API may see; echo leaves such memory as it is.",
                        upper(&ctx.short(b, role))
                    ),
                });
            }
        }
    }
    Ok(())
}
