//! threads (positive): `--threads N` threads, each with its own command pool, buffers, pipeline
//! and descriptor set, record and submit at the same time to the shared compute queue
//! (vkQueueSubmit serialised by a mutex). Even threads run saxpy, odd threads an affine map.
//! `size` is split evenly across threads. One iteration = every thread does one
//! upload → dispatch → readback round; the main thread then folds outputs in thread order.

use crate::harness::{fill_f32, seed, Exec, Opts, Sink};
use crate::vk::{groups_1d, words, Buf, Ctx, Dir, Res};
use ash::vk::BufferUsageFlags as U;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};

/// Per-thread results the main thread collects after each iteration.
#[derive(Default)]
struct Slot {
    exec: Exec,
    output: Option<Buf>,
    error: Option<String>,
}

/// What the main thread and the workers share.
struct Shared {
    slots: Vec<Mutex<Slot>>,
    /// Main → workers: start an iteration (or stop, when `stop` is set).
    start: Barrier,
    /// Workers → main: setup or iteration finished.
    done: Barrier,
    stop: AtomicBool,
}

fn worker(ctx: &Ctx, o: &Opts, id: u32, n: u64, sh: &Shared) {
    let (slot, start, done, stop) = (&sh.slots[id as usize], &sh.start, &sh.done, &sh.stop);
    let bytes = n * 4;
    let saxpy = id & 1 == 0;
    let setup = || -> Res<_> {
        let x = ctx.io(o.variant, bytes, Dir::In, U::empty())?;
        let y = ctx.io(
            o.variant,
            bytes,
            if saxpy { Dir::InOut } else { Dir::Out },
            U::empty(),
        )?;
        let k = if saxpy {
            ctx.kernel(spv!("saxpy"), 2, 8)?
        } else {
            ctx.kernel(spv!("affine"), 2, 12)?
        };
        let set = ctx.bind(&k, &[&x.dev, &y.dev])?;
        let push = if saxpy {
            words(&[(1.0 + id as f32).to_bits(), n as u32])
        } else {
            words(&[(0.5 * id as f32).to_bits(), (-1.0f32).to_bits(), n as u32])
        };
        Ok((x, y, k, set, push, ctx.stream(ctx.compute)?))
    };
    let mut state = match setup() {
        Ok(s) => Some(s),
        Err(e) => {
            slot.lock().unwrap().error = Some(e.to_string());
            None
        }
    };
    if let Some((_, y, ..)) = &state {
        slot.lock().unwrap().output = Some(*y.output());
    }
    done.wait(); // setup finished
    for it in 0.. {
        start.wait();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if let Some((x, y, k, set, push, s)) = state.as_mut() {
            fill_f32(x.input().f32s_mut(), seed(o.seed, it, 2 * id));
            if saxpy {
                fill_f32(y.input().f32s_mut(), seed(o.seed, it, 2 * id + 1));
            }
            let r = s.run(ctx, |r| {
                r.upload(&[x, y]);
                r.dispatch(k, Some(*set), push, groups_1d(n, 256));
                r.readback(&[y]);
                Ok(())
            });
            let mut sl = slot.lock().unwrap();
            match r {
                Ok(e) => sl.exec = e,
                Err(e) => {
                    sl.error = Some(e.to_string());
                    state = None;
                }
            }
        }
        done.wait();
    }
}

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let t = o.threads;
    let n = (o.size_bytes / 4 / t as u64).max(64);
    let sh = Shared {
        slots: (0..t).map(|_| Mutex::default()).collect(),
        start: Barrier::new(t as usize + 1),
        done: Barrier::new(t as usize + 1),
        stop: AtomicBool::new(false),
    };
    let check = |slots: &[Mutex<Slot>]| -> Res<()> {
        for (i, s) in slots.iter().enumerate() {
            if let Some(e) = &s.lock().unwrap().error {
                return Err(format!("thread {i}: {e}").into());
            }
        }
        Ok(())
    };

    std::thread::scope(|scope| {
        for id in 0..t {
            let sh = &sh;
            // Named like most thread pools name their workers; the layer keys buffers per named
            // thread, so each worker's buffers keep their identity across runs.
            std::thread::Builder::new()
                .name(format!("worker-{id}"))
                .spawn_scoped(scope, move || worker(ctx, o, id, n, sh))
                .expect("spawn worker thread");
        }
        sh.done.wait();
        let result = check(&sh.slots).and_then(|_| {
            sink.iterate(o.iters, |_, sink| {
                sh.start.wait();
                sh.done.wait();
                check(&sh.slots)?;
                for s in &sh.slots {
                    let s = s.lock().unwrap();
                    sink.add(s.exec);
                    sink.fold(s.output.as_ref().unwrap().bytes());
                }
                Ok(())
            })
        });
        sh.stop.store(true, Ordering::SeqCst);
        sh.start.wait();
        result
    })
}
