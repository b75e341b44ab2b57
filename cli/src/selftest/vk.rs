//! The Vulkan the selftest's workloads share, written as discrete-GPU code is written: one
//! instance and device on the physical device the parent names, memory types picked by property
//! flags, buffers with their own allocation or sub-allocated from a block, compute and graphics
//! pipelines from the embedded SPIR-V, one command buffer and fence, events, global barriers.
//!
//! Vulkan 1.0 is all it needs (a 1.1 instance where the loader offers it), so it runs on every
//! device echo may meet. With validation asked for (`VKECHO_SELFTEST_VALIDATION=1`) the instance
//! enables `VK_LAYER_KHRONOS_validation` itself — below echo, which the environment enables, so
//! validation checks the calls echo makes — with synchronization validation, and a debug
//! messenger collects every warning and error. Everything created is destroyed at drop, so a
//! run under validation ends without leak reports.

use ash::vk;
use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::Mutex;

pub type Res<T> = Result<T, String>;

/// A Vulkan error in words, with the call that returned it.
pub fn vkr<T>(what: &str, r: Result<T, vk::Result>) -> Res<T> {
    r.map_err(|e| format!("{what} failed: {e}"))
}

// The samples' memory kinds and memory-type choice, one copy for both.
#[path = "../../../samples/src/memory.rs"]
mod memory;
pub use memory::{Block, Mem};

/// One validation message: its id name and text (shortened).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub severity: String,
    pub text: String,
}

static MESSAGES: Mutex<Vec<Message>> = Mutex::new(Vec::new());

/// The validation messages collected so far (warnings and errors).
pub fn messages() -> Vec<Message> {
    MESSAGES.lock().map(|m| m.clone()).unwrap_or_default()
}

/// The messenger the instance is created with and the one it keeps: warnings and errors of every
/// type, to [`on_message`].
fn messenger_info() -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(on_message))
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut std::ffi::c_void,
) -> vk::Bool32 {
    // The validation layer's findings only: the loader's own messages (general: which layers
    // the environment adds) say nothing about the calls.
    if data.is_null() || !types.contains(vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION) {
        return vk::FALSE;
    }
    // SAFETY: the layer passes valid callback data for the duration of the call.
    let d = unsafe { &*data };
    let text = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: NUL-terminated strings owned by the layer for this call.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let id = match text(d.p_message_id_name) {
        s if s.is_empty() => format!("MessageID=0x{:08x}", d.message_id_number as u32),
        s => s,
    };
    let mut body = text(d.p_message);
    if body.len() > 600 {
        let mut cut = 600;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
        body.push('…');
    }
    let sev = if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        "error"
    } else {
        "warning"
    };
    if let Ok(mut m) = MESSAGES.lock() {
        m.push(Message {
            id,
            severity: sev.into(),
            text: body,
        });
    }
    vk::FALSE
}

/// A buffer bound to memory; `ptr` is its persistent host mapping (null when not mapped).
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    pub handle: vk::Buffer,
    pub size: u64,
    ptr: *mut u8,
}

impl Buf {
    fn mapped(&self) -> *mut u8 {
        assert!(!self.ptr.is_null(), "buffer is not host-mapped");
        self.ptr
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: a persistent mapping of `size` bytes that lives as long as the Gpu.
        unsafe { std::slice::from_raw_parts(self.mapped(), self.size as usize) }
    }
    #[allow(clippy::mut_from_ref)]
    pub fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: as above; the workloads order host and GPU access with fences and events.
        unsafe { std::slice::from_raw_parts_mut(self.mapped(), self.size as usize) }
    }
    #[allow(clippy::mut_from_ref)]
    pub fn words_mut(&self) -> &mut [u32] {
        // SAFETY: as above; mappings are at least 4-byte aligned (minMemoryMapAlignment ≥ 64,
        // sub-allocations at aligned offsets).
        unsafe { std::slice::from_raw_parts_mut(self.mapped() as *mut u32, self.size as usize / 4) }
    }
}

/// A compute pipeline with `bindings` storage buffers in set 0.
pub struct Kernel {
    pub pipeline: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub set_layout: vk::DescriptorSetLayout,
}

enum Obj {
    Buffer(vk::Buffer),
    Image(vk::Image),
    View(vk::ImageView),
    Memory(vk::DeviceMemory),
    Pipeline(vk::Pipeline),
    PipelineLayout(vk::PipelineLayout),
    SetLayout(vk::DescriptorSetLayout),
    RenderPass(vk::RenderPass),
    Framebuffer(vk::Framebuffer),
    Event(vk::Event),
}

pub struct Gpu {
    _entry: ash::Entry,
    instance: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub dev: ash::Device,
    pub name: String,
    pub queue: vk::Queue,
    mem: vk::PhysicalDeviceMemoryProperties,
    pool: vk::CommandPool,
    pub cmd: vk::CommandBuffer,
    pub fence: vk::Fence,
    dpool: vk::DescriptorPool,
    objects: RefCell<Vec<Obj>>,
}

const VALIDATION: &CStr = c"VK_LAYER_KHRONOS_validation";

impl Gpu {
    /// Instance and device on physical device `index` (the loader's order), with one queue of a
    /// family that can compute (and draw, with `graphics`).
    pub fn new(index: usize, graphics: bool, validation: bool) -> Res<Gpu> {
        // SAFETY: loading the loader runs no code of ours.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| format!("cannot load the Vulkan loader (libvulkan.so.1): {e}"))?;
        let loader = unsafe { entry.try_enumerate_instance_version() }
            .ok()
            .flatten()
            .unwrap_or(vk::API_VERSION_1_0);
        let api = loader.min(vk::API_VERSION_1_1);
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkecho selftest")
            .engine_name(c"vkecho selftest")
            .api_version(api);
        let layers = [VALIDATION.as_ptr()];
        let exts = [ash::ext::debug_utils::NAME.as_ptr()];
        let sync = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&sync);
        let mut create_messenger = messenger_info();
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validation {
            info = info
                .enabled_layer_names(&layers)
                .enabled_extension_names(&exts)
                .push_next(&mut features)
                .push_next(&mut create_messenger);
        }
        // SAFETY: valid create info.
        let instance = vkr("vkCreateInstance", unsafe {
            entry.create_instance(&info, None)
        })?;
        let messenger = if validation {
            let du = ash::ext::debug_utils::Instance::new(&entry, &instance);
            let info = messenger_info();
            // SAFETY: valid instance and create info.
            match unsafe { du.create_debug_utils_messenger(&info, None) } {
                Ok(m) => Some((du, m)),
                Err(e) => {
                    unsafe { instance.destroy_instance(None) };
                    return Err(format!("vkCreateDebugUtilsMessengerEXT failed: {e}"));
                }
            }
        } else {
            None
        };
        let built = Self::open(&instance, index, graphics);
        let (pdev, dev, family) = match built {
            Ok(v) => v,
            Err(e) => {
                unsafe {
                    if let Some((du, m)) = &messenger {
                        du.destroy_debug_utils_messenger(*m, None);
                    }
                    instance.destroy_instance(None)
                };
                return Err(e);
            }
        };
        // SAFETY: valid handles from here on; every object is destroyed in Drop.
        unsafe {
            let props = instance.get_physical_device_properties(pdev);
            let mem = instance.get_physical_device_memory_properties(pdev);
            let name = props
                .device_name_as_c_str()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            let queue = dev.get_device_queue(family, 0);
            let pool = vkr(
                "vkCreateCommandPool",
                dev.create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                ),
            )?;
            let cmd = vkr(
                "vkAllocateCommandBuffers",
                dev.allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                ),
            )?[0];
            let fence = vkr(
                "vkCreateFence",
                dev.create_fence(&vk::FenceCreateInfo::default(), None),
            )?;
            let sizes = [
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: 16,
                },
                vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::UNIFORM_BUFFER,
                    descriptor_count: 4,
                },
            ];
            let dpool = vkr(
                "vkCreateDescriptorPool",
                dev.create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(8)
                        .pool_sizes(&sizes),
                    None,
                ),
            )?;
            Ok(Gpu {
                _entry: entry,
                instance,
                messenger,
                dev,
                name,
                queue,
                mem,
                pool,
                cmd,
                fence,
                dpool,
                objects: RefCell::new(Vec::new()),
            })
        }
    }

    fn open(
        instance: &ash::Instance,
        index: usize,
        graphics: bool,
    ) -> Res<(vk::PhysicalDevice, ash::Device, u32)> {
        // SAFETY: valid instance.
        let pdevs = vkr("vkEnumeratePhysicalDevices", unsafe {
            instance.enumerate_physical_devices()
        })?;
        let pdev = *pdevs.get(index).ok_or(format!(
            "no physical device {index} (the loader lists {})",
            pdevs.len()
        ))?;
        let fams = unsafe { instance.get_physical_device_queue_family_properties(pdev) };
        let mut want = vk::QueueFlags::COMPUTE;
        if graphics {
            want |= vk::QueueFlags::GRAPHICS;
        }
        let family = fams
            .iter()
            .position(|f| f.queue_flags.contains(want))
            .ok_or(format!("device {index} has no queue family with {want:?}"))?
            as u32;
        let prio = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: valid physical device and create info.
        let dev = vkr("vkCreateDevice", unsafe {
            instance.create_device(pdev, &info, None)
        })?;
        Ok((pdev, dev, family))
    }

    fn track(&self, o: Obj) {
        self.objects.borrow_mut().push(o);
    }

    /// Whether this device has a memory type a zero-copy program would use.
    pub fn has_unified(&self) -> bool {
        self.memory_type(Mem::Unified, !0).is_ok()
    }

    /// A memory type for `kind` among `bits`, by property flags.
    pub fn memory_type(&self, kind: Mem, bits: u32) -> Res<u32> {
        memory::memory_type(&self.mem, kind, bits)
            .ok_or(format!("no {kind:?} memory type among bits {bits:#x}"))
    }

    fn allocate(&self, size: u64, type_index: u32, map: bool) -> Res<(vk::DeviceMemory, *mut u8)> {
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(type_index);
        // SAFETY: valid device and allocate info.
        let memory = vkr(
            &format!("vkAllocateMemory({size} bytes, type {type_index})"),
            unsafe { self.dev.allocate_memory(&info, None) },
        )?;
        self.track(Obj::Memory(memory));
        let ptr = if map {
            // SAFETY: a host-visible allocation, mapped once for its lifetime.
            vkr("vkMapMemory", unsafe {
                self.dev
                    .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            })? as *mut u8
        } else {
            std::ptr::null_mut()
        };
        Ok((memory, ptr))
    }

    fn buffer_handle(&self, size: u64, usage: vk::BufferUsageFlags) -> Res<vk::Buffer> {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        // SAFETY: valid create info.
        let b = vkr("vkCreateBuffer", unsafe {
            self.dev.create_buffer(&info, None)
        })?;
        self.track(Obj::Buffer(b));
        Ok(b)
    }

    /// A buffer with its own allocation at offset 0, mapped persistently unless `Device`.
    pub fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, kind: Mem) -> Res<Buf> {
        let handle = self.buffer_handle(size, usage)?;
        let req = unsafe { self.dev.get_buffer_memory_requirements(handle) };
        let t = self.memory_type(kind, req.memory_type_bits)?;
        let (memory, ptr) = self.allocate(req.size, t, kind != Mem::Device)?;
        vkr("vkBindBufferMemory", unsafe {
            self.dev.bind_buffer_memory(handle, memory, 0)
        })?;
        Ok(Buf { handle, size, ptr })
    }

    /// One allocation of `size` bytes of `kind` memory that buffers are sub-allocated from.
    pub fn block(&self, size: u64, kind: Mem) -> Res<Block> {
        let type_index = self.memory_type(kind, !0)?;
        let (memory, ptr) = self.allocate(size, type_index, kind != Mem::Device)?;
        Ok(Block::new(memory, size, type_index, ptr))
    }

    /// A buffer bound into `block` at its next suitably aligned offset.
    pub fn sub_buffer(
        &self,
        block: &mut Block,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Res<Buf> {
        let handle = self.buffer_handle(size, usage)?;
        let req = unsafe { self.dev.get_buffer_memory_requirements(handle) };
        let (offset, ptr) = block.place(&req, 16)?;
        vkr("vkBindBufferMemory", unsafe {
            self.dev.bind_buffer_memory(handle, block.memory, offset)
        })?;
        Ok(Buf { handle, size, ptr })
    }

    /// A 2D RGBA8 colour image with its own device-local allocation and a view of it.
    pub fn color_image(&self, w: u32, h: u32) -> Res<(vk::Image, vk::ImageView)> {
        let info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(vk::Format::R8G8B8A8_UNORM)
            .extent(vk::Extent3D {
                width: w,
                height: h,
                depth: 1,
            })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        // SAFETY: valid create infos; objects tracked for destruction.
        unsafe {
            let image = vkr("vkCreateImage", self.dev.create_image(&info, None))?;
            self.track(Obj::Image(image));
            let req = self.dev.get_image_memory_requirements(image);
            let t = self.memory_type(Mem::Device, req.memory_type_bits)?;
            let (memory, _) = self.allocate(req.size, t, false)?;
            vkr(
                "vkBindImageMemory",
                self.dev.bind_image_memory(image, memory, 0),
            )?;
            let view = vkr(
                "vkCreateImageView",
                self.dev.create_image_view(
                    &vk::ImageViewCreateInfo::default()
                        .image(image)
                        .view_type(vk::ImageViewType::TYPE_2D)
                        .format(vk::Format::R8G8B8A8_UNORM)
                        .subresource_range(color_range()),
                    None,
                ),
            )?;
            self.track(Obj::View(view));
            Ok((image, view))
        }
    }

    pub fn shader(&self, spirv: &[u8]) -> Res<vk::ShaderModule> {
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spirv))
            .map_err(|e| format!("embedded SPIR-V: {e}"))?;
        vkr("vkCreateShaderModule", unsafe {
            self.dev
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
        })
    }

    pub fn set_layout(
        &self,
        ty: vk::DescriptorType,
        count: u32,
        stages: vk::ShaderStageFlags,
    ) -> Res<vk::DescriptorSetLayout> {
        let binds: Vec<_> = (0..count)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(ty)
                    .descriptor_count(1)
                    .stage_flags(stages)
            })
            .collect();
        let l = vkr("vkCreateDescriptorSetLayout", unsafe {
            self.dev.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binds),
                None,
            )
        })?;
        self.track(Obj::SetLayout(l));
        Ok(l)
    }

    pub fn pipeline_layout(
        &self,
        set_layout: vk::DescriptorSetLayout,
        push: u32,
        stages: vk::ShaderStageFlags,
    ) -> Res<vk::PipelineLayout> {
        let ranges = [vk::PushConstantRange {
            stage_flags: stages,
            offset: 0,
            size: push,
        }];
        let sets = [set_layout];
        let mut info = vk::PipelineLayoutCreateInfo::default().set_layouts(&sets);
        if push > 0 {
            info = info.push_constant_ranges(&ranges);
        }
        let l = vkr("vkCreatePipelineLayout", unsafe {
            self.dev.create_pipeline_layout(&info, None)
        })?;
        self.track(Obj::PipelineLayout(l));
        Ok(l)
    }

    /// A compute pipeline with `bindings` storage buffers and `push` bytes of push constants.
    pub fn kernel(&self, spirv: &[u8], bindings: u32, push: u32) -> Res<Kernel> {
        let stage = vk::ShaderStageFlags::COMPUTE;
        let set_layout = self.set_layout(vk::DescriptorType::STORAGE_BUFFER, bindings, stage)?;
        let layout = self.pipeline_layout(set_layout, push, stage)?;
        let module = self.shader(spirv)?;
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(
                vk::PipelineShaderStageCreateInfo::default()
                    .stage(stage)
                    .module(module)
                    .name(c"main"),
            )
            .layout(layout);
        let made = unsafe {
            self.dev
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
        };
        unsafe { self.dev.destroy_shader_module(module, None) };
        let pipeline = made.map_err(|(_, e)| format!("vkCreateComputePipelines failed: {e}"))?[0];
        self.track(Obj::Pipeline(pipeline));
        Ok(Kernel {
            pipeline,
            layout,
            set_layout,
        })
    }

    pub fn track_pipeline(&self, p: vk::Pipeline) {
        self.track(Obj::Pipeline(p));
    }
    pub fn track_render_pass(&self, r: vk::RenderPass) {
        self.track(Obj::RenderPass(r));
    }
    pub fn track_framebuffer(&self, f: vk::Framebuffer) {
        self.track(Obj::Framebuffer(f));
    }

    /// A descriptor set of `layout` with binding i = the whole of `bufs[i]`, of type `ty`.
    pub fn descriptor_set(
        &self,
        layout: vk::DescriptorSetLayout,
        ty: vk::DescriptorType,
        bufs: &[&Buf],
    ) -> Res<vk::DescriptorSet> {
        let layouts = [layout];
        let set = vkr("vkAllocateDescriptorSets", unsafe {
            self.dev.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(self.dpool)
                    .set_layouts(&layouts),
            )
        })?[0];
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
                    .descriptor_type(ty)
                    .buffer_info(info)
            })
            .collect();
        unsafe { self.dev.update_descriptor_sets(&writes, &[]) };
        Ok(set)
    }

    pub fn event(&self) -> Res<vk::Event> {
        let e = vkr("vkCreateEvent", unsafe {
            self.dev.create_event(&vk::EventCreateInfo::default(), None)
        })?;
        self.track(Obj::Event(e));
        Ok(e)
    }

    /// Records the command buffer anew with `f`.
    pub fn record(&self, f: impl FnOnce(&Gpu, vk::CommandBuffer)) -> Res<()> {
        unsafe {
            vkr(
                "vkResetCommandBuffer",
                self.dev
                    .reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty()),
            )?;
            vkr(
                "vkBeginCommandBuffer",
                self.dev.begin_command_buffer(
                    self.cmd,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                ),
            )?;
            f(self, self.cmd);
            vkr("vkEndCommandBuffer", self.dev.end_command_buffer(self.cmd))
        }
    }

    /// Submits the command buffer with the fence.
    pub fn submit(&self) -> Res<()> {
        let cmds = [self.cmd];
        let info = vk::SubmitInfo::default().command_buffers(&cmds);
        vkr("vkQueueSubmit", unsafe {
            self.dev.queue_submit(self.queue, &[info], self.fence)
        })
    }

    /// Waits for the fence (bounded: a GPU that does not finish in a minute is an error) and
    /// resets it.
    pub fn wait(&self) -> Res<()> {
        unsafe {
            vkr(
                "vkWaitForFences",
                self.dev
                    .wait_for_fences(&[self.fence], true, 60_000_000_000),
            )?;
            vkr("vkResetFences", self.dev.reset_fences(&[self.fence]))
        }
    }

    /// Records with `f`, submits, waits.
    pub fn run(&self, f: impl FnOnce(&Gpu, vk::CommandBuffer)) -> Res<()> {
        self.record(f)?;
        self.submit()?;
        self.wait()
    }

    /// `vkCmdCopyBuffer` with (src offset, dst offset, size) regions.
    pub fn copy(&self, cmd: vk::CommandBuffer, src: &Buf, dst: &Buf, regions: &[(u64, u64, u64)]) {
        let r: Vec<_> = regions
            .iter()
            .map(|&(s, d, n)| vk::BufferCopy {
                src_offset: s,
                dst_offset: d,
                size: n,
            })
            .collect();
        unsafe { self.dev.cmd_copy_buffer(cmd, src.handle, dst.handle, &r) };
    }

    /// The whole of `src` into `dst` (same size).
    pub fn copy_all(&self, cmd: vk::CommandBuffer, src: &Buf, dst: &Buf) {
        self.copy(cmd, src, dst, &[(0, 0, src.size.min(dst.size))]);
    }

    /// A global memory barrier.
    pub fn barrier(&self, cmd: vk::CommandBuffer, b: Barrier) {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(b.1)
            .dst_access_mask(b.3)];
        unsafe {
            self.dev.cmd_pipeline_barrier(
                cmd,
                b.0,
                b.2,
                vk::DependencyFlags::empty(),
                &mb,
                &[],
                &[],
            )
        };
    }

    /// Binds `k` with `set`, pushes `push` and dispatches enough groups of 64 for `n` items.
    pub fn dispatch(
        &self,
        cmd: vk::CommandBuffer,
        k: &Kernel,
        set: vk::DescriptorSet,
        push: &[u32],
        n: u64,
    ) {
        let bytes: Vec<u8> = push.iter().flat_map(|w| w.to_le_bytes()).collect();
        let groups = n.div_ceil(64).clamp(1, 1024) as u32;
        unsafe {
            let d = &self.dev;
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, k.pipeline);
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                k.layout,
                0,
                &[set],
                &[],
            );
            if !bytes.is_empty() {
                d.cmd_push_constants(cmd, k.layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
            }
            d.cmd_dispatch(cmd, groups, 1, 1);
        }
    }
}

pub fn color_range() -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: 1,
    }
}

/// A global memory barrier: (source stages, source access, destination stages, destination
/// access).
#[derive(Clone, Copy)]
pub struct Barrier(
    pub vk::PipelineStageFlags,
    pub vk::AccessFlags,
    pub vk::PipelineStageFlags,
    pub vk::AccessFlags,
);

use vk::AccessFlags as A;
use vk::PipelineStageFlags as S;

/// Upload copies → compute shaders.
pub const UPLOAD_TO_COMPUTE: Barrier = Barrier(
    S::TRANSFER,
    A::TRANSFER_WRITE,
    S::COMPUTE_SHADER,
    A::from_raw(A::SHADER_READ.as_raw() | A::SHADER_WRITE.as_raw()),
);
/// Compute shaders → readback copies.
pub const COMPUTE_TO_READBACK: Barrier = Barrier(
    S::COMPUTE_SHADER,
    A::SHADER_WRITE,
    S::TRANSFER,
    A::TRANSFER_READ,
);
/// Readback copies → the host (after the fence).
pub const READBACK_TO_HOST: Barrier =
    Barrier(S::TRANSFER, A::TRANSFER_WRITE, S::HOST, A::HOST_READ);
/// Compute shaders → the host (zero-copy).
pub const COMPUTE_TO_HOST: Barrier =
    Barrier(S::COMPUTE_SHADER, A::SHADER_WRITE, S::HOST, A::HOST_READ);

impl Drop for Gpu {
    fn drop(&mut self) {
        unsafe {
            let _ = self.dev.device_wait_idle();
            let objs = std::mem::take(&mut *self.objects.borrow_mut());
            for o in objs.iter().rev() {
                match *o {
                    Obj::Buffer(b) => self.dev.destroy_buffer(b, None),
                    Obj::Image(i) => self.dev.destroy_image(i, None),
                    Obj::View(v) => self.dev.destroy_image_view(v, None),
                    Obj::Pipeline(p) => self.dev.destroy_pipeline(p, None),
                    Obj::PipelineLayout(l) => self.dev.destroy_pipeline_layout(l, None),
                    Obj::SetLayout(l) => self.dev.destroy_descriptor_set_layout(l, None),
                    Obj::RenderPass(r) => self.dev.destroy_render_pass(r, None),
                    Obj::Framebuffer(f) => self.dev.destroy_framebuffer(f, None),
                    Obj::Event(e) => self.dev.destroy_event(e, None),
                    Obj::Memory(_) => {}
                }
            }
            for o in &objs {
                if let Obj::Memory(m) = *o {
                    self.dev.free_memory(m, None);
                }
            }
            self.dev.destroy_descriptor_pool(self.dpool, None);
            self.dev.destroy_fence(self.fence, None);
            self.dev.destroy_command_pool(self.pool, None);
            self.dev.destroy_device(None);
            if let Some((du, m)) = &self.messenger {
                du.destroy_debug_utils_messenger(*m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}
