//! race (negative control, S2): the upload copy runs in its own fenced submission; after that
//! fence the host writes the NEXT iteration's input into the staging buffer while the dispatch that
//! reads the device buffer is still pending. The dispatch's submission waits on a timeline
//! semaphore that the host signals only after writing the staging buffer, so if the two buffers
//! were aliased the dispatch would always read the new data: deterministic corruption. As written
//! (separate buffers) the program is correct. Zero-copy twin: write input i, dispatch, read.
//! `--race-at N` (tests only): the early write happens in iteration N only; every other iteration
//! writes the next input after the dispatch's fence (a one-off race, late in the run).

use crate::harness::{fill_f32, seed, Exec, Opts, Sink};
use crate::vk::{groups_1d, words, Ctx, Dir, Mem, Needs, Res, UPLOAD_TO_COMPUTE};
use ash::vk::{BufferUsageFlags as U, PipelineStageFlags as S};

pub fn needs(o: &Opts) -> Needs {
    Needs {
        timeline: o.staging(),
        ..Needs::default()
    }
}

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let k = ctx.kernel(spv!("affine"), 2, 12)?;
    let push = words(&[3.0f32.to_bits(), 0.25f32.to_bits(), n as u32]);
    let mut comp = ctx.stream(ctx.compute)?;

    if !o.staging() {
        let input = ctx.buffer(bytes, U::STORAGE_BUFFER, Mem::Unified)?;
        let out = ctx.io(o.variant, bytes, Dir::Out, U::empty())?;
        let set = ctx.bind(&k, &[&input, &out.dev])?;
        return sink.iterate(o.iters, |it, sink| {
            fill_f32(input.f32s_mut(), seed(o.seed, it, 0));
            sink.add(comp.run(ctx, |r| {
                r.dispatch(&k, Some(set), &push, groups_1d(n, 256));
                r.readback(&[&out]);
                Ok(())
            })?);
            sink.fold(out.output().bytes());
            Ok(())
        });
    }

    let d_in = ctx.buffer(bytes, U::STORAGE_BUFFER | U::TRANSFER_DST, Mem::Device)?;
    let h_in = ctx.buffer(bytes, U::TRANSFER_SRC, Mem::Staging)?;
    let out = ctx.io(o.variant, bytes, Dir::Out, U::empty())?;
    let set = ctx.bind(&k, &[&d_in, &out.dev])?;
    let mut up = ctx.stream(ctx.compute)?;
    let go = ctx.timeline_semaphore(0)?;

    fill_f32(h_in.f32s_mut(), seed(o.seed, 0, 0));
    sink.iterate(o.iters, |it, sink| {
        let ticket = it as u64 + 1;
        // 1. Upload input `it` in its own submission and wait for it.
        let e = up.run(ctx, |r| {
            r.copy(&h_in, &d_in);
            r.barrier(UPLOAD_TO_COMPUTE);
            Ok(())
        })?;
        sink.add(e);
        // 2. Submit the dispatch; it cannot start before the host signals `go`.
        let bytes = comp.record(ctx, |r| {
            r.dispatch(&k, Some(set), &push, groups_1d(n, 256));
            r.readback(&[&out]);
            Ok(())
        })?;
        ctx.submit(
            ctx.compute,
            &[comp.cmd],
            &[(go, ticket, S::COMPUTE_SHADER)],
            &[],
            comp.fence,
        )?;
        // 3. The host already prepares the next input in the staging buffer...
        let early = o.race_at.is_none_or(|at| at == it);
        if early {
            fill_f32(h_in.f32s_mut(), seed(o.seed, it + 1, 0));
        }
        // 4. ...and only then lets the dispatch run.
        ctx.signal(go, ticket)?;
        ctx.wait(comp.fence)?;
        if !early {
            // `--race-at` (tests): every other iteration writes it once the dispatch is done.
            fill_f32(h_in.f32s_mut(), seed(o.seed, it + 1, 0));
        }
        sink.add(Exec {
            bytes_copied: bytes,
            copy_ns: comp.timer.collect(ctx)?,
        });
        sink.fold(out.output().bytes());
        Ok(())
    })
}
