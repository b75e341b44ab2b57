//! [`Model::build`]: the trace replayed record by record, one family of events at a time —
//! buffers and memory, commands and recordings, submissions and completions, host access and
//! validation records.

use super::{Binding, BufId, Buffer, MemId, Memory, Model, Op, OpKind, Step, SubId, Submission};
use crate::trace::{BufferUse, Event, SubmitBatch, Trace};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What the replay keeps while it reads the trace, beside the model it builds.
struct Replay {
    m: Model,
    buf_of: HashMap<u64, BufId>,
    mem_of: HashMap<u64, MemId>,
    /// Command buffer handle → index of its current recording.
    cmd_of: HashMap<u64, usize>,
    /// Submissions not yet observed complete.
    pending: Vec<SubId>,
    /// Buffers the trace never saw created (bound before tracing began, imported, made by a
    /// layer below) that commands use: handle → (first event, uses, commands). Explained once
    /// each at the end, not warned per command.
    unknown: BTreeMap<u64, (u64, u64, BTreeSet<String>)>,
    /// Sampled validation: each `Window` record with the buffers it did not watch, and each
    /// buffer's `Watch` record.
    marks: Vec<(u64, Vec<BufId>)>,
    watch: HashMap<BufId, u64>,
    /// Recording → the commands in it whose late-bound descriptors are restated at each
    /// submission: `(position in the recording, late id, seq of the command, command name)`.
    late_at: HashMap<usize, Vec<(usize, u64, u64, String)>>,
    /// Late id → the buffers its descriptors named at the last `CmdLateUse` (the submission
    /// that follows it reads those).
    late_uses: HashMap<u64, Vec<BufferUse>>,
}

impl Model {
    /// Replay a trace. Never fails: what cannot be followed becomes a warning.
    pub fn build(trace: &Trace) -> Model {
        let mut r = Replay {
            m: Model {
                whole_host_writes: trace
                    .header
                    .settings
                    .get("host_writes")
                    .is_some_and(|v| v == "whole"),
                ..Default::default()
            },
            buf_of: HashMap::new(),
            mem_of: HashMap::new(),
            cmd_of: HashMap::new(),
            pending: Vec::new(),
            unknown: BTreeMap::new(),
            marks: Vec::new(),
            watch: HashMap::new(),
            late_at: HashMap::new(),
            late_uses: HashMap::new(),
        };
        for rec in &trace.records {
            let seq = rec.seq;
            r.m.last_seq = r.m.last_seq.max(seq);
            let event = &rec.event;
            match event {
                Event::BufferCreate { .. }
                | Event::BufferDestroy { .. }
                | Event::MemoryAlloc { .. }
                | Event::MemoryFree { .. }
                | Event::BindBuffer { .. }
                | Event::MapMemory { .. }
                | Event::UnmapMemory { .. }
                | Event::BufferAddress { .. }
                | Event::BindImage { .. }
                | Event::Aside { .. } => r.buffers_and_memory(seq, event),
                Event::CmdBegin { .. }
                | Event::CmdReset { .. }
                | Event::CmdFree { .. }
                | Event::CmdCopyBuffer { .. }
                | Event::CmdUse { .. }
                | Event::CmdLateUse { .. }
                | Event::CmdExecute { .. } => r.commands(seq, event),
                Event::QueueSubmit { .. }
                | Event::FenceSignaled { .. }
                | Event::QueueWaitIdle { .. }
                | Event::DeviceWaitIdle
                | Event::SemaphoreReached { .. } => r.submissions(seq, event),
                Event::DeviceCreate { .. }
                | Event::Unvalidated { .. }
                | Event::ValidationLost { .. }
                | Event::Watch { .. }
                | Event::Window { .. }
                | Event::Watched { .. }
                | Event::HostAccess { .. }
                | Event::HostWrites { .. } => r.host_access(seq, event),
                Event::DeviceDestroy { .. }
                | Event::FlushRanges { .. }
                | Event::InvalidateRanges { .. }
                | Event::CmdEnd { .. }
                | Event::CmdBarrier { .. }
                | Event::FenceReset { .. }
                | Event::SemaphoreSignal { .. }
                | Event::GpuTime { .. }
                | Event::Truncated { .. } => {}
            }
        }
        r.finish()
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

impl Replay {
    /// Buffers and memory: creation, destruction, binds, maps, device addresses.
    fn buffers_and_memory(&mut self, seq: u64, event: &Event) {
        match event {
            Event::BufferCreate {
                buffer,
                key,
                usage,
                flags,
                size,
                req,
                stack,
                ..
            } => {
                let id = self.m.buffers.len();
                self.m.buffers.push(Buffer {
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
                    aside: None,
                });
                self.buf_of.insert(*buffer, id);
            }
            Event::BufferDestroy { buffer } => match self.buf_of.remove(buffer) {
                Some(b) => self.m.buffers[b].destroyed = Some(seq),
                None => self.note(*buffer, seq, "vkDestroyBuffer"),
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
                let id = self.m.memories.len();
                let dedicated = dedicated_buffer.and_then(|h| self.buf_of.get(&h).copied());
                self.m.memories.push(Memory {
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
                    unmaps: Vec::new(),
                    binds: Vec::new(),
                    image_binds: Vec::new(),
                    aside: None,
                });
                self.mem_of.insert(*memory, id);
            }
            Event::MemoryFree { memory } => match self.mem_of.remove(memory) {
                Some(x) => self.m.memories[x].freed = Some(seq),
                None => self.m.warn(format!("event {seq}: free of unknown memory {memory:#x}")),
            },
            Event::BindBuffer {
                buffer,
                memory,
                offset,
            } => match (self.buf_of.get(buffer), self.mem_of.get(memory)) {
                (Some(&b), Some(&x)) => {
                    self.m.buffers[b].bind = Some(Binding {
                        memory: x,
                        offset: *offset,
                        seq,
                    });
                    self.m.memories[x].binds.push((b, *offset, seq));
                    // Bytes the host may have written under the buffer before its bind:
                    // enforce carries them into the shared range at the bind (S2 checks
                    // that moment; S1 already counts a mapped member's unseen writes at its
                    // first GPU read).
                    if self.m.host_mapped(b) {
                        self.m.written_before_bind.push((b, seq));
                    }
                }
                _ => self.m.warn(format!(
                    "event {seq}: bind of buffer {buffer:#x} to memory {memory:#x}, one of which is unknown"
                )),
            },
            Event::MapMemory {
                memory,
                offset,
                size,
            } => match self.mem_of.get(memory) {
                Some(&x) => {
                    let total = self.m.memories[x].size;
                    let len = if *size == u64::MAX {
                        total.saturating_sub(*offset)
                    } else {
                        *size
                    };
                    self.m.memories[x].maps.push((seq, *offset, len));
                }
                None => self.m.warn(format!("event {seq}: map of unknown memory {memory:#x}")),
            },
            Event::UnmapMemory { memory } => {
                // An unmap of unknown memory is the map's warning's business (or a no-op).
                if let Some(&x) = self.mem_of.get(memory) {
                    self.m.memories[x].unmaps.push(seq);
                }
            }
            Event::BufferAddress { buffer } => match self.buf_of.get(buffer) {
                Some(&b) => {
                    if self.m.buffers[b].address_taken.is_none() {
                        self.m.buffers[b].address_taken = Some(seq);
                    }
                }
                None => self.note(*buffer, seq, "vkGetBufferDeviceAddress"),
            },
            Event::BindImage {
                memory,
                offset,
                size,
                ..
            } => match self.mem_of.get(memory) {
                Some(&x) => self.m.memories[x].image_binds.push((*offset, *size, seq)),
                None => self.m.warn(format!("event {seq}: image bound to unknown memory {memory:#x}")),
            },
            Event::Aside {
                command,
                buffers,
                memory,
                everything,
                ..
            } => {
                let first = || Some((seq, command.clone()));
                if *everything && self.m.aside_all.is_none() {
                    self.m.aside_all = first();
                }
                for h in buffers {
                    if let Some(&b) = self.buf_of.get(h) {
                        if self.m.buffers[b].aside.is_none() {
                            self.m.buffers[b].aside = first();
                        }
                    }
                }
                for h in memory {
                    if let Some(&x) = self.mem_of.get(h) {
                        if self.m.memories[x].aside.is_none() {
                            self.m.memories[x].aside = first();
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Commands and recordings: begin/reset, free, and the commands that touch buffers.
    fn commands(&mut self, seq: u64, event: &Event) {
        match event {
            Event::CmdBegin { cmd, .. } | Event::CmdReset { cmd } => {
                self.m.recordings.push(Vec::new());
                self.cmd_of.insert(*cmd, self.m.recordings.len() - 1);
            }
            Event::CmdFree { cmd } => {
                self.cmd_of.remove(cmd);
            }
            Event::CmdCopyBuffer {
                cmd,
                src,
                dst,
                regions,
            } => {
                let (Some(&s), Some(&d)) = (self.buf_of.get(src), self.buf_of.get(dst)) else {
                    self.m.unknown_copies.0 += 1;
                    self.m.unknown_copies.1 = regions
                        .iter()
                        .map(|r| r.size)
                        .fold(self.m.unknown_copies.1, u64::saturating_add);
                    for b in [src, dst] {
                        if !self.buf_of.contains_key(b) {
                            let e = self.unknown.entry(*b).or_insert((seq, 0, BTreeSet::new()));
                            e.1 += 1;
                            e.2.insert("vkCmdCopyBuffer".into());
                        }
                    }
                    return;
                };
                let op = Op {
                    recorded: seq,
                    kind: OpKind::Copy {
                        src: s,
                        dst: d,
                        regions: regions.clone(),
                    },
                };
                self.m.record(&mut self.cmd_of, *cmd, op);
            }
            Event::CmdUse {
                cmd,
                command,
                uses,
                late,
            } => {
                for u in uses {
                    let Some(op) = self.use_op(seq, command, u) else {
                        return;
                    };
                    self.m.record(&mut self.cmd_of, *cmd, op);
                }
                if let Some(id) = late {
                    let r = self.recording_of(*cmd);
                    let at = self.m.recordings[r].len();
                    self.late_at
                        .entry(r)
                        .or_default()
                        .push((at, *id, seq, command.clone()));
                }
            }
            Event::CmdLateUse { late, uses } => {
                self.late_uses.insert(*late, uses.clone());
            }
            Event::CmdExecute { cmd, secondaries } => {
                // The secondaries' commands run in the primary, in order, at this point. Their
                // recordings are taken as they stand here: re-recording or resetting a
                // secondary invalidates the primaries that execute it, so this is also what
                // they hold when the primary is submitted.
                let mut ops = Vec::new();
                let mut late = Vec::new();
                for s in secondaries {
                    match self.cmd_of.get(s) {
                        Some(&r) => {
                            // Late descriptor uses of the secondary keep their place among its
                            // commands, now at the primary's position.
                            for m in self.late_at.get(&r).into_iter().flatten() {
                                late.push((m.0 + ops.len(), m.1, m.2, m.3.clone()));
                            }
                            ops.extend(self.m.recordings[r].iter().cloned());
                        }
                        None => self.m.warn(format!(
                            "event {seq}: executed secondary command buffer {s:#x} was never recorded"
                        )),
                    }
                }
                let r = self.recording_of(*cmd);
                let base = self.m.recordings[r].len();
                for m in late {
                    self.late_at
                        .entry(r)
                        .or_default()
                        .push((m.0 + base, m.1, m.2, m.3));
                }
                for op in ops {
                    self.m.record(&mut self.cmd_of, *cmd, op);
                }
            }
            _ => {}
        }
    }

    /// The index of `cmd`'s current recording (one is started for a command buffer whose begin
    /// the trace did not hold, as [`Model::record`] does).
    fn recording_of(&mut self, cmd: u64) -> usize {
        match self.cmd_of.get(&cmd) {
            Some(&r) => r,
            None => {
                self.m.recordings.push(Vec::new());
                let r = self.m.recordings.len() - 1;
                self.cmd_of.insert(cmd, r);
                r
            }
        }
    }

    /// One buffer use of a recorded command as an op; `None` when the buffer is unknown to the
    /// trace (explained once at the end).
    fn use_op(&mut self, seq: u64, command: &str, u: &BufferUse) -> Option<Op> {
        let Some(&b) = self.buf_of.get(&u.buffer) else {
            let e = self
                .unknown
                .entry(u.buffer)
                .or_insert((seq, 0, BTreeSet::new()));
            e.1 += 1;
            e.2.insert(command.to_string());
            return None;
        };
        let bsize = self.m.buffers[b].size;
        let size = if u.size == u64::MAX {
            bsize.saturating_sub(u.offset)
        } else {
            u.size
        };
        Some(Op {
            recorded: seq,
            kind: OpKind::Use {
                buffer: b,
                offset: u.offset,
                size,
                access: u.access,
                kind: u.kind,
                command: command.to_string(),
            },
        })
    }

    /// Recording `r` as the submission at `seq` runs it: where it holds commands with late-bound
    /// descriptors, a copy with the buffers they name now (the last `CmdLateUse` of each) in
    /// their place. A command whose late uses the trace does not restate reaches every buffer
    /// of the device (fail closed).
    fn as_submitted(&mut self, seq: u64, r: usize) -> usize {
        let Some(marks) = self.late_at.get(&r).cloned() else {
            return r;
        };
        let mut ops = self.m.recordings[r].clone();
        for (at, id, recorded, command) in marks.into_iter().rev() {
            let Some(uses) = self.late_uses.get(&id).cloned() else {
                if self.m.aside_all.is_none() {
                    self.m.aside_all = Some((
                        seq,
                        format!("{command} (its update-after-bind descriptors at this submission are not in the trace)"),
                    ));
                }
                continue;
            };
            let new: Vec<Op> = uses
                .iter()
                .filter_map(|u| self.use_op(recorded, &command, u))
                .collect();
            let at = at.min(ops.len());
            ops.splice(at..at, new);
        }
        self.m.recordings.push(ops);
        self.m.recordings.len() - 1
    }

    /// Submissions and completions: what each submission runs, and when the host first sees it
    /// complete.
    fn submissions(&mut self, seq: u64, event: &Event) {
        match event {
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
                        match self.cmd_of.get(c) {
                            Some(&r) => recs.push(self.as_submitted(seq, r)),
                            None => self.m.warn(format!(
                                "event {seq}: submitted command buffer {c:#x} was never recorded"
                            )),
                        }
                    }
                    waits.extend_from_slice(w);
                    signals.extend_from_slice(s);
                }
                let id = self.m.submissions.len();
                self.m.submissions.push(Submission {
                    seq,
                    queue: *queue,
                    fence: *fence,
                    recordings: recs,
                    waits,
                    signals,
                    completed: None,
                });
                self.pending.push(id);
                self.m.timeline.push((seq, Step::Submit(id)));
            }
            Event::FenceSignaled { fences } => {
                let roots: Vec<SubId> = self
                    .pending
                    .iter()
                    .copied()
                    .filter(|&s| {
                        self.m.submissions[s]
                            .fence
                            .is_some_and(|f| fences.contains(&f))
                    })
                    .collect();
                self.m.complete(&mut self.pending, roots, seq);
            }
            Event::QueueWaitIdle { queue } => {
                let roots: Vec<SubId> = self
                    .pending
                    .iter()
                    .copied()
                    .filter(|&s| self.m.submissions[s].queue == *queue)
                    .collect();
                self.m.complete(&mut self.pending, roots, seq);
            }
            Event::DeviceWaitIdle => {
                let roots = self.pending.clone();
                self.m.complete(&mut self.pending, roots, seq);
            }
            Event::SemaphoreReached { semaphores } => {
                let roots: Vec<SubId> = self
                    .pending
                    .iter()
                    .copied()
                    .filter(|&s| {
                        self.m.submissions[s].signals.iter().any(|&(sem, v)| {
                            semaphores.iter().any(|&(s2, v2)| s2 == sem && v <= v2)
                        })
                    })
                    .collect();
                self.m.complete(&mut self.pending, roots, seq);
            }
            _ => {}
        }
    }

    /// Host access and validation records: the device's validation, the profiler's watches and
    /// windows, what it could not see, and every host access.
    fn host_access(&mut self, seq: u64, event: &Event) {
        match event {
            Event::DeviceCreate {
                alias_type,
                validation,
                ..
            } => {
                if alias_type.is_some() {
                    self.m.alias_type = *alias_type;
                }
                self.m.validation = validation.clone();
            }
            Event::Unvalidated { buffer, reason } => {
                if let Some(&b) = self.buf_of.get(buffer) {
                    self.m.unvalidated.entry(b).or_insert((seq, reason.clone()));
                }
            }
            // The first loss is the one that counts.
            Event::ValidationLost { reason } if self.m.validation_lost.is_none() => {
                self.m.validation_lost = Some((seq, reason.clone()));
            }
            Event::Watch { buffer } => match self.buf_of.get(buffer) {
                Some(&b) => {
                    self.watch.entry(b).or_insert(seq);
                }
                None => self
                    .m
                    .warn(format!("event {seq}: watch of unknown buffer {buffer:#x}")),
            },
            Event::Window { unobserved } => {
                let mut v = Vec::new();
                for h in unobserved {
                    match self.buf_of.get(h) {
                        Some(&b) => v.push(b),
                        None => self.m.warn(format!(
                            "event {seq}: unobserved window of unknown buffer {h:#x}"
                        )),
                    }
                }
                self.marks.push((seq, v));
            }
            Event::Watched { buffer } => match self.buf_of.get(buffer) {
                Some(&b) => {
                    self.m.watched.entry(b).or_insert(seq);
                }
                None => self.note(*buffer, seq, "the profiler's watch"),
            },
            Event::HostAccess { buffer, access } => match self.buf_of.get(buffer) {
                Some(&b) => self.m.timeline.push((
                    seq,
                    Step::Host {
                        buffer: b,
                        access: *access,
                    },
                )),
                None => self.note(*buffer, seq, "host access"),
            },
            Event::HostWrites {
                buffer,
                write,
                ranges,
                any,
            } => {
                let Some(&b) = self.buf_of.get(buffer) else {
                    self.note(*buffer, seq, "exact host writes");
                    return;
                };
                // The window's write record it names (a record that was dropped: none, and
                // the write stays "any part").
                let step = self
                    .m
                    .timeline
                    .iter()
                    .rev()
                    .take_while(|(s, _)| *s >= *write)
                    .find_map(|(s, st)| match st {
                        Step::Host { buffer: x, access }
                            if *s == *write && *x == b && access.writes() =>
                        {
                            Some(*s)
                        }
                        _ => None,
                    });
                if let Some(s) = step {
                    let size = self.m.buffers[b].size;
                    let seen = match any {
                        Some(why) => Err(why.clone()),
                        None => Ok(ranges
                            .iter()
                            .map(|r| (r[0].min(size), r[1].min(size)))
                            .filter(|r| r.0 < r.1)
                            .collect()),
                    };
                    self.m.exact_writes.entry(s).or_insert(seen);
                }
            }

            _ => {}
        }
    }

    /// A use of a buffer the trace does not know, by `what`, at `seq`.
    fn note(&mut self, b: u64, seq: u64, what: &str) {
        let e = self.unknown.entry(b).or_insert((seq, 0, BTreeSet::new()));
        e.1 += 1;
        e.2.insert(what.to_string());
    }

    /// After the last record: the unknown buffers explained, what each submission touches,
    /// and the windows sampled validation did not watch.
    fn finish(self) -> Model {
        let Replay {
            mut m,
            unknown,
            marks,
            watch,
            ..
        } = self;
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
}
