//! saxpy (positive): y = a*x + y over `size` bytes per vector. Memory-bound and copy-dominated:
//! every iteration uploads x and y through their own staging buffers, runs one dispatch, and reads
//! y back through a third staging buffer (the h_in → d → h_out group of DESIGN §5).
//! `--inject-hazard` (tests only) omits the upload → compute barrier.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{groups_1d, words, Ctx, Dir, Res};
use ash::vk::BufferUsageFlags as U;

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let x = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
    let y = ctx.io(o.variant, bytes, Dir::InOut, U::empty())?;
    let k = ctx.kernel(spv!("saxpy"), 2, 8)?;
    let set = ctx.bind(&k, &[&x.dev, &y.dev])?;
    let mut s = ctx.stream(ctx.compute)?;
    let a = 2.5f32;

    sink.iterate(o.iters, |it, sink| {
        fill_f32(x.input().f32s_mut(), seed(o.seed, it, 0));
        fill_f32(y.input().f32s_mut(), seed(o.seed, it, 1));
        let e = s.run(ctx, |r| {
            if o.inject_hazard {
                // Deliberately broken: the dispatch reads x and y with no barrier after their copies.
                for io in [&x, &y] {
                    if let Some(up) = &io.up {
                        r.copy(up, &io.dev);
                    }
                }
            } else {
                r.upload(&[&x, &y]);
            }
            r.dispatch(
                &k,
                Some(set),
                &words(&[a.to_bits(), n as u32]),
                groups_1d(n, 256),
            );
            r.readback(&[&y]);
            Ok(())
        })?;
        sink.add(e);
        sink.fold(y.output().bytes());
        Ok(())
    })
}
