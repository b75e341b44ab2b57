//! Profile mode at each event of the chassis (`crate::events::Mode`): what the trace records of
//! each followed command. Outermost of the modes: it records what the application asked for.

use super::Profiler;
use crate::events::{
    raw, slice, Allocate, BufferCopy, Cmd, CreateBuffer, Down, Free, Mode, Next, Ranges,
    Submission, Told, Wait, Work,
};
use crate::hostmem::export::Backing;
use crate::records::Device;
use crate::submit::{command_buffers, trace, Batch};
use ash::vk;
use echo_analyzer::trace::Event;

impl Mode for Profiler {
    fn wants_uses(&self) -> bool {
        true
    }

    fn wants_templates(&self) -> bool {
        true
    }

    fn backing(&self) -> Option<Backing> {
        if self.may_import() {
            Profiler::backing(self)
        } else {
            None
        }
    }

    fn key_floor(&self, dev: &Device) -> Option<u64> {
        Some(dev.settings.min_bytes)
    }

    unsafe fn before(&self, dev: &Device, cmd: &Cmd<'_>) {
        match *cmd {
            Cmd::DestroyDevice => self.on_destroy_device(dev),
            Cmd::LeftAlive => self.on_exit(),
            Cmd::Uses {
                cb,
                command,
                work,
                buffers,
            } => match work {
                Work::Names => self.on_use(cb, command, buffers.to_vec()),
                Work::Dispatch => self.on_dispatch_or_draw(cb, false, command, buffers.to_vec()),
                Work::Draw => self.on_dispatch_or_draw(cb, true, command, buffers.to_vec()),
            },
            Cmd::BindSets {
                cb,
                bp,
                first,
                sets,
                dynamic,
            } => self.on_bind_sets(cb, bp, first, sets, dynamic),
            Cmd::PushDescriptors {
                cb,
                bp,
                set,
                count,
                writes,
            } => self.on_push_descriptors(cb, bp, set, count, writes),
            Cmd::PushTemplate {
                cb,
                template: Some(t),
                set,
                data,
            } => self.on_push_template(cb, t, set, data),
            Cmd::BindPipeline { cb, bp, pipeline } => self.on_bind_pipeline(cb, bp, pipeline),
            Cmd::BindShaders {
                cb,
                stages,
                shaders,
            } => self.on_bind_shaders(cb, stages, shaders),
            Cmd::Execute {
                cb,
                secondaries: Some(s),
            } => self.on_execute(cb, s.iter().map(|c| raw(*c)).collect()),
            Cmd::FreeCommandBuffers(cbs) => self.on_free(
                &cbs.iter()
                    .filter(|c| **c != vk::CommandBuffer::null())
                    .map(|c| raw(*c))
                    .collect::<Vec<_>>(),
            ),
            Cmd::DestroyPool(cbs) => self.on_free(cbs),
            Cmd::DeviceAddress(buffer) => self.on_device_address(buffer),
            Cmd::Barrier {
                cb, ordering: true, ..
            } => self.on_barrier(cb),
            Cmd::UpdateSets {
                write_count,
                writes,
                copy_count,
                copies,
            } => self.on_update_sets(write_count, writes, copy_count, copies),
            Cmd::UpdateWithTemplate {
                set,
                template: Some(t),
                data,
            } => self.on_update_with_template(set, t, data),
            Cmd::DestroyShaderModule(m) => self.on_destroy_module(m),
            Cmd::DestroyPipeline(p) => self.on_destroy_pipeline(p),
            Cmd::DestroyShader(s) => self.on_destroy_shader(s),
            Cmd::DestroyBufferView(v) => self.on_destroy_view(v),
            Cmd::MemoryAside { command, memory } => {
                self.on_aside(None, command, false, &[], &[], &[memory], &[])
            }
            Cmd::Aside {
                cb,
                command,
                everything,
                buffers,
                views,
                memory,
                sets,
            } => self.on_aside(cb, command, everything, buffers, views, memory, sets),
            _ => {}
        }
    }

    unsafe fn after(&self, dev: &Device, cmd: &Cmd<'_>, ok: bool) {
        if !ok {
            return;
        }
        match *cmd {
            Cmd::ResetPool(cbs) => self.on_reset(cbs),
            Cmd::Begin { cb, flags } => self.on_begin(
                cb,
                flags.contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            ),
            Cmd::End(cb) => self.on_end(cb),
            Cmd::Reset(cb) => self.on_reset(&[cb]),
            Cmd::FenceStatus(f) => self.observed(dev, Event::FenceSignaled { fences: vec![f] }),
            Cmd::ResetFences(Some(f)) => self.observed_no_window(Event::FenceReset {
                fences: f.iter().map(|x| raw(*x)).collect(),
            }),
            Cmd::SemaphoreValue { semaphore, value } if !value.is_null() => self.observed(
                dev,
                Event::SemaphoreReached {
                    semaphores: vec![(semaphore, *value)],
                },
            ),
            Cmd::SignalSemaphore(i) => self.on_host_signal(raw(i.semaphore), i.value),
            Cmd::ShaderModule(module, info) => self.on_shader_module(module, info),
            Cmd::ComputePipelines { count, infos, out } => {
                self.on_compute_pipelines(count, infos, out)
            }
            Cmd::GraphicsPipelines { count, infos, out } => {
                self.on_graphics_pipelines(count, infos, out)
            }
            Cmd::Shaders { count, infos, out } => self.on_create_shaders(count, infos, out),
            Cmd::AllocateSets(info, out) => {
                let n = info.descriptor_set_count;
                let sets: Vec<u64> = std::slice::from_raw_parts(out, n as usize)
                    .iter()
                    .map(|s| raw(*s))
                    .collect();
                let layouts: Vec<u64> = slice(info.p_set_layouts, n)
                    .iter()
                    .map(|l| raw(*l))
                    .collect();
                self.on_allocate_sets(&sets, &layouts);
            }
            Cmd::SetLayout(layout, info) => self.on_set_layout(layout, info),
            // May hand out the application's view of a double mapping instead.
            Cmd::Mapping(m) => self.on_map(m.memory, m.offset, m.size, m.data),
            Cmd::Mapped(memory) => self.after_map(dev, memory), // arms what it reaches
            Cmd::BufferBound {
                buffer,
                memory,
                offset,
            } => self.on_bind(dev, buffer, memory, offset),
            Cmd::CreateBufferView(i, out) => {
                self.on_buffer_view(raw(*out), raw(i.buffer), i.offset, i.range)
            }
            Cmd::ImageBound {
                image,
                memory,
                offset,
                chained,
            } => image_bound(self, dev, image, memory, offset, chained),
            _ => {}
        }
    }

    unsafe fn create_buffer(
        &self,
        dev: &Device,
        c: CreateBuffer,
        next: Next<'_, CreateBuffer, vk::Result>,
    ) -> vk::Result {
        // A buffer may be bound into imported (double-mapped) memory, so it declares the
        // host-allocation handle type (VUID-vkBindBufferMemory-memory-02727).
        let patch = self.patch_buffer_info(&*c.info);
        let r = c.down_patched(patch.as_deref(), next);
        if r == vk::Result::SUCCESS {
            self.on_create_buffer(dev, raw(*c.out));
        }
        r
    }

    fn destroy_buffer(&self, _dev: &Device, buffer: u64, next: Next<'_, (), ()>) {
        self.before_destroy_buffer(buffer);
        next(())
    }

    unsafe fn allocate(
        &self,
        dev: &Device,
        a: Allocate,
        next: Next<'_, Allocate, vk::Result>,
    ) -> vk::Result {
        // Host-visible memory is backed by a double mapping (falls back on any failure); not
        // once an image that cannot live in imported memory exists (hooks/image.rs).
        let import = if dev.state.image_imports.may_import() {
            self.prepare_import(dev, &*a.info)
        } else {
            None
        };
        let mut r = match &import {
            Some(im) => next(a.with_info(im.info())),
            None => next(a.clone()),
        };
        let import = match import {
            Some(im) if r != vk::Result::SUCCESS => {
                self.import_failed(im);
                r = next(a.clone());
                None
            }
            im => im,
        };
        if r == vk::Result::SUCCESS {
            let memory = raw(*a.out);
            if import.is_some() {
                dev.state.image_imports.imported.insert(memory);
            }
            self.on_allocate(dev, memory, &*a.app, import);
        }
        r
    }

    fn free_memory(&self, dev: &Device, f: Free, how: Down, next: Next<'_, Down, ()>) {
        let double_map = self.before_free_memory(dev, f.memory);
        next(how);
        drop(double_map); // unmapped only once the driver let go of it
    }

    fn unmap_memory(&self, dev: &Device, memory: u64, how: Down, next: Next<'_, Down, ()>) {
        self.before_unmap(dev, memory);
        next(how)
    }

    unsafe fn ranges(
        &self,
        _dev: &Device,
        r: Ranges,
        next: Next<'_, Ranges, vk::Result>,
    ) -> vk::Result {
        self.on_ranges(r.flush, r.n, r.p);
        next(r)
    }

    unsafe fn copy<C: BufferCopy>(&self, dev: &Device, c: C, told: &Told, next: Next<'_, C, ()>) {
        if c.traced() {
            let (src, dst) = c.buffers();
            told.seq
                .set(self.on_copy(dev, raw(c.cb()), src, dst, c.trace()));
        }
        next(c)
    }

    unsafe fn submit<B: Batch>(
        &self,
        dev: &Device,
        s: Submission<B>,
        told: &Told,
        next: Next<'_, Submission<B>, vk::Result>,
    ) -> vk::Result {
        let batches = s.batches();
        let seq = self.before_submit(dev, command_buffers(batches));
        told.seq.set(seq.seq);
        let r = next(s);
        if r == vk::Result::SUCCESS {
            self.on_submit(seq, s.queue, trace(batches), s.fence);
        }
        r
    }

    unsafe fn wait(
        &self,
        dev: &Device,
        what: Wait<'_>,
        next: Next<'_, (), vk::Result>,
    ) -> vk::Result {
        let t0 = super::sink::monotonic_ns();
        let r = next(());
        if r == vk::Result::SUCCESS {
            let waited = super::sink::monotonic_ns().saturating_sub(t0);
            match what {
                Wait::Queue(queue) => {
                    self.observed_after(dev, Event::QueueWaitIdle { queue }, Some(waited))
                }
                Wait::Device => self.observed_after(dev, Event::DeviceWaitIdle, Some(waited)),
                Wait::Fences { count, fences, all } => {
                    self.on_fences_waited(dev, count, fences, all, waited)
                }
                Wait::Semaphores(info) => self.on_semaphores_waited(dev, &*info, waited),
            }
        }
        r
    }
}

/// An image bound over memory reaches the bytes of any buffer there (issue 32); the trace gets
/// the range. An image bound with a chained structure (a plane of a disjoint image, a swapchain
/// image) may not be asked its requirements with `vkGetImageMemoryRequirements`: then the rest
/// of the allocation from `offset` counts (conservative).
unsafe fn image_bound(
    p: &Profiler,
    dev: &Device,
    image: vk::Image,
    memory: vk::DeviceMemory,
    offset: u64,
    chained: bool,
) {
    if memory == vk::DeviceMemory::null() {
        return;
    }
    let size = if chained {
        dev.state
            .memory
            .get(&raw(memory))
            .map_or(u64::MAX, |m| m.size.saturating_sub(offset))
    } else {
        let mut req = vk::MemoryRequirements::default();
        (dev.fp.get_image_memory_requirements)(dev.handle, image, &mut req);
        req.size
    };
    p.on_bind_image(raw(image), raw(memory), offset, size);
}
