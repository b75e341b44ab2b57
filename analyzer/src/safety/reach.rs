//! What can reach a pair's bytes besides the commands echo follows (issue 32).
//!
//! - **Stepped aside.** A command the registry says can reach memory and echo does not follow
//!   is recorded as an `aside` event: a buffer it names, or whose memory it names, leaves every
//!   group; a command that runs work over bound state (or names buffers through structures
//!   echo does not read) takes every buffer of the device along.
//! - **Bytes, not handles.** Another buffer bound over a member's bytes while both live, or an
//!   image bound over them, reads and writes those bytes where echo does not look; a device
//!   address taken of such a buffer reaches them too (S3 on the bytes).

use super::{upper, Cause, Ctx, Verdict};
use crate::model::BufId;

/// The first failing reason for either buffer of the pair.
pub fn check(ctx: &Ctx, staging: BufId, device: BufId) -> Result<(), Verdict> {
    let m = ctx.m;
    if let Some((seq, command)) = &m.aside_all {
        return Err(Verdict {
            cause: Cause::Aside,
            event: Some(*seq),
            message: format!(
                "compat: {command} (event {seq}) can reach every buffer of the device, {} and {} among them (it runs work over what is bound to the command buffer, or names buffers through structures echo does not read), and echo does not follow it",
                ctx.name(staging, "staging"),
                ctx.name(device, "device")
            ),
            plain: format!(
                "The program calls {command}, which echo does not follow and which can reach any buffer ({} and {} among them), so echo leaves every buffer of this device as it is.",
                ctx.short(staging, "staging"),
                ctx.short(device, "device")
            ),
        });
    }
    for (b, role) in [(device, "device"), (staging, "staging")] {
        aside(ctx, b, role)?;
        shared_bytes(ctx, b, role)?;
    }
    Ok(())
}

fn aside(ctx: &Ctx, b: BufId, role: &str) -> Result<(), Verdict> {
    let m = ctx.m;
    let buf = &m.buffers[b];
    let memory = buf.bind.as_ref().and_then(|x| {
        m.memories[x.memory]
            .aside
            .as_ref()
            .map(|a| (a, "its memory"))
    });
    let Some(((seq, command), via)) = buf.aside.as_ref().map(|a| (a, "it")).or(memory) else {
        return Ok(());
    };
    Err(Verdict {
        cause: Cause::Aside,
        event: Some(*seq),
        message: format!(
            "compat: {command} (event {seq}) names {} ({via}), and echo does not follow {command}",
            ctx.name(b, role)
        ),
        plain: format!(
            "The program uses {} through {command}, a command echo does not follow, so its memory must stay as it is.",
            ctx.short(b, role)
        ),
    })
}

/// Whether `[a, a + la)` and `[b, b + lb)` intersect.
fn overlap(a: u64, la: u64, b: u64, lb: u64) -> bool {
    a < b.saturating_add(lb) && b < a.saturating_add(la)
}

fn shared_bytes(ctx: &Ctx, b: BufId, role: &str) -> Result<(), Verdict> {
    let m = ctx.m;
    let buf = &m.buffers[b];
    let Some(bind) = &buf.bind else { return Ok(()) };
    let mem = &m.memories[bind.memory];
    let (start, len) = (bind.offset, buf.bound_len());
    let alive = |created: u64, destroyed: Option<u64>| {
        created < buf.destroyed.unwrap_or(u64::MAX) && buf.created < destroyed.unwrap_or(u64::MAX)
    };
    for &(other, offset, seq) in &mem.binds {
        let o = &m.buffers[other];
        if other == b
            || !overlap(start, len, offset, o.bound_len())
            || !alive(o.created, o.destroyed)
        {
            continue;
        }
        if let Some(at) = o.address_taken {
            return Err(Verdict {
                cause: Cause::S3Address,
                event: Some(at),
                message: format!(
                    "S3: the application took the device address of buffer #{} (event {at}), which is bound over the bytes of {}",
                    o.number,
                    ctx.name(b, role)
                ),
                plain: format!(
                    "The program asks for the GPU address of buffer #{}, which lies over the same bytes as {}: code holding that address reaches them, so they must stay where they are.",
                    o.number,
                    ctx.short(b, role)
                ),
            });
        }
        return Err(Verdict {
            cause: Cause::SharedBytes,
            event: Some(seq),
            message: format!(
                "compat: buffer #{} is bound over the bytes of {} (vkBindBufferMemory at event {seq}, offset {offset}); echo follows buffers, so uses of #{} would reach them unseen",
                o.number,
                ctx.name(b, role),
                o.number
            ),
            plain: format!(
                "Buffer #{} is bound over the same bytes as {}, so the program can read or write them through it; echo keeps them where they are.",
                o.number,
                ctx.short(b, role)
            ),
        });
    }
    for &(offset, size, seq) in &mem.image_binds {
        // Images are never traced as destroyed: one bound before the buffer is gone counts.
        if overlap(start, len, offset, size) && seq < buf.destroyed.unwrap_or(u64::MAX) {
            return Err(Verdict {
                cause: Cause::SharedBytes,
                event: Some(seq),
                message: format!(
                    "compat: an image is bound over the bytes of {} (vkBindImageMemory at event {seq}, offset {offset}, {size} bytes)",
                    ctx.name(b, role)
                ),
                plain: format!(
                    "{} shares its bytes with an image, which echo does not follow as a use; echo keeps them where they are.",
                    upper(&ctx.short(b, role))
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::overlap;

    #[test]
    fn ranges_overlap_only_when_they_share_a_byte() {
        assert!(overlap(0, 10, 9, 1));
        assert!(!overlap(0, 10, 10, 5));
        assert!(!overlap(10, 5, 0, 10));
        assert!(overlap(4, 1, 0, 100));
        assert!(!overlap(0, 0, 0, 10));
    }
}
