//! Enforce at each event of the chassis (`crate::events::Mode`): a bind still held back happens
//! at the first command, descriptor or view that names the buffer; copies lose their self-copy
//! regions (`copy.rs`); submissions lose command buffers that held only dropped copies
//! (`empty.rs`), and count what was elided. Innermost of the modes: what it lets go on is what
//! reaches the driver.

use super::{Enforcer, FreeAction, Unmap};
use crate::events::{
    allocate_flags, dedicated_buffer, raw, slice, Allocate, BindDown, BufferBinds, BufferCopy, Cmd,
    CreateBuffer, Down, Free, MapMemory, Mode, Next, Ranges, Submission, Told,
};
use crate::records::Device;
use crate::state::{UpdateTemplate, Written};
use crate::submit::{command_buffers, Batch};
use ash::vk;
use std::ffi::c_void;

impl Enforcer {
    /// The buffers an update (or push) through template `t` writes are used from now on, so a
    /// bind still held back for one of them happens now.
    ///
    /// # Safety
    /// `data` must be the application's `pData` for `t`.
    pub unsafe fn touch_template(&self, dev: &Device, t: &UpdateTemplate, data: *const c_void) {
        use ash::vk::Handle;
        if !self.has_pending() {
            return;
        }
        for (_, _, _, w) in t.decode(data) {
            if let Written::Buffer(b) = w {
                self.touch(dev, b.buffer.as_raw());
            }
        }
    }
}

impl Mode for Enforcer {
    fn wants_uses(&self) -> bool {
        self.has_pending()
    }

    fn wants_templates(&self) -> bool {
        true
    }

    fn key_floor(&self, _dev: &Device) -> Option<u64> {
        Some(self.smallest_planned_size())
    }

    unsafe fn before(&self, dev: &Device, cmd: &Cmd<'_>) {
        match *cmd {
            Cmd::Uses { buffers, .. } => {
                for b in buffers {
                    self.touch(dev, b.buffer); // a bind still held back happens now
                }
            }
            Cmd::PushDescriptors { count, writes, .. } => {
                crate::enforce::touch_writes(self, dev, count, writes) // a bind still held back happens now
            }
            Cmd::PushTemplate {
                template: Some(t),
                data,
                ..
            }
            | Cmd::UpdateWithTemplate {
                template: Some(t),
                data,
                ..
            } => self.touch_template(dev, t, data),
            Cmd::UpdateSets {
                write_count,
                writes,
                ..
            } => crate::enforce::touch_writes(self, dev, write_count, writes),
            Cmd::Execute {
                cb,
                secondaries: Some(s),
            } => self.on_execute(cb, &s.iter().map(|c| raw(*c)).collect::<Vec<_>>()),
            Cmd::FreeCommandBuffers(cbs) => {
                self.on_reset(&cbs.iter().map(|c| raw(*c)).collect::<Vec<_>>())
            }
            Cmd::DestroyPool(cbs) => self.on_reset(cbs),
            Cmd::DeviceAddress(buffer) => self.touch(dev, buffer),
            // Buffers a barrier names must have memory bound (VUID-VkBufferMemoryBarrier-
            // buffer-01931, and its `2` twin): binds still held back happen now.
            Cmd::CreateBufferView(i, _) => self.touch(dev, raw(i.buffer)), // a view needs it bound
            Cmd::Aside {
                cb,
                command,
                everything,
                buffers,
                ..
            } => self.on_aside(dev, cb, command, everything, buffers),
            Cmd::Barrier { buffers, .. } if self.has_pending() => {
                for b in buffers.buffers() {
                    self.touch(dev, raw(b));
                }
            }
            _ => {}
        }
    }

    unsafe fn after(&self, _dev: &Device, cmd: &Cmd<'_>, ok: bool) {
        if !ok {
            return;
        }
        match *cmd {
            Cmd::ResetPool(cbs) => self.on_reset(cbs),
            Cmd::Begin { cb, .. } | Cmd::Reset(cb) => self.on_reset(&[cb]),
            _ => {}
        }
    }

    unsafe fn create_buffer(
        &self,
        dev: &Device,
        c: CreateBuffer,
        next: Next<'_, CreateBuffer, vk::Result>,
    ) -> vk::Result {
        let r = next(c);
        if r == vk::Result::SUCCESS {
            let buffer = raw(*c.out);
            // The key is cloned out of the map: no map guard may be held while enforce locks.
            let key = dev.state.buffers.get(&buffer).and_then(|b| b.key.clone());
            if let Some(k) = key {
                self.buffer_created(buffer, &k);
            }
        }
        r
    }

    fn destroy_buffer(&self, dev: &Device, buffer: u64, next: Next<'_, (), ()>) {
        // A memory whose free waited for this buffer (its last guest) is freed after it.
        let deferred_free = self.buffer_destroyed(dev, buffer);
        next(());
        if let Some(f) = deferred_free {
            self.free_now(dev, f);
        }
    }

    unsafe fn bind_buffers(
        &self,
        dev: &Device,
        b: &BufferBinds<'_>,
        _how: BindDown,
        next: Next<'_, BindDown, vk::Result>,
    ) -> vk::Result {
        // Redirected, deferred or as asked, one bind at a time; records where each buffer
        // really is. The first failure is the result.
        let mut result = vk::Result::SUCCESS;
        for (index, (buffer, memory, offset, chained)) in b.each().enumerate() {
            let r = self.bind(
                dev,
                buffer,
                memory,
                offset,
                chained,
                &mut |memory, offset| {
                    next(BindDown::One {
                        index,
                        memory,
                        offset,
                    })
                },
            );
            if let BufferBinds::One { .. } = b {
                return r;
            }
            if r != vk::Result::SUCCESS && result == vk::Result::SUCCESS {
                result = r;
            }
        }
        result
    }

    fn driver_memory(
        &self,
        dev: &Device,
        memory: u64,
        why: &dyn Fn() -> String,
    ) -> Option<Result<u64, vk::Result>> {
        // An allocation echo did not make is made now, with its bytes.
        self.any_virtual()
            .then(|| self.driver_memory_now(dev, memory, &why()))
    }

    fn unmade(&self, memory: u64) -> Option<Option<u64>> {
        Enforcer::unmade(self, memory)
    }

    unsafe fn allocate(
        &self,
        dev: &Device,
        a: Allocate,
        next: Next<'_, Allocate, vk::Result>,
    ) -> vk::Result {
        let mut a = a;
        // A staging allocation the plan marks skip_allocation is not made; the application gets
        // echo's handle (virt.rs).
        let i = &*a.app;
        if dev.wants_key(i.allocation_size) {
            let flags = allocate_flags(i);
            let (hash, _) = crate::callsite::site(dev.settings.stack_depth as usize, false);
            a.site = Some(hash);
            let keys = &dev.state.memory_keys;
            let peek = keys.peek(hash, i.allocation_size, i.memory_type_index, flags);
            let chain = alloc_chain(i);
            let mut take = || keys.key(hash, i.allocation_size, i.memory_type_index, flags);
            match self.skip_allocation(dev, &peek, i, &chain, a.alloc, &mut take) {
                Ok(handle) => {
                    let made = Allocate {
                        key: Some(peek),
                        ..a.clone()
                    };
                    made.record(dev, handle, &|| (hash, Vec::new()));
                    *a.out = vk::Handle::from_raw(handle);
                    return vk::Result::SUCCESS;
                }
                Err(k) => a.key = k,
            }
        }
        // An allocation dedicated to a planned device buffer may need a host-visible type (the
        // staging maps are served from it). State and key keep the application's request.
        let switched = self.allocation_type(dedicated_buffer(i), i.memory_type_index, dev);
        let patched;
        if let Some(t) = switched {
            patched = vk::MemoryAllocateInfo {
                memory_type_index: t,
                ..*i
            };
            a = a.with_info(&patched);
        }
        // Guarded enforce: the memory a guarded group will live in is double-mapped too.
        let info = &*a.info;
        let mut guarded = match self.guard() {
            Some(g)
                if dev.state.image_imports.may_import()
                    && self.guard_wants(dev, info, dedicated_buffer(info)) =>
            {
                g.prepare_import(dev, info)
            }
            _ => None,
        };
        let mut r = match &guarded {
            Some(g) => next(a.with_info(g.info())),
            None => next(a.clone()),
        };
        if guarded.is_some() && r != vk::Result::SUCCESS {
            crate::log::warn!("guard: importing a double mapping failed ({r:?}); allocated as asked, its group is not applied");
            guarded = None;
            r = next(a.clone());
        }
        if r == vk::Result::SUCCESS {
            let memory = raw(*a.out);
            if guarded.is_some() {
                dev.state.image_imports.imported.insert(memory);
            }
            self.memory_allocated(dev, memory, switched);
            if let Some(g) = guarded {
                self.guard_imported(memory, g);
            }
        }
        r
    }

    fn free_memory(&self, dev: &Device, f: Free, _how: Down, next: Next<'_, Down, ()>) {
        let then = match Enforcer::free(self, dev, f.memory, f.alloc) {
            // Deferred: a buffer (or an allocation echo did not make) still lives in it (S4).
            FreeAction::Deferred => return next(Down::Nothing),
            FreeAction::Skip { then } => {
                dev.state.memory.remove(&f.memory);
                next(Down::Nothing);
                then
            }
            FreeAction::Down { memory: m, then } => {
                dev.state.memory.remove(&f.memory);
                // The guard's double mapping is unmapped (at the end of this arm) only once the
                // driver let go of the memory.
                let _mapping = self.guard().and_then(|g| g.before_free(m));
                next(Down::Driver(m));
                then
            }
        };
        if let Some(f) = then {
            self.free_now(dev, f);
        }
    }

    unsafe fn map_memory(
        &self,
        dev: &Device,
        m: MapMemory,
        _how: Down,
        next: Next<'_, Down, vk::Result>,
    ) -> vk::Result {
        // A staging allocation's map may be served from its device buffer's memory.
        Enforcer::map(
            self,
            dev,
            m.memory,
            m.offset,
            m.size,
            m.data,
            &mut |memory| next(Down::Driver(memory)),
        )
    }

    fn unmap_memory(&self, dev: &Device, memory: u64, _how: Down, next: Next<'_, Down, ()>) {
        match Enforcer::unmap(self, dev, memory) {
            Unmap::Served => {} // echo's mapping stays while aliased buffers use it
            Unmap::Down(m) => {
                if let Some(mut s) = dev.state.memory.get_mut(&memory) {
                    s.mapped = None;
                }
                next(Down::Driver(m))
            }
        }
    }

    unsafe fn ranges(
        &self,
        dev: &Device,
        r: Ranges,
        next: Next<'_, Ranges, vk::Result>,
    ) -> vk::Result {
        // Translated onto what the driver holds.
        if r.n > 0 && !r.p.is_null() {
            if let Some(t) = self.translate_ranges(dev, slice(r.p, r.n)) {
                if t.is_empty() {
                    // Only ranges of an allocation made in part that nothing at the driver holds.
                    return vk::Result::SUCCESS;
                }
                return next(Ranges {
                    n: t.len() as u32,
                    p: t.as_ptr(),
                    ..r
                });
            }
        }
        next(r)
    }

    unsafe fn copy<C: BufferCopy>(&self, dev: &Device, c: C, _told: &Told, next: Next<'_, C, ()>) {
        // Self-copy regions dropped, one substitute barrier in their place.
        self.cmd_copy(dev, c, next)
    }

    unsafe fn submit<B: Batch>(
        &self,
        _dev: &Device,
        s: Submission<B>,
        _told: &Told,
        next: Next<'_, Submission<B>, vk::Result>,
    ) -> vk::Result {
        let batches = s.batches();
        let stripped = self.strip(batches);
        let r = match &stripped {
            Some(st) => next(s.with(st.count(), st.as_ptr())),
            None => next(s),
        };
        if r == vk::Result::SUCCESS && self.elides() {
            self.on_submit(command_buffers(batches));
            if let Some(st) = &stripped {
                self.count_stripped(st);
            }
        }
        r
    }
}

/// The structures of an allocate info's chain (enforce decides from them whether an allocation
/// may be left unmade).
unsafe fn alloc_chain(info: &vk::MemoryAllocateInfo<'_>) -> echo_analyzer::apply::AllocChain {
    let mut c = echo_analyzer::apply::AllocChain::default();
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        match (*p).s_type {
            vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO => {
                c.flags = (*(p as *const vk::MemoryAllocateFlagsInfo<'_>))
                    .flags
                    .as_raw();
            }
            vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO => {
                let d = &*(p as *const vk::MemoryDedicatedAllocateInfo<'_>);
                c.dedicated = Some((raw(d.buffer), raw(d.image)));
            }
            vk::StructureType::MEMORY_PRIORITY_ALLOCATE_INFO_EXT => {
                let q = &*(p as *const vk::MemoryPriorityAllocateInfoEXT<'_>);
                c.priority = Some(q.priority.to_bits());
            }
            t => c.other.push(t.as_raw()),
        }
        p = (*p).p_next;
    }
    c
}
