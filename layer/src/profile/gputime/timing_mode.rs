//! GPU timing (issue 47) at each event of the chassis (`crate::events::Mode`): timestamps in
//! echo's query pools around the copies and submissions profile recorded, by the sequence
//! number profile gave them (`Told::seq`).

use super::GpuTimer;
use crate::events::{raw, BufferCopy, Cmd, Mode, Next, Submission, Told};
use crate::records::Device;
use crate::submit::Batch;
use ash::vk;

impl Mode for GpuTimer {
    unsafe fn after(&self, _dev: &Device, cmd: &Cmd<'_>, ok: bool) {
        if let (true, Cmd::Begin { cb, flags }) = (ok, *cmd) {
            self.on_begin(
                cb,
                flags.contains(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE),
            );
        }
    }

    unsafe fn copy<C: BufferCopy>(&self, _dev: &Device, c: C, told: &Told, next: Next<'_, C, ()>) {
        let cb = raw(c.cb());
        match self.copy_before(cb, told.seq.get()) {
            Some(t) => {
                next(c);
                self.copy_after(cb, t);
            }
            None => next(c),
        }
    }

    unsafe fn submit<B: Batch>(
        &self,
        dev: &Device,
        s: Submission<B>,
        told: &Told,
        next: Next<'_, Submission<B>, vk::Result>,
    ) -> vk::Result {
        let (w, sent) = self.wrap(dev, s.queue, told.seq.get(), s.batches());
        let r = match &sent {
            Some(sent) => {
                let (n, p) = sent.batches();
                next(s.with(n, p))
            }
            None => next(s),
        };
        self.submitted(w, s.fence, r == vk::Result::SUCCESS);
        r
    }
}
