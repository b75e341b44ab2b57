//! The runtime guard of guarded enforce at each event of the chassis (`crate::events::Mode`):
//! which guarded memory each command buffer uses, and the submissions and waits that put it in
//! flight or show it done. Outside enforce: it sees the buffers and command buffers the
//! application named, and counts a recorded command's memory once enforce bound it.

use super::{holds_buffers, Guard};
use crate::events::{
    raw, slice, BufferCopy, Cmd, CreateBuffer, Mode, Next, Submission, Told, Wait,
};
use crate::hostmem::export::Backing;
use crate::hostmem::memfd::BufferPatch;
use crate::records::Device;
use crate::submit::{command_buffers, Batch};
use ash::vk;

impl Mode for Guard {
    fn wants_uses(&self) -> bool {
        true
    }

    fn backing(&self) -> Option<Backing> {
        Some(Backing::HostImport) // the memory of guarded groups is imported host memory
    }

    unsafe fn before(&self, dev: &Device, cmd: &Cmd<'_>) {
        if let Cmd::BindSets { cb, sets, .. } = *cmd {
            self.bind_sets(dev, cb, sets);
        }
    }

    unsafe fn after(&self, dev: &Device, cmd: &Cmd<'_>, ok: bool) {
        match *cmd {
            Cmd::Uses { cb, buffers, .. } if !buffers.is_empty() => {
                let ids: Vec<u64> = buffers.iter().map(|b| b.buffer).collect();
                self.use_buffers(dev, cb, &ids);
            }
            Cmd::PushDescriptors {
                cb, count, writes, ..
            } if !writes.is_null() => {
                // Push descriptors: their buffers are used by this command buffer.
                let w = slice(writes, count);
                if w.iter()
                    .any(|w| w.p_buffer_info.is_null() && holds_buffers(w.descriptor_type))
                {
                    self.use_all(cb);
                }
                let b: Vec<u64> = w
                    .iter()
                    .filter(|w| !w.p_buffer_info.is_null())
                    .flat_map(|w| {
                        std::slice::from_raw_parts(w.p_buffer_info, w.descriptor_count as usize)
                    })
                    .map(|i| raw(i.buffer))
                    .collect();
                self.use_buffers(dev, cb, &b);
            }
            Cmd::PushTemplate { cb, .. } => self.use_all(cb), // a template's buffers are not followed
            Cmd::Execute {
                cb,
                secondaries: Some(s),
            } => self.execute(cb, &s.iter().map(|c| raw(*c)).collect::<Vec<_>>()),
            Cmd::Begin { cb, .. } if ok => self.begin(cb),
            Cmd::UpdateSets {
                write_count,
                writes,
                copy_count,
                copies,
            } => self.sets_updated(slice(writes, write_count), slice(copies, copy_count)),
            Cmd::UpdateWithTemplate { set, .. } => self.set_unknown(set), // not followed
            Cmd::FenceStatus(f) if ok => self.fences_done(&[f]),
            // A fence may be reset only once its submission completed.
            Cmd::ResetFences(Some(f)) if ok => {
                self.fences_done(&f.iter().map(|x| raw(*x)).collect::<Vec<_>>())
            }
            _ => {}
        }
    }

    unsafe fn create_buffer(
        &self,
        dev: &Device,
        c: CreateBuffer,
        next: Next<'_, CreateBuffer, vk::Result>,
    ) -> vk::Result {
        // Buffers large enough to be planned may be bound into the imported memory of a
        // guarded group: they declare the host-allocation handle type.
        let patch = if dev.wants_key((*c.info).size) {
            BufferPatch::host_allocation(&*c.info)
        } else {
            None
        };
        c.down_patched(patch.as_deref(), next)
    }

    unsafe fn copy<C: BufferCopy>(&self, dev: &Device, c: C, _told: &Told, next: Next<'_, C, ()>) {
        let (src, dst) = c.buffers();
        self.use_buffers(dev, raw(c.cb()), &[src, dst]);
        next(c)
    }

    unsafe fn submit<B: Batch>(
        &self,
        dev: &Device,
        s: Submission<B>,
        _told: &Told,
        next: Next<'_, Submission<B>, vk::Result>,
    ) -> vk::Result {
        if !self.active() {
            return next(s);
        }
        let cbs: Vec<u64> = command_buffers(s.batches()).collect();
        let used = self.before_submit(dev, s.queue, &cbs);
        let r = next(s);
        self.after_submit(s.queue, s.fence, r == vk::Result::SUCCESS, used);
        r
    }

    unsafe fn wait(
        &self,
        dev: &Device,
        what: Wait<'_>,
        next: Next<'_, (), vk::Result>,
    ) -> vk::Result {
        let r = next(());
        if r == vk::Result::SUCCESS {
            match what {
                Wait::Queue(q) => self.queue_idle(q),
                Wait::Device => self.device_idle(),
                Wait::Fences { count, fences, all } if self.active() && !fences.is_null() => {
                    let f = std::slice::from_raw_parts(fences, count as usize);
                    self.fences_done(&super::signalled(dev, f, all));
                }
                _ => {}
            }
        }
        r
    }
}
