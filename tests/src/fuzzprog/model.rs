//! The validity model: the state a program has built so far, and whether the next op is valid
//! there. The generator emits only ops [`Model::apply`] accepts; [`repair`] replays a list and
//! drops what it refuses, so every sub-list a shrinker tries is a valid program again.
//!
//! What it checks, beyond handles being alive, bound and of the right usage: GPU accesses to
//! the same bytes are ordered by barriers or semaphores (the [`sync`] log, one queue), the host
//! touches bytes only after waiting for the GPU work that uses them (and reads GPU writes only
//! when a barrier made them visible to the host), only defined bytes are read by the host,
//! indirect dispatches read parameters the host wrote, no two accesses of one command race,
//! command buffers are neither pending when re-recorded or resubmitted nor invalidated by a
//! destroyed resource or a rewritten (non-update-after-bind) descriptor set.
//!
//! Over 1,000 lines: one validity rule per op of the program language (the checks listed
//! above), each where the op changes the state it checks.

use super::sync::{Access, Log, Need, Ranges};
use super::{access, stage, usage, Binding, Caps, Cmd, Desc, Draw, Kernel, Op, Program, Res};
use super::{ALIGN, IMAGE_BYTES, LOCAL, UNIFORM_BYTES};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub struct Mem {
    pub size: u64,
    pub mapped: bool,
    pub dedicated: Option<u32>,
    pub address: bool,
    pub defined: Ranges,
    /// Indirect dispatch parameters the host wrote: offset → groups.
    pub indirect: BTreeMap<u64, u32>,
    pub host_wrote: bool,
    pub host_read: bool,
}

#[derive(Clone, Debug)]
pub struct Buf {
    pub size: u64,
    pub usage: u32,
    pub bound: Option<(u32, u64)>,
    /// Its memory was freed: it may only be destroyed.
    pub dead: bool,
}

#[derive(Clone, Debug)]
pub struct Img {
    pub bound: Option<(u32, u64)>,
    pub dead: bool,
    /// Layout GENERAL (after an ImageInit ran), as of the last submission.
    pub general: bool,
    pub defined: bool,
}

#[derive(Clone, Debug)]
pub struct View {
    pub buf: u32,
    pub offset: u64,
    pub range: u64,
}

#[derive(Clone, Debug)]
pub struct Set {
    pub kernel: Kernel,
    pub uab: bool,
    /// Its layout is for the vertex stage (draws only).
    pub vertex: bool,
    pub res: Option<Vec<Res>>,
}

#[derive(Clone, Debug)]
pub struct Cb {
    pub cmds: Vec<Cmd>,
    pub valid: bool,
    pub last_sub: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    Unsignaled,
    Pending(u64),
    Signaled,
}

#[derive(Clone, Debug, Default)]
pub struct Sem {
    pub timeline: bool,
    /// Timeline: (value, submission) of every signal submitted.
    pub signals: Vec<(u64, u64)>,
    /// Binary: the submission whose signal no wait has consumed yet.
    pub pending: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub caps: Caps,
    pub mems: BTreeMap<u32, Mem>,
    pub bufs: BTreeMap<u32, Buf>,
    pub imgs: BTreeMap<u32, Img>,
    pub views: BTreeMap<u32, View>,
    pub sets: BTreeMap<u32, Set>,
    pub cbs: BTreeMap<u32, Cb>,
    pub fences: BTreeMap<u32, Fence>,
    pub sems: BTreeMap<u32, Sem>,
    pub log: Log,
    /// The last submission's number (1, 2, …) and the last one the host knows complete.
    pub sub: u64,
    pub done: u64,
    used: BTreeSet<(u8, u32)>,
}

type R<T = ()> = Result<T, String>;

/// A binding of a dispatch: how the kernel uses it, its memory range, its buffer.
type Bound = (Binding, (u32, u64, u64), u32);

fn fail<T>(msg: impl Into<String>) -> R<T> {
    Err(msg.into())
}

/// An access a command makes: memory, range, write, stage, access.
#[derive(Clone, Copy, Debug)]
pub struct Touch {
    pub res: (u8, u32),
    pub mem: u32,
    /// The range synchronization covers (a dispatch: the whole descriptor range, as
    /// synchronization validation takes it).
    pub lo: u64,
    pub hi: u64,
    /// The bytes really read or written (a dispatch: its invocations' elements).
    pub exact: (u64, u64),
    pub write: bool,
    pub stage: u64,
    pub access: u64,
}

/// Why a command cannot run where it stands.
#[derive(Clone, Debug)]
pub enum Refusal {
    /// It lacks these dependencies: a barrier covering them makes it valid.
    Hazard(Vec<(Need, (u8, u32))>),
    Invalid(String),
}

impl From<String> for Refusal {
    fn from(s: String) -> Refusal {
        Refusal::Invalid(s)
    }
}

fn overlap(a: (u32, u64, u64), b: (u32, u64, u64)) -> bool {
    a.0 == b.0 && a.1 < b.2 && b.1 < a.2
}

impl Model {
    pub fn new(caps: Caps) -> Model {
        Model {
            caps,
            mems: BTreeMap::new(),
            bufs: BTreeMap::new(),
            imgs: BTreeMap::new(),
            views: BTreeMap::new(),
            sets: BTreeMap::new(),
            cbs: BTreeMap::new(),
            fences: BTreeMap::new(),
            sems: BTreeMap::new(),
            log: Log::default(),
            sub: 0,
            done: 0,
            used: BTreeSet::new(),
        }
    }

    fn fresh(&mut self, kind: u8, id: u32) -> R {
        if !self.used.insert((kind, id)) {
            return fail(format!("id {id} of kind {kind} used before"));
        }
        Ok(())
    }

    /// Whether an id of this kind was ever created (ids are never reused).
    pub fn id_used(&self, kind: u8, id: u32) -> bool {
        self.used.contains(&(kind, id))
    }

    /// The memory range of `len` bytes at `off` of a live, bound buffer.
    pub fn buf_range(&self, buf: u32, off: u64, len: u64) -> R<(u32, u64, u64)> {
        let b = self.bufs.get(&buf).ok_or(format!("no buffer {buf}"))?;
        if b.dead {
            return fail(format!("buffer {buf}'s memory was freed"));
        }
        let (mem, at) = b.bound.ok_or(format!("buffer {buf} is not bound"))?;
        if len == 0 || off + len > b.size {
            return fail(format!(
                "range {off}+{len} outside buffer {buf} ({})",
                b.size
            ));
        }
        Ok((mem, at + off, at + off + len))
    }

    fn usage_has(&self, buf: u32, u: u32) -> R {
        let b = self.bufs.get(&buf).ok_or(format!("no buffer {buf}"))?;
        if b.usage & u != u {
            return fail(format!("buffer {buf} lacks usage {u:#x}"));
        }
        Ok(())
    }

    fn img_range(&self, img: u32) -> R<(u32, u64, u64)> {
        let i = self.imgs.get(&img).ok_or(format!("no image {img}"))?;
        if i.dead {
            return fail(format!("image {img}'s memory was freed"));
        }
        let (mem, at) = i.bound.ok_or(format!("image {img} is not bound"))?;
        Ok((mem, at, at + self.caps.image_size))
    }

    /// The buffers, images, views and sets a command names (views and sets: also their
    /// buffers).
    fn refs(&self, cmd: &Cmd) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
        let (mut b, mut i, mut v, mut s) = (vec![], vec![], vec![], vec![]);
        let res = |r: &Res, b: &mut Vec<u32>, v: &mut Vec<u32>| match *r {
            Res::Buf { buf, .. } => b.push(buf),
            Res::View { view } => {
                v.push(view);
                if let Some(x) = self.views.get(&view) {
                    b.push(x.buf);
                }
            }
        };
        match cmd {
            Cmd::Copy { src, dst, .. } => b.extend([*src, *dst]),
            Cmd::Fill { buf, .. } | Cmd::Update { buf, .. } => b.push(*buf),
            Cmd::ImageInit { img } | Cmd::ClearImage { img, .. } => i.push(*img),
            Cmd::QueryCopy { buf, .. } => b.push(*buf),
            Cmd::PushConstants { .. } => {}
            Cmd::ToImage { buf, img, .. } | Cmd::FromImage { img, buf, .. } => {
                b.push(*buf);
                i.push(*img);
            }
            Cmd::Barrier { buf, .. } => b.extend(buf.iter().copied()),
            Cmd::Dispatch { desc, indirect, .. } => {
                if let Some((buf, _)) = indirect {
                    b.push(*buf);
                }
                match desc {
                    Desc::Set { set } => {
                        s.push(*set);
                        if let Some(Set { res: Some(rs), .. }) = self.sets.get(set) {
                            for r in rs {
                                res(r, &mut b, &mut v);
                            }
                        }
                    }
                    Desc::Push { res: rs, .. } => {
                        for r in rs {
                            res(r, &mut b, &mut v);
                        }
                    }
                    Desc::Addr { src, dst } => b.extend([*src, *dst]),
                }
            }
        }
        (b, i, v, s)
    }

    fn cb_uses(&self, cb: &Cb, what: Use) -> bool {
        cb.cmds.iter().any(|c| {
            let (b, i, v, s) = self.refs(c);
            match what {
                Use::Buf(x) => b.contains(&x),
                Use::Img(x) => i.contains(&x),
                Use::View(x) => v.contains(&x),
                Use::Set(x) => s.contains(&x),
                Use::Mem(m) => {
                    b.iter().any(|x| {
                        self.bufs
                            .get(x)
                            .and_then(|b| b.bound)
                            .is_some_and(|(bm, _)| bm == m)
                    }) || i.iter().any(|x| {
                        self.imgs
                            .get(x)
                            .and_then(|i| i.bound)
                            .is_some_and(|(im, _)| im == m)
                    })
                }
            }
        })
    }

    fn pending_use(&self, what: Use) -> bool {
        self.cbs
            .values()
            .any(|cb| cb.last_sub > self.done && self.cb_uses(cb, what))
    }

    fn invalidate(&mut self, what: Use) {
        let hit: Vec<u32> = self
            .cbs
            .iter()
            .filter(|(_, cb)| self.cb_uses(cb, what))
            .map(|(id, _)| *id)
            .collect();
        for id in hit {
            self.cbs.get_mut(&id).unwrap().valid = false;
        }
    }

    fn check_res(&self, r: &Res, b: Binding) -> R<(u32, u64, u64, u32)> {
        match *r {
            Res::Buf { buf, offset, range } => {
                if b.texel() {
                    return fail("a texel binding needs a view");
                }
                self.usage_has(buf, b.usage())?;
                if offset % ALIGN != 0 || range % 4 != 0 {
                    return fail("descriptor offset or range misaligned");
                }
                if b == Binding::Uniform && range != UNIFORM_BYTES {
                    return fail("a uniform range is 256 bytes");
                }
                let (m, lo, hi) = self.buf_range(buf, offset, range)?;
                Ok((m, lo, hi, buf))
            }
            Res::View { view } => {
                if !b.texel() {
                    return fail("a view in a buffer binding");
                }
                let v = self.views.get(&view).ok_or(format!("no view {view}"))?;
                self.usage_has(v.buf, b.usage())?;
                let (m, lo, hi) = self.buf_range(v.buf, v.offset, v.range)?;
                Ok((m, lo, hi, v.buf))
            }
        }
    }

    /// The resources of a dispatch (`draw`: a draw), checked, with their memory ranges.
    fn dispatch_res(&self, kernel: Kernel, desc: &Desc, draw: bool) -> R<Vec<Bound>> {
        let binds = kernel.bindings();
        let res: Vec<Res> = match desc {
            Desc::Set { set } => {
                let s = self.sets.get(set).ok_or(format!("no set {set}"))?;
                if s.kernel != kernel {
                    return fail("set of another kernel");
                }
                if s.vertex != draw {
                    return fail("a set of the other stage (compute / vertex)");
                }
                s.res.clone().ok_or(format!("set {set} not written"))?
            }
            Desc::Push { res, .. } => {
                if !self.caps.push_descriptor {
                    return fail("no push descriptors");
                }
                if kernel == Kernel::Addr {
                    return fail("addr takes no descriptors");
                }
                res.clone()
            }
            Desc::Addr { src, dst } => {
                if kernel != Kernel::Addr || !self.caps.device_address {
                    return fail("addresses only for kernel addr");
                }
                let mut out = vec![];
                for (b, x) in [(Binding::StorageRead, *src), (Binding::StorageWrite, *dst)] {
                    self.usage_has(x, usage::ADDRESS)?;
                    let size = self.bufs[&x].size;
                    let r = self.buf_range(x, 0, size)?;
                    if !self.mems[&r.0].address {
                        return fail("address of a buffer in memory without DEVICE_ADDRESS");
                    }
                    out.push((b, r, x));
                }
                return Ok(out);
            }
        };
        if res.len() != binds.len() {
            return fail("descriptor count");
        }
        let mut out = vec![];
        for (r, &b) in res.iter().zip(binds) {
            let (m, lo, hi, buf) = self.check_res(r, b)?;
            out.push((b, (m, lo, hi), buf));
        }
        Ok(out)
    }

    /// Static checks of a command (recording): handles, usages, ranges.
    pub fn check_cmd(&self, cmd: &Cmd) -> R {
        self.cmd_touches(cmd, false).map(|_| ())
    }

    /// The accesses a command makes and its static checks. `dynamic`: also what depends on the
    /// state at execution (image layouts, indirect parameters).
    fn cmd_touches(&self, cmd: &Cmd, dynamic: bool) -> R<Vec<Touch>> {
        use access as a;
        let t = |res: (u8, u32), r: (u32, u64, u64), write, st, acc| Touch {
            res,
            mem: r.0,
            lo: r.1,
            hi: r.2,
            exact: (r.1, r.2),
            write,
            stage: st,
            access: acc,
        };
        let mut out = vec![];
        match cmd {
            Cmd::Copy {
                src, dst, regions, ..
            } => {
                self.usage_has(*src, usage::SRC)?;
                self.usage_has(*dst, usage::DST)?;
                if regions.is_empty() {
                    return fail("no regions");
                }
                let mut reads = vec![];
                let mut writes: Vec<(u32, u64, u64)> = vec![];
                for &[so, d, n] in regions {
                    if so % 4 != 0 || d % 4 != 0 || n % 4 != 0 {
                        return fail("copy region misaligned");
                    }
                    let r = self.buf_range(*src, so, n)?;
                    let w = self.buf_range(*dst, d, n)?;
                    if writes.iter().any(|x| overlap(*x, w)) {
                        return fail("copy destinations overlap");
                    }
                    reads.push(r);
                    writes.push(w);
                }
                if reads.iter().any(|r| writes.iter().any(|w| overlap(*r, *w))) {
                    return fail("copy source and destination overlap in memory");
                }
                out.extend(
                    reads
                        .into_iter()
                        .map(|r| t((0, *src), r, false, stage::TRANSFER, a::TRANSFER_READ)),
                );
                out.extend(
                    writes
                        .into_iter()
                        .map(|w| t((0, *dst), w, true, stage::TRANSFER, a::TRANSFER_WRITE)),
                );
            }
            Cmd::Fill {
                buf, offset, size, ..
            }
            | Cmd::Update {
                buf, offset, size, ..
            } => {
                self.usage_has(*buf, usage::DST)?;
                if offset % 4 != 0 || size % 4 != 0 {
                    return fail("fill/update misaligned");
                }
                if matches!(cmd, Cmd::Update { .. }) && *size > 65536 {
                    return fail("update over 65536 bytes");
                }
                let w = self.buf_range(*buf, *offset, *size)?;
                out.push(t((0, *buf), w, true, stage::TRANSFER, a::TRANSFER_WRITE));
            }
            Cmd::ImageInit { img } => {
                let r = self.img_range(*img)?;
                out.push(t((1, *img), r, true, stage::TRANSFER, a::TRANSFER_WRITE));
            }
            Cmd::ClearImage { img, .. } => {
                let r = self.img_range(*img)?;
                if dynamic && !self.imgs[img].general {
                    return fail(format!("image {img} not in GENERAL"));
                }
                out.push(t((1, *img), r, true, stage::TRANSFER, a::TRANSFER_WRITE));
            }
            Cmd::QueryCopy { buf, offset, .. } => {
                if !self.caps.timestamps {
                    return fail("no timestamps");
                }
                self.usage_has(*buf, usage::DST)?;
                if offset % 8 != 0 {
                    return fail("a query result's offset is a multiple of 8");
                }
                let w = self.buf_range(*buf, *offset, 8)?;
                out.push(t((0, *buf), w, true, stage::TRANSFER, a::TRANSFER_WRITE));
            }
            Cmd::PushConstants { .. } => {}
            Cmd::ToImage {
                buf, offset, img, ..
            } => {
                self.usage_has(*buf, usage::SRC)?;
                let r = self.buf_range(*buf, *offset, IMAGE_BYTES)?;
                if offset % 4 != 0 {
                    return fail("misaligned");
                }
                let w = self.img_range(*img)?;
                if dynamic && !self.imgs[img].general {
                    return fail(format!("image {img} not in GENERAL"));
                }
                if overlap(r, w) {
                    return fail("copy to an image over its own source");
                }
                out.push(t((0, *buf), r, false, stage::TRANSFER, a::TRANSFER_READ));
                out.push(t((1, *img), w, true, stage::TRANSFER, a::TRANSFER_WRITE));
            }
            Cmd::FromImage {
                img, buf, offset, ..
            } => {
                self.usage_has(*buf, usage::DST)?;
                let w = self.buf_range(*buf, *offset, IMAGE_BYTES)?;
                if offset % 4 != 0 {
                    return fail("misaligned");
                }
                let r = self.img_range(*img)?;
                if dynamic && !self.imgs[img].general {
                    return fail(format!("image {img} not in GENERAL"));
                }
                if overlap(r, w) {
                    return fail("copy from an image over its own destination");
                }
                out.push(t((1, *img), r, false, stage::TRANSFER, a::TRANSFER_READ));
                out.push(t((0, *buf), w, true, stage::TRANSFER, a::TRANSFER_WRITE));
            }
            Cmd::Barrier {
                buf,
                src_stage,
                dst_stage,
                ..
            } => {
                if *src_stage == 0 || *dst_stage == 0 {
                    return fail("empty stage mask");
                }
                if let Some(b) = buf {
                    let size = self.bufs.get(b).ok_or("no buffer")?.size;
                    self.buf_range(*b, 0, size)?;
                }
            }
            Cmd::Dispatch {
                kernel,
                desc,
                groups,
                base,
                indirect,
                n,
                bind2,
                code,
                draw,
                ..
            } => {
                if *bind2 && !self.caps.maint6 {
                    return fail("a ...2 bind without VK_KHR_maintenance6");
                }
                if code.needs_shader_object() && !self.caps.shader_object {
                    return fail("a shader object without VK_EXT_shader_object");
                }
                let drawn = !draw.is_none();
                if drawn
                    && (!self.caps.draw
                        || (*draw == Draw::Library && !self.caps.gpl)
                        || !matches!(kernel, Kernel::Xform | Kernel::Inplace)
                        || indirect.is_some()
                        || *bind2
                        || code.needs_shader_object())
                {
                    return fail("a draw the device or the program language does not have");
                }
                let shader_stage = if drawn {
                    stage::VERTEX_SHADER
                } else {
                    stage::COMPUTE
                };
                let res = self.dispatch_res(*kernel, desc, drawn)?;
                if *n == 0 {
                    return fail("n = 0");
                }
                for (b, r, _) in &res {
                    if *b != Binding::Uniform && (r.2 - r.1) / 4 < *n as u64 {
                        return fail("n past a binding's range");
                    }
                }
                for (i, (b1, r1, _)) in res.iter().enumerate() {
                    for (b2, r2, _) in &res[i + 1..] {
                        if (b1.writes() || b2.writes()) && overlap(*r1, *r2) {
                            return fail("bindings of one dispatch overlap, one written: a race");
                        }
                    }
                }
                let groups = match indirect {
                    Some((ib, off)) => {
                        if *base != 0 {
                            return fail("indirect with a base");
                        }
                        self.usage_has(*ib, usage::INDIRECT)?;
                        if off % 4 != 0 {
                            return fail("misaligned");
                        }
                        let r = self.buf_range(*ib, *off, 12)?;
                        if res.iter().any(|(b, x, _)| b.writes() && overlap(*x, r)) {
                            return fail("a dispatch writes its own parameters");
                        }
                        out.push(t(
                            (0, *ib),
                            r,
                            false,
                            stage::DRAW_INDIRECT,
                            a::INDIRECT_READ,
                        ));
                        if dynamic {
                            let m = &self.mems[&r.0];
                            match m.indirect.get(&r.1) {
                                Some(&g) if m.defined.covers(r.1, r.2) => g,
                                _ => return fail("indirect parameters the host did not write"),
                            }
                        } else {
                            0
                        }
                    }
                    None => *groups,
                };
                if groups > 4096 || *base > 4096 {
                    return fail("too many groups");
                }
                let lo = (*base * LOCAL).min(*n) as u64;
                let hi = ((*base + groups) * LOCAL).min(*n) as u64;
                for (b, r, buf) in res {
                    let (ra, wa) = b.access();
                    let exact = if b == Binding::Uniform {
                        (r.1, r.1 + UNIFORM_BYTES)
                    } else if lo < hi {
                        (r.1 + lo * 4, r.1 + hi * 4)
                    } else {
                        (r.1, r.1)
                    };
                    for (a, w) in [(ra, false), (wa, true)] {
                        if a != 0 {
                            let mut x = t((0, buf), r, w, shader_stage, a);
                            x.exact = exact;
                            out.push(x);
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Runs one command of a submission (number `sub`): checks, then its effects. On a hazard,
    /// nothing changes.
    pub fn sim_cmd(&mut self, cmd: &Cmd, sub: u64) -> Result<(), Refusal> {
        self.sim(cmd, sub, true)
    }

    /// What synchronization validation checks when a command buffer is recorded: its commands'
    /// hazards among themselves, with the descriptors as they are now.
    pub fn record_check(&self, cmds: &[Cmd]) -> R {
        let mut t = self.clone();
        t.log = Log::default();
        for c in cmds {
            match t.sim(c, 1, false) {
                Ok(()) => {}
                Err(Refusal::Invalid(e)) => return fail(e),
                Err(Refusal::Hazard(h)) => {
                    return fail(format!("hazard inside the command buffer: {:?}", h[0]))
                }
            }
        }
        Ok(())
    }

    fn sim(&mut self, cmd: &Cmd, sub: u64, dynamic: bool) -> Result<(), Refusal> {
        let touches = self.cmd_touches(cmd, dynamic)?;
        if let Cmd::Barrier {
            buf,
            event,
            src_stage,
            src_access,
            dst_stage,
            dst_access,
            ..
        } = cmd
        {
            self.log.barrier(
                buf.map(|b| (0, b)),
                Need {
                    src_stage: *src_stage,
                    src_access: *src_access,
                    dst_stage: *dst_stage,
                    dst_access: *dst_access,
                },
                *event,
            );
            return Ok(());
        }
        if let Cmd::ImageInit { img } = cmd {
            // The layout transition: a barrier from everything before, over the image's bytes.
            self.log.barrier(
                Some((1, *img)),
                Need {
                    src_stage: stage::ALL_COMMANDS,
                    src_access: access::MEMORY_WRITE,
                    dst_stage: stage::TRANSFER,
                    dst_access: access::TRANSFER_READ | access::TRANSFER_WRITE,
                },
                false,
            );
        }
        let mut needs = vec![];
        for x in &touches {
            needs.extend(
                self.log
                    .device_needs(x.mem, x.lo, x.hi, x.write, x.stage, x.access),
            );
        }
        if !needs.is_empty() {
            return Err(Refusal::Hazard(needs));
        }
        // Definedness of what it writes.
        let defined_all = |m: &Model, ts: &[Touch]| {
            ts.iter()
                .filter(|x| !x.write)
                .all(|x| m.mems[&x.mem].defined.covers(x.exact.0, x.exact.1))
        };
        match cmd {
            Cmd::Copy {
                src, dst, regions, ..
            } => {
                for &[so, d, n] in regions {
                    let (sm, slo, _) = self.buf_range(*src, so, n).unwrap();
                    let (dm, dlo, _) = self.buf_range(*dst, d, n).unwrap();
                    let parts = self.mems[&sm].defined.within(slo, slo + n);
                    self.write_bytes(dm, dlo, dlo + n, false);
                    for (a, b) in parts {
                        self.mems
                            .get_mut(&dm)
                            .unwrap()
                            .defined
                            .add(a - slo + dlo, b - slo + dlo);
                    }
                }
            }
            Cmd::Fill { .. } | Cmd::Update { .. } => {
                let w = touches[0];
                self.write_bytes(w.mem, w.lo, w.hi, true);
            }
            Cmd::ImageInit { img } => {
                let w = touches[0];
                self.write_bytes(w.mem, w.lo, w.hi, false);
                let i = self.imgs.get_mut(img).unwrap();
                i.general = true;
                i.defined = false;
            }
            Cmd::ToImage { img, .. } => {
                let (r, w) = (touches[0], touches[1]);
                let ok = self.mems[&r.mem].defined.covers(r.lo, r.hi);
                self.write_bytes(w.mem, w.lo, w.hi, false);
                self.imgs.get_mut(img).unwrap().defined = ok;
            }
            Cmd::FromImage { img, .. } => {
                let w = touches[1];
                let ok = self.imgs[img].defined;
                self.write_bytes(w.mem, w.lo, w.hi, ok);
            }
            Cmd::ClearImage { img, .. } => {
                // The texels are known (the image's memory holds them in a layout of the
                // driver's: its bytes are not).
                let w = touches[0];
                self.write_bytes(w.mem, w.lo, w.hi, false);
                self.imgs.get_mut(img).unwrap().defined = true;
            }
            Cmd::QueryCopy { .. } => {
                let w = touches[0];
                self.write_bytes(w.mem, w.lo, w.hi, false);
            }
            Cmd::PushConstants { .. } => {}
            Cmd::Dispatch { .. } => {
                let ok = defined_all(self, &touches);
                for w in touches.iter().filter(|x| x.write) {
                    self.write_bytes(w.mem, w.exact.0, w.exact.1, ok);
                }
            }
            Cmd::Barrier { .. } => unreachable!(),
        }
        for x in touches {
            self.log.push(Access {
                res: x.res,
                mem: x.mem,
                lo: x.lo,
                hi: x.hi,
                write: x.write,
                stage: x.stage,
                access: x.access,
                sub: Some(sub),
                avail: false,
                vis: vec![],
                dep: 0,
                run: 0,
                shadows: false,
            });
        }
        Ok(())
    }

    /// Bytes `lo..hi` of `mem` were written (defined or not): images over them lose their
    /// texels, indirect parameters there are gone.
    fn write_bytes(&mut self, mem: u32, lo: u64, hi: u64, defined: bool) {
        let size = self.caps.image_size;
        for i in self.imgs.values_mut() {
            if let Some((m, at)) = i.bound {
                if m == mem && at < hi && lo < at + size {
                    i.defined = false;
                }
            }
        }
        let m = self.mems.get_mut(&mem).unwrap();
        m.indirect.retain(|&o, _| o + 12 <= lo || o >= hi);
        if defined {
            m.defined.add(lo, hi);
        } else {
            m.defined.remove(lo, hi);
        }
    }

    fn host_access(&mut self, mem: u32, lo: u64, hi: u64, write: bool) -> R {
        let m = self.mems.get(&mem).ok_or(format!("no memory {mem}"))?;
        if (lo | hi) & 3 != 0 || lo >= hi || hi > m.size {
            return fail("host range");
        }
        if !write && !m.defined.covers(lo, hi) {
            return fail(format!("host read of undefined bytes of memory {mem}"));
        }
        self.log.host_ok(mem, lo, hi, write, self.done)?;
        self.log.push(Access {
            res: (2, 0),
            mem,
            lo,
            hi,
            write,
            stage: stage::HOST,
            access: if write {
                access::HOST_WRITE
            } else {
                access::HOST_READ
            },
            sub: None,
            avail: true,
            vis: vec![],
            dep: 0,
            run: 0,
            shadows: false,
        });
        let m = self.mems.get_mut(&mem).unwrap();
        if write {
            m.host_wrote = true;
        } else {
            m.host_read = true;
        }
        Ok(())
    }

    fn complete(&mut self, upto: u64) {
        self.done = self.done.max(upto);
        let done = self.done;
        for f in self.fences.values_mut() {
            if let Fence::Pending(s) = *f {
                if s <= done {
                    *f = Fence::Signaled;
                }
            }
        }
    }

    /// Checks `op` where the program stands and applies it; on an error nothing changes.
    pub fn apply(&mut self, op: &Op) -> R {
        let mut next = self.clone();
        next.apply_in_place(op)?;
        *self = next;
        Ok(())
    }

    fn apply_in_place(&mut self, op: &Op) -> R {
        match op {
            Op::Alloc {
                mem,
                size,
                dedicated,
                address,
            } => {
                self.fresh(0, *mem)?;
                if *size == 0 || size % ALIGN != 0 || *size > (1 << 24) {
                    return fail("allocation size");
                }
                if *address && !self.caps.device_address {
                    return fail("no device addresses");
                }
                if let Some(b) = dedicated {
                    let x = self.bufs.get(b).ok_or("dedicated to no buffer")?;
                    if x.bound.is_some() || x.size != *size {
                        return fail("dedicated allocation of another size or a bound buffer");
                    }
                }
                self.mems.insert(
                    *mem,
                    Mem {
                        size: *size,
                        mapped: false,
                        dedicated: *dedicated,
                        address: *address,
                        defined: Ranges::default(),
                        indirect: BTreeMap::new(),
                        host_wrote: false,
                        host_read: false,
                    },
                );
            }
            Op::Free { mem } => {
                if !self.mems.contains_key(mem) {
                    return fail("no memory");
                }
                if self.log.in_flight(*mem, None, self.done) || self.pending_use(Use::Mem(*mem)) {
                    return fail("free of memory in use");
                }
                self.invalidate(Use::Mem(*mem));
                self.mems.remove(mem);
                self.log.forget(*mem);
                for b in self.bufs.values_mut() {
                    if b.bound.is_some_and(|(m, _)| m == *mem) {
                        b.dead = true;
                    }
                }
                for i in self.imgs.values_mut() {
                    if i.bound.is_some_and(|(m, _)| m == *mem) {
                        i.dead = true;
                    }
                }
            }
            Op::Buffer { buf, size, usage } => {
                self.fresh(1, *buf)?;
                if *size == 0 || size % ALIGN != 0 || *usage == 0 {
                    return fail("buffer size or usage");
                }
                if usage & usage::ADDRESS != 0 && !self.caps.device_address {
                    return fail("no device addresses");
                }
                self.bufs.insert(
                    *buf,
                    Buf {
                        size: *size,
                        usage: *usage,
                        bound: None,
                        dead: false,
                    },
                );
            }
            Op::Bind {
                buf, mem, offset, ..
            } => {
                let b = self.bufs.get(buf).ok_or("no buffer")?;
                let m = self.mems.get(mem).ok_or("no memory")?;
                if b.bound.is_some() {
                    return fail("bound twice");
                }
                if offset % ALIGN != 0 || offset + b.size > m.size {
                    return fail("bind range");
                }
                if m.dedicated.is_some_and(|d| d != *buf) || (m.dedicated.is_some() && *offset != 0)
                {
                    return fail("dedicated to another buffer");
                }
                if b.usage & usage::ADDRESS != 0 && !m.address {
                    return fail("address usage in memory without DEVICE_ADDRESS");
                }
                self.bufs.get_mut(buf).unwrap().bound = Some((*mem, *offset));
            }
            Op::Destroy { buf } => {
                if !self.bufs.contains_key(buf) {
                    return fail("no buffer");
                }
                if self.pending_use(Use::Buf(*buf)) {
                    return fail("destroy of a buffer in use");
                }
                self.invalidate(Use::Buf(*buf));
                self.bufs.remove(buf);
                self.views.retain(|_, v| v.buf != *buf);
                for s in self.sets.values_mut() {
                    if s.res.as_ref().is_some_and(|rs| {
                        rs.iter()
                            .any(|r| matches!(r, Res::Buf { buf: b, .. } if b == buf))
                    }) {
                        s.res = None;
                    }
                }
            }
            Op::Image { img } => {
                self.fresh(2, *img)?;
                if self.caps.image_size == 0 {
                    return fail("no images");
                }
                self.imgs.insert(
                    *img,
                    Img {
                        bound: None,
                        dead: false,
                        general: false,
                        defined: false,
                    },
                );
            }
            Op::BindImage {
                img, mem, offset, ..
            } => {
                let i = self.imgs.get(img).ok_or("no image")?;
                let m = self.mems.get(mem).ok_or("no memory")?;
                if i.bound.is_some() || m.dedicated.is_some() {
                    return fail("image bound twice, or into a dedicated allocation");
                }
                if offset % self.caps.image_align.max(1) != 0
                    || offset + self.caps.image_size > m.size
                {
                    return fail("image bind range");
                }
                self.imgs.get_mut(img).unwrap().bound = Some((*mem, *offset));
            }
            Op::DestroyImage { img } => {
                if !self.imgs.contains_key(img) || self.pending_use(Use::Img(*img)) {
                    return fail("no image, or in use");
                }
                self.invalidate(Use::Img(*img));
                self.imgs.remove(img);
            }
            Op::View {
                view,
                buf,
                offset,
                range,
            } => {
                self.fresh(3, *view)?;
                let b = self.bufs.get(buf).ok_or("no buffer")?;
                if b.usage & (usage::UNIFORM_TEXEL | usage::STORAGE_TEXEL) == 0 {
                    return fail("view of a buffer without texel usage");
                }
                if offset % ALIGN != 0 || range % 4 != 0 || *range > 65536 * 4 {
                    return fail("view range");
                }
                self.buf_range(*buf, *offset, *range)?;
                self.views.insert(
                    *view,
                    View {
                        buf: *buf,
                        offset: *offset,
                        range: *range,
                    },
                );
            }
            Op::DestroyView { view } => {
                if !self.views.contains_key(view) || self.pending_use(Use::View(*view)) {
                    return fail("no view, or in use");
                }
                self.invalidate(Use::View(*view));
                self.views.remove(view);
                for s in self.sets.values_mut() {
                    if s.res
                        .as_ref()
                        .is_some_and(|rs| rs.contains(&Res::View { view: *view }))
                    {
                        s.res = None;
                    }
                }
            }
            Op::Map { mem, v2 } => {
                if *v2 && !self.caps.map2 {
                    return fail("vkMapMemory2 without VK_KHR_map_memory2");
                }
                let m = self.mems.get_mut(mem).ok_or("no memory")?;
                if m.mapped {
                    return fail("mapped twice");
                }
                m.mapped = true;
            }
            Op::Unmap { mem, v2 } => {
                if *v2 && !self.caps.map2 {
                    return fail("vkUnmapMemory2 without VK_KHR_map_memory2");
                }
                let m = self.mems.get_mut(mem).ok_or("no memory")?;
                if !m.mapped {
                    return fail("not mapped");
                }
                m.mapped = false;
            }
            Op::Flush { mem } | Op::Invalidate { mem } => {
                if !self.mems.get(mem).ok_or("no memory")?.mapped {
                    return fail("flush/invalidate of unmapped memory");
                }
            }
            Op::Write {
                mem, offset, len, ..
            } => {
                self.host_access(*mem, *offset, offset + len, true)?;
                self.write_bytes(*mem, *offset, offset + len, true);
            }
            Op::WriteIndirect {
                mem,
                offset,
                groups,
            } => {
                if *groups == 0 || *groups > 64 {
                    return fail("indirect groups");
                }
                self.host_access(*mem, *offset, offset + 12, true)?;
                self.write_bytes(*mem, *offset, offset + 12, true);
                self.mems
                    .get_mut(mem)
                    .unwrap()
                    .indirect
                    .insert(*offset, *groups);
            }
            Op::Read { mem, offset, len } => {
                self.host_access(*mem, *offset, offset + len, false)?;
            }
            Op::Set {
                set,
                kernel,
                uab,
                partial,
                vertex,
            } => {
                if *vertex
                    && (!self.caps.draw || !matches!(kernel, Kernel::Xform | Kernel::Inplace))
                {
                    return fail("a vertex-stage set without draws, or of a kernel draws lack");
                }
                self.fresh(4, *set)?;
                if *partial && (!*uab || !self.caps.partially_bound) {
                    return fail("partially bound: only with update-after-bind and the feature");
                }
                if *kernel == Kernel::Addr {
                    return fail("addr has no descriptors");
                }
                if *uab
                    && (!self.caps.uab_storage
                        || !kernel
                            .bindings()
                            .iter()
                            .all(|b| b.usage() == usage::STORAGE))
                {
                    return fail("update-after-bind needs storage buffers and the feature");
                }
                self.sets.insert(
                    *set,
                    Set {
                        kernel: *kernel,
                        uab: *uab,
                        vertex: *vertex,
                        res: None,
                    },
                );
            }
            Op::WriteSet { set, res, .. } => {
                let s = self.sets.get(set).ok_or("no set")?;
                let binds = s.kernel.bindings();
                if res.len() != binds.len() {
                    return fail("descriptor count");
                }
                for (r, &b) in res.iter().zip(binds) {
                    self.check_res(r, b)?;
                }
                if self.pending_use(Use::Set(*set)) {
                    return fail("write of a set in use");
                }
                if !s.uab {
                    self.invalidate(Use::Set(*set));
                }
                self.sets.get_mut(set).unwrap().res = Some(res.clone());
            }
            Op::Record {
                cb,
                cmds,
                secondary,
            } => {
                if cmds.is_empty() {
                    return fail("empty command buffer");
                }
                let mut at = 0;
                for &[a, b] in secondary {
                    if a < at || b <= a || b > cmds.len() {
                        return fail("secondary runs out of order, empty or past the end");
                    }
                    if cmds[a..b]
                        .iter()
                        .any(|c| matches!(c, Cmd::Barrier { .. } | Cmd::ImageInit { .. }))
                    {
                        // Synchronization validation (VVL 1.3.239) did not apply a barrier in a
                        // secondary to the accesses before it.
                        return fail("a barrier in a secondary command buffer");
                    }
                    at = b;
                }
                if let Some(c) = self.cbs.get(cb) {
                    if c.last_sub > self.done {
                        return fail("re-record of a pending command buffer");
                    }
                } else {
                    self.fresh(5, *cb)?;
                }
                for c in cmds {
                    self.check_cmd(c)?;
                }
                self.record_check(cmds)?;
                let last_sub = self.cbs.get(cb).map_or(0, |c| c.last_sub);
                self.cbs.insert(
                    *cb,
                    Cb {
                        cmds: cmds.clone(),
                        valid: true,
                        last_sub,
                    },
                );
            }
            Op::Submit {
                cbs,
                fence,
                wait,
                signal,
                ..
            } => {
                self.submit(cbs, *fence, wait, signal)?;
            }
            Op::Fence { fence } => {
                self.fresh(6, *fence)?;
                self.fences.insert(*fence, Fence::Unsignaled);
            }
            Op::Semaphore { sem, timeline } => {
                self.fresh(7, *sem)?;
                self.sems.insert(
                    *sem,
                    Sem {
                        timeline: *timeline,
                        ..Sem::default()
                    },
                );
            }
            Op::WaitFence { fence } => match self.fences.get(fence) {
                Some(Fence::Pending(s)) => {
                    let s = *s;
                    self.complete(s);
                }
                Some(Fence::Signaled) => {}
                _ => return fail("wait for a fence nothing will signal"),
            },
            Op::ResetFence { fence } => match self.fences.get(fence) {
                Some(Fence::Pending(_)) => return fail("reset of a pending fence"),
                Some(_) => {
                    self.fences.insert(*fence, Fence::Unsignaled);
                }
                None => return fail("no fence"),
            },
            Op::WaitSem { sem, value } => {
                let s = self.sems.get(sem).ok_or("no semaphore")?;
                if !s.timeline || *value == 0 {
                    return fail("host wait on a binary semaphore");
                }
                let by = s
                    .signals
                    .iter()
                    .filter(|(v, _)| v >= value)
                    .map(|&(_, sub)| sub)
                    .min()
                    .ok_or("host wait for a value nothing will signal")?;
                self.complete(by);
            }
            Op::QueueIdle | Op::DeviceIdle => {
                let s = self.sub;
                self.complete(s);
            }
        }
        Ok(())
    }

    fn submit(
        &mut self,
        cbs: &[u32],
        fence: Option<u32>,
        wait: &[super::SemRef],
        signal: &[super::SemRef],
    ) -> R {
        if cbs.is_empty() {
            return fail("a batch without command buffers");
        }
        for (i, cb) in cbs.iter().enumerate() {
            let c = self.cbs.get(cb).ok_or("no command buffer")?;
            if !c.valid || c.last_sub > self.done || cbs[..i].contains(cb) {
                return fail(format!("command buffer {cb} invalid or pending"));
            }
        }
        if let Some(f) = fence {
            if self.fences.get(&f) != Some(&Fence::Unsignaled) {
                return fail("fence not unsignaled");
            }
        }
        self.sub += 1;
        let sub = self.sub;
        self.log.host_submitted();
        for w in wait {
            if w.stage == 0 {
                return fail("wait without stages");
            }
            let s = self.sems.get_mut(&w.sem).ok_or("no semaphore")?;
            let by = if s.timeline {
                s.signals
                    .iter()
                    .filter(|(v, _)| *v >= w.value && w.value > 0)
                    .map(|&(_, sub)| sub)
                    .min()
                    .ok_or("wait for a timeline value nothing signals")?
            } else {
                s.pending
                    .take()
                    .ok_or("wait on an unsignaled binary semaphore")?
            };
            self.log.semaphore(by, w.stage);
        }
        for cb in cbs {
            self.log.run += 1;
            let cmds = self.cbs[cb].cmds.clone();
            for c in &cmds {
                match self.sim_cmd(c, sub) {
                    Ok(()) => {}
                    Err(Refusal::Invalid(e)) => return fail(e),
                    Err(Refusal::Hazard(h)) => {
                        return fail(format!("unsynchronized: {:?}", h[0]));
                    }
                }
            }
            self.cbs.get_mut(cb).unwrap().last_sub = sub;
        }
        for sg in signal {
            let s = self.sems.get_mut(&sg.sem).ok_or("no semaphore")?;
            if s.timeline {
                if s.signals.last().is_some_and(|&(v, _)| v >= sg.value) || sg.value == 0 {
                    return fail("timeline values must grow");
                }
                s.signals.push((sg.value, sub));
            } else {
                if s.pending.is_some() {
                    return fail("signal of a signaled binary semaphore");
                }
                s.pending = Some(sub);
            }
        }
        if let Some(f) = fence {
            self.fences.insert(f, Fence::Pending(sub));
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Use {
    Buf(u32),
    Img(u32),
    View(u32),
    Set(u32),
    Mem(u32),
}

/// Replays `p` and keeps what is valid where it stands: a record keeps the commands that are
/// valid when recorded; any other op is kept or dropped whole.
pub fn repair(p: &Program) -> Program {
    let mut m = Model::new(p.caps);
    let mut ops = Vec::with_capacity(p.ops.len());
    for op in &p.ops {
        let op = match op {
            Op::Record {
                cb,
                cmds,
                secondary,
            } => Op::Record {
                cb: *cb,
                cmds: cmds
                    .iter()
                    .filter(|c| m.check_cmd(c).is_ok())
                    .cloned()
                    .collect(),
                secondary: super::kept_runs(secondary, |j| m.check_cmd(&cmds[j]).is_ok()),
            },
            o => o.clone(),
        };
        if m.apply(&op).is_ok() {
            ops.push(op);
        }
    }
    Program {
        seed: p.seed,
        caps: p.caps,
        ops,
    }
}

/// Whether every op of `p` is valid where it stands (the first error otherwise).
pub fn validate(p: &Program) -> Result<Model, (usize, String)> {
    let mut m = Model::new(p.caps);
    for (i, op) in p.ops.iter().enumerate() {
        m.apply(op).map_err(|e| (i, e))?;
    }
    Ok(m)
}
