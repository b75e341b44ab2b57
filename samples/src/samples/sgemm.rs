//! sgemm (positive): C = A * B with n x n matrices, n ≈ sqrt(size / 4) rounded down to a multiple
//! of 64 (so one matrix is about `size` bytes). A tiled shared-memory kernel with register
//! blocking (64 x 64 per workgroup): O(n³) compute for O(n²) copies, so the copy fraction is small.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{words, Ctx, Dir, Res};
use ash::vk::BufferUsageFlags as U;

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = (((o.size_bytes / 4) as f64).sqrt() as u64 / 64 * 64).max(64);
    let bytes = n * n * 4;
    eprintln!("sgemm: n = {n}");
    let a = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
    let b = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
    let c = ctx.io(o.variant, bytes, Dir::Out, U::empty())?;
    let k = ctx.kernel(spv!("sgemm"), 3, 4)?;
    let set = ctx.bind(&k, &[&a.dev, &b.dev, &c.dev])?;
    let mut s = ctx.stream(ctx.compute)?;
    let tiles = (n / 64) as u32;

    sink.iterate(o.iters, |it, sink| {
        fill_f32(a.input().f32s_mut(), seed(o.seed, it, 0));
        fill_f32(b.input().f32s_mut(), seed(o.seed, it, 1));
        let e = s.run(ctx, |r| {
            r.upload(&[&a, &b]);
            r.dispatch(&k, Some(set), &words(&[n as u32]), [tiles, tiles, 1]);
            r.readback(&[&c]);
            Ok(())
        })?;
        sink.add(e);
        sink.fold(c.output().bytes());
        Ok(())
    })
}
