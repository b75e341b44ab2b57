//! pipeline (positive): an inference-like loop. Host preprocess (tokenise raw bytes into ids),
//! upload the ids, five dispatches through intermediate device buffers (embedding bag → dense+relu
//! → row norm → dense → softmax), read the probabilities back, host postprocess (argmax per row).
//! The weights (a 512 KiB embedding table, two dense layers) are uploaded ONCE at init through
//! staging buffers that are destroyed and freed right after the upload, while the weights stay in
//! use: the one-time-upload case of DESIGN §5. `size` = bytes of token ids per iteration.
//! Activations are stored feature-major (feature * rows + row), as GPU code does for coalescing.

use crate::harness::{fill_f32, fill_u8, seed, Opts, Sink, Variant};
use crate::vk::{groups_1d, words, Buf, Ctx, Dir, Mem, Res, COMPUTE_TO_COMPUTE, UPLOAD_TO_COMPUTE};
use ash::vk::BufferUsageFlags as U;

// A small model: lavapipe runs shaders on the CPU, where a bigger one would bury the copies.
const LEN: u64 = 32; // tokens per row
const VOCAB: u64 = 16384;
const DIM: u64 = 8;
const HIDDEN: u64 = 16;
const CLASSES: u64 = 8;

/// Device buffers holding `weights`. Staging: uploaded through temporary staging buffers in one
/// submission, which are then destroyed and their memory freed. Zero-copy: written in place.
fn upload_once(ctx: &Ctx, o: &Opts, weights: &[Vec<f32>]) -> Res<Vec<Buf>> {
    if o.variant == Variant::ZeroCopy {
        return weights
            .iter()
            .map(|w| {
                let b = ctx.buffer(w.len() as u64 * 4, U::STORAGE_BUFFER, Mem::Unified)?;
                b.f32s_mut().copy_from_slice(w);
                Ok(b)
            })
            .collect();
    }
    let dev = weights
        .iter()
        .map(|w| {
            ctx.buffer(
                w.len() as u64 * 4,
                U::STORAGE_BUFFER | U::TRANSFER_DST,
                Mem::Device,
            )
        })
        .collect::<Res<Vec<_>>>()?;
    let staging = weights
        .iter()
        .map(|w| {
            let b = ctx.buffer(w.len() as u64 * 4, U::TRANSFER_SRC, Mem::Staging)?;
            b.f32s_mut().copy_from_slice(w);
            Ok(b)
        })
        .collect::<Res<Vec<_>>>()?;
    let mut s = ctx.stream(ctx.compute)?;
    s.run(ctx, |r| {
        for (h, d) in staging.iter().zip(&dev) {
            r.copy(h, d);
        }
        r.barrier(UPLOAD_TO_COMPUTE);
        Ok(())
    })?;
    for h in staging {
        ctx.destroy_buffer(h);
    }
    Ok(dev)
}

pub fn run(ctx: &Ctx, o: &Opts, sink: &mut Sink) -> Res<()> {
    let rows = (o.size_bytes / (LEN * 4)).max(1);
    eprintln!("pipeline: {rows} rows of {LEN} tokens");
    let dense = ctx.kernel(spv!("dense"), 4, 16)?;
    let embed = ctx.kernel(spv!("embed"), 3, 12)?;
    let norm = ctx.kernel(spv!("rownorm"), 2, 8)?;
    let softmax = ctx.kernel(spv!("softmax"), 2, 8)?;

    let init = |len: u64, stream: u32, scale: f32| {
        let mut v = vec![0f32; len as usize];
        fill_f32(&mut v, seed(o.seed ^ 0x5eed, 0, stream));
        v.iter_mut().for_each(|x| *x *= scale);
        v
    };
    let w = upload_once(
        ctx,
        o,
        &[
            init(VOCAB * DIM, 0, 1.0),
            init(DIM * HIDDEN, 1, 0.3),
            init(HIDDEN, 2, 0.1),
            init(HIDDEN * CLASSES, 3, 0.3),
            init(CLASSES, 4, 0.1),
        ],
    )?;
    let (table, w1, b1, w2, b2) = (&w[0], &w[1], &w[2], &w[3], &w[4]);

    let dev = |bytes: u64| ctx.buffer(bytes, U::STORAGE_BUFFER, Mem::Device);
    let ids = ctx.io(o.variant, rows * LEN * 4, Dir::In, U::empty())?;
    let emb = dev(rows * DIM * 4)?;
    let h1 = dev(rows * HIDDEN * 4)?;
    let h2 = dev(rows * HIDDEN * 4)?;
    let logits = dev(rows * CLASSES * 4)?;
    let probs = ctx.io(o.variant, rows * CLASSES * 4, Dir::Out, U::empty())?;

    let set_embed = ctx.bind(&embed, &[&ids.dev, table, &emb])?;
    let set_d1 = ctx.bind(&dense, &[&emb, w1, b1, &h1])?;
    let set_norm = ctx.bind(&norm, &[&h1, &h2])?;
    let set_d2 = ctx.bind(&dense, &[&h2, w2, b2, &logits])?;
    let set_soft = ctx.bind(&softmax, &[&logits, &probs.dev])?;
    let r32 = rows as u32;

    let mut raw = vec![0u8; (rows * LEN * 2) as usize];
    let mut preds = vec![0u32; rows as usize];
    let mut s = ctx.stream(ctx.compute)?;
    sink.iterate(o.iters, |it, sink| {
        // Host preprocess: "tokenise" pairs of raw bytes into vocabulary ids.
        fill_u8(&mut raw, seed(o.seed, it, 0));
        // Activations are feature-major: token l of row r goes to ids[l * rows + r].
        let ids_in = ids.input().u32s_mut();
        for (t, pair) in raw.chunks_exact(2).enumerate() {
            let (r, l) = (t / LEN as usize, t % LEN as usize);
            ids_in[l * rows as usize + r] =
                (((pair[0] as u32) << 6) ^ pair[1] as u32) % VOCAB as u32;
        }
        let e = s.run(ctx, |r| {
            r.upload(&[&ids]);
            r.dispatch(
                &embed,
                Some(set_embed),
                &words(&[r32, LEN as u32, DIM as u32]),
                groups_1d(rows * DIM, 256),
            );
            r.barrier(COMPUTE_TO_COMPUTE);
            let p = words(&[r32, DIM as u32, HIDDEN as u32, 1]);
            r.dispatch(&dense, Some(set_d1), &p, groups_1d(rows * HIDDEN, 256));
            r.barrier(COMPUTE_TO_COMPUTE);
            r.dispatch(
                &norm,
                Some(set_norm),
                &words(&[r32, HIDDEN as u32]),
                groups_1d(rows, 64),
            );
            r.barrier(COMPUTE_TO_COMPUTE);
            let p = words(&[r32, HIDDEN as u32, CLASSES as u32, 0]);
            r.dispatch(&dense, Some(set_d2), &p, groups_1d(rows * CLASSES, 256));
            r.barrier(COMPUTE_TO_COMPUTE);
            r.dispatch(
                &softmax,
                Some(set_soft),
                &words(&[r32, CLASSES as u32]),
                groups_1d(rows, 64),
            );
            r.readback(&[&probs]);
            Ok(())
        })?;
        sink.add(e);
        // Host postprocess: the most likely class of every row.
        let out = probs.output().f32s();
        let prob = |r: usize, c: usize| out[c * rows as usize + r];
        for (r, p) in preds.iter_mut().enumerate() {
            let best =
                (0..CLASSES as usize).fold(0, |b, c| if prob(r, c) > prob(r, b) { c } else { b });
            *p = best as u32;
        }
        sink.fold(probs.output().bytes());
        sink.fold(&words(&preds));
        Ok(())
    })
}
