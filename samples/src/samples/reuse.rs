//! reuse (negative control): one staging buffer is refilled and copied, in turn, into three
//! long-lived device buffers (as ggml uploads tensors through one staging buffer), each copy in its
//! own fenced submission; a dispatch then reads all three (out = a*b + c). The staging buffer's
//! bytes are needed by more than one partner, so no destination may alias it.
//! Zero-copy twin: three unified buffers written directly.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{groups_1d, words, Ctx, Dir, Mem, Res, UPLOAD_TO_COMPUTE};
use ash::vk::BufferUsageFlags as U;

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let k = ctx.kernel(spv!("fma3"), 4, 4)?;
    let (kind, usage) = match o.staging() {
        true => (Mem::Device, U::STORAGE_BUFFER | U::TRANSFER_DST),
        false => (Mem::Unified, U::STORAGE_BUFFER),
    };
    let d: Vec<_> = (0..3)
        .map(|_| ctx.buffer(bytes, usage, kind))
        .collect::<Res<_>>()?;
    let staging = match o.staging() {
        true => Some(ctx.buffer(bytes, U::TRANSFER_SRC, Mem::Staging)?),
        false => None,
    };
    let out = ctx.io(o.variant, bytes, Dir::Out, U::empty())?;
    let set = ctx.bind(&k, &[&d[0], &d[1], &d[2], &out.dev])?;
    let mut s = ctx.stream(ctx.compute)?;

    sink.iterate(o.iters, |it, sink| {
        for (i, dst) in d.iter().enumerate() {
            match &staging {
                Some(h) => {
                    fill_f32(h.f32s_mut(), seed(o.seed, it, i as u32));
                    sink.add(s.run(ctx, |r| {
                        r.copy(h, dst);
                        r.barrier(UPLOAD_TO_COMPUTE);
                        Ok(())
                    })?);
                }
                None => fill_f32(dst.f32s_mut(), seed(o.seed, it, i as u32)),
            }
        }
        sink.add(s.run(ctx, |r| {
            r.dispatch(&k, Some(set), &words(&[n as u32]), groups_1d(n, 256));
            r.readback(&[&out]);
            Ok(())
        })?);
        sink.fold(out.output().bytes());
        Ok(())
    })
}
