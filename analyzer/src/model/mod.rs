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

mod replay;

use crate::trace::{Access, CopyRegion, Frame, MemReq, ObjectKey, UseKind};
use std::collections::HashMap;

/// How much of a buffer's host access the trace saw (sampled validation, `crate::sampling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Coverage {
    /// Windows from the buffer's first watched one to its last.
    pub windows: usize,
    /// Of those, windows it was protected in (its accesses recorded).
    pub observed: usize,
}

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
    /// The first command echo steps aside from that named it: `(seq, command)`.
    pub aside: Option<(u64, String)>,
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
    /// `seq` of every `vkUnmapMemory`.
    pub unmaps: Vec<u64>,
    /// `(buffer, offset, seq)` of every bind into it.
    pub binds: Vec<(BufId, u64, u64)>,
    /// `(offset, size, seq)` of every image bound into it.
    pub image_binds: Vec<(u64, u64, u64)>,
    /// The first command echo steps aside from that named this allocation: `(seq, command)`.
    pub aside: Option<(u64, String)>,
}

impl Memory {
    /// The `seq` of the map the application still held at event `at`: the last `vkMapMemory`
    /// before `at` with no `vkUnmapMemory` (nor free) between it and `at`.
    pub fn mapped_at(&self, at: u64) -> Option<u64> {
        let map = self.maps.iter().map(|m| m.0).filter(|&s| s < at).max()?;
        let closed = self.unmaps.iter().any(|&u| u > map && u < at)
            || self.freed.is_some_and(|f| f > map && f < at);
        (!closed).then_some(map)
    }

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
    /// The profile ran with `host_writes=whole`: a host write rewrites its whole buffer (the
    /// user vouches for it; S1 then treats it so).
    pub whole_host_writes: bool,
    /// Exact host writes (issue 54): the `seq` of a host write step (`Step::Host` that writes)
    /// → what the profiler saw it write in its window (`HostWrites`): `Ok(ranges)`, byte
    /// offsets `[from, to)` in the buffer, or `Err(why)` where the window could not be exact.
    /// A write without an entry wrote "any part" of its buffer.
    pub exact_writes: HashMap<u64, Result<Vec<(u64, u64)>, String>>,
    /// Buffers the layer armed for host-access validation (`Watched`), with the record's seq:
    /// every host access to them since their bind is in the trace.
    pub watched: HashMap<BufId, u64>,
    /// Recorded copies that name a buffer the trace does not know: `(copies, bytes)`.
    pub unknown_copies: (u64, u64),
    /// Buffers not watched in some host-access window of their lifetime (sampled validation),
    /// with the first such window's event and the reason: their pairs lack evidence.
    pub unwatched: HashMap<BufId, (u64, String)>,
    /// The first command echo steps aside from that can reach every buffer of the device (it
    /// runs work over bound state, or names buffers through structures echo does not read):
    /// `(seq, command)`.
    pub aside_all: Option<(u64, String)>,
    /// Buffers validated by sampling: how many of their windows were watched
    /// ([`crate::sampling`]).
    pub coverage: HashMap<BufId, Coverage>,
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
}
