//! GPU timestamps around the copies recorded into the application's command buffers (see the
//! module above): a pair of queries per copy in a device-wide pool handed out in blocks per
//! recording, read back with the submission that ran them, or before the command buffer is
//! recorded, reset, freed or submitted again.

use super::{lock, CmdCopies, GpuTimer, COPY_BLOCKS, PAIRS_PER_BLOCK};
use ash::vk;

/// A copy's timestamps being recorded (between [`GpuTimer::copy_before`] and
/// [`GpuTimer::copy_after`]).
pub struct CopyTicket {
    query: u32,
}

impl GpuTimer {
    /// `vkBeginCommandBuffer`: what the recording left is read (it is not pending), its copy
    /// blocks go back.
    pub fn on_begin(&self, cmd: u64, simultaneous: bool) {
        self.release_cmd(cmd);
        if self.copies_on && self.on() {
            self.cmds.insert(
                cmd,
                CmdCopies {
                    simultaneous,
                    ..Default::default()
                },
            );
        }
    }

    /// `vkResetCommandBuffer`, a pool reset or destroyed, `vkFreeCommandBuffers`.
    pub fn on_reset(&self, cmds: &[u64]) {
        for c in cmds {
            self.release_cmd(*c);
        }
    }

    /// `vkCmdExecuteCommands`.
    pub fn on_execute(&self, primary: u64, secondaries: &[u64]) {
        if let Some(mut e) = self.cmds.get_mut(&primary) {
            e.secondaries.extend_from_slice(secondaries);
        }
    }

    /// The recording ends (re-begun, reset or freed: not pending then). What was set aside is
    /// read if the device is idle now; this recording's results not read by then are given up.
    fn release_cmd(&self, cmd: u64) {
        if self.cmds.get(&cmd).is_some_and(|e| e.submitted.is_some()) {
            self.read_if_idle(false);
        }
        if let Some((_, e)) = self.cmds.remove(&cmd) {
            if !e.blocks.is_empty() {
                lock(&self.copy_free).extend(e.blocks);
            }
        }
    }

    /// Before a copy is recorded into `cmd` (its record's `seq`): reset a pair and write the
    /// first timestamp. `None`: not timed.
    pub fn copy_before(&self, cmd: u64, copy_seq: u64) -> Option<CopyTicket> {
        if !self.copies_on || copy_seq == 0 || !self.on() {
            return None;
        }
        let mut e = self.cmds.get_mut(&cmd)?;
        if e.simultaneous {
            return None;
        }
        let n = e.copies.len() as u32;
        if n / PAIRS_PER_BLOCK >= e.blocks.len() as u32 {
            let b = self.take_block()?;
            e.blocks.push(b);
        }
        let block = e.blocks[(n / PAIRS_PER_BLOCK) as usize];
        let query = 2 * (block * PAIRS_PER_BLOCK + n % PAIRS_PER_BLOCK);
        e.copies.push((query, copy_seq));
        drop(e);
        let pool = (*lock(&self.copy_pool))?;
        let cb = <vk::CommandBuffer as vk::Handle>::from_raw(cmd);
        // SAFETY: the application's command buffer in the recording state (we are in its
        // vkCmdCopyBuffer), outside a render pass (copies are); echo's query pool.
        unsafe {
            (self.fp.cmd_reset_query_pool)(cb, pool, query, 2);
            (self.fp.cmd_write_timestamp)(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, query);
        }
        Some(CopyTicket { query })
    }

    /// After the copy went down: the second timestamp.
    pub fn copy_after(&self, cmd: u64, t: CopyTicket) {
        let Some(pool) = *lock(&self.copy_pool) else {
            return;
        };
        // SAFETY: as in `copy_before`.
        unsafe {
            (self.fp.cmd_write_timestamp)(
                <vk::CommandBuffer as vk::Handle>::from_raw(cmd),
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                pool,
                t.query + 1,
            )
        };
    }

    fn take_block(&self) -> Option<u32> {
        let mut pool = lock(&self.copy_pool);
        if pool.is_none() {
            let info = vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(2 * PAIRS_PER_BLOCK * COPY_BLOCKS);
            let mut p = vk::QueryPool::null();
            // SAFETY: a valid create info, through the next layer.
            let r = unsafe {
                (self.fp.create_query_pool)(self.device, &info, std::ptr::null(), &mut p)
            };
            if r != vk::Result::SUCCESS {
                drop(pool);
                self.fail("vkCreateQueryPool", r);
                return None;
            }
            *pool = Some(p);
            *lock(&self.copy_free) = (0..COPY_BLOCKS).rev().collect();
            *lock(&self.copy_last) =
                vec![(u64::MAX, u64::MAX); (PAIRS_PER_BLOCK * COPY_BLOCKS) as usize];
        }
        drop(pool);
        lock(&self.copy_free).pop()
    }

    /// Read `cmd`'s copies if it was submitted since they were last read.
    pub(super) fn read_cmd(&self, cmd: u64) {
        self.read_cmd_for(cmd, None);
    }

    /// Read `cmd`'s copies as run by submission `which` (`None`: whichever ran them last).
    pub(super) fn read_cmd_for(&self, cmd: u64, which: Option<(u64, u64)>) {
        let Some(pool) = *lock(&self.copy_pool) else {
            return;
        };
        let (copies, (queue, submit)) = {
            let Some(mut e) = self.cmds.get_mut(&cmd) else {
                return;
            };
            let Some(sub) = e.submitted else { return };
            if which.is_some_and(|w| w != sub) {
                return; // submitted again since: that submission reads them
            }
            e.submitted = None;
            (e.copies.clone(), sub)
        };
        let mask = self.masks.get(&queue).map_or(u64::MAX, |m| *m);
        for (query, copy_seq) in copies {
            let Some(v) = self.results(pool, query, mask) else {
                continue;
            };
            let fresh = {
                let mut last = lock(&self.copy_last);
                let l = &mut last[(query / 2) as usize];
                let fresh = *l != v;
                *l = v;
                fresh
            };
            if fresh {
                self.emit(queue, submit, Some(copy_seq), v, mask);
            }
        }
    }
}
