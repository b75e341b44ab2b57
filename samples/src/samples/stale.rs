//! stale (negative control, S1): each iteration uploads input i through the staging buffer and runs
//! a first dispatch; then the host reuses the staging buffer as scratch for other data (a scaled
//! copy of the first result), and a second dispatch reads the device buffer again with no new
//! upload. Aliased, the second dispatch would read the scratch data instead of input i.
//! Zero-copy twin: the input stays in its unified buffer; the scratch lives in host memory.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{groups_1d, words, Buf, Ctx, Dir, Mem, Res};
use ash::vk::BufferUsageFlags as U;

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let k = ctx.kernel(spv!("affine"), 2, 12)?;
    let first = words(&[2.0f32.to_bits(), 1.0f32.to_bits(), n as u32]);
    let second = words(&[(-0.5f32).to_bits(), 3.0f32.to_bits(), n as u32]);
    let input = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
    let out = ctx.io(o.variant, bytes, Dir::Out, U::empty())?;
    let set = ctx.bind(&k, &[&input.dev, &out.dev])?;
    let mut s = ctx.stream(ctx.compute)?;
    // Staging: the scratch is the staging buffer itself; zero-copy: a separate host buffer.
    let host_scratch: Option<Buf> = match o.staging() {
        true => None,
        false => Some(ctx.buffer(bytes, U::TRANSFER_SRC, Mem::Staging)?),
    };
    let scratch = host_scratch.as_ref().unwrap_or_else(|| input.input());

    sink.iterate(o.iters, |it, sink| {
        fill_f32(input.input().f32s_mut(), seed(o.seed, it, 0));
        sink.add(s.run(ctx, |r| {
            r.upload(&[&input]);
            r.dispatch(&k, Some(set), &first, groups_1d(n, 256));
            r.readback(&[&out]);
            Ok(())
        })?);
        sink.fold(out.output().bytes());
        // The host reuses the staging memory for something else.
        for (dst, v) in scratch.f32s_mut().iter_mut().zip(out.output().f32s()) {
            *dst = v * 0.5;
        }
        // The device buffer is read again, without a new upload.
        sink.add(s.run(ctx, |r| {
            r.dispatch(&k, Some(set), &second, groups_1d(n, 256));
            r.readback(&[&out]);
            Ok(())
        })?);
        sink.fold(out.output().bytes());
        Ok(())
    })
}
