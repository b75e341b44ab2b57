//! multiqueue (positive): saxpy with the uploads on a second queue — a transfer-only family when the
//! device has one, else a second queue of the compute family, else the compute queue itself (all
//! three paths are legal; lavapipe has one queue). The x upload signals a binary semaphore, the y
//! upload a timeline semaphore; the compute submission waits on both, dispatches and reads back.

use crate::harness::{fill_f32, seed, Exec, Opts, Sink};
use crate::vk::{groups_1d, words, Ctx, Dir, Needs, Res};
use ash::vk::{BufferUsageFlags as U, PipelineStageFlags as S};

pub fn needs(o: &Opts) -> Needs {
    Needs {
        timeline: o.staging(),
        upload_queue: o.staging(),
        ..Needs::default()
    }
}

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.floats(1);
    let bytes = n * 4;
    let x = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
    let y = ctx.io(o.variant, bytes, Dir::InOut, U::empty())?;
    let k = ctx.kernel(spv!("saxpy"), 2, 8)?;
    let set = ctx.bind(&k, &[&x.dev, &y.dev])?;
    let mut comp = ctx.stream(ctx.compute)?;
    let push = words(&[1.75f32.to_bits(), n as u32]);

    if !o.staging() {
        // The UMA version: nothing to upload, so no second queue and no semaphores.
        return sink.iterate(o.iters, |it, sink| {
            fill_f32(x.input().f32s_mut(), seed(o.seed, it, 0));
            fill_f32(y.input().f32s_mut(), seed(o.seed, it, 1));
            sink.add(comp.run(ctx, |r| {
                r.dispatch(&k, Some(set), &push, groups_1d(n, 256));
                r.readback(&[&y]);
                Ok(())
            })?);
            sink.fold(y.output().bytes());
            Ok(())
        });
    }

    let mut up_x = ctx.stream(ctx.upload)?;
    let mut up_y = ctx.stream(ctx.upload)?;
    let x_ready = ctx.semaphore()?;
    let y_ready = ctx.timeline_semaphore(0)?;
    sink.iterate(o.iters, |it, sink| {
        let ticket = it as u64 + 1;
        fill_f32(x.input().f32s_mut(), seed(o.seed, it, 0));
        fill_f32(y.input().f32s_mut(), seed(o.seed, it, 1));
        let bx = up_x.record(ctx, |r| {
            r.copy(x.up.as_ref().unwrap(), &x.dev);
            Ok(())
        })?;
        let by = up_y.record(ctx, |r| {
            r.copy(y.up.as_ref().unwrap(), &y.dev);
            Ok(())
        })?;
        let bc = comp.record(ctx, |r| {
            r.dispatch(&k, Some(set), &push, groups_1d(n, 256));
            r.readback(&[&y]);
            Ok(())
        })?;
        ctx.submit(
            ctx.upload,
            &[up_x.cmd],
            &[],
            &[(x_ready, 0)],
            ash::vk::Fence::null(),
        )?;
        ctx.submit(
            ctx.upload,
            &[up_y.cmd],
            &[],
            &[(y_ready, ticket)],
            ash::vk::Fence::null(),
        )?;
        let waits = [
            (x_ready, 0, S::COMPUTE_SHADER),
            (y_ready, ticket, S::COMPUTE_SHADER),
        ];
        ctx.submit(ctx.compute, &[comp.cmd], &waits, &[], comp.fence)?;
        ctx.wait(comp.fence)?;
        // The compute submission waited on both uploads, so their timestamps are available too.
        let copy_ns =
            up_x.timer.collect(ctx)? + up_y.timer.collect(ctx)? + comp.timer.collect(ctx)?;
        sink.add(Exec {
            bytes_copied: bx + by + bc,
            copy_ns,
        });
        sink.fold(y.output().bytes());
        Ok(())
    })
}
