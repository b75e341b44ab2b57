//! The selftest's built-in workloads: small discrete-GPU-style programs whose output (every byte
//! the host reads back, every iteration) must be the same with echo as without it.
//!
//! - `upload` (clean): y = a*x + y; x and y uploaded through staging buffers with their own
//!   allocations, y read back through a third (the h_in → d → h_out group of DESIGN §5).
//! - `suballoc` (clean): the same kind of traffic with every buffer sub-allocated from two
//!   blocks at non-zero offsets; one staging buffer feeds three device buffers.
//! - `graphics` (clean): vertex, index and uniform buffers filled through staging buffers every
//!   frame, drawn into an image that is read back.
//! - `race` (hazard, must be refused for S2): the host writes the next input into the staging
//!   buffer while the dispatch that reads its device buffer waits on an event the host sets
//!   afterwards; shared memory would hand the GPU the new input.
//! - `early-read` (hazard, must be refused for S2): the host reads the readback staging buffer
//!   while the GPU works, before the copy that fills it (it sees the previous result); shared
//!   memory would show it the new one.
//!
//! The clean ones have a zero-copy twin (`--variant zero-copy`: host-visible device-local
//! buffers, no copies), timed against the staging version and echo.

use super::vk::{
    vkr, Buf, Gpu, Mem, Res, COMPUTE_TO_HOST, COMPUTE_TO_READBACK, READBACK_TO_HOST,
    UPLOAD_TO_COMPUTE,
};
use ash::vk;
use ash::vk::BufferUsageFlags as U;
use std::io::Write;
use std::time::{Duration, Instant};

const SAXPY: &[u8] = include_bytes!("shaders/saxpy.comp.spv");
const FMA3: &[u8] = include_bytes!("shaders/fma3.comp.spv");
const AFFINE: &[u8] = include_bytes!("shaders/affine.comp.spv");
const FILL: &[u8] = include_bytes!("shaders/fill.comp.spv");
const DRAW_VERT: &[u8] = include_bytes!("shaders/draw.vert.spv");
const DRAW_FRAG: &[u8] = include_bytes!("shaders/draw.frag.spv");

/// What a workload's analysis must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Clean traffic: every pair accepted, every group applied (a refusal is safe, but reported).
    Clean,
    /// Every candidate pair of this role must be refused for this condition (at least one).
    Refused {
        role: &'static str,
        condition: &'static str,
    },
}

pub struct Workload {
    pub name: &'static str,
    pub about: &'static str,
    pub expect: Expect,
    /// Needs a queue that can draw.
    pub graphics: bool,
    run: fn(&Gpu, &Opts, &mut Sink) -> Res<()>,
}

impl Workload {
    pub fn clean(&self) -> bool {
        self.expect == Expect::Clean
    }
}

pub const ALL: &[Workload] = &[
    Workload {
        name: "upload",
        about: "clean: y = a*x + y, uploads and a readback through staging buffers of their own",
        expect: Expect::Clean,
        graphics: false,
        run: upload,
    },
    Workload {
        name: "suballoc",
        about: "clean: the same traffic, every buffer sub-allocated from two blocks",
        expect: Expect::Clean,
        graphics: false,
        run: suballoc,
    },
    Workload {
        name: "graphics",
        about: "clean: vertex, index and uniform buffers through staging, drawn and read back",
        expect: Expect::Clean,
        graphics: true,
        run: graphics,
    },
    Workload {
        name: "race",
        about: "hazard: the host writes the staging buffer while the GPU reads its device buffer",
        expect: Expect::Refused {
            role: "upload",
            condition: "S2",
        },
        graphics: false,
        run: race,
    },
    Workload {
        name: "early-read",
        about: "hazard: the host reads the readback staging buffer before the copy that fills it",
        expect: Expect::Refused {
            role: "readback",
            condition: "S2",
        },
        graphics: false,
        run: early_read,
    },
];

pub fn find(name: &str) -> Option<&'static Workload> {
    ALL.iter().find(|w| w.name == name)
}

/// One run's parameters (the worker's command line).
pub struct Opts {
    /// Bytes of each main buffer (a multiple of 256).
    pub size: u64,
    pub iters: u32,
    pub zero_copy: bool,
    /// Test only (`VKECHO_SELFTEST_PLANT=no-race`): `race` writes after the fence (no hazard).
    pub no_race: bool,
}

/// Where the output goes: every byte the host reads back, in order, written to a file between
/// iterations (not timed), and the time of each iteration.
pub struct Sink {
    file: Option<std::io::BufWriter<std::fs::File>>,
    pending: Vec<u8>,
    pub iter_ms: Vec<f64>,
    pub bytes: u64,
    /// Test only: flip byte 17 of this iteration's output (`VKECHO_SELFTEST_PLANT=differ:…`).
    pub flip_in: Option<usize>,
}

impl Sink {
    pub fn new(path: Option<&std::path::Path>) -> Res<Sink> {
        let file = match path {
            Some(p) => Some(std::io::BufWriter::new(
                std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
            )),
            None => None,
        };
        Ok(Sink {
            file,
            pending: Vec::new(),
            iter_ms: Vec::new(),
            bytes: 0,
            flip_in: None,
        })
    }

    /// The host reads `bytes` (timed: reading a result is part of the program's work).
    fn take(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// Ends an iteration that began at `start`: its time, then its output to the file.
    fn end(&mut self, start: Instant) -> Res<()> {
        self.iter_ms.push(start.elapsed().as_secs_f64() * 1e3);
        if self.flip_in == Some(self.iter_ms.len() - 1) && !self.pending.is_empty() {
            let at = 17 % self.pending.len();
            self.pending[at] ^= 0x5a;
        }
        self.bytes += self.pending.len() as u64;
        if let Some(f) = &mut self.file {
            f.write_all(&self.pending)
                .map_err(|e| format!("cannot write the output: {e}"))?;
        }
        self.pending.clear();
        Ok(())
    }

    pub fn finish(&mut self) -> Res<()> {
        if let Some(f) = &mut self.file {
            f.flush()
                .map_err(|e| format!("cannot write the output: {e}"))?;
        }
        Ok(())
    }
}

pub fn run(w: &Workload, g: &Gpu, o: &Opts, sink: &mut Sink) -> Res<()> {
    (w.run)(g, o, sink)?;
    sink.finish()
}

/// Words in [0, 2³²), a pure function of (seed, index).
fn fill(dst: &mut [u32], seed: u32) {
    for (i, v) in dst.iter_mut().enumerate() {
        *v = hash(seed.wrapping_mul(0x9e37_79b9) ^ i as u32);
    }
}

fn hash(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

fn seed(it: u32, stream: u32) -> u32 {
    hash(
        it.wrapping_mul(31)
            .wrapping_add(stream)
            .wrapping_add(0x5e1f),
    )
}

// ------------------------------------------------------------------------------ upload

fn upload(g: &Gpu, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.size / 4;
    let k = g.kernel(SAXPY, 2, 8)?;
    let a = 2_654_435_761u32;
    if o.zero_copy {
        let x = g.buffer(o.size, U::STORAGE_BUFFER, Mem::Unified)?;
        let y = g.buffer(o.size, U::STORAGE_BUFFER, Mem::Unified)?;
        let set = g.descriptor_set(k.set_layout, vk::DescriptorType::STORAGE_BUFFER, &[&x, &y])?;
        for it in 0..o.iters {
            let t = Instant::now();
            fill(x.words_mut(), seed(it, 0));
            fill(y.words_mut(), seed(it, 1));
            g.run(|g, c| {
                g.dispatch(c, &k, set, &[a, n as u32], n);
                g.barrier(c, COMPUTE_TO_HOST);
            })?;
            sink.take(y.bytes());
            sink.end(t)?;
        }
        return Ok(());
    }
    let x = g.buffer(o.size, U::STORAGE_BUFFER | U::TRANSFER_DST, Mem::Device)?;
    let x_up = g.buffer(o.size, U::TRANSFER_SRC, Mem::Staging)?;
    let y = g.buffer(
        o.size,
        U::STORAGE_BUFFER | U::TRANSFER_DST | U::TRANSFER_SRC,
        Mem::Device,
    )?;
    let y_up = g.buffer(o.size, U::TRANSFER_SRC, Mem::Staging)?;
    let y_down = g.buffer(o.size, U::TRANSFER_DST, Mem::Staging)?;
    let set = g.descriptor_set(k.set_layout, vk::DescriptorType::STORAGE_BUFFER, &[&x, &y])?;
    for it in 0..o.iters {
        let t = Instant::now();
        fill(x_up.words_mut(), seed(it, 0));
        fill(y_up.words_mut(), seed(it, 1));
        g.run(|g, c| {
            g.copy_all(c, &x_up, &x);
            g.copy_all(c, &y_up, &y);
            g.barrier(c, UPLOAD_TO_COMPUTE);
            g.dispatch(c, &k, set, &[a, n as u32], n);
            g.barrier(c, COMPUTE_TO_READBACK);
            g.copy_all(c, &y, &y_down);
            g.barrier(c, READBACK_TO_HOST);
        })?;
        sink.take(y_down.bytes());
        sink.end(t)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ suballoc

fn suballoc(g: &Gpu, o: &Opts, sink: &mut Sink) -> Res<()> {
    let bytes = o.size;
    let n = bytes / 4;
    let slack = 1 << 16;
    let k = g.kernel(FMA3, 4, 4)?;
    if o.zero_copy {
        let mut block = g.block(4 * bytes + slack, Mem::Unified)?;
        let _params = g.sub_buffer(&mut block, 256, U::STORAGE_BUFFER)?;
        let v: Vec<Buf> = (0..4)
            .map(|_| g.sub_buffer(&mut block, bytes, U::STORAGE_BUFFER))
            .collect::<Res<_>>()?;
        let set = g.descriptor_set(
            k.set_layout,
            vk::DescriptorType::STORAGE_BUFFER,
            &[&v[0], &v[1], &v[2], &v[3]],
        )?;
        for it in 0..o.iters {
            let t = Instant::now();
            for (i, b) in v[..3].iter().enumerate() {
                fill(b.words_mut(), seed(it, i as u32));
            }
            g.run(|g, c| {
                g.dispatch(c, &k, set, &[n as u32], n);
                g.barrier(c, COMPUTE_TO_HOST);
            })?;
            sink.take(v[3].bytes());
            sink.end(t)?;
        }
        return Ok(());
    }
    // Device block: a small parameter buffer first, so every vector sits at a non-zero offset.
    let mut dblock = g.block(4 * bytes + slack, Mem::Device)?;
    let _params = g.sub_buffer(&mut dblock, 256, U::STORAGE_BUFFER)?;
    let d: Vec<Buf> = (0..3)
        .map(|_| g.sub_buffer(&mut dblock, bytes, U::STORAGE_BUFFER | U::TRANSFER_DST))
        .collect::<Res<_>>()?;
    let d_out = g.sub_buffer(&mut dblock, bytes, U::STORAGE_BUFFER | U::TRANSFER_SRC)?;
    // Staging block: a small header buffer, the packed inputs, then the readback buffer.
    let mut hblock = g.block(4 * bytes + slack, Mem::Staging)?;
    let _header = g.sub_buffer(&mut hblock, 256, U::TRANSFER_SRC)?;
    let h_in = g.sub_buffer(&mut hblock, 3 * bytes, U::TRANSFER_SRC)?;
    let h_out = g.sub_buffer(&mut hblock, bytes, U::TRANSFER_DST)?;
    let set = g.descriptor_set(
        k.set_layout,
        vk::DescriptorType::STORAGE_BUFFER,
        &[&d[0], &d[1], &d[2], &d_out],
    )?;
    for it in 0..o.iters {
        let t = Instant::now();
        for (i, part) in h_in.words_mut().chunks_exact_mut(n as usize).enumerate() {
            fill(part, seed(it, i as u32));
        }
        g.run(|g, c| {
            for (i, dst) in d.iter().enumerate() {
                g.copy(c, &h_in, dst, &[(i as u64 * bytes, 0, bytes)]);
            }
            g.barrier(c, UPLOAD_TO_COMPUTE);
            g.dispatch(c, &k, set, &[n as u32], n);
            g.barrier(c, COMPUTE_TO_READBACK);
            g.copy_all(c, &d_out, &h_out);
            g.barrier(c, READBACK_TO_HOST);
        })?;
        sink.take(h_out.bytes());
        sink.end(t)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ race

fn race(g: &Gpu, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.size / 4;
    let k = g.kernel(AFFINE, 2, 12)?;
    let push = [3u32, 0x9e37, n as u32];
    let d_in = g.buffer(o.size, U::STORAGE_BUFFER | U::TRANSFER_DST, Mem::Device)?;
    let h_in = g.buffer(o.size, U::TRANSFER_SRC, Mem::Staging)?;
    let out = g.buffer(o.size, U::STORAGE_BUFFER | U::TRANSFER_SRC, Mem::Device)?;
    let h_out = g.buffer(o.size, U::TRANSFER_DST, Mem::Staging)?;
    let set = g.descriptor_set(
        k.set_layout,
        vk::DescriptorType::STORAGE_BUFFER,
        &[&d_in, &out],
    )?;
    let go = g.event()?;
    fill(h_in.words_mut(), seed(0, 0));
    for it in 0..o.iters {
        let t = Instant::now();
        // 1. Upload input `it` in a submission of its own, and wait for it.
        g.run(|g, c| {
            g.copy_all(c, &h_in, &d_in);
            g.barrier(c, UPLOAD_TO_COMPUTE);
        })?;
        // 2. The dispatch that reads the device buffer, held back until the host sets `go`.
        g.record(|g, c| unsafe {
            let mb = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::HOST_WRITE)
                .dst_access_mask(vk::AccessFlags::SHADER_READ)];
            g.dev.cmd_wait_events(
                c,
                &[go],
                vk::PipelineStageFlags::HOST,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                &mb,
                &[],
                &[],
            );
            g.dispatch(c, &k, set, &push, n);
            g.barrier(c, COMPUTE_TO_READBACK);
            g.copy_all(c, &out, &h_out);
            g.barrier(c, READBACK_TO_HOST);
        })?;
        g.submit()?;
        // 3. The host already writes the next input into the staging buffer (legal: the
        //    device buffer holds this one) ...
        if !o.no_race {
            fill(h_in.words_mut(), seed(it + 1, 0));
        }
        // 4. ... and only then lets the dispatch run.
        vkr("vkSetEvent", unsafe { g.dev.set_event(go) })?;
        g.wait()?;
        vkr("vkResetEvent", unsafe { g.dev.reset_event(go) })?;
        if o.no_race {
            fill(h_in.words_mut(), seed(it + 1, 0));
        }
        sink.take(h_out.bytes());
        sink.end(t)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ early-read

fn early_read(g: &Gpu, o: &Opts, sink: &mut Sink) -> Res<()> {
    let n = o.size / 4;
    let k = g.kernel(FILL, 1, 8)?;
    let d = g.buffer(o.size, U::STORAGE_BUFFER | U::TRANSFER_SRC, Mem::Device)?;
    let r = g.buffer(o.size, U::TRANSFER_DST, Mem::Staging)?;
    let set = g.descriptor_set(k.set_layout, vk::DescriptorType::STORAGE_BUFFER, &[&d])?;
    let (filled, may_copy) = (g.event()?, g.event()?);
    r.bytes_mut().fill(0);
    for it in 0..o.iters {
        let t = Instant::now();
        g.record(|g, c| unsafe {
            g.dispatch(c, &k, set, &[seed(it, 0), n as u32], n);
            g.dev
                .cmd_set_event(c, filled, vk::PipelineStageFlags::COMPUTE_SHADER);
            g.barrier(c, COMPUTE_TO_READBACK);
            // The host's early read of r (between `filled` and `may_copy`) comes before the
            // copy writes r.
            let mb = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::HOST_READ | vk::AccessFlags::HOST_WRITE)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE)];
            g.dev.cmd_wait_events(
                c,
                &[may_copy],
                vk::PipelineStageFlags::HOST,
                vk::PipelineStageFlags::TRANSFER,
                &mb,
                &[],
                &[],
            );
            g.copy_all(c, &d, &r);
            g.barrier(c, READBACK_TO_HOST);
        })?;
        g.submit()?;
        // The GPU has filled d; the host reads r early: the previous iteration's result.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match unsafe { g.dev.get_event_status(filled) } {
                Ok(true) => break,
                Ok(false) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(50))
                }
                Ok(false) => return Err("the GPU did not set the event within 60 s".into()),
                Err(e) => return Err(format!("vkGetEventStatus failed: {e}")),
            }
        }
        sink.take(r.bytes());
        vkr("vkSetEvent", unsafe { g.dev.set_event(may_copy) })?;
        g.wait()?;
        unsafe {
            vkr("vkResetEvent", g.dev.reset_event(filled))?;
            vkr("vkResetEvent", g.dev.reset_event(may_copy))?;
        }
        sink.take(r.bytes());
        sink.end(t)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ graphics

const W: u32 = 256;
const H: u32 = 256;
const UNIFORMS: usize = 1024;
const VERTEX_BYTES: u64 = 16;

fn graphics(g: &Gpu, o: &Opts, sink: &mut Sink) -> Res<()> {
    // Vertices: three per small triangle, 16 bytes each (position, colour, weight).
    let tris = (o.size / VERTEX_BYTES / 3).clamp(256, 16384);
    let nv = tris * 3;
    let (vbytes, ibytes, ubytes) = (nv * VERTEX_BYTES, nv * 4, UNIFORMS as u64 * 16);
    let kind = if o.zero_copy {
        Mem::Unified
    } else {
        Mem::Device
    };
    let dst = if o.zero_copy {
        U::empty()
    } else {
        U::TRANSFER_DST
    };
    let vb = g.buffer(vbytes, U::VERTEX_BUFFER | dst, kind)?;
    let ib = g.buffer(ibytes, U::INDEX_BUFFER | dst, kind)?;
    let ub = g.buffer(ubytes, U::UNIFORM_BUFFER | dst, kind)?;
    let staging = if o.zero_copy {
        None
    } else {
        Some((
            g.buffer(vbytes, U::TRANSFER_SRC, Mem::Staging)?,
            g.buffer(ibytes, U::TRANSFER_SRC, Mem::Staging)?,
            g.buffer(ubytes, U::TRANSFER_SRC, Mem::Staging)?,
        ))
    };
    let (vs, is, us) = match &staging {
        Some((a, b, c)) => (*a, *b, *c),
        None => (vb, ib, ub),
    };
    // The render target and its readback buffer after the buffers (as a program that loads its
    // geometry first): where a driver cannot put an image in imported memory, echo stops
    // importing from the image on (SwiftShader), and the buffers are still watched.
    let (image, view) = g.color_image(W, H)?;
    let rb = g.buffer(u64::from(W * H * 4), U::TRANSFER_DST, Mem::Staging)?;
    let stages = vk::ShaderStageFlags::VERTEX;
    let set_layout = g.set_layout(vk::DescriptorType::UNIFORM_BUFFER, 1, stages)?;
    let layout = g.pipeline_layout(set_layout, 0, stages)?;
    let set = g.descriptor_set(set_layout, vk::DescriptorType::UNIFORM_BUFFER, &[&ub])?;
    let pass = render_pass(g)?;
    let views = [view];
    let fb = vkr("vkCreateFramebuffer", unsafe {
        g.dev.create_framebuffer(
            &vk::FramebufferCreateInfo::default()
                .render_pass(pass)
                .attachments(&views)
                .width(W)
                .height(H)
                .layers(1),
            None,
        )
    })?;
    g.track_framebuffer(fb);
    let pipeline = draw_pipeline(g, pass, layout)?;

    for it in 0..o.iters {
        let t = Instant::now();
        write_vertices(vs.bytes_mut(), tris, it);
        for (j, tri) in is.words_mut().chunks_exact_mut(3).enumerate() {
            // Triangles in an order that changes every frame (overlaps decide the image).
            let t = ((j as u64 + u64::from(it) * 7919) % tris) as u32;
            tri.copy_from_slice(&[3 * t, 3 * t + 1, 3 * t + 2]);
        }
        write_uniforms(us.bytes_mut(), it);
        g.run(|g, c| unsafe {
            if staging.is_some() {
                g.copy_all(c, &vs, &vb);
                g.copy_all(c, &is, &ib);
                g.copy_all(c, &us, &ub);
                g.barrier(
                    c,
                    super::vk::Barrier(
                        vk::PipelineStageFlags::TRANSFER,
                        vk::AccessFlags::TRANSFER_WRITE,
                        vk::PipelineStageFlags::VERTEX_INPUT
                            | vk::PipelineStageFlags::VERTEX_SHADER,
                        vk::AccessFlags::VERTEX_ATTRIBUTE_READ
                            | vk::AccessFlags::INDEX_READ
                            | vk::AccessFlags::UNIFORM_READ,
                    ),
                );
            }
            let clear = [vk::ClearValue {
                color: vk::ClearColorValue {
                    float32: [0.05, 0.05, 0.1, 1.0],
                },
            }];
            g.dev.cmd_begin_render_pass(
                c,
                &vk::RenderPassBeginInfo::default()
                    .render_pass(pass)
                    .framebuffer(fb)
                    .render_area(vk::Rect2D {
                        offset: vk::Offset2D::default(),
                        extent: vk::Extent2D {
                            width: W,
                            height: H,
                        },
                    })
                    .clear_values(&clear),
                vk::SubpassContents::INLINE,
            );
            g.dev
                .cmd_bind_pipeline(c, vk::PipelineBindPoint::GRAPHICS, pipeline);
            g.dev.cmd_bind_vertex_buffers(c, 0, &[vb.handle], &[0]);
            g.dev
                .cmd_bind_index_buffer(c, ib.handle, 0, vk::IndexType::UINT32);
            g.dev.cmd_bind_descriptor_sets(
                c,
                vk::PipelineBindPoint::GRAPHICS,
                layout,
                0,
                &[set],
                &[],
            );
            g.dev.cmd_draw_indexed(c, nv as u32, 2, 0, 0, 0);
            g.dev.cmd_end_render_pass(c);
            let region = vk::BufferImageCopy {
                buffer_offset: 0,
                buffer_row_length: 0,
                buffer_image_height: 0,
                image_subresource: vk::ImageSubresourceLayers {
                    aspect_mask: vk::ImageAspectFlags::COLOR,
                    mip_level: 0,
                    base_array_layer: 0,
                    layer_count: 1,
                },
                image_offset: vk::Offset3D::default(),
                image_extent: vk::Extent3D {
                    width: W,
                    height: H,
                    depth: 1,
                },
            };
            g.dev.cmd_copy_image_to_buffer(
                c,
                image,
                vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                rb.handle,
                &[region],
            );
            g.barrier(c, READBACK_TO_HOST);
        })?;
        sink.take(rb.bytes());
        sink.end(t)?;
    }
    Ok(())
}

/// Triangle t: a centre anywhere in the image, its three corners within a few pixels of it, a
/// colour and a weight (how far the uniform's offset moves it).
fn write_vertices(dst: &mut [u8], tris: u64, it: u32) {
    let unit = |h: u32| (h >> 8) as f32 / 16_777_216.0;
    for t in 0..tris as u32 {
        let h = |k: u32| hash(seed(it, 7) ^ (t.wrapping_mul(16) + k));
        let (cx, cy) = (unit(h(0)) * 1.9 - 0.95, unit(h(1)) * 1.9 - 0.95);
        let color = h(2).to_le_bytes();
        let weight = unit(h(3)) * 0.1;
        for v in 0..3u32 {
            let r = 0.02 + unit(h(4 + v)) * 0.04;
            let a = (v as f32) * std::f32::consts::TAU / 3.0 + unit(h(8)) * std::f32::consts::TAU;
            let (x, y) = (cx + r * a.cos(), cy + r * a.sin());
            let at = ((t * 3 + v) as usize) * VERTEX_BYTES as usize;
            let rec = &mut dst[at..at + VERTEX_BYTES as usize];
            rec[0..4].copy_from_slice(&x.to_le_bytes());
            rec[4..8].copy_from_slice(&y.to_le_bytes());
            rec[8..12].copy_from_slice(&color);
            rec[12..16].copy_from_slice(&weight.to_le_bytes());
        }
    }
}

/// 1024 vec4: an offset (x, y in [-1, 1)), a brightness in [0.5, 1), 0.
fn write_uniforms(dst: &mut [u8], it: u32) {
    let unit = |h: u32| (h >> 8) as f32 / 16_777_216.0;
    for (i, v) in dst.chunks_exact_mut(16).enumerate() {
        let h = |k: u32| hash(seed(it, 11) ^ ((i as u32) * 4 + k));
        let vals = [
            unit(h(0)) * 2.0 - 1.0,
            unit(h(1)) * 2.0 - 1.0,
            0.5 + unit(h(2)) * 0.5,
            0.0,
        ];
        for (k, x) in vals.iter().enumerate() {
            v[k * 4..k * 4 + 4].copy_from_slice(&x.to_le_bytes());
        }
    }
}

fn render_pass(g: &Gpu) -> Res<vk::RenderPass> {
    let attachment = [vk::AttachmentDescription::default()
        .format(vk::Format::R8G8B8A8_UNORM)
        .samples(vk::SampleCountFlags::TYPE_1)
        .load_op(vk::AttachmentLoadOp::CLEAR)
        .store_op(vk::AttachmentStoreOp::STORE)
        .stencil_load_op(vk::AttachmentLoadOp::DONT_CARE)
        .stencil_store_op(vk::AttachmentStoreOp::DONT_CARE)
        .initial_layout(vk::ImageLayout::UNDEFINED)
        .final_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)];
    let color = [vk::AttachmentReference {
        attachment: 0,
        layout: vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL,
    }];
    let subpass = [vk::SubpassDescription::default()
        .pipeline_bind_point(vk::PipelineBindPoint::GRAPHICS)
        .color_attachments(&color)];
    let deps = [
        // The previous frame's copy out of the image comes before this frame writes it.
        vk::SubpassDependency {
            src_subpass: vk::SUBPASS_EXTERNAL,
            dst_subpass: 0,
            src_stage_mask: vk::PipelineStageFlags::TRANSFER,
            dst_stage_mask: vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT,
            src_access_mask: vk::AccessFlags::TRANSFER_READ,
            dst_access_mask: vk::AccessFlags::COLOR_ATTACHMENT_WRITE,
            dependency_flags: vk::DependencyFlags::empty(),
        },
        // The frame's colour writes come before the copy that reads them.
        vk::SubpassDependency {
            src_subpass: 0,
            dst_subpass: vk::SUBPASS_EXTERNAL,
            src_stage_mask: vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT,
            dst_stage_mask: vk::PipelineStageFlags::TRANSFER,
            src_access_mask: vk::AccessFlags::COLOR_ATTACHMENT_WRITE,
            dst_access_mask: vk::AccessFlags::TRANSFER_READ,
            dependency_flags: vk::DependencyFlags::empty(),
        },
    ];
    let pass = vkr("vkCreateRenderPass", unsafe {
        g.dev.create_render_pass(
            &vk::RenderPassCreateInfo::default()
                .attachments(&attachment)
                .subpasses(&subpass)
                .dependencies(&deps),
            None,
        )
    })?;
    g.track_render_pass(pass);
    Ok(pass)
}

fn draw_pipeline(g: &Gpu, pass: vk::RenderPass, layout: vk::PipelineLayout) -> Res<vk::Pipeline> {
    let vert = g.shader(DRAW_VERT)?;
    let frag = match g.shader(DRAW_FRAG) {
        Ok(f) => f,
        Err(e) => {
            unsafe { g.dev.destroy_shader_module(vert, None) };
            return Err(e);
        }
    };
    let stages = [
        vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::VERTEX)
            .module(vert)
            .name(c"main"),
        vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::FRAGMENT)
            .module(frag)
            .name(c"main"),
    ];
    let bindings = [vk::VertexInputBindingDescription {
        binding: 0,
        stride: VERTEX_BYTES as u32,
        input_rate: vk::VertexInputRate::VERTEX,
    }];
    let attrs = [
        vk::VertexInputAttributeDescription {
            location: 0,
            binding: 0,
            format: vk::Format::R32G32_SFLOAT,
            offset: 0,
        },
        vk::VertexInputAttributeDescription {
            location: 1,
            binding: 0,
            format: vk::Format::R8G8B8A8_UNORM,
            offset: 8,
        },
        vk::VertexInputAttributeDescription {
            location: 2,
            binding: 0,
            format: vk::Format::R32_SFLOAT,
            offset: 12,
        },
    ];
    let input = vk::PipelineVertexInputStateCreateInfo::default()
        .vertex_binding_descriptions(&bindings)
        .vertex_attribute_descriptions(&attrs);
    let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
        .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
    let viewports = [vk::Viewport {
        x: 0.0,
        y: 0.0,
        width: W as f32,
        height: H as f32,
        min_depth: 0.0,
        max_depth: 1.0,
    }];
    let scissors = [vk::Rect2D {
        offset: vk::Offset2D::default(),
        extent: vk::Extent2D {
            width: W,
            height: H,
        },
    }];
    let viewport = vk::PipelineViewportStateCreateInfo::default()
        .viewports(&viewports)
        .scissors(&scissors);
    let raster = vk::PipelineRasterizationStateCreateInfo::default()
        .polygon_mode(vk::PolygonMode::FILL)
        .cull_mode(vk::CullModeFlags::NONE)
        .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
        .line_width(1.0);
    let multisample = vk::PipelineMultisampleStateCreateInfo::default()
        .rasterization_samples(vk::SampleCountFlags::TYPE_1);
    let blend_attachments = [vk::PipelineColorBlendAttachmentState::default()
        .blend_enable(false)
        .color_write_mask(vk::ColorComponentFlags::RGBA)];
    let blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend_attachments);
    let info = vk::GraphicsPipelineCreateInfo::default()
        .stages(&stages)
        .vertex_input_state(&input)
        .input_assembly_state(&assembly)
        .viewport_state(&viewport)
        .rasterization_state(&raster)
        .multisample_state(&multisample)
        .color_blend_state(&blend)
        .layout(layout)
        .render_pass(pass)
        .subpass(0);
    let made = unsafe {
        g.dev
            .create_graphics_pipelines(vk::PipelineCache::null(), &[info], None)
    };
    unsafe {
        g.dev.destroy_shader_module(vert, None);
        g.dev.destroy_shader_module(frag, None);
    }
    let p = made.map_err(|(_, e)| format!("vkCreateGraphicsPipelines failed: {e}"))?[0];
    g.track_pipeline(p);
    Ok(p)
}
