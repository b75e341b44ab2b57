//! suballoc (positive): buffers sub-allocated at non-zero offsets from a few large allocations, as
//! VMA, gpu-allocator or vulkano do. One staging buffer holds the inputs of three device buffers
//! side by side, each copied from its own sub-range; out = a*b + c is read back through a second
//! staging buffer in the same staging block. `size` = bytes per vector.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{
    groups_1d, words, Ctx, Mem, Res, COMPUTE_TO_READBACK, READBACK_TO_HOST, UPLOAD_TO_COMPUTE,
};
use ash::vk::BufferUsageFlags as U;

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let slack = 1 << 16; // room for alignment and the small buffers that push offsets off zero
    let k = ctx.kernel(spv!("fma3"), 4, 4)?;
    let mut s = ctx.stream(ctx.compute)?;

    if !o.staging() {
        // The UMA version: all four vectors in one host-visible device-local block.
        let mut block = ctx.block(4 * bytes + slack, Mem::Unified)?;
        let _params = ctx.sub_buffer(&mut block, 256, U::STORAGE_BUFFER)?;
        let v: Vec<_> = (0..4)
            .map(|_| ctx.sub_buffer(&mut block, bytes, U::STORAGE_BUFFER))
            .collect::<Res<_>>()?;
        let set = ctx.bind(&k, &[&v[0], &v[1], &v[2], &v[3]])?;
        return sink.iterate(o.iters, |it, sink| {
            for (i, b) in v[..3].iter().enumerate() {
                fill_f32(b.f32s_mut(), seed(o.seed, it, i as u32));
            }
            let e = s.run(ctx, |r| {
                r.dispatch(&k, Some(set), &words(&[n as u32]), groups_1d(n, 256));
                r.barrier(crate::vk::COMPUTE_TO_HOST);
                Ok(())
            })?;
            sink.add(e);
            sink.fold(v[3].bytes());
            Ok(())
        });
    }

    // Device block: a small parameter buffer first, so every vector sits at a non-zero offset.
    let mut dblock = ctx.block(4 * bytes + slack, Mem::Device)?;
    let _params = ctx.sub_buffer(&mut dblock, 256, U::STORAGE_BUFFER)?;
    let d: Vec<_> = (0..3)
        .map(|_| ctx.sub_buffer(&mut dblock, bytes, U::STORAGE_BUFFER | U::TRANSFER_DST))
        .collect::<Res<_>>()?;
    let d_out = ctx.sub_buffer(&mut dblock, bytes, U::STORAGE_BUFFER | U::TRANSFER_SRC)?;
    // Staging block: a small header buffer, the packed inputs, then the readback buffer.
    let mut hblock = ctx.block(4 * bytes + slack, Mem::Staging)?;
    let _header = ctx.sub_buffer(&mut hblock, 256, U::TRANSFER_SRC)?;
    let h_in = ctx.sub_buffer(&mut hblock, 3 * bytes, U::TRANSFER_SRC)?;
    let h_out = ctx.sub_buffer(&mut hblock, bytes, U::TRANSFER_DST)?;
    eprintln!(
        "suballoc: device offsets {:?} / {}, staging offsets in {} out {}",
        d.iter().map(|b| b.offset).collect::<Vec<_>>(),
        d_out.offset,
        h_in.offset,
        h_out.offset
    );
    let set = ctx.bind(&k, &[&d[0], &d[1], &d[2], &d_out])?;

    sink.iterate(o.iters, |it, sink| {
        let inputs = h_in.f32s_mut();
        for (i, part) in inputs.chunks_exact_mut(n as usize).enumerate() {
            fill_f32(part, seed(o.seed, it, i as u32));
        }
        let e = s.run(ctx, |r| {
            for (i, dst) in d.iter().enumerate() {
                r.copy_regions(&h_in, dst, &[(i as u64 * bytes, 0, bytes)]);
            }
            r.barrier(UPLOAD_TO_COMPUTE);
            r.dispatch(&k, Some(set), &words(&[n as u32]), groups_1d(n, 256));
            r.barrier(COMPUTE_TO_READBACK);
            r.copy(&d_out, &h_out);
            r.barrier(READBACK_TO_HOST);
            Ok(())
        })?;
        sink.add(e);
        sink.fold(h_out.bytes());
        Ok(())
    })
}
