//! conv2d (positive): a 5x5 convolution of a single-channel float image of about `size` bytes
//! (width = the largest power of two ≤ sqrt(pixels)). 25 taps per pixel: between saxpy and sgemm.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{words, Ctx, Dir, Res};
use ash::vk::BufferUsageFlags as U;

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let pixels = o.floats(256);
    let w = 1u64 << ((pixels as f64).sqrt().log2().floor() as u32);
    let h = pixels / w;
    let bytes = w * h * 4;
    let src = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
    let dst = ctx.io(o.variant, bytes, Dir::Out, U::empty())?;
    let k = ctx.kernel(spv!("conv2d"), 2, 8)?;
    let set = ctx.bind(&k, &[&src.dev, &dst.dev])?;
    let mut s = ctx.stream(ctx.compute)?;
    let groups = [w.div_ceil(16) as u32, h.div_ceil(16) as u32, 1];

    sink.iterate(o.iters, |it, sink| {
        fill_f32(src.input().f32s_mut(), seed(o.seed, it, 0));
        let e = s.run(ctx, |r| {
            r.upload(&[&src]);
            r.dispatch(&k, Some(set), &words(&[w as u32, h as u32]), groups);
            r.readback(&[&dst]);
            Ok(())
        })?;
        sink.add(e);
        sink.fold(dst.output().bytes());
        Ok(())
    })
}
