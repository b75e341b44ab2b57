//! The generator: a random legal program for a seed and the device's [`Caps`].
//!
//! A program has the shape of the code echo is for — buffers and their memory, one or two
//! recorded workloads (uploads, compute, downloads, fills, image round trips) submitted in
//! 2–4 iterations with host writes before and host reads after — and random departures from it
//! that are legal but that echo must refuse or handle: sub-allocated and aliased buffers, an
//! image bound over a buffer's memory, writes before the bind, a staging buffer feeding several
//! partners, device addresses, update-after-bind descriptors rewritten between submissions, host
//! writes while unrelated GPU work is in flight, per-call download buffers allocated and freed,
//! re-recorded and resubmitted command buffers, fences, timeline and binary semaphores, idle
//! waits. Every op goes through [`Model::apply`]; one it refuses is not emitted. Barriers are
//! placed where the model finds a hazard, their masks exact or broad, as 1.0 or
//! synchronization2, global or per buffer.
//!
//! Over 1,000 lines: one generator per kind of op and departure listed above, each next to the
//! model check it must pass.

use super::model::{Model, Refusal};
use super::rng::Rng;
use super::sync::Need;
use super::{access, stage, usage, Caps, Cmd, Code, Desc, Draw, Kernel, Op, Program, Res, SemRef};
use super::{ALIGN, IMAGE_BYTES, LOCAL, UNIFORM_BYTES};

const SIZES: [u64; 9] = [4096, 4352, 8192, 12288, 16384, 32768, 65536, 1024, 256];
const SIZE_WEIGHTS: [u32; 9] = [6, 3, 6, 3, 4, 2, 1, 2, 1];

struct Gen {
    rng: Rng,
    m: Model,
    ops: Vec<Op>,
    next: u32,
    /// Update-after-bind sets to write late: (set, descriptors while recording, at submission).
    late: Vec<(u32, Vec<Res>, Vec<Res>)>,
    /// The upload buffers are written by the host in the first iteration only (constant
    /// inputs copied again every iteration): a kernel writing their partner then changes what
    /// the next copy reads once the two share memory.
    inputs_once: bool,
    inputs_written: bool,
    /// Host accesses while submissions are in flight ([`Gen::host_in_flight`]).
    in_flight: bool,
}

/// One device buffer and its staging partners.
#[derive(Clone, Debug)]
struct Chain {
    dev: u32,
    up: Option<u32>,
    down: Option<u32>,
    size: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sync {
    Fence,
    Timeline,
    Idle,
}

pub fn generate(seed: u64, caps: Caps) -> Program {
    let mut g = Gen {
        rng: Rng::new(seed),
        m: Model::new(caps),
        ops: vec![],
        next: 0,
        late: vec![],
        inputs_once: false,
        inputs_written: false,
        in_flight: false,
    };
    g.program();
    Program {
        seed,
        caps,
        ops: g.ops,
    }
}

fn round(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

impl Gen {
    fn id(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    fn push(&mut self, op: Op) -> bool {
        if self.m.apply(&op).is_ok() {
            self.ops.push(op);
            true
        } else {
            false
        }
    }

    /// The record op of `cmds`, some of them (a run without a barrier) in a secondary command
    /// buffer.
    fn record(&mut self, cb: u32, cmds: Vec<Cmd>) -> Op {
        let mut secondary = vec![];
        if cmds.len() >= 2 && self.rng.chance(0.25) {
            let n = cmds.len() as u64;
            let a = self.rng.range(0, n - 1);
            let b = self.rng.range(a + 1, n);
            let (a, b) = (a as usize, b as usize);
            if !cmds[a..b]
                .iter()
                .any(|c| matches!(c, Cmd::Barrier { .. } | Cmd::ImageInit { .. }))
            {
                secondary.push([a, b]);
            }
        }
        Op::Record {
            cb,
            cmds,
            secondary,
        }
    }

    fn size(&mut self) -> u64 {
        SIZES[self.rng.weighted(&SIZE_WEIGHTS)]
    }

    /// A buffer with its own allocation (dedicated or not), or none when the model refuses.
    fn own_memory(
        &mut self,
        buf: u32,
        size: u64,
        address: bool,
        write_first: Option<u32>,
    ) -> Option<u32> {
        let mem = self.id();
        let dedicated = self.rng.chance(0.5).then_some(buf);
        if !self.push(Op::Alloc {
            mem,
            size,
            dedicated,
            address,
        }) {
            return None;
        }
        if let Some(val) = write_first {
            // Written before the bind (map, write, unmap or keep mapped, then bind).
            self.push(Op::Write {
                mem,
                offset: 0,
                len: size,
                val,
            });
        }
        let v2 = self.rng.chance(0.3);
        self.push(Op::Bind {
            buf,
            mem,
            offset: 0,
            v2,
        });
        Some(mem)
    }

    fn buffer(&mut self, size: u64, usage: u32) -> u32 {
        let buf = self.id();
        self.push(Op::Buffer { buf, size, usage });
        buf
    }

    fn program(&mut self) {
        let caps = self.m.caps;
        let addr = caps.device_address && self.rng.chance(0.15);
        self.inputs_once = self.rng.chance(0.2);
        self.in_flight = self.rng.chance(0.5);
        // Device buffers and their staging partners.
        let n_chains = self.rng.range(1, 3) as usize;
        let layout = self.rng.weighted(&[45, 35, 20]); // dedicated, blocks, mixed
        let mut chains = vec![];
        let mut dev_extra = usage::UNIFORM_TEXEL | usage::STORAGE_TEXEL;
        if addr {
            dev_extra |= usage::ADDRESS;
        }
        for _ in 0..n_chains {
            let size = self.size();
            let mut du = usage::SRC | usage::DST | usage::STORAGE;
            if self.rng.chance(0.5) {
                du |= dev_extra;
            }
            if self.rng.chance(0.2) {
                du |= usage::UNIFORM;
            }
            let dev = self.buffer(size, du);
            let up = self.rng.chance(0.85).then(|| {
                let extra = if self.rng.chance(0.2) {
                    usage::STORAGE | usage::DST
                } else {
                    0
                };
                self.buffer(size, usage::SRC | extra)
            });
            let down = self.rng.chance(0.75).then(|| {
                let extra = if self.rng.chance(0.2) { usage::SRC } else { 0 };
                self.buffer(size, usage::DST | extra)
            });
            chains.push(Chain {
                dev,
                up,
                down,
                size,
            });
        }
        // A spare device buffer (update-after-bind rewrites, aliasing, image copies).
        let spare_size = chains.iter().map(|c| c.size).max().unwrap_or(ALIGN);
        let spare = self.buffer(
            spare_size,
            usage::SRC | usage::DST | usage::STORAGE | dev_extra,
        );
        // Memory.
        let mut staging_mems = vec![];
        let blocks = layout == 1 || (layout == 2 && self.rng.chance(0.5));
        let mut dev_block: Option<(u32, u64)> = None;
        if blocks {
            let dev_bytes: u64 = chains.iter().map(|c| c.size).sum::<u64>()
                + spare_size
                + if self.rng.chance(0.3) {
                    caps.image_size.max(ALIGN)
                } else {
                    0
                }
                + 2 * ALIGN;
            let st_bytes: u64 = chains
                .iter()
                .map(|c| c.size * (c.up.is_some() as u64 + c.down.is_some() as u64))
                .sum::<u64>()
                + ALIGN;
            let (dm, sm) = (self.id(), self.id());
            self.push(Op::Alloc {
                mem: dm,
                size: round(dev_bytes),
                dedicated: None,
                address: addr,
            });
            self.push(Op::Alloc {
                mem: sm,
                size: round(st_bytes),
                dedicated: None,
                address: false,
            });
            dev_block = Some((dm, round(dev_bytes)));
            staging_mems.push(sm);
            let mut at = 0;
            let mut sat = 0;
            let mut last_dev = None;
            for c in chains.clone() {
                // Aliasing: now and then a device buffer at the offset of the one before.
                let off = match last_dev {
                    Some(o) if self.rng.chance(0.08) => o,
                    _ => {
                        let o = at;
                        at += c.size;
                        o
                    }
                };
                last_dev = Some(off);
                let coin = self.rng.chance(0.3);
                self.push(Op::Bind {
                    buf: c.dev,
                    mem: dm,
                    offset: off,
                    v2: coin,
                });
                for s in [c.up, c.down].into_iter().flatten() {
                    let early = self.rng.chance(0.15).then(|| self.rng.u32());
                    if let Some(val) = early {
                        self.push(Op::Write {
                            mem: sm,
                            offset: sat,
                            len: c.size,
                            val,
                        });
                    }
                    let coin = self.rng.chance(0.3);
                    self.push(Op::Bind {
                        buf: s,
                        mem: sm,
                        offset: sat,
                        v2: coin,
                    });
                    sat += c.size;
                }
            }
            self.push(Op::Bind {
                buf: spare,
                mem: dm,
                offset: at,
                v2: false,
            });
            at += spare_size;
            dev_block = dev_block.map(|(m, s)| (m, s.min(round(dev_bytes)).max(at)));
        } else {
            for c in chains.clone() {
                self.own_memory(c.dev, c.size, addr, None);
                for s in [c.up, c.down].into_iter().flatten() {
                    let early = (Some(s) == c.up && self.rng.chance(0.15)).then(|| self.rng.u32());
                    if let Some(m) = self.own_memory(s, c.size, false, early) {
                        staging_mems.push(m);
                    }
                }
            }
            self.own_memory(spare, spare_size, addr, None);
        }
        // Persistent maps.
        for &m in &staging_mems.clone() {
            if self.rng.chance(0.6) && !self.m.mems[&m].mapped {
                let v2 = caps.map2 && self.rng.chance(0.5);
                self.push(Op::Map { mem: m, v2 });
            }
        }
        // An image: its own memory, or over the device block (past or over a buffer).
        let mut image = None;
        if caps.image_size > 0 && self.rng.chance(0.2) {
            let img = self.id();
            self.push(Op::Image { img });
            let over = match dev_block {
                Some((dm, size)) if self.rng.chance(0.6) => {
                    let align = caps.image_align.max(ALIGN);
                    let max = size.saturating_sub(caps.image_size) / align;
                    Some((dm, self.rng.range(0, max) * align))
                }
                _ => None,
            };
            let (mem, offset) = match over {
                Some(x) => x,
                None => {
                    let mem = self.id();
                    self.push(Op::Alloc {
                        mem,
                        size: round(caps.image_size),
                        dedicated: None,
                        address: false,
                    });
                    (mem, 0)
                }
            };
            let coin = self.rng.chance(0.3);
            if self.push(Op::BindImage {
                img,
                mem,
                offset,
                v2: coin,
            }) {
                image = Some(img);
            }
        }
        // A uniform block the host writes.
        let uni = if self.rng.chance(0.25) {
            let b = self.buffer(UNIFORM_BYTES, usage::UNIFORM | usage::DST);
            self.own_memory(b, UNIFORM_BYTES, false, None);
            Some(b)
        } else {
            None
        };
        // Indirect parameters.
        let ind = if self.rng.chance(0.2) {
            let b = self.buffer(ALIGN, usage::INDIRECT | usage::DST);
            self.own_memory(b, ALIGN, false, None).map(|m| (b, m))
        } else {
            None
        };
        let ctx = Ctx {
            chains,
            spare,
            image,
            uni,
            ind,
        };
        self.iterations(&ctx);
        // Some persistent maps end before the readbacks (later host accesses map for their own).
        let mapped: Vec<u32> = (self.m.mems.iter())
            .filter(|(_, m)| m.mapped)
            .map(|(&k, _)| k)
            .collect();
        for mem in mapped {
            if self.rng.chance(0.3) {
                let v2 = caps.map2 && self.rng.chance(0.5);
                self.push(Op::Unmap { mem, v2 });
            }
        }
        self.epilogue();
    }

    /// The dispatch of one chain's compute step, and the set-up ops it needs (sets, views).
    fn compute(&mut self, ctx: &Ctx, c: &Chain, uab_sets: &mut Vec<(u32, u32)>) -> Option<Cmd> {
        let caps = self.m.caps;
        let n = (c.size / 4) as u32;
        let other = ctx
            .chains
            .iter()
            .find(|o| o.dev != c.dev && o.size >= c.size)
            .map(|o| o.dev)
            .unwrap_or(ctx.spare);
        let dev_usage = self.m.bufs.get(&c.dev).map_or(0, |b| b.usage);
        let other_usage = self.m.bufs.get(&other).map_or(0, |b| b.usage);
        let mut kernels = vec![Kernel::Inplace, Kernel::Xform];
        if ctx.uni.is_some() {
            kernels.push(Kernel::Uniform);
        }
        if dev_usage & usage::UNIFORM_TEXEL != 0 && other_usage & usage::STORAGE_TEXEL != 0 {
            kernels.push(Kernel::Texel);
        }
        if dev_usage & usage::ADDRESS != 0 && other_usage & usage::ADDRESS != 0 {
            kernels.push(Kernel::Addr);
        }
        let kernel = self.rng.pick(&kernels);
        // Now and then the kernel runs as a draw's vertex shader (a monolithic pipeline, or one
        // linked from a pre-rasterization library).
        let draw = if caps.draw
            && matches!(kernel, Kernel::Xform | Kernel::Inplace)
            && self.rng.chance(0.25)
        {
            if caps.gpl && self.rng.chance(0.6) {
                Draw::Library
            } else {
                Draw::Monolithic
            }
        } else {
            Draw::None
        };
        let whole = |b: u32, size: u64| Res::Buf {
            buf: b,
            offset: 0,
            range: size,
        };
        let res: Vec<Res> = match kernel {
            Kernel::Inplace => vec![whole(c.dev, c.size)],
            Kernel::Xform => {
                if self.rng.chance(0.5) {
                    vec![whole(c.dev, c.size), whole(other, c.size)]
                } else {
                    vec![whole(other, c.size), whole(c.dev, c.size)]
                }
            }
            Kernel::Uniform => vec![whole(ctx.uni?, UNIFORM_BYTES), whole(c.dev, c.size)],
            Kernel::Texel => {
                let (v1, v2) = (self.id(), self.id());
                self.push(Op::View {
                    view: v1,
                    buf: c.dev,
                    offset: 0,
                    range: c.size,
                });
                self.push(Op::View {
                    view: v2,
                    buf: other,
                    offset: 0,
                    range: c.size,
                });
                vec![Res::View { view: v1 }, Res::View { view: v2 }]
            }
            Kernel::Addr => vec![],
        };
        let desc = if kernel == Kernel::Addr {
            Desc::Addr {
                src: c.dev,
                dst: other,
            }
        } else {
            let mode = self.rng.weighted(&[
                6,
                if caps.push_descriptor { 3 } else { 0 },
                if caps.uab_storage && matches!(kernel, Kernel::Xform | Kernel::Inplace) {
                    4
                } else {
                    0
                },
            ]);
            match mode {
                1 => Desc::Push {
                    res,
                    template: self.rng.chance(0.5),
                },
                _ => {
                    let set = self.id();
                    let uab = mode == 2;
                    let partial = uab && caps.partially_bound && self.rng.chance(0.4);
                    self.push(Op::Set {
                        set,
                        kernel,
                        uab,
                        partial,
                        vertex: !draw.is_none(),
                    });
                    let coin = self.rng.chance(0.4);
                    self.push(Op::WriteSet {
                        set,
                        res: res.clone(),
                        template: coin,
                    });
                    if uab {
                        uab_sets.push((set, c.dev));
                        if self.rng.chance(0.7) {
                            self.late_set(set, res);
                        }
                    }
                    Desc::Set { set }
                }
            }
        };
        let groups_needed = n.div_ceil(LOCAL);
        let k = self.rng.u32() % 1000;
        let indirect = match ctx.ind {
            Some((b, m)) if draw.is_none() && self.rng.chance(0.5) => {
                let g = groups_needed.min(64);
                self.push(Op::WriteIndirect {
                    mem: m,
                    offset: 0,
                    groups: g,
                });
                Some((b, 0))
            }
            _ => None,
        };
        let base = if indirect.is_none() && groups_needed > 1 && self.rng.chance(0.15) {
            self.rng.range(1, groups_needed as u64 - 1) as u32
        } else {
            0
        };
        let bind2 = draw.is_none() && caps.maint6 && self.rng.chance(0.5);
        let code = if caps.shader_object && draw.is_none() {
            [
                Code::Pipeline,
                Code::Object,
                Code::PipelineThenObject,
                Code::ObjectThenPipeline,
                Code::ObjectUnbind,
            ][self.rng.weighted(&[4, 3, 2, 2, 2])]
        } else {
            Code::Pipeline
        };
        Some(Cmd::Dispatch {
            kernel,
            desc,
            groups: groups_needed - base,
            base,
            indirect,
            n,
            k,
            bind2,
            code,
            draw,
        })
    }

    /// An update-after-bind set written late: recorded while one of its bindings names a decoy
    /// (a buffer of its own that nothing else uses), written with `res` after the recording and
    /// before the first submission ([`Gen::iterations`]) — the GPU reads what the set holds at
    /// submission, so echo must take the descriptors as submitted, not as recorded (the planted
    /// fault `VK_ECHO_TEST_LATE_AT_RECORD=1` takes them as recorded).
    fn late_set(&mut self, set: u32, res: Vec<Res>) {
        let i = self.rng.below(res.len() as u64) as usize;
        let Res::Buf { range, .. } = res[i] else {
            return;
        };
        let decoy = self.buffer(range, usage::STORAGE);
        if self.own_memory(decoy, range, false, None).is_none() {
            return;
        }
        let mut early = res.clone();
        early[i] = Res::Buf {
            buf: decoy,
            offset: 0,
            range,
        };
        self.late.push((set, early, res));
    }

    /// A copy between two buffers: whole, split in regions with one offset, or a part.
    fn copy(&mut self, src: u32, dst: u32, size: u64) -> Cmd {
        let v2 = self.rng.chance(0.4);
        let regions = match self.rng.weighted(&[6, 2, 2]) {
            0 => vec![[0, 0, size]],
            1 if size >= 1024 => {
                let a = (size / 2) & !3;
                vec![[0, 0, a], [a, a, size - a]]
            }
            _ => {
                let len = (self.rng.range(1, size / 4)) * 4;
                let off = self.rng.range(0, (size - len) / 4) * 4;
                vec![[off, off, len]]
            }
        };
        Cmd::Copy {
            src,
            dst,
            regions,
            v2,
        }
    }

    /// The commands of a workload over some chains (no barriers yet).
    fn steps(
        &mut self,
        ctx: &Ctx,
        chains: &[Chain],
        up: bool,
        work: bool,
        down: bool,
        uab: &mut Vec<(u32, u32)>,
    ) -> Vec<Cmd> {
        let mut cmds = vec![];
        for c in chains {
            if up {
                if let Some(u) = c.up {
                    cmds.push(self.copy(u, c.dev, c.size));
                } else if self.rng.chance(0.5) {
                    let val = self.rng.u32();
                    cmds.push(Cmd::Fill {
                        buf: c.dev,
                        offset: 0,
                        size: c.size,
                        val,
                    });
                } else {
                    let val = self.rng.u32();
                    let size = c.size.min(65536);
                    cmds.push(Cmd::Update {
                        buf: c.dev,
                        offset: 0,
                        size,
                        val,
                    });
                }
                // A staging buffer feeding a second partner.
                if self.rng.chance(0.08) {
                    if let Some(u) = c.up {
                        let spare_size = self.m.bufs.get(&ctx.spare).map_or(0, |b| b.size);
                        cmds.push(self.copy(u, ctx.spare, c.size.min(spare_size)));
                    }
                }
            }
            if work && self.rng.chance(0.8) {
                if let Some(d) = self.compute(ctx, c, uab) {
                    cmds.push(d);
                }
            }
            if work && self.rng.chance(0.1) {
                let val = self.rng.u32();
                cmds.push(Cmd::Fill {
                    buf: c.dev,
                    offset: 0,
                    size: (c.size / 2) & !3,
                    val,
                });
            }
            if work {
                if let Some(img) = ctx.image {
                    if self.rng.chance(0.5) && c.size >= IMAGE_BYTES {
                        let v2 = self.rng.chance(0.4);
                        cmds.push(Cmd::ImageInit { img });
                        if self.rng.chance(0.5) {
                            // A clear, a command echo only marks, writing the image's memory.
                            let val = self.rng.u32();
                            cmds.push(Cmd::ClearImage { img, val });
                        } else {
                            cmds.push(Cmd::ToImage {
                                buf: c.dev,
                                offset: 0,
                                img,
                                v2,
                            });
                        }
                        let back = if self.rng.chance(0.5) {
                            c.dev
                        } else {
                            ctx.spare
                        };
                        cmds.push(Cmd::FromImage {
                            img,
                            buf: back,
                            offset: 0,
                            v2,
                        });
                    }
                }
            }
            if down {
                if let Some(d) = c.down {
                    cmds.push(self.copy(c.dev, d, c.size));
                }
            }
            if work {
                self.marked_and_aside(ctx, c, &mut cmds);
            }
        }
        cmds
    }

    /// Commands echo steps aside from or only marks (issue 53), now and then: a timestamp
    /// copied into a buffer (vkCmdCopyQueryPoolResults: echo steps aside from the buffer), push
    /// constants with no dispatch after them.
    fn marked_and_aside(&mut self, ctx: &Ctx, c: &Chain, cmds: &mut Vec<Cmd>) {
        if self.m.caps.timestamps && self.rng.chance(0.12) {
            let mut targets = vec![(c.dev, c.size), (ctx.spare, c.size)];
            if let Some(d) = c.down {
                targets.push((d, c.size));
            }
            let (buf, size) = targets[self.rng.below(targets.len() as u64) as usize];
            let offset = self.rng.below(size / 8) * 8;
            let v2 = self.rng.chance(0.5);
            let at = self.rng.below(cmds.len() as u64 + 1) as usize;
            cmds.insert(at, Cmd::QueryCopy { buf, offset, v2 });
        }
        if self.rng.chance(0.08) {
            let val = self.rng.u32();
            let at = self.rng.below(cmds.len() as u64 + 1) as usize;
            cmds.insert(at, Cmd::PushConstants { val });
        }
    }

    /// A barrier covering `needs`.
    fn barrier_for(&mut self, needs: &[(Need, (u8, u32))]) -> Cmd {
        let mut n = Need {
            src_stage: 0,
            src_access: 0,
            dst_stage: 0,
            dst_access: 0,
        };
        for (x, _) in needs {
            n.src_stage |= x.src_stage;
            n.src_access |= x.src_access;
            n.dst_stage |= x.dst_stage;
            n.dst_access |= x.dst_access;
        }
        let v2 = self.rng.chance(0.5);
        if self.rng.chance(0.2) {
            return Cmd::Barrier {
                v2,
                event: false,
                buf: None,
                src_stage: stage::ALL_COMMANDS,
                src_access: access::MEMORY_WRITE,
                dst_stage: stage::ALL_COMMANDS,
                dst_access: access::MEMORY_READ | access::MEMORY_WRITE,
            };
        }
        // A buffer barrier when every earlier access was made through one buffer.
        let mut buf = None;
        if self.rng.chance(0.5) && needs.iter().all(|(_, r)| *r == needs[0].1) && needs[0].1 .0 == 0
        {
            buf = Some(needs[0].1 .1);
        }
        // Some as an event set, waited on and reset at once (vkCmdSetEvent/vkCmdWaitEvents/
        // vkCmdResetEvent), set at all commands: synchronization validation takes a set after
        // the last submission's reset as a race unless its stage mask holds ALL_COMMANDS.
        let event = self.rng.chance(0.25);
        Cmd::Barrier {
            v2,
            event,
            buf,
            src_stage: if event {
                stage::ALL_COMMANDS
            } else {
                n.src_stage
            },
            src_access: n.src_access,
            dst_stage: n.dst_stage,
            dst_access: n.dst_access,
        }
    }

    /// Places barriers in the workloads so that each is valid run after itself and after the
    /// others, in this order, any number of times (a trial on a copy of the model).
    fn settle(&mut self, cbs: &mut [Vec<Cmd>], chained: bool) {
        for _ in 0..6 {
            let mut trial = self.m.clone();
            let mut changed = false;
            for _rep in 0..2 {
                for (i, cmds) in cbs.iter_mut().enumerate() {
                    trial.sub += 1;
                    trial.log.run += 1;
                    let sub = trial.sub;
                    trial.log.host_submitted();
                    if chained && i > 0 {
                        trial.log.semaphore(sub - 1, stage::ALL_COMMANDS);
                    }
                    let mut j = 0;
                    let mut tries = 0;
                    while j < cmds.len() {
                        let mut t = trial.clone();
                        match t.sim_cmd(&cmds[j], sub) {
                            Ok(()) => {
                                trial = t;
                                j += 1;
                                tries = 0;
                            }
                            Err(Refusal::Hazard(_)) if tries >= 2 => {
                                cmds.remove(j);
                                changed = true;
                                tries = 0;
                            }
                            Err(Refusal::Hazard(needs)) => {
                                let mut b = self.barrier_for(&needs);
                                if matches!(b, Cmd::Barrier { event: true, .. }) {
                                    // An event orders only this command buffer's accesses
                                    // (sync::Log::barrier): a pipeline barrier where the
                                    // hazard is with an earlier one.
                                    let mut u = trial.clone();
                                    let ok = u.sim_cmd(&b, sub).is_ok()
                                        && u.sim_cmd(&cmds[j], sub).is_ok();
                                    if let Cmd::Barrier { event, .. } = &mut b {
                                        *event = ok;
                                    }
                                }
                                cmds.insert(j, b);
                                changed = true;
                                tries += 1;
                            }
                            Err(Refusal::Invalid(_)) => {
                                cmds.remove(j);
                                changed = true;
                            }
                        }
                    }
                }
                trial.done = trial.sub;
            }
            if !changed {
                return;
            }
        }
    }

    fn host_barrier(&mut self) -> Cmd {
        let vertex = if self.m.caps.draw {
            stage::VERTEX_SHADER
        } else {
            0
        };
        Cmd::Barrier {
            v2: self.rng.chance(0.5),
            event: false,
            buf: None,
            src_stage: stage::TRANSFER | stage::COMPUTE | vertex,
            src_access: access::TRANSFER_WRITE | access::SHADER_WRITE,
            dst_stage: stage::HOST,
            dst_access: access::HOST_READ | access::HOST_WRITE,
        }
    }

    fn iterations(&mut self, ctx: &Ctx) {
        let iters = self.rng.range(2, 4);
        let sync = [Sync::Fence, Sync::Timeline, Sync::Idle][self.rng.weighted(&[6, 3, 1])];
        // Split: an upload command buffer and a work-and-download one.
        let split = self.rng.chance(0.3);
        let chained = split && self.rng.chance(0.5);
        let mut uab = vec![];
        let chains = ctx.chains.clone();
        let mut cbs: Vec<Vec<Cmd>> = if split {
            vec![
                self.steps(ctx, &chains, true, false, false, &mut uab),
                self.steps(ctx, &chains, false, true, true, &mut uab),
            ]
        } else {
            vec![self.steps(ctx, &chains, true, true, true, &mut uab)]
        };
        cbs.retain(|c| !c.is_empty());
        if cbs.is_empty() {
            return;
        }
        // The spare buffer's bytes defined first (a kernel may read it).
        if let Some((mem, at, size)) = self
            .m
            .bufs
            .get(&ctx.spare)
            .and_then(|b| Some((b.bound?.0, b.bound?.1, b.size)))
        {
            if !self.m.mems[&mem].defined.covers(at, at + size) {
                let val = self.rng.u32();
                let last = cbs.len() - 1;
                cbs[last].insert(
                    0,
                    Cmd::Fill {
                        buf: ctx.spare,
                        offset: 0,
                        size,
                        val,
                    },
                );
            }
        }
        if self.rng.chance(0.4) || !uab.is_empty() {
            let v2 = self.rng.chance(0.5);
            for c in cbs.iter_mut() {
                c.insert(
                    0,
                    Cmd::Barrier {
                        v2,
                        event: false,
                        buf: None,
                        src_stage: stage::ALL_COMMANDS,
                        src_access: access::MEMORY_WRITE,
                        dst_stage: stage::ALL_COMMANDS,
                        dst_access: access::MEMORY_READ | access::MEMORY_WRITE,
                    },
                );
            }
        }
        for c in cbs.iter_mut() {
            c.push(self.host_barrier());
        }
        self.settle(&mut cbs, chained);
        let ids: Vec<u32> = cbs.iter().map(|_| self.id()).collect();
        // Sets written late: the decoy while recording, the real descriptors after.
        let late = std::mem::take(&mut self.late);
        for (set, early, _) in &late {
            let coin = self.rng.chance(0.4);
            self.push(Op::WriteSet {
                set: *set,
                res: early.clone(),
                template: coin,
            });
        }
        for (id, cmds) in ids.iter().zip(&cbs) {
            let op = self.record(*id, cmds.clone());
            self.push(op);
        }
        for (set, _, res) in late {
            let coin = self.rng.chance(0.4);
            self.push(Op::WriteSet {
                set,
                res,
                template: coin,
            });
        }
        let fence = self.id();
        self.push(Op::Fence { fence });
        let timeline = self.id();
        self.push(Op::Semaphore {
            sem: timeline,
            timeline: true,
        });
        let binary = self.id();
        if chained {
            self.push(Op::Semaphore {
                sem: binary,
                timeline: false,
            });
        }
        let mut tl_value = 0;
        let delay = self.rng.chance(0.3);
        let mut inputs_done = false;
        for it in 0..iters {
            if !inputs_done {
                self.host_inputs(ctx);
            }
            inputs_done = false;
            // Perturbations between iterations.
            if it > 0 {
                self.perturb(ctx, &mut uab, &ids, &cbs);
            }
            let last = ids.len() - 1;
            for (i, &cb) in ids.iter().enumerate() {
                let mut wait = vec![];
                let mut signal = vec![];
                if chained && i > 0 {
                    wait.push(SemRef {
                        sem: binary,
                        value: 0,
                        stage: stage::ALL_COMMANDS,
                    });
                }
                if chained && i < last {
                    signal.push(SemRef {
                        sem: binary,
                        value: 0,
                        stage: 0,
                    });
                }
                let mut f = None;
                if i == last || (split && !chained && self.rng.chance(0.5)) {
                    match sync {
                        Sync::Fence => f = Some(fence),
                        Sync::Timeline => {
                            tl_value += self.rng.range(1, 3);
                            signal.push(SemRef {
                                sem: timeline,
                                value: tl_value,
                                stage: 0,
                            });
                        }
                        Sync::Idle => {}
                    }
                }
                let v2 = self.rng.chance(0.4);
                if !self.push(Op::Submit {
                    cbs: vec![cb],
                    fence: f,
                    wait,
                    signal,
                    v2,
                }) {
                    // Re-record and try once more (a rewritten set, a destroyed buffer).
                    let mut again = vec![cbs[i].clone()];
                    self.settle(&mut again, false);
                    let op = self.record(cb, again.pop().unwrap());
                    self.push(op);
                    let f2 = f;
                    let sig: Vec<SemRef> = if chained && i < last {
                        vec![SemRef {
                            sem: binary,
                            value: 0,
                            stage: 0,
                        }]
                    } else {
                        vec![]
                    };
                    let wt: Vec<SemRef> = if chained && i > 0 {
                        vec![SemRef {
                            sem: binary,
                            value: 0,
                            stage: stage::ALL_COMMANDS,
                        }]
                    } else {
                        vec![]
                    };
                    self.push(Op::Submit {
                        cbs: vec![cb],
                        fence: f2,
                        wait: wt,
                        signal: sig,
                        v2,
                    });
                }
                if self.in_flight && self.rng.chance(0.6) {
                    self.host_in_flight(ctx);
                }
                if split && !chained && i < last && f.is_some() && self.rng.chance(0.7) {
                    self.wait(sync, fence, timeline, tl_value);
                }
            }
            if delay && it + 1 < iters {
                // The next inputs before the wait: legal only where no GPU work in flight
                // touches them (the model refuses the rest: then after the wait).
                inputs_done = self.host_inputs(ctx);
            }
            self.wait(sync, fence, timeline, tl_value);
            self.host_outputs(ctx);
        }
    }

    fn wait(&mut self, sync: Sync, fence: u32, timeline: u32, value: u64) {
        match sync {
            Sync::Fence => {
                if self.push(Op::WaitFence { fence }) {
                    self.push(Op::ResetFence { fence });
                }
            }
            Sync::Timeline => {
                if value > 0 {
                    self.push(Op::WaitSem {
                        sem: timeline,
                        value,
                    });
                }
            }
            Sync::Idle => {
                if self.rng.chance(0.5) {
                    self.push(Op::QueueIdle);
                } else {
                    self.push(Op::DeviceIdle);
                }
            }
        }
    }

    /// Host writes of the upload buffers (and the uniform block); whether all were valid.
    fn host_inputs(&mut self, ctx: &Ctx) -> bool {
        let mut all = true;
        let skip = self.inputs_once && self.inputs_written;
        self.inputs_written = true;
        for c in ctx.chains.clone() {
            if skip {
                break;
            }
            if let Some(u) = c.up {
                let Some((mem, at)) = self.m.bufs.get(&u).and_then(|b| b.bound) else {
                    continue;
                };
                let val = self.rng.u32();
                let (off, len) = if self.rng.chance(0.85) {
                    (0, c.size)
                } else {
                    let len = self.rng.range(1, c.size / 4) * 4;
                    (self.rng.range(0, (c.size - len) / 4) * 4, len)
                };
                let ok = self.push(Op::Write {
                    mem,
                    offset: at + off,
                    len,
                    val,
                });
                all &= ok;
                if ok && self.m.mems[&mem].mapped && self.rng.chance(0.3) {
                    self.push(Op::Flush { mem });
                }
            }
        }
        if let Some(u) = ctx.uni {
            if let Some((mem, at)) = self.m.bufs.get(&u).and_then(|b| b.bound) {
                let val = self.rng.u32();
                all &= self.push(Op::Write {
                    mem,
                    offset: at,
                    len: UNIFORM_BYTES,
                    val,
                });
            }
        }
        all
    }

    /// Host accesses while a submission is in flight (issue 53): writes of upload buffers and
    /// the uniform block, reads of download buffers' defined bytes, each over the whole buffer
    /// or a part — legal only where no pending GPU work touches those bytes (the model refuses
    /// the rest, which is then not emitted). Echo must refuse such a staging buffer's pair (S2)
    /// or keep its bytes apart.
    fn host_in_flight(&mut self, ctx: &Ctx) {
        let mut cands: Vec<(u32, u64, bool)> = vec![];
        for c in &ctx.chains {
            if let Some(u) = c.up {
                cands.push((u, c.size, true));
            }
            if let Some(d) = c.down {
                cands.push((d, c.size, false));
            }
        }
        if let Some(u) = ctx.uni {
            cands.push((u, UNIFORM_BYTES, true));
        }
        for (buf, size, write) in cands {
            if !self.rng.chance(0.5) {
                continue;
            }
            let Some((mem, at)) = self.m.bufs.get(&buf).and_then(|b| b.bound) else {
                continue;
            };
            let (off, len) = if self.rng.chance(0.4) {
                (0, size)
            } else {
                let len = self.rng.range(1, size / 4) * 4;
                (self.rng.range(0, (size - len) / 4) * 4, len)
            };
            if write {
                let val = self.rng.u32();
                self.push(Op::Write {
                    mem,
                    offset: at + off,
                    len,
                    val,
                });
            } else {
                let parts = self.m.mems[&mem].defined.within(at + off, at + off + len);
                for (lo, hi) in parts {
                    self.push(Op::Read {
                        mem,
                        offset: lo,
                        len: hi - lo,
                    });
                }
            }
        }
    }

    /// Host reads of the download buffers' defined bytes.
    fn host_outputs(&mut self, ctx: &Ctx) {
        for c in ctx.chains.clone() {
            let Some(d) = c.down else { continue };
            let Some((mem, at)) = self.m.bufs.get(&d).and_then(|b| b.bound) else {
                continue;
            };
            if self.m.mems[&mem].mapped && self.rng.chance(0.3) {
                self.push(Op::Invalidate { mem });
            }
            let parts = self.m.mems[&mem].defined.within(at, at + c.size);
            for (lo, hi) in parts {
                self.push(Op::Read {
                    mem,
                    offset: lo,
                    len: hi - lo,
                });
            }
        }
    }

    /// Legal departures between iterations.
    fn perturb(&mut self, ctx: &Ctx, uab: &mut [(u32, u32)], ids: &[u32], cbs: &[Vec<Cmd>]) {
        // An update-after-bind set pointed at the spare buffer (or back): no re-record.
        if !uab.is_empty() && self.rng.chance(0.5) {
            let (set, dev) = uab[self.rng.below(uab.len() as u64) as usize];
            if let Some(s) = self.m.sets.get(&set).cloned() {
                if let Some(mut res) = s.res {
                    let spare_size = self.m.bufs.get(&ctx.spare).map_or(0, |b| b.size);
                    let i = res.len() - 1;
                    if let Res::Buf { buf, offset, range } = res[i] {
                        let to = if buf == ctx.spare { dev } else { ctx.spare };
                        if range <= spare_size || to == dev {
                            res[i] = Res::Buf {
                                buf: to,
                                offset,
                                range,
                            };
                            let coin = self.rng.chance(0.4);
                            self.push(Op::WriteSet {
                                set,
                                res,
                                template: coin,
                            });
                        }
                    }
                }
            }
        }
        // A per-call download: a fresh buffer and allocation, one copy, read, freed.
        if self.rng.chance(0.15) {
            let c = ctx.chains[self.rng.below(ctx.chains.len() as u64) as usize].clone();
            let b = self.buffer(c.size, usage::DST);
            if let Some(mem) = self.own_memory(b, c.size, false, None) {
                let mut cmds = vec![self.copy(c.dev, b, c.size), self.host_barrier()];
                self.settle(std::slice::from_mut(&mut cmds), false);
                let cb = self.id();
                let fence = self.id();
                self.push(Op::Fence { fence });
                let op = self.record(cb, cmds);
                if self.push(op)
                    && self.push(Op::Submit {
                        cbs: vec![cb],
                        fence: Some(fence),
                        wait: vec![],
                        signal: vec![],
                        v2: false,
                    })
                    && self.push(Op::WaitFence { fence })
                {
                    let parts = self.m.mems[&mem].defined.within(0, c.size);
                    for (lo, hi) in parts {
                        self.push(Op::Read {
                            mem,
                            offset: lo,
                            len: hi - lo,
                        });
                    }
                }
                self.push(Op::Destroy { buf: b });
                self.push(Op::Free { mem });
            }
        }
        // A re-record of a workload.
        if self.rng.chance(0.1) {
            let i = self.rng.below(ids.len() as u64) as usize;
            let op = self.record(ids[i], cbs[i].clone());
            self.push(op);
        }
        // A host write to the spare buffer's memory (legal only when nothing in flight uses it).
        if self.rng.chance(0.1) {
            if let Some((mem, at)) = self.m.bufs.get(&ctx.spare).and_then(|b| b.bound) {
                let val = self.rng.u32();
                self.push(Op::Write {
                    mem,
                    offset: at,
                    len: ALIGN,
                    val,
                });
            }
        }
    }

    /// Final readbacks: every device buffer's defined bytes copied into one fresh buffer,
    /// then read; the download buffers read again.
    fn epilogue(&mut self) {
        self.push(Op::DeviceIdle);
        let mut srcs = vec![];
        for (&id, b) in &self.m.bufs {
            let Some((mem, at)) = b.bound else { continue };
            if b.dead || b.usage & usage::SRC == 0 {
                continue;
            }
            let m = &self.m.mems[&mem];
            if m.host_wrote || m.host_read {
                continue;
            }
            for (lo, hi) in m.defined.within(at, at + b.size) {
                srcs.push((id, lo - at, hi - lo));
            }
        }
        if !srcs.is_empty() {
            let total: u64 = srcs.iter().map(|s| s.2).sum();
            let size = round(total);
            let f = self.buffer(size, usage::DST);
            if let Some(mem) = self.own_memory(f, size, false, None) {
                let mut cmds = vec![Cmd::Barrier {
                    v2: false,
                    event: false,
                    buf: None,
                    src_stage: stage::ALL_COMMANDS,
                    src_access: access::MEMORY_WRITE,
                    dst_stage: stage::TRANSFER,
                    dst_access: access::TRANSFER_READ | access::TRANSFER_WRITE,
                }];
                let mut at = 0;
                for (b, off, len) in srcs {
                    cmds.push(Cmd::Copy {
                        src: b,
                        dst: f,
                        regions: vec![[off, at, len]],
                        v2: false,
                    });
                    at += len;
                }
                cmds.push(self.host_barrier());
                self.settle(std::slice::from_mut(&mut cmds), false);
                let cb = self.id();
                let fence = self.id();
                self.push(Op::Fence { fence });
                let op = self.record(cb, cmds);
                if self.push(op)
                    && self.push(Op::Submit {
                        cbs: vec![cb],
                        fence: Some(fence),
                        wait: vec![],
                        signal: vec![],
                        v2: false,
                    })
                    && self.push(Op::WaitFence { fence })
                {
                    for (lo, hi) in self.m.mems[&mem].defined.within(0, size) {
                        self.push(Op::Read {
                            mem,
                            offset: lo,
                            len: hi - lo,
                        });
                    }
                }
            }
        }
    }
}

struct Ctx {
    chains: Vec<Chain>,
    spare: u32,
    image: Option<u32>,
    uni: Option<u32>,
    ind: Option<(u32, u32)>,
}
