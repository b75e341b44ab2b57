//! Replaying a trace into per-object histories: the model every analysis step reads.
//!
//! Vulkan handles are recycled, so the model gives every buffer and allocation its own id at
//! creation ([`BufId`], [`MemId`]) and resolves handles to ids at the moment an event names them.
//! Buffers are numbered `#1, #2, …` in creation order for messages.
//!
//! GPU work is modelled per submission: the commands of its command buffers, in order (a
//! secondary command buffer's commands in place of the `vkCmdExecuteCommands` that ran it), happen
//! between the `QueueSubmit` record and the host's first observation of its completion (a fence it
//! signals, a later fence on the same queue, queue/device idle, a timeline value it or a later
//! submission on its queue signals, or the completion of a submission that waited on it).

use crate::trace::{
    Access, CopyRegion, Event, Frame, MemReq, ObjectKey, SubmitBatch, Trace, UseKind,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub type BufId = usize;
pub type MemId = usize;
pub type SubId = usize;

#[derive(Clone, Debug)]
pub struct Binding {
    pub memory: MemId,
    pub offset: u64,
    pub seq: u64,
}

#[derive(Clone, Debug)]
pub struct Buffer {
    pub handle: u64,
    /// 1-based creation order, for messages (`#3`).
    pub number: usize,
    pub key: ObjectKey,
    pub usage: u32,
    pub flags: u32,
    pub size: u64,
    pub req: MemReq,
    pub stack: Vec<Frame>,
    pub created: u64,
    pub destroyed: Option<u64>,
    pub bind: Option<Binding>,
    /// First `vkGetBufferDeviceAddress` on it.
    pub address_taken: Option<u64>,
}

impl Buffer {
    /// Bytes the buffer occupies in its memory once bound.
    pub fn bound_len(&self) -> u64 {
        self.req.size.max(self.size)
    }
}

#[derive(Clone, Debug)]
pub struct Memory {
    pub handle: u64,
    pub key: ObjectKey,
    pub type_index: u32,
    pub size: u64,
    pub dedicated_buffer: Option<BufId>,
    pub host_visible: bool,
    pub external: bool,
    /// Imported by the application from its own pointer (VK_EXT_external_memory_host).
    pub host_import: bool,
    pub allocated: u64,
    pub freed: Option<u64>,
    /// `(seq, offset, size)` of every `vkMapMemory` (size already resolved from `VK_WHOLE_SIZE`).
    pub maps: Vec<(u64, u64, u64)>,
    /// `(buffer, offset, seq)` of every bind into it.
    pub binds: Vec<(BufId, u64, u64)>,
}

impl Memory {
    /// Only this buffer was ever bound to the allocation (dedicated, or used as if it were).
    pub fn owned_by(&self, b: BufId) -> bool {
        self.dedicated_buffer == Some(b)
            || (!self.binds.is_empty() && self.binds.iter().all(|x| x.0 == b))
    }
}

#[derive(Clone, Debug)]
pub enum OpKind {
    Copy {
        src: BufId,
        dst: BufId,
        regions: Vec<CopyRegion>,
    },
    Use {
        buffer: BufId,
        offset: u64,
        /// Resolved: never `VK_WHOLE_SIZE`.
        size: u64,
        access: Access,
        kind: UseKind,
        command: String,
    },
}

/// One recorded command that touches a buffer.
#[derive(Clone, Debug)]
pub struct Op {
    /// `seq` of the record that recorded it.
    pub recorded: u64,
    pub kind: OpKind,
}

impl Op {
    /// Buffers this op touches with the byte ranges `(buffer, offset, len, reads, writes)`.
    pub fn touches(&self) -> Vec<(BufId, u64, u64, bool, bool)> {
        match &self.kind {
            OpKind::Copy { src, dst, regions } => {
                let mut v = Vec::new();
                for r in regions {
                    v.push((*src, r.src_offset, r.size, true, false));
                    v.push((*dst, r.dst_offset, r.size, false, true));
                }
                v
            }
            OpKind::Use {
                buffer,
                offset,
                size,
                access,
                ..
            } => vec![(*buffer, *offset, *size, access.reads(), access.writes())],
        }
    }

    pub fn name(&self) -> String {
        match &self.kind {
            OpKind::Copy { .. } => "vkCmdCopyBuffer".into(),
            OpKind::Use { command, .. } => command.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Submission {
    pub seq: u64,
    pub queue: u64,
    pub fence: Option<u64>,
    /// Recordings (indices into [`Model::recordings`]) in execution order.
    pub recordings: Vec<usize>,
    pub waits: Vec<(u64, u64)>,
    pub signals: Vec<(u64, u64)>,
    /// `seq` of the host's first observation of its completion.
    pub completed: Option<u64>,
}

/// What happened, in trace order, that the safety checks replay.
#[derive(Clone, Debug)]
pub enum Step {
    Submit(SubId),
    Complete(SubId),
    Host { buffer: BufId, access: Access },
}

#[derive(Clone, Debug, Default)]
pub struct Model {
    pub buffers: Vec<Buffer>,
    pub memories: Vec<Memory>,
    /// The command lists of every recording (begin … end) of every command buffer.
    pub recordings: Vec<Vec<Op>>,
    pub submissions: Vec<Submission>,
    pub timeline: Vec<(u64, Step)>,
    /// Per submission: the buffers its commands touch.
    pub touched: Vec<std::collections::BTreeSet<BufId>>,
    /// Memory type index the layer would alias into (from `DeviceCreate`), when known.
    pub alias_type: Option<u32>,
    pub last_seq: u64,
    pub truncated: bool,
    /// Things in the trace the model could not follow (unknown handles, …), for people.
    pub warnings: Vec<String>,
    /// How host access was validated (`DeviceCreate::validation`; `""` when the trace does not
    /// say, as in version 1 traces).
    pub validation: String,
    /// Where host-access validation stopped early, and why (`ValidationLost`).
    pub validation_lost: Option<(u64, String)>,
    /// Buffers whose host accesses the profiler could not see (`Unvalidated`), with the reason.
    pub unvalidated: HashMap<BufId, (u64, String)>,
    /// Buffers bound into memory the host had mapped before the bind, with the bind's seq: the
    /// bytes under them may hold host writes (map → memcpy → unmap → bind), which enforce moves
    /// into the shared range at the bind — a host write there as far as S2 is concerned.
    pub written_before_bind: Vec<(BufId, u64)>,
    /// Buffers the layer armed for host-access validation (`Watched`), with the record's seq:
    /// every host access to them since their bind is in the trace.
    pub watched: HashMap<BufId, u64>,
    /// Recorded copies that name a buffer the trace does not know: `(copies, bytes)`.
    pub unknown_copies: (u64, u64),
    /// Buffers not watched in some host-access window of their lifetime (sampled validation),
    /// with the first such window's event and the reason: their pairs lack evidence.
    pub unwatched: HashMap<BufId, (u64, String)>,
    /// Buffers validated by sampling: how many of their windows were watched
    /// ([`crate::sampling`]).
    pub coverage: HashMap<BufId, crate::sampling::Coverage>,
}

const MAX_WARNINGS: usize = 20;

impl Model {
    pub fn ops(&self, s: SubId) -> impl Iterator<Item = &Op> {
        self.submissions[s]
            .recordings
            .iter()
            .flat_map(move |r| self.recordings[*r].iter())
    }

    /// Whether the host ever mapped memory under this buffer's bound range.
    pub fn host_mapped(&self, b: BufId) -> bool {
        let buf = &self.buffers[b];
        let Some(bind) = &buf.bind else { return false };
        let mem = &self.memories[bind.memory];
        let (lo, hi) = (bind.offset, bind.offset.saturating_add(buf.bound_len()));
        mem.maps
            .iter()
            .any(|&(_, off, size)| off < hi && off.saturating_add(size) > lo)
    }

    /// Host accesses the trace holds for buffer `b`: `(reads, writes)`.
    pub fn host_accesses(&self, b: BufId) -> (u64, u64) {
        let (mut r, mut w) = (0, 0);
        for (_, step) in &self.timeline {
            if let Step::Host { buffer, access } = step {
                if *buffer == b {
                    r += access.reads() as u64;
                    w += access.writes() as u64;
                }
            }
        }
        (r, w)
    }

    /// Whether the trace holds a `readwrite` host access for `b`: the layer's record that a
    /// fault opened a page `b` shares with other watched memory (sub-allocations closer than a
    /// page), so `b`'s accesses there went unseen and count as both.
    pub fn host_shared_page(&self, b: BufId) -> bool {
        self.timeline.iter().any(|(_, step)| {
            matches!(step, Step::Host { buffer, access } if *buffer == b && *access == Access::ReadWrite)
        })
    }

    /// Buffers touched by a submission, with the union of ranges touched per buffer.
    pub fn touched_by(&self, s: SubId) -> HashMap<BufId, Vec<(u64, u64)>> {
        let mut m: HashMap<BufId, Vec<(u64, u64)>> = HashMap::new();
        for op in self.ops(s) {
            for (b, off, len, _, _) in op.touches() {
                m.entry(b).or_default().push((off, len));
            }
        }
        m
    }

    /// The seq of the submission of `s` and of its completion, for messages.
    pub fn describe_submission(&self, s: SubId) -> String {
        let sub = &self.submissions[s];
        match sub.completed {
            Some(c) => format!("submission {} (observed complete at event {c})", sub.seq),
            None => format!("submission {} (never observed complete)", sub.seq),
        }
    }

    fn warn(&mut self, w: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w);
        } else if self.warnings.len() == MAX_WARNINGS {
            self.warnings.push("more warnings suppressed".into());
        }
    }

    /// Replay a trace. Never fails: what cannot be followed becomes a warning.
    pub fn build(trace: &Trace) -> Model {
        let mut m = Model {
            truncated: trace.truncated,
            ..Default::default()
        };
        let mut buf_of: HashMap<u64, BufId> = HashMap::new();
        let mut mem_of: HashMap<u64, MemId> = HashMap::new();
        // Command buffer handle → index of its current recording.
        let mut cmd_of: HashMap<u64, usize> = HashMap::new();
        let mut pending: Vec<SubId> = Vec::new();
        // Buffers the trace never saw created (bound before tracing began, imported, made by a
        // layer below) that commands use: handle → (first event, uses, commands). Explained
        // once each at the end, not warned per command.
        let mut unknown: BTreeMap<u64, (u64, u64, BTreeSet<String>)> = BTreeMap::new();
        let note = |unknown: &mut BTreeMap<u64, (u64, u64, BTreeSet<String>)>,
                    b: u64,
                    seq: u64,
                    what: &str| {
            let e = unknown.entry(b).or_insert((seq, 0, BTreeSet::new()));
            e.1 += 1;
            e.2.insert(what.to_string());
        };
        // Sampled validation: each `Window` record with the buffers it did not watch, and each
        // buffer's `Watch` record.
        let mut marks: Vec<(u64, Vec<BufId>)> = Vec::new();
        let mut watch: HashMap<BufId, u64> = HashMap::new();

        for rec in &trace.records {
            let seq = rec.seq;
            m.last_seq = m.last_seq.max(seq);
            match &rec.event {
                Event::DeviceCreate {
                    alias_type,
                    validation,
                    ..
                } => {
                    if alias_type.is_some() {
                        m.alias_type = *alias_type;
                    }
                    m.validation = validation.clone();
                }
                Event::Unvalidated { buffer, reason } => {
                    if let Some(&b) = buf_of.get(buffer) {
                        m.unvalidated.entry(b).or_insert((seq, reason.clone()));
                    }
                }
                Event::ValidationLost { reason } => {
                    if m.validation_lost.is_none() {
                        m.validation_lost = Some((seq, reason.clone()));
                    }
                }
                Event::Watch { buffer } => match buf_of.get(buffer) {
                    Some(&b) => {
                        watch.entry(b).or_insert(seq);
                    }
                    None => m.warn(format!("event {seq}: watch of unknown buffer {buffer:#x}")),
                },
                Event::Window { unobserved } => {
                    let mut v = Vec::new();
                    for h in unobserved {
                        match buf_of.get(h) {
                            Some(&b) => v.push(b),
                            None => m.warn(format!(
                                "event {seq}: unobserved window of unknown buffer {h:#x}"
                            )),
                        }
                    }
                    marks.push((seq, v));
                }
                Event::DeviceDestroy { .. } => {}
                Event::BufferCreate {
                    buffer,
                    key,
                    usage,
                    flags,
                    size,
                    req,
                    stack,
                } => {
                    let id = m.buffers.len();
                    m.buffers.push(Buffer {
                        handle: *buffer,
                        number: id + 1,
                        key: key.clone(),
                        usage: *usage,
                        flags: *flags,
                        size: *size,
                        req: *req,
                        stack: stack.clone(),
                        created: seq,
                        destroyed: None,
                        bind: None,
                        address_taken: None,
                    });
                    buf_of.insert(*buffer, id);
                }
                Event::BufferDestroy { buffer } => match buf_of.remove(buffer) {
                    Some(b) => m.buffers[b].destroyed = Some(seq),
                    None => note(&mut unknown, *buffer, seq, "vkDestroyBuffer"),
                },
                Event::MemoryAlloc {
                    memory,
                    key,
                    type_index,
                    size,
                    dedicated_buffer,
                    host_visible,
                    external,
                    host_import,
                } => {
                    let id = m.memories.len();
                    let dedicated = dedicated_buffer.and_then(|h| buf_of.get(&h).copied());
                    m.memories.push(Memory {
                        handle: *memory,
                        key: key.clone(),
                        type_index: *type_index,
                        size: *size,
                        dedicated_buffer: dedicated,
                        host_visible: *host_visible,
                        external: *external || *host_import,
                        host_import: *host_import,
                        allocated: seq,
                        freed: None,
                        maps: Vec::new(),
                        binds: Vec::new(),
                    });
                    mem_of.insert(*memory, id);
                }
                Event::MemoryFree { memory } => match mem_of.remove(memory) {
                    Some(x) => m.memories[x].freed = Some(seq),
                    None => m.warn(format!("event {seq}: free of unknown memory {memory:#x}")),
                },
                Event::BindBuffer {
                    buffer,
                    memory,
                    offset,
                } => match (buf_of.get(buffer), mem_of.get(memory)) {
                    (Some(&b), Some(&x)) => {
                        m.buffers[b].bind = Some(Binding {
                            memory: x,
                            offset: *offset,
                            seq,
                        });
                        m.memories[x].binds.push((b, *offset, seq));
                        // Bytes the host may have written under the buffer before its bind:
                        // enforce carries them into the shared range at the bind (S2 checks
                        // that moment; S1 already counts a mapped member's unseen writes at its
                        // first GPU read).
                        if m.host_mapped(b) {
                            m.written_before_bind.push((b, seq));
                        }
                    }
                    _ => m.warn(format!(
                        "event {seq}: bind of buffer {buffer:#x} to memory {memory:#x}, one of which is unknown"
                    )),
                },
                Event::MapMemory {
                    memory,
                    offset,
                    size,
                } => match mem_of.get(memory) {
                    Some(&x) => {
                        let total = m.memories[x].size;
                        let len = if *size == u64::MAX {
                            total.saturating_sub(*offset)
                        } else {
                            *size
                        };
                        m.memories[x].maps.push((seq, *offset, len));
                    }
                    None => m.warn(format!("event {seq}: map of unknown memory {memory:#x}")),
                },
                Event::UnmapMemory { .. }
                | Event::FlushRanges { .. }
                | Event::InvalidateRanges { .. }
                | Event::CmdEnd { .. }
                | Event::CmdBarrier { .. }
                | Event::FenceReset { .. }
                | Event::SemaphoreSignal { .. }
                | Event::Truncated { .. } => {}
                Event::CmdBegin { cmd, .. } | Event::CmdReset { cmd } => {
                    m.recordings.push(Vec::new());
                    cmd_of.insert(*cmd, m.recordings.len() - 1);
                }
                Event::CmdFree { cmd } => {
                    cmd_of.remove(cmd);
                }
                Event::CmdCopyBuffer {
                    cmd,
                    src,
                    dst,
                    regions,
                } => {
                    let (Some(&s), Some(&d)) = (buf_of.get(src), buf_of.get(dst)) else {
                        m.unknown_copies.0 += 1;
                        m.unknown_copies.1 = regions
                            .iter()
                            .map(|r| r.size)
                            .fold(m.unknown_copies.1, u64::saturating_add);
                        for b in [src, dst] {
                            if !buf_of.contains_key(b) {
                                let e = unknown.entry(*b).or_insert((seq, 0, BTreeSet::new()));
                                e.1 += 1;
                                e.2.insert("vkCmdCopyBuffer".into());
                            }
                        }
                        continue;
                    };
                    let op = Op {
                        recorded: seq,
                        kind: OpKind::Copy {
                            src: s,
                            dst: d,
                            regions: regions.clone(),
                        },
                    };
                    m.record(&mut cmd_of, *cmd, op);
                }
                Event::CmdUse { cmd, command, uses } => {
                    for u in uses {
                        let Some(&b) = buf_of.get(&u.buffer) else {
                            let e = unknown.entry(u.buffer).or_insert((seq, 0, BTreeSet::new()));
                            e.1 += 1;
                            e.2.insert(command.clone());
                            continue;
                        };
                        let bsize = m.buffers[b].size;
                        let size = if u.size == u64::MAX {
                            bsize.saturating_sub(u.offset)
                        } else {
                            u.size
                        };
                        let op = Op {
                            recorded: seq,
                            kind: OpKind::Use {
                                buffer: b,
                                offset: u.offset,
                                size,
                                access: u.access,
                                kind: u.kind,
                                command: command.clone(),
                            },
                        };
                        m.record(&mut cmd_of, *cmd, op);
                    }
                }
                Event::CmdExecute { cmd, secondaries } => {
                    // The secondaries' commands run in the primary, in order, at this point. Their
                    // recordings are taken as they stand here: re-recording or resetting a
                    // secondary invalidates the primaries that execute it, so this is also what
                    // they hold when the primary is submitted.
                    let mut ops = Vec::new();
                    for s in secondaries {
                        match cmd_of.get(s) {
                            Some(&r) => ops.extend(m.recordings[r].iter().cloned()),
                            None => m.warn(format!(
                                "event {seq}: executed secondary command buffer {s:#x} was never recorded"
                            )),
                        }
                    }
                    for op in ops {
                        m.record(&mut cmd_of, *cmd, op);
                    }
                }
                Event::QueueSubmit {
                    queue,
                    batches,
                    fence,
                } => {
                    let mut recs = Vec::new();
                    let (mut waits, mut signals) = (Vec::new(), Vec::new());
                    for SubmitBatch {
                        command_buffers,
                        waits: w,
                        signals: s,
                    } in batches
                    {
                        for c in command_buffers {
                            match cmd_of.get(c) {
                                Some(&r) => recs.push(r),
                                None => m.warn(format!(
                                    "event {seq}: submitted command buffer {c:#x} was never recorded"
                                )),
                            }
                        }
                        waits.extend_from_slice(w);
                        signals.extend_from_slice(s);
                    }
                    let id = m.submissions.len();
                    m.submissions.push(Submission {
                        seq,
                        queue: *queue,
                        fence: *fence,
                        recordings: recs,
                        waits,
                        signals,
                        completed: None,
                    });
                    pending.push(id);
                    m.timeline.push((seq, Step::Submit(id)));
                }
                Event::FenceSignaled { fences } => {
                    let roots: Vec<SubId> = pending
                        .iter()
                        .copied()
                        .filter(|&s| m.submissions[s].fence.is_some_and(|f| fences.contains(&f)))
                        .collect();
                    m.complete(&mut pending, roots, seq);
                }
                Event::QueueWaitIdle { queue } => {
                    let roots: Vec<SubId> = pending
                        .iter()
                        .copied()
                        .filter(|&s| m.submissions[s].queue == *queue)
                        .collect();
                    m.complete(&mut pending, roots, seq);
                }
                Event::DeviceWaitIdle => {
                    let roots = pending.clone();
                    m.complete(&mut pending, roots, seq);
                }
                Event::SemaphoreReached { semaphores } => {
                    let roots: Vec<SubId> = pending
                        .iter()
                        .copied()
                        .filter(|&s| {
                            m.submissions[s].signals.iter().any(|&(sem, v)| {
                                semaphores.iter().any(|&(s2, v2)| s2 == sem && v <= v2)
                            })
                        })
                        .collect();
                    m.complete(&mut pending, roots, seq);
                }
                Event::BufferAddress { buffer } => match buf_of.get(buffer) {
                    Some(&b) => {
                        if m.buffers[b].address_taken.is_none() {
                            m.buffers[b].address_taken = Some(seq);
                        }
                    }
                    None => note(&mut unknown, *buffer, seq, "vkGetBufferDeviceAddress"),
                },
                Event::Watched { buffer } => match buf_of.get(buffer) {
                    Some(&b) => {
                        m.watched.entry(b).or_insert(seq);
                    }
                    None => note(&mut unknown, *buffer, seq, "the profiler's watch"),
                },
                Event::HostAccess { buffer, access } => match buf_of.get(buffer) {
                    Some(&b) => m.timeline.push((seq, Step::Host { buffer: b, access: *access })),
                    None => note(&mut unknown, *buffer, seq, "host access"),
                },
            }
        }
        for (handle, (first, uses, commands)) in unknown {
            m.warn(format!(
                "buffer {handle:#x} is not in the trace (created before tracing began, imported, or made by a layer below): {uses} use{} by {} from event {first} ignored, and no pair can involve it",
                if uses == 1 { "" } else { "s" },
                commands.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        m.touched = (0..m.submissions.len())
            .map(|s| m.touched_by(s).into_keys().collect())
            .collect();
        crate::sampling::mark_unwatched(&mut m, &marks, &watch);
        m
    }

    fn record(&mut self, cmd_of: &mut HashMap<u64, usize>, cmd: u64, op: Op) {
        let r = match cmd_of.get(&cmd) {
            Some(&r) => r,
            None => {
                // Recording without a traced begin: start one so the command is not lost.
                self.recordings.push(Vec::new());
                let r = self.recordings.len() - 1;
                cmd_of.insert(cmd, r);
                r
            }
        };
        self.recordings[r].push(op);
    }

    /// Mark `roots` complete at `seq`, with everything their completion implies: every earlier
    /// submission on the same queue, and every submission whose semaphore signal they waited on.
    fn complete(&mut self, pending: &mut Vec<SubId>, roots: Vec<SubId>, seq: u64) {
        let mut work = roots;
        while let Some(s) = work.pop() {
            if self.submissions[s].completed.is_some() {
                continue;
            }
            self.submissions[s].completed = Some(seq);
            self.timeline.push((seq, Step::Complete(s)));
            let (queue, waits) = (self.submissions[s].queue, self.submissions[s].waits.clone());
            for &p in pending.iter() {
                if p >= s || self.submissions[p].completed.is_some() {
                    continue;
                }
                let same_queue = self.submissions[p].queue == queue;
                let signaled_our_wait = self.submissions[p].signals.iter().any(|&(sem, v)| {
                    waits
                        .iter()
                        .any(|&(ws, wv)| ws == sem && (wv == 0 || v <= wv))
                });
                if same_queue || signaled_our_wait {
                    work.push(p);
                }
            }
        }
        pending.retain(|&p| self.submissions[p].completed.is_none());
    }
}
