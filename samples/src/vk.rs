//! The Vulkan boilerplate every sample shares, written the way discrete-GPU compute code is written:
//! instance and device setup, memory-type choice by property flags, buffers with one allocation each
//! (or sub-allocated from a block), compute pipelines, descriptor sets, command recording (copies,
//! barriers, dispatches, optional timestamps around copies), fences and semaphores.
//!
//! Every object created through [`Ctx`] is registered and destroyed when the context drops, so a run
//! under the validation layer ends without leak reports.
//!
//! Over 1,000 lines on purpose: every sample builds on exactly this one context, so what a
//! sample does to Vulkan can be read in one place (no file of the workspace depends on another
//! part of it).

use crate::harness::{Exec, Variant, RUN_NS};
use ash::vk;
use std::ffi::CStr;
use std::io::Cursor;
use std::sync::Mutex;

// C-string literals (c"..") need Rust 1.77; the workspace supports 1.75.
#[allow(clippy::manual_c_str_literals)]
const NAME: &CStr = match CStr::from_bytes_with_nul(b"echo-samples\0") {
    Ok(c) => c,
    Err(_) => panic!(),
};
#[allow(clippy::manual_c_str_literals)]
const MAIN: &CStr = match CStr::from_bytes_with_nul(b"main\0") {
    Ok(c) => c,
    Err(_) => panic!(),
};

pub use crate::harness::Res;
pub use crate::memory::{Block, Mem};

/// Optional device capabilities a sample asks for; nothing is enabled that a sample does not use.
#[derive(Clone, Copy, Default)]
pub struct Needs {
    pub timeline: bool,
    pub bda: bool,
    /// A second queue for uploads (transfer-only family, else a second queue of the compute family).
    pub upload_queue: bool,
}

#[derive(Clone, Copy)]
pub struct Queue {
    pub family: u32,
    pub index: u32,
    pub handle: vk::Queue,
}

/// A buffer bound to memory; `ptr` is its persistent host mapping (null when not host-visible).
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    pub handle: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub offset: u64,
    pub size: u64,
    ptr: *mut u8,
    owns_memory: bool,
}

// The mapping is plain host memory; the samples synchronise host access with fences.
unsafe impl Send for Buf {}
unsafe impl Sync for Buf {}

impl Buf {
    fn mapped(&self) -> *mut u8 {
        assert!(!self.ptr.is_null(), "buffer is not host-mapped");
        self.ptr
    }
    pub fn bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.mapped(), self.size as usize) }
    }
    pub fn f32s(&self) -> &[f32] {
        unsafe { std::slice::from_raw_parts(self.mapped() as *const f32, self.size as usize / 4) }
    }
    #[allow(clippy::mut_from_ref)]
    pub fn f32s_mut(&self) -> &mut [f32] {
        unsafe { std::slice::from_raw_parts_mut(self.mapped() as *mut f32, self.size as usize / 4) }
    }
    #[allow(clippy::mut_from_ref)]
    pub fn u32s_mut(&self) -> &mut [u32] {
        unsafe { std::slice::from_raw_parts_mut(self.mapped() as *mut u32, self.size as usize / 4) }
    }
}

/// A device buffer the shaders use, plus, in the staging variant, the host-visible staging buffers
/// it exchanges data with: `up` (host → device) and `down` (device → host). In the zero-copy variant
/// both are absent and the host reads and writes `dev` directly.
pub struct Io {
    pub dev: Buf,
    pub up: Option<Buf>,
    pub down: Option<Buf>,
}

impl Io {
    /// The buffer the host writes inputs into.
    pub fn input(&self) -> &Buf {
        self.up.as_ref().unwrap_or(&self.dev)
    }
    /// The buffer the host reads results from.
    pub fn output(&self) -> &Buf {
        self.down.as_ref().unwrap_or(&self.dev)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    In,
    Out,
    InOut,
}

/// A compute pipeline with `bindings` storage buffers in set 0 and `push` bytes of push constants.
pub struct Kernel {
    pub pipeline: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub set_layout: vk::DescriptorSetLayout,
    pub bindings: u32,
}

/// An execution dependency with memory access scopes, recorded as a global memory barrier.
#[derive(Clone, Copy)]
pub struct Dep(
    vk::PipelineStageFlags,
    vk::AccessFlags,
    vk::PipelineStageFlags,
    vk::AccessFlags,
);

const TRANSFER: vk::PipelineStageFlags = vk::PipelineStageFlags::TRANSFER;
const COMPUTE: vk::PipelineStageFlags = vk::PipelineStageFlags::COMPUTE_SHADER;
const HOST: vk::PipelineStageFlags = vk::PipelineStageFlags::HOST;
const SHADER_RW: vk::AccessFlags = vk::AccessFlags::from_raw(
    vk::AccessFlags::SHADER_READ.as_raw() | vk::AccessFlags::SHADER_WRITE.as_raw(),
);
/// Upload copies → shaders.
pub const UPLOAD_TO_COMPUTE: Dep = Dep(
    TRANSFER,
    vk::AccessFlags::TRANSFER_WRITE,
    COMPUTE,
    SHADER_RW,
);
/// One dispatch → the next.
pub const COMPUTE_TO_COMPUTE: Dep = Dep(COMPUTE, vk::AccessFlags::SHADER_WRITE, COMPUTE, SHADER_RW);
/// Shaders → readback copies.
pub const COMPUTE_TO_READBACK: Dep = Dep(
    COMPUTE,
    vk::AccessFlags::SHADER_WRITE,
    TRANSFER,
    vk::AccessFlags::TRANSFER_READ,
);
/// Readback copies → host reads (after the fence).
pub const READBACK_TO_HOST: Dep = Dep(
    TRANSFER,
    vk::AccessFlags::TRANSFER_WRITE,
    HOST,
    vk::AccessFlags::HOST_READ,
);
/// Shaders → host reads (zero-copy).
pub const COMPUTE_TO_HOST: Dep = Dep(
    COMPUTE,
    vk::AccessFlags::SHADER_WRITE,
    HOST,
    vk::AccessFlags::HOST_READ,
);

enum Obj {
    Buffer(vk::Buffer),
    Memory(vk::DeviceMemory),
    Pipeline(vk::Pipeline),
    PipelineLayout(vk::PipelineLayout),
    SetLayout(vk::DescriptorSetLayout),
    CommandPool(vk::CommandPool),
    Fence(vk::Fence),
    Semaphore(vk::Semaphore),
    QueryPool(vk::QueryPool),
}

pub struct Ctx {
    _entry: ash::Entry,
    pub instance: ash::Instance,
    pub dev: ash::Device,
    pub props: vk::PhysicalDeviceProperties,
    mem: vk::PhysicalDeviceMemoryProperties,
    pub compute: Queue,
    pub upload: Queue,
    submit_lock: Mutex<()>,
    timing: bool,
    descriptor_pool: Mutex<vk::DescriptorPool>,
    objects: Mutex<Vec<Obj>>,
}

impl Ctx {
    /// Creates a Vulkan 1.2 instance and a device on the first physical device with a compute
    /// queue. Layers requested through the environment (VK_INSTANCE_LAYERS) are left to the loader.
    pub fn new(needs: Needs, timing: bool) -> Res<Ctx> {
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| format!("cannot load the Vulkan loader (libvulkan.so.1): {e}"))?;
        let app = vk::ApplicationInfo::default()
            .application_name(NAME)
            .application_version(1)
            .engine_name(NAME)
            .api_version(vk::API_VERSION_1_2);
        let instance = unsafe {
            entry.create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
        }
        .map_err(|e| format!("vkCreateInstance failed: {e}"))?;

        let built = Self::open_device(&instance, needs, timing);
        let (pdev, dev, compute, upload, upload_kind) = match built {
            Ok(v) => v,
            Err(e) => {
                unsafe { instance.destroy_instance(None) };
                return Err(e);
            }
        };
        let props = unsafe { instance.get_physical_device_properties(pdev) };
        let mem = unsafe { instance.get_physical_device_memory_properties(pdev) };
        let name = unsafe { CStr::from_ptr(props.device_name.as_ptr()) };
        eprintln!(
            "echo-samples: device {:?}, upload queue: {upload_kind} (family {}, index {})",
            name, upload.family, upload.index
        );

        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 4096,
        }];
        let pool_info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(1024)
            .pool_sizes(&sizes);
        let descriptor_pool = unsafe { dev.create_descriptor_pool(&pool_info, None)? };

        Ok(Ctx {
            _entry: entry,
            instance,
            dev,
            props,
            mem,
            compute,
            upload,
            submit_lock: Mutex::new(()),
            timing,
            descriptor_pool: Mutex::new(descriptor_pool),
            objects: Mutex::new(Vec::new()),
        })
    }

    #[allow(clippy::type_complexity)]
    fn open_device(
        instance: &ash::Instance,
        needs: Needs,
        timing: bool,
    ) -> Res<(vk::PhysicalDevice, ash::Device, Queue, Queue, &'static str)> {
        let pdevs = unsafe { instance.enumerate_physical_devices()? };
        let (pdev, families, family) = pdevs
            .iter()
            .find_map(|&p| {
                let props = unsafe { instance.get_physical_device_properties(p) };
                if props.api_version < vk::API_VERSION_1_2 {
                    return None;
                }
                let fams = unsafe { instance.get_physical_device_queue_family_properties(p) };
                let f = fams
                    .iter()
                    .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))?;
                Some((p, fams, f as u32))
            })
            .ok_or("no Vulkan 1.2 physical device with a compute queue")?;

        // Upload queue: a transfer-only family if there is one, else a second queue of the compute
        // family, else the compute queue itself.
        let transfer_only = families.iter().position(|f| {
            f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                && !f
                    .queue_flags
                    .intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS)
        });
        let (upload_family, upload_index, kind) = match (needs.upload_queue, transfer_only) {
            (false, _) => (family, 0, "same-queue"),
            (true, Some(f)) => (f as u32, 0, "transfer-family"),
            (true, None) if families[family as usize].queue_count >= 2 => {
                (family, 1, "second-queue")
            }
            (true, None) => (family, 0, "same-queue"),
        };

        if timing
            && [family, upload_family]
                .iter()
                .any(|&f| families[f as usize].timestamp_valid_bits == 0)
        {
            return Err("--timing: a queue family in use does not support timestamps".into());
        }

        // Features: only what the sample uses.
        let mut supported12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut supported12);
        unsafe { instance.get_physical_device_features2(pdev, &mut f2) };
        let mut enable12 = vk::PhysicalDeviceVulkan12Features::default();
        if needs.timeline {
            if supported12.timeline_semaphore == 0 {
                return Err("the device does not support timelineSemaphore".into());
            }
            enable12.timeline_semaphore = vk::TRUE;
        }
        if needs.bda {
            if supported12.buffer_device_address == 0 {
                return Err("the device does not support bufferDeviceAddress".into());
            }
            enable12.buffer_device_address = vk::TRUE;
        }
        if timing {
            if supported12.host_query_reset == 0 {
                return Err("--timing needs hostQueryReset".into());
            }
            enable12.host_query_reset = vk::TRUE;
        }

        let priorities = [1.0f32, 1.0];
        let mut queue_infos = vec![vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(if upload_family == family && upload_index == 1 {
                &priorities[..2]
            } else {
                &priorities[..1]
            })];
        if upload_family != family {
            queue_infos.push(
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(upload_family)
                    .queue_priorities(&priorities[..1]),
            );
        }
        let mut info = vk::DeviceCreateInfo::default().queue_create_infos(&queue_infos);
        if needs.timeline || needs.bda || timing {
            info = info.push_next(&mut enable12);
        }
        let dev = unsafe { instance.create_device(pdev, &info, None) }
            .map_err(|e| format!("vkCreateDevice failed: {e}"))?;
        let compute = Queue {
            family,
            index: 0,
            handle: unsafe { dev.get_device_queue(family, 0) },
        };
        let upload = Queue {
            family: upload_family,
            index: upload_index,
            handle: unsafe { dev.get_device_queue(upload_family, upload_index) },
        };
        Ok((pdev, dev, compute, upload, kind))
    }

    fn track(&self, o: Obj) {
        self.objects.lock().unwrap().push(o);
    }

    fn untrack(&self, pred: impl Fn(&Obj) -> bool) {
        let mut objs = self.objects.lock().unwrap();
        if let Some(i) = objs.iter().position(pred) {
            objs.remove(i);
        }
    }

    // ---------------------------------------------------------------- memory and buffers

    /// Picks a memory type for `kind` among `type_bits`, by property flags.
    pub fn memory_type(&self, kind: Mem, type_bits: u32) -> Res<u32> {
        crate::memory::memory_type(&self.mem, kind, type_bits).ok_or_else(|| match kind {
            Mem::Unified => {
                "no DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT memory type: the zero-copy \
                             variant needs a unified-memory device"
                    .into()
            }
            _ => format!("no memory type for {kind:?} among bits {type_bits:#x}").into(),
        })
    }

    fn is_host_visible(&self, type_index: u32) -> bool {
        self.mem.memory_types[type_index as usize]
            .property_flags
            .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
    }

    fn create_buffer_handle(&self, size: u64, usage: vk::BufferUsageFlags) -> Res<vk::Buffer> {
        let families = [self.compute.family, self.upload.family];
        let mut info = vk::BufferCreateInfo::default().size(size).usage(usage);
        if self.compute.family != self.upload.family {
            // Both queue families touch these buffers; concurrent sharing avoids ownership transfers.
            info = info
                .sharing_mode(vk::SharingMode::CONCURRENT)
                .queue_family_indices(&families);
        }
        let buffer = unsafe { self.dev.create_buffer(&info, None)? };
        self.track(Obj::Buffer(buffer));
        Ok(buffer)
    }

    /// Allocates memory; maps it persistently when `map` (staging and unified memory only: discrete-GPU
    /// code never maps device-local memory).
    fn allocate(
        &self,
        size: u64,
        type_index: u32,
        device_address: bool,
        map: bool,
    ) -> Res<(vk::DeviceMemory, *mut u8)> {
        let mut flags =
            vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(type_index);
        if device_address {
            info = info.push_next(&mut flags);
        }
        let memory = unsafe { self.dev.allocate_memory(&info, None) }.map_err(|e| {
            format!("vkAllocateMemory({size} bytes, type {type_index}) failed: {e}")
        })?;
        self.track(Obj::Memory(memory));
        let ptr = if map && self.is_host_visible(type_index) {
            unsafe {
                self.dev
                    .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())?
                    as *mut u8
            }
        } else {
            std::ptr::null_mut()
        };
        Ok((memory, ptr))
    }

    /// Creates a buffer with its own `vkAllocateMemory` allocation, bound at offset 0, and mapped
    /// persistently when the memory is host-visible.
    pub fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, kind: Mem) -> Res<Buf> {
        let handle = self.create_buffer_handle(size, usage)?;
        let req = unsafe { self.dev.get_buffer_memory_requirements(handle) };
        let type_index = self.memory_type(kind, req.memory_type_bits)?;
        let bda = usage.contains(vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS);
        let (memory, ptr) = self.allocate(req.size, type_index, bda, kind != Mem::Device)?;
        unsafe { self.dev.bind_buffer_memory(handle, memory, 0)? };
        if kind != Mem::Device && ptr.is_null() {
            return Err(format!("{kind:?} buffer got memory that is not host-visible").into());
        }
        Ok(Buf {
            handle,
            memory,
            offset: 0,
            size,
            ptr,
            owns_memory: true,
        })
    }

    /// Destroys a buffer now (and frees its memory if it owns its allocation).
    pub fn destroy_buffer(&self, b: Buf) {
        unsafe { self.dev.destroy_buffer(b.handle, None) };
        self.untrack(|o| matches!(o, Obj::Buffer(h) if *h == b.handle));
        if b.owns_memory {
            unsafe { self.dev.free_memory(b.memory, None) };
            self.untrack(|o| matches!(o, Obj::Memory(m) if *m == b.memory));
        }
    }

    /// The device buffer for `dir`, created before its staging buffers (staging variant), or a
    /// unified, mapped buffer (zero-copy variant). `extra` usage is added to the device buffer.
    pub fn io(
        &self,
        variant: Variant,
        size: u64,
        dir: Dir,
        extra: vk::BufferUsageFlags,
    ) -> Res<Io> {
        use vk::BufferUsageFlags as U;
        let storage = U::STORAGE_BUFFER | extra;
        if variant == Variant::ZeroCopy {
            let dev = self.buffer(size, storage, Mem::Unified)?;
            return Ok(Io {
                dev,
                up: None,
                down: None,
            });
        }
        let usage = match dir {
            Dir::In => storage | U::TRANSFER_DST,
            Dir::Out => storage | U::TRANSFER_SRC,
            Dir::InOut => storage | U::TRANSFER_DST | U::TRANSFER_SRC,
        };
        let dev = self.buffer(size, usage, Mem::Device)?;
        let up = match dir {
            Dir::In | Dir::InOut => Some(self.buffer(size, U::TRANSFER_SRC, Mem::Staging)?),
            Dir::Out => None,
        };
        let down = match dir {
            Dir::Out | Dir::InOut => Some(self.buffer(size, U::TRANSFER_DST, Mem::Staging)?),
            Dir::In => None,
        };
        Ok(Io { dev, up, down })
    }

    /// One large allocation of memory suitable for `kind`, mapped when host-visible.
    pub fn block(&self, size: u64, kind: Mem) -> Res<Block> {
        let type_index = self.memory_type(kind, !0)?;
        let (memory, ptr) = self.allocate(size, type_index, false, kind != Mem::Device)?;
        Ok(Block::new(memory, size, type_index, ptr))
    }

    /// Creates a buffer bound into `block` at the next suitably aligned offset.
    pub fn sub_buffer(
        &self,
        block: &mut Block,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Res<Buf> {
        let handle = self.create_buffer_handle(size, usage)?;
        let req = unsafe { self.dev.get_buffer_memory_requirements(handle) };
        let (offset, ptr) = block.place(&req, 1)?;
        unsafe { self.dev.bind_buffer_memory(handle, block.memory, offset)? };
        Ok(Buf {
            handle,
            memory: block.memory,
            offset,
            size,
            ptr,
            owns_memory: false,
        })
    }

    pub fn device_address(&self, b: &Buf) -> u64 {
        unsafe {
            self.dev
                .get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(b.handle))
        }
    }

    // ---------------------------------------------------------------- pipelines

    /// A compute pipeline from SPIR-V with `bindings` storage buffers and `push` bytes of push constants.
    pub fn kernel(&self, spirv: &[u8], bindings: u32, push: u32) -> Res<Kernel> {
        let code = ash::util::read_spv(&mut Cursor::new(spirv))?;
        let module = unsafe {
            self.dev
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)?
        };
        let binds: Vec<_> = (0..bindings)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_layout = unsafe {
            self.dev.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binds),
                None,
            )?
        };
        self.track(Obj::SetLayout(set_layout));
        let ranges = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::COMPUTE,
            offset: 0,
            size: push,
        }];
        let set_layouts = [set_layout];
        let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
        if push > 0 {
            layout_info = layout_info.push_constant_ranges(&ranges);
        }
        let layout = unsafe { self.dev.create_pipeline_layout(&layout_info, None)? };
        self.track(Obj::PipelineLayout(layout));
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(MAIN);
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout);
        let created = unsafe {
            self.dev
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
        };
        unsafe { self.dev.destroy_shader_module(module, None) };
        let pipeline = created.map_err(|(_, e)| e)?[0];
        self.track(Obj::Pipeline(pipeline));
        Ok(Kernel {
            pipeline,
            layout,
            set_layout,
            bindings,
        })
    }

    /// A descriptor set for `k` with binding i = the whole of `bufs[i]`.
    pub fn bind(&self, k: &Kernel, bufs: &[&Buf]) -> Res<vk::DescriptorSet> {
        assert_eq!(bufs.len() as u32, k.bindings, "binding count");
        let pool = self.descriptor_pool.lock().unwrap();
        let layouts = [k.set_layout];
        let set = unsafe {
            self.dev.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(*pool)
                    .set_layouts(&layouts),
            )?[0]
        };
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = bufs
            .iter()
            .map(|b| {
                [vk::DescriptorBufferInfo {
                    buffer: b.handle,
                    offset: 0,
                    range: b.size,
                }]
            })
            .collect();
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        unsafe { self.dev.update_descriptor_sets(&writes, &[]) };
        Ok(set)
    }

    // ---------------------------------------------------------------- commands and sync

    /// A command pool, one primary command buffer, a fence and a timer for `queue`. Each thread
    /// that records uses its own stream.
    pub fn stream(&self, queue: Queue) -> Res<Stream> {
        let pool = unsafe {
            self.dev.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(queue.family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )?
        };
        self.track(Obj::CommandPool(pool));
        let cmd = self.command_buffer(pool)?;
        Ok(Stream {
            queue,
            cmd,
            fence: self.fence()?,
            timer: self.timer()?,
        })
    }

    pub fn command_buffer(&self, pool: vk::CommandPool) -> Res<vk::CommandBuffer> {
        Ok(unsafe {
            self.dev.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )?[0]
        })
    }

    pub fn fence(&self) -> Res<vk::Fence> {
        let f = unsafe {
            self.dev
                .create_fence(&vk::FenceCreateInfo::default(), None)?
        };
        self.track(Obj::Fence(f));
        Ok(f)
    }

    pub fn semaphore(&self) -> Res<vk::Semaphore> {
        let s = unsafe {
            self.dev
                .create_semaphore(&vk::SemaphoreCreateInfo::default(), None)?
        };
        self.track(Obj::Semaphore(s));
        Ok(s)
    }

    pub fn timeline_semaphore(&self, initial: u64) -> Res<vk::Semaphore> {
        let mut t = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(initial);
        let s = unsafe {
            self.dev
                .create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut t), None)?
        };
        self.track(Obj::Semaphore(s));
        Ok(s)
    }

    /// Host-signals a timeline semaphore.
    pub fn signal(&self, sem: vk::Semaphore, value: u64) -> Res<()> {
        unsafe {
            self.dev.signal_semaphore(
                &vk::SemaphoreSignalInfo::default()
                    .semaphore(sem)
                    .value(value),
            )?
        };
        Ok(())
    }

    fn timer(&self) -> Res<Timer> {
        if !self.timing {
            return Ok(Timer::default());
        }
        let cap = 64;
        let pool = unsafe {
            self.dev.create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(cap),
                None,
            )?
        };
        self.track(Obj::QueryPool(pool));
        unsafe { self.dev.reset_query_pool(pool, 0, cap) };
        Ok(Timer {
            pool,
            cap,
            used: 0,
            period_ns: self.props.limits.timestamp_period as f64,
        })
    }

    /// Submits command buffers to `queue`; `wait` and `signal` list (semaphore, timeline value)
    /// pairs (the value is ignored for binary semaphores). Submissions to one queue are serialised.
    pub fn submit(
        &self,
        queue: Queue,
        cmds: &[vk::CommandBuffer],
        wait: &[(vk::Semaphore, u64, vk::PipelineStageFlags)],
        signal: &[(vk::Semaphore, u64)],
        fence: vk::Fence,
    ) -> Res<()> {
        let wait_sems: Vec<_> = wait.iter().map(|w| w.0).collect();
        let wait_vals: Vec<_> = wait.iter().map(|w| w.1).collect();
        let wait_stages: Vec<_> = wait.iter().map(|w| w.2).collect();
        let sig_sems: Vec<_> = signal.iter().map(|s| s.0).collect();
        let sig_vals: Vec<_> = signal.iter().map(|s| s.1).collect();
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals)
            .signal_semaphore_values(&sig_vals);
        let mut info = vk::SubmitInfo::default()
            .command_buffers(cmds)
            .wait_semaphores(&wait_sems)
            .wait_dst_stage_mask(&wait_stages)
            .signal_semaphores(&sig_sems);
        if wait_vals.iter().chain(&sig_vals).any(|&v| v != 0) {
            info = info.push_next(&mut timeline);
        }
        let _guard = self.submit_lock.lock().unwrap();
        unsafe { self.dev.queue_submit(queue.handle, &[info], fence)? };
        Ok(())
    }

    /// Waits for a fence and resets it.
    pub fn wait(&self, fence: vk::Fence) -> Res<()> {
        unsafe {
            self.dev.wait_for_fences(&[fence], true, u64::MAX)?;
            self.dev.reset_fences(&[fence])?;
        }
        Ok(())
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        unsafe {
            let _ = self.dev.device_wait_idle();
            let objs = std::mem::take(&mut *self.objects.lock().unwrap());
            // Everything but memory, newest first; then the allocations.
            for o in objs.iter().rev() {
                match *o {
                    Obj::Buffer(b) => self.dev.destroy_buffer(b, None),
                    Obj::Pipeline(p) => self.dev.destroy_pipeline(p, None),
                    Obj::PipelineLayout(l) => self.dev.destroy_pipeline_layout(l, None),
                    Obj::SetLayout(l) => self.dev.destroy_descriptor_set_layout(l, None),
                    Obj::CommandPool(p) => self.dev.destroy_command_pool(p, None),
                    Obj::Fence(f) => self.dev.destroy_fence(f, None),
                    Obj::Semaphore(s) => self.dev.destroy_semaphore(s, None),
                    Obj::QueryPool(q) => self.dev.destroy_query_pool(q, None),
                    Obj::Memory(_) => {}
                }
            }
            for o in &objs {
                if let Obj::Memory(m) = *o {
                    self.dev.free_memory(m, None);
                }
            }
            self.dev
                .destroy_descriptor_pool(*self.descriptor_pool.lock().unwrap(), None);
            self.dev.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// Timestamp queries around copy commands (`--timing`); a no-op when timing is off.
#[derive(Default)]
pub struct Timer {
    pool: vk::QueryPool,
    cap: u32,
    used: u32,
    period_ns: f64,
}

impl Timer {
    /// Nanoseconds spent between each recorded (start, end) pair since the last collect; resets
    /// the queries. Call only after the work that wrote them has completed.
    pub fn collect(&mut self, ctx: &Ctx) -> Res<f64> {
        if self.used == 0 {
            return Ok(0.0);
        }
        let mut ticks = vec![0u64; self.used as usize];
        unsafe {
            ctx.dev.get_query_pool_results(
                self.pool,
                0,
                &mut ticks,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )?;
            ctx.dev.reset_query_pool(self.pool, 0, self.used);
        }
        self.used = 0;
        let ticks: u64 = ticks.chunks(2).map(|p| p[1].saturating_sub(p[0])).sum();
        Ok(ticks as f64 * self.period_ns)
    }
}

/// Per-thread command resources: pool, command buffer, fence, timer.
pub struct Stream {
    pub queue: Queue,
    pub cmd: vk::CommandBuffer,
    pub fence: vk::Fence,
    pub timer: Timer,
}

impl Stream {
    /// Re-records the command buffer with `f`; returns the bytes its copies move.
    pub fn record(&mut self, ctx: &Ctx, f: impl FnOnce(&mut Rec) -> Res<()>) -> Res<u64> {
        unsafe {
            ctx.dev.begin_command_buffer(
                self.cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )?
        };
        let mut rec = Rec {
            ctx,
            cmd: self.cmd,
            timer: &mut self.timer,
            bytes: 0,
        };
        f(&mut rec)?;
        let bytes = rec.bytes;
        unsafe { ctx.dev.end_command_buffer(self.cmd)? };
        Ok(bytes)
    }

    /// Records with `f`, submits with the stream's fence, waits, and reports bytes copied and
    /// copy time.
    pub fn run(&mut self, ctx: &Ctx, f: impl FnOnce(&mut Rec) -> Res<()>) -> Res<Exec> {
        let t = std::time::Instant::now();
        let bytes = self.record(ctx, f)?;
        ctx.submit(self.queue, &[self.cmd], &[], &[], self.fence)?;
        ctx.wait(self.fence)?;
        RUN_NS.fetch_add(
            t.elapsed().as_nanos() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(Exec {
            bytes_copied: bytes,
            copy_ns: self.timer.collect(ctx)?,
        })
    }
}

/// A command buffer being recorded.
pub struct Rec<'a> {
    pub ctx: &'a Ctx,
    pub cmd: vk::CommandBuffer,
    timer: &'a mut Timer,
    bytes: u64,
}

impl Rec<'_> {
    fn stamp(&mut self) {
        if self.timer.cap == 0 {
            return;
        }
        assert!(
            self.timer.used < self.timer.cap,
            "timer query pool exhausted"
        );
        unsafe {
            self.ctx.dev.cmd_write_timestamp(
                self.cmd,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.timer.pool,
                self.timer.used,
            )
        };
        self.timer.used += 1;
    }

    /// `vkCmdCopyBuffer` with (src offset, dst offset, size) regions; timed when `--timing`.
    pub fn copy_regions(&mut self, src: &Buf, dst: &Buf, regions: &[(u64, u64, u64)]) {
        let regions: Vec<_> = regions
            .iter()
            .map(|&(s, d, n)| vk::BufferCopy {
                src_offset: s,
                dst_offset: d,
                size: n,
            })
            .collect();
        self.bytes += regions.iter().map(|r| r.size).sum::<u64>();
        self.stamp();
        unsafe {
            self.ctx
                .dev
                .cmd_copy_buffer(self.cmd, src.handle, dst.handle, &regions)
        };
        self.stamp();
    }

    pub fn copy(&mut self, src: &Buf, dst: &Buf) {
        assert_eq!(
            src.size, dst.size,
            "copy between buffers of different sizes"
        );
        self.copy_regions(src, dst, &[(0, 0, src.size)]);
    }

    pub fn barrier(&mut self, d: Dep) {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(d.1)
            .dst_access_mask(d.3)];
        unsafe {
            self.ctx.dev.cmd_pipeline_barrier(
                self.cmd,
                d.0,
                d.2,
                vk::DependencyFlags::empty(),
                &mb,
                &[],
                &[],
            )
        };
    }

    /// Copies every staging input into its device buffer, then makes them visible to shaders.
    /// Nothing in the zero-copy variant (host writes before the submission are visible to it).
    pub fn upload(&mut self, ios: &[&Io]) {
        let mut any = false;
        for io in ios {
            if let Some(up) = &io.up {
                self.copy(up, &io.dev);
                any = true;
            }
        }
        if any {
            self.barrier(UPLOAD_TO_COMPUTE);
        }
    }

    /// Copies results back into their staging buffers and makes them visible to the host; in the
    /// zero-copy variant only the shader → host barrier.
    pub fn readback(&mut self, ios: &[&Io]) {
        if ios.iter().all(|io| io.down.is_none()) {
            self.barrier(COMPUTE_TO_HOST);
            return;
        }
        self.barrier(COMPUTE_TO_READBACK);
        for io in ios {
            if let Some(down) = &io.down {
                self.copy(&io.dev, down);
            }
        }
        self.barrier(READBACK_TO_HOST);
    }

    /// Binds `k` with `set` (if any), pushes `push`, and dispatches `groups`.
    pub fn dispatch(
        &mut self,
        k: &Kernel,
        set: Option<vk::DescriptorSet>,
        push: &[u8],
        groups: [u32; 3],
    ) {
        let d = &self.ctx.dev;
        unsafe {
            d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, k.pipeline);
            if let Some(set) = set {
                d.cmd_bind_descriptor_sets(
                    self.cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    k.layout,
                    0,
                    &[set],
                    &[],
                );
            }
            if !push.is_empty() {
                d.cmd_push_constants(self.cmd, k.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            }
            d.cmd_dispatch(self.cmd, groups[0], groups[1], groups[2]);
        }
    }
}

/// Workgroups for grid-stride kernels: enough to fill any GPU; beyond that each invocation loops
/// (lavapipe pays a per-workgroup cost, so 65535 tiny groups are ~25% slower there).
const MAX_GROUPS: u64 = 4096;

/// Workgroup count for a grid-stride kernel over `n` items with `local` invocations per group.
pub fn groups_1d(n: u64, local: u32) -> [u32; 3] {
    [n.div_ceil(local as u64).clamp(1, MAX_GROUPS) as u32, 1, 1]
}

/// Push-constant bytes from 32-bit words.
pub fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}
