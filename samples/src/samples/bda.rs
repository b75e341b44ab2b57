//! bda (negative control, S3): saxpy whose shader reaches both device buffers through buffer
//! device addresses passed as push constants (GL_EXT_buffer_reference, Vulkan 1.2
//! bufferDeviceAddress). The program holds the addresses, so the buffers must not be rebound.
//! Zero-copy twin: the same shader on unified buffers.

use crate::harness::{fill_f32, seed, Opts, Sink};
use crate::vk::{groups_1d, words, Ctx, Dir, Needs, Res};
use ash::vk::BufferUsageFlags as U;

pub fn needs(_: &Opts) -> Needs {
    Needs {
        bda: true,
        ..Needs::default()
    }
}

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let x = ctx.io(o.variant, bytes, Dir::In, U::SHADER_DEVICE_ADDRESS)?;
    let y = ctx.io(o.variant, bytes, Dir::InOut, U::SHADER_DEVICE_ADDRESS)?;
    let k = ctx.kernel(spv!("saxpy_bda"), 0, 24)?;
    let (xa, ya) = (ctx.device_address(&x.dev), ctx.device_address(&y.dev));
    let push = words(&[
        xa as u32,
        (xa >> 32) as u32,
        ya as u32,
        (ya >> 32) as u32,
        0.75f32.to_bits(),
        n as u32,
    ]);
    let mut s = ctx.stream(ctx.compute)?;

    sink.iterate(o.iters, |it, sink| {
        fill_f32(x.input().f32s_mut(), seed(o.seed, it, 0));
        fill_f32(y.input().f32s_mut(), seed(o.seed, it, 1));
        sink.add(s.run(ctx, |r| {
            r.upload(&[&x, &y]);
            r.dispatch(&k, None, &push, groups_1d(n, 256));
            r.readback(&[&y]);
            Ok(())
        })?);
        sink.fold(y.output().bytes());
        Ok(())
    })
}
