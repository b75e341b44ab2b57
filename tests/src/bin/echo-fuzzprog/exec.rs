//! The executor: runs a program's ops with ash on the first physical device, one Vulkan call
//! (or a few) per op, and prints one line per host read (`r<op> <len> <hash>`) and a last line
//! `digest <hash> reads <n>`. Exit 2: a Vulkan call failed or a wait ran past 10 s (a hang);
//! exit 3: the device cannot run this program (memory requirements or features differ from the
//! caps it was generated for).
//!
//! The ops are here, one arm each with the Vulkan calls it makes; the recorded commands in
//! `record.rs`.

mod record;

use ash::vk;
use echo_tests::fuzzprog::{
    fnv, pattern, Binding, Caps, Cmd, Code, Desc, Draw, Kernel, Op, Program, Res, SemRef,
};
use echo_tests::fuzzprog::{IMAGE_H, IMAGE_W, LOCAL};
use std::collections::{BTreeSet, HashMap};

const SPV_XFORM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_xform.spv"));
const SPV_INPLACE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_inplace.spv"));
const SPV_UNIFORM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_uniform.spv"));
const SPV_TEXEL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_texel.spv"));
const SPV_ADDR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_addr.spv"));
const SPV_VXFORM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_vxform_vert.spv"));
const SPV_VINPLACE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_vinplace_vert.spv"));
const SPV_POINT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fz_point_frag.spv"));

/// Waits longer than this are a hang.
const TIMEOUT_NS: u64 = 10_000_000_000;

pub type Res2<T> = Result<T, (i32, String)>;

fn vkerr(what: &'static str) -> impl Fn(vk::Result) -> (i32, String) {
    move |e| (2, format!("{what}: {e}"))
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Plain,
    Push,
    Uab,
    /// Update-after-bind and partially bound.
    UabPartial,
}

struct Pipe {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    template: Option<vk::DescriptorUpdateTemplate>,
    /// The kernel as a shader object (made at its first use).
    shader: Option<vk::ShaderEXT>,
    /// Draws (`pipeline` is then the monolithic graphics pipeline): the pre-rasterization
    /// library and the pipeline linked from it (made at their first use).
    lib: Option<vk::Pipeline>,
    linked: Option<vk::Pipeline>,
}

struct Mem {
    mem: vk::DeviceMemory,
    size: u64,
    map: Option<*mut u8>,
}

pub struct Exec {
    _entry: ash::Entry,
    instance: ash::Instance,
    dev: ash::Device,
    queue: vk::Queue,
    qf: u32,
    mem_type: u32,
    pub caps: Caps,
    push: Option<ash::khr::push_descriptor::Device>,
    map2: Option<ash::khr::map_memory2::Device>,
    maint6: Option<ash::khr::maintenance6::Device>,
    shader_object: Option<ash::ext::shader_object::Device>,
    pool: vk::CommandPool,
    dpool: vk::DescriptorPool,
    dpool_uab: Option<vk::DescriptorPool>,
    mems: HashMap<u32, Mem>,
    bufs: HashMap<u32, vk::Buffer>,
    imgs: HashMap<u32, vk::Image>,
    views: HashMap<u32, vk::BufferView>,
    /// Set → (handle, kernel, kind, for draws).
    sets: HashMap<u32, (vk::DescriptorSet, Kernel, Kind, bool)>,
    cbs: HashMap<u32, vk::CommandBuffer>,
    /// The secondary command buffer of each run of a primary (reused when it is recorded again).
    secondaries: HashMap<(vk::CommandBuffer, usize), vk::CommandBuffer>,
    fences: HashMap<u32, vk::Fence>,
    sems: HashMap<u32, (vk::Semaphore, bool)>,
    /// The events each command buffer's event barriers use, in recording order (reused when it
    /// is recorded again); `recording`: the command buffer being recorded and its next event.
    cb_events: HashMap<vk::CommandBuffer, Vec<vk::Event>>,
    recording: usize,
    /// The timestamp queries of each command buffer, in recording order (indices into
    /// `queries`, made at the first use; reused when it is recorded again); the next one.
    cb_queries: HashMap<vk::CommandBuffer, Vec<u32>>,
    recording_query: usize,
    queries: Option<(vk::QueryPool, u32)>,
    /// Per (kernel, kind, for draws).
    pipes: HashMap<(Kernel, Kind, bool), Pipe>,
    /// Vulkan commands called (coverage).
    pub cover: BTreeSet<&'static str>,
    pub lines: Vec<String>,
    digest: Vec<u8>,
}

fn desc_type(b: Binding) -> vk::DescriptorType {
    match b {
        Binding::StorageRead | Binding::StorageWrite | Binding::StorageRw => {
            vk::DescriptorType::STORAGE_BUFFER
        }
        Binding::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
        Binding::UniformTexel => vk::DescriptorType::UNIFORM_TEXEL_BUFFER,
        Binding::StorageTexel => vk::DescriptorType::STORAGE_TEXEL_BUFFER,
    }
}

impl Exec {
    /// Instance and device on the first physical device, with what the caps need.
    pub unsafe fn new() -> Res2<Exec> {
        let entry = ash::Entry::load().map_err(|e| (2, format!("loader: {e}")))?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"echo-fuzzprog")
            .api_version(vk::API_VERSION_1_3);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .map_err(vkerr("vkCreateInstance"))?;
        let pd = *instance
            .enumerate_physical_devices()
            .map_err(vkerr("vkEnumeratePhysicalDevices"))?
            .first()
            .ok_or((3, "no physical device".to_string()))?;
        let props = instance.get_physical_device_properties(pd);
        if props.api_version < vk::API_VERSION_1_3 {
            return Err((3, "a Vulkan 1.3 device is needed".into()));
        }
        let qf = instance
            .get_physical_device_queue_family_properties(pd)
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or((3, "no compute queue".to_string()))? as u32;
        let exts = instance
            .enumerate_device_extension_properties(pd)
            .map_err(vkerr("vkEnumerateDeviceExtensionProperties"))?;
        let has = |n: &std::ffi::CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
        let push_ok = has(ash::khr::push_descriptor::NAME);
        let map2_ok = has(ash::khr::map_memory2::NAME);
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut m6 = vk::PhysicalDeviceMaintenance6FeaturesKHR::default();
        let mut so = vk::PhysicalDeviceShaderObjectFeaturesEXT::default();
        let mut gpl = vk::PhysicalDeviceGraphicsPipelineLibraryFeaturesEXT::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut f12)
            .push_next(&mut f13);
        if has(ash::khr::maintenance6::NAME) {
            f2 = f2.push_next(&mut m6);
        }
        if has(ash::ext::shader_object::NAME) {
            f2 = f2.push_next(&mut so);
        }
        if has(ash::ext::graphics_pipeline_library::NAME) {
            f2 = f2.push_next(&mut gpl);
        }
        instance.get_physical_device_features2(pd, &mut f2);
        let stores = f2.features.vertex_pipeline_stores_and_atomics == vk::TRUE;
        let so_ok = so.shader_object == vk::TRUE && f13.dynamic_rendering == vk::TRUE;
        // Draws: a graphics queue family (the one chosen), dynamic rendering and stores in
        // vertex shaders; pipeline libraries on top.
        let qprops = instance.get_physical_device_queue_family_properties(pd)[qf as usize];
        let graphics_q = qprops.queue_flags.contains(vk::QueueFlags::GRAPHICS);
        let timestamps = qprops.timestamp_valid_bits > 0;
        let draw_ok = graphics_q && f13.dynamic_rendering == vk::TRUE && stores;
        let gpl_ok = draw_ok
            && gpl.graphics_pipeline_library == vk::TRUE
            && has(ash::khr::pipeline_library::NAME);
        let maint6_ok = m6.maintenance6 == vk::TRUE;
        let (addr, uab) = (
            f12.buffer_device_address == vk::TRUE,
            f12.descriptor_binding_storage_buffer_update_after_bind == vk::TRUE,
        );
        let partial = uab && f12.descriptor_binding_partially_bound == vk::TRUE;
        if f12.timeline_semaphore == 0 || f13.synchronization2 == 0 {
            return Err((
                3,
                "timeline semaphores and synchronization2 are needed".into(),
            ));
        }
        let mut e12 = vk::PhysicalDeviceVulkan12Features::default()
            .timeline_semaphore(true)
            .buffer_device_address(addr)
            .descriptor_binding_storage_buffer_update_after_bind(uab)
            .descriptor_binding_partially_bound(partial);
        let mut e13 = vk::PhysicalDeviceVulkan13Features::default()
            .synchronization2(true)
            .dynamic_rendering(so_ok || draw_ok);
        let mut egpl = vk::PhysicalDeviceGraphicsPipelineLibraryFeaturesEXT::default()
            .graphics_pipeline_library(true);
        let f10 = vk::PhysicalDeviceFeatures::default().vertex_pipeline_stores_and_atomics(draw_ok);
        let mut eso = vk::PhysicalDeviceShaderObjectFeaturesEXT::default().shader_object(true);
        let mut e6 = vk::PhysicalDeviceMaintenance6FeaturesKHR::default().maintenance6(true);
        let prio = [1.0f32];
        let qinfo = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(qf)
            .queue_priorities(&prio)];
        let mut names = vec![];
        if push_ok {
            names.push(ash::khr::push_descriptor::NAME.as_ptr());
        }
        if map2_ok {
            names.push(ash::khr::map_memory2::NAME.as_ptr());
        }
        if maint6_ok {
            names.push(ash::khr::maintenance6::NAME.as_ptr());
        }
        if so_ok {
            names.push(ash::ext::shader_object::NAME.as_ptr());
        }
        if gpl_ok {
            names.push(ash::khr::pipeline_library::NAME.as_ptr());
            names.push(ash::ext::graphics_pipeline_library::NAME.as_ptr());
        }
        let mut dinfo = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qinfo)
            .enabled_extension_names(&names)
            .enabled_features(&f10)
            .push_next(&mut e12)
            .push_next(&mut e13);
        if maint6_ok {
            dinfo = dinfo.push_next(&mut e6);
        }
        if so_ok {
            dinfo = dinfo.push_next(&mut eso);
        }
        if gpl_ok {
            dinfo = dinfo.push_next(&mut egpl);
        }
        let dev = instance
            .create_device(pd, &dinfo, None)
            .map_err(vkerr("vkCreateDevice"))?;
        let queue = dev.get_device_queue(qf, 0);
        let mp = instance.get_physical_device_memory_properties(pd);
        use vk::MemoryPropertyFlags as F;
        let mem_type = (0..mp.memory_type_count)
            .find(|&i| {
                mp.memory_types[i as usize]
                    .property_flags
                    .contains(F::HOST_VISIBLE | F::HOST_COHERENT)
            })
            .ok_or((3, "no host-visible coherent memory".to_string()))?;
        // The image's requirements, asked without making an image (Vulkan 1.3): an image made
        // would change what echo does with every later allocation (on SwiftShader it stops
        // importing host memory, and profiles lose their evidence).
        let info = image_info();
        let mut ireq2 = vk::MemoryRequirements2::default();
        dev.get_device_image_memory_requirements(
            &vk::DeviceImageMemoryRequirements::default().create_info(&info),
            &mut ireq2,
        );
        let ireq = ireq2.memory_requirements;
        let caps = Caps {
            push_descriptor: push_ok,
            map2: map2_ok,
            maint6: maint6_ok,
            uab_storage: uab,
            partially_bound: partial,
            shader_object: so_ok,
            draw: draw_ok,
            gpl: gpl_ok,
            timestamps,
            device_address: addr,
            image_size: if ireq.memory_type_bits & (1 << mem_type) != 0 {
                ireq.size
            } else {
                0
            },
            image_align: ireq.alignment,
        };
        let pool = dev
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(qf)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
            .map_err(vkerr("vkCreateCommandPool"))?;
        let sizes = |n| {
            [
                vk::DescriptorType::STORAGE_BUFFER,
                vk::DescriptorType::UNIFORM_BUFFER,
                vk::DescriptorType::UNIFORM_TEXEL_BUFFER,
                vk::DescriptorType::STORAGE_TEXEL_BUFFER,
            ]
            .map(|ty| vk::DescriptorPoolSize {
                ty,
                descriptor_count: n,
            })
        };
        let s = sizes(256);
        let dpool = dev
            .create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(128)
                    .pool_sizes(&s),
                None,
            )
            .map_err(vkerr("vkCreateDescriptorPool"))?;
        let s = sizes(64);
        let dpool_uab = if uab {
            Some(
                dev.create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(32)
                        .pool_sizes(&s[..1])
                        .flags(vk::DescriptorPoolCreateFlags::UPDATE_AFTER_BIND),
                    None,
                )
                .map_err(vkerr("vkCreateDescriptorPool"))?,
            )
        } else {
            None
        };
        let push = push_ok.then(|| ash::khr::push_descriptor::Device::new(&instance, &dev));
        let map2 = map2_ok.then(|| ash::khr::map_memory2::Device::new(&instance, &dev));
        let maint6 = maint6_ok.then(|| ash::khr::maintenance6::Device::new(&instance, &dev));
        let shader_object = so_ok.then(|| ash::ext::shader_object::Device::new(&instance, &dev));
        Ok(Exec {
            _entry: entry,
            instance,
            dev,
            queue,
            qf,
            mem_type,
            caps,
            push,
            map2,
            maint6,
            shader_object,
            pool,
            dpool,
            dpool_uab,
            mems: HashMap::new(),
            bufs: HashMap::new(),
            imgs: HashMap::new(),
            views: HashMap::new(),
            sets: HashMap::new(),
            cbs: HashMap::new(),
            secondaries: HashMap::new(),
            fences: HashMap::new(),
            sems: HashMap::new(),
            cb_events: HashMap::new(),
            recording: 0,
            cb_queries: HashMap::new(),
            recording_query: 0,
            queries: None,
            pipes: HashMap::new(),
            cover: ["vkGetDeviceQueue"].into_iter().collect(),
            lines: vec![],
            digest: vec![],
        })
    }

    /// Runs every op; the output lines are in `lines`.
    pub unsafe fn run(&mut self, p: &Program) -> Res2<()> {
        for (i, op) in p.ops.iter().enumerate() {
            self.op(i, op)?;
        }
        self.dev
            .device_wait_idle()
            .map_err(vkerr("vkDeviceWaitIdle"))?;
        if std::env::var_os("ECHO_FUZZPROG_TEST_UNSTABLE").is_some()
            && std::env::var("VK_ECHO_DISABLE").as_deref() == Ok("1")
        {
            // The planted fault of the oracle's test: output that varies without the layer.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            self.lines.push(format!("unstable {t}"));
        }
        let n = self.lines.len();
        self.lines
            .push(format!("digest {:016x} reads {n}", fnv(&self.digest)));
        Ok(())
    }

    fn c(&mut self, name: &'static str) {
        self.cover.insert(name);
    }

    fn mem_ptr(&mut self, mem: u32) -> Res2<(*mut u8, bool)> {
        let m = self.mems.get(&mem).ok_or((3, format!("no memory {mem}")))?;
        if let Some(p) = m.map {
            return Ok((p, false));
        }
        let mm = m.mem;
        self.c("vkMapMemory");
        let p = unsafe {
            self.dev
                .map_memory(mm, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        }
        .map_err(vkerr("vkMapMemory"))?;
        Ok((p as *mut u8, true))
    }

    fn unmap_after(&mut self, mem: u32, temp: bool) {
        if temp {
            self.c("vkUnmapMemory");
            unsafe { self.dev.unmap_memory(self.mems[&mem].mem) };
        }
    }

    unsafe fn op(&mut self, idx: usize, op: &Op) -> Res2<()> {
        let dev = self.dev.clone();
        match op {
            Op::Alloc {
                mem,
                size,
                dedicated,
                address,
            } => {
                let mut info = vk::MemoryAllocateInfo::default()
                    .allocation_size(*size)
                    .memory_type_index(self.mem_type);
                let mut ded = vk::MemoryDedicatedAllocateInfo::default();
                if let Some(b) = dedicated {
                    let buf = self.bufs[b];
                    let req = dev.get_buffer_memory_requirements(buf);
                    if req.size != *size {
                        return Err((
                            3,
                            format!("dedicated allocation: the buffer needs {} bytes", req.size),
                        ));
                    }
                    ded = ded.buffer(buf);
                    info = info.push_next(&mut ded);
                }
                let mut flags = vk::MemoryAllocateFlagsInfo::default()
                    .flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
                if *address {
                    info = info.push_next(&mut flags);
                }
                self.c("vkAllocateMemory");
                let m = dev
                    .allocate_memory(&info, None)
                    .map_err(vkerr("vkAllocateMemory"))?;
                self.mems.insert(
                    *mem,
                    Mem {
                        mem: m,
                        size: *size,
                        map: None,
                    },
                );
            }
            Op::Free { mem } => {
                let m = self.mems.remove(mem).unwrap();
                self.c("vkFreeMemory");
                dev.free_memory(m.mem, None);
            }
            Op::Buffer { buf, size, usage } => {
                let info = vk::BufferCreateInfo::default()
                    .size(*size)
                    .usage(vk::BufferUsageFlags::from_raw(*usage));
                self.c("vkCreateBuffer");
                let b = dev
                    .create_buffer(&info, None)
                    .map_err(vkerr("vkCreateBuffer"))?;
                let req = dev.get_buffer_memory_requirements(b);
                if req.memory_type_bits & (1 << self.mem_type) == 0 || req.size > *size {
                    return Err((3, format!("buffer {buf}: requirements {req:?}")));
                }
                self.bufs.insert(*buf, b);
            }
            Op::Bind {
                buf,
                mem,
                offset,
                v2,
            } => {
                let (b, m) = (self.bufs[buf], self.mems[mem].mem);
                let req = dev.get_buffer_memory_requirements(b);
                if offset % req.alignment != 0 || offset + req.size > self.mems[mem].size {
                    return Err((3, format!("bind of buffer {buf}: requirements {req:?}")));
                }
                if *v2 {
                    self.c("vkBindBufferMemory2");
                    let i = [vk::BindBufferMemoryInfo::default()
                        .buffer(b)
                        .memory(m)
                        .memory_offset(*offset)];
                    dev.bind_buffer_memory2(&i)
                        .map_err(vkerr("vkBindBufferMemory2"))?;
                } else {
                    self.c("vkBindBufferMemory");
                    dev.bind_buffer_memory(b, m, *offset)
                        .map_err(vkerr("vkBindBufferMemory"))?;
                }
            }
            Op::Destroy { buf } => {
                self.c("vkDestroyBuffer");
                dev.destroy_buffer(self.bufs.remove(buf).unwrap(), None);
            }
            Op::Image { img } => {
                self.c("vkCreateImage");
                let i = dev
                    .create_image(&image_info(), None)
                    .map_err(vkerr("vkCreateImage"))?;
                self.imgs.insert(*img, i);
            }
            Op::BindImage {
                img,
                mem,
                offset,
                v2,
            } => {
                let (i, m) = (self.imgs[img], self.mems[mem].mem);
                let req = dev.get_image_memory_requirements(i);
                if offset % req.alignment != 0 || offset + req.size > self.mems[mem].size {
                    return Err((3, format!("bind of image {img}: requirements {req:?}")));
                }
                if *v2 {
                    self.c("vkBindImageMemory2");
                    let b = [vk::BindImageMemoryInfo::default()
                        .image(i)
                        .memory(m)
                        .memory_offset(*offset)];
                    dev.bind_image_memory2(&b)
                        .map_err(vkerr("vkBindImageMemory2"))?;
                } else {
                    self.c("vkBindImageMemory");
                    dev.bind_image_memory(i, m, *offset)
                        .map_err(vkerr("vkBindImageMemory"))?;
                }
            }
            Op::DestroyImage { img } => {
                dev.destroy_image(self.imgs.remove(img).unwrap(), None);
            }
            Op::View {
                view,
                buf,
                offset,
                range,
            } => {
                let info = vk::BufferViewCreateInfo::default()
                    .buffer(self.bufs[buf])
                    .format(vk::Format::R32_UINT)
                    .offset(*offset)
                    .range(*range);
                self.c("vkCreateBufferView");
                let v = dev
                    .create_buffer_view(&info, None)
                    .map_err(vkerr("vkCreateBufferView"))?;
                self.views.insert(*view, v);
            }
            Op::DestroyView { view } => {
                self.c("vkDestroyBufferView");
                dev.destroy_buffer_view(self.views.remove(view).unwrap(), None);
            }
            Op::Map { mem, v2 } => {
                let memory = self.mems[mem].mem;
                let p = match (v2, &self.map2) {
                    (true, Some(m2)) => {
                        self.cover.insert("vkMapMemory2");
                        let info = vk::MemoryMapInfoKHR::default()
                            .memory(memory)
                            .size(vk::WHOLE_SIZE);
                        let mut p = std::ptr::null_mut();
                        (m2.fp().map_memory2_khr)(dev.handle(), &info, &mut p)
                            .result()
                            .map_err(vkerr("vkMapMemory2KHR"))?;
                        p
                    }
                    (true, None) => return Err((3, "no VK_KHR_map_memory2".into())),
                    (false, _) => {
                        self.c("vkMapMemory");
                        dev.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                            .map_err(vkerr("vkMapMemory"))?
                    }
                };
                self.mems.get_mut(mem).unwrap().map = Some(p as *mut u8);
            }
            Op::Unmap { mem, v2 } => {
                let m = self.mems.get_mut(mem).unwrap();
                m.map = None;
                let memory = m.mem;
                match (v2, &self.map2) {
                    (true, Some(m2)) => {
                        self.cover.insert("vkUnmapMemory2");
                        let info = vk::MemoryUnmapInfoKHR::default().memory(memory);
                        (m2.fp().unmap_memory2_khr)(dev.handle(), &info)
                            .result()
                            .map_err(vkerr("vkUnmapMemory2KHR"))?;
                    }
                    (true, None) => return Err((3, "no VK_KHR_map_memory2".into())),
                    (false, _) => {
                        self.c("vkUnmapMemory");
                        dev.unmap_memory(memory);
                    }
                }
            }
            Op::Flush { mem } | Op::Invalidate { mem } => {
                let r = [vk::MappedMemoryRange::default()
                    .memory(self.mems[mem].mem)
                    .size(vk::WHOLE_SIZE)];
                if matches!(op, Op::Flush { .. }) {
                    self.c("vkFlushMappedMemoryRanges");
                    dev.flush_mapped_memory_ranges(&r)
                        .map_err(vkerr("vkFlushMappedMemoryRanges"))?;
                } else {
                    self.c("vkInvalidateMappedMemoryRanges");
                    dev.invalidate_mapped_memory_ranges(&r)
                        .map_err(vkerr("vkInvalidateMappedMemoryRanges"))?;
                }
            }
            Op::Write {
                mem,
                offset,
                len,
                val,
            } => {
                let (p, temp) = self.mem_ptr(*mem)?;
                let words = p.add(*offset as usize) as *mut u32;
                for w in 0..(*len / 4) {
                    words
                        .add(w as usize)
                        .write_unaligned(pattern(*val, offset + w * 4));
                }
                self.unmap_after(*mem, temp);
            }
            Op::WriteIndirect {
                mem,
                offset,
                groups,
            } => {
                let (p, temp) = self.mem_ptr(*mem)?;
                let words = p.add(*offset as usize) as *mut u32;
                for (i, v) in [*groups, 1, 1].into_iter().enumerate() {
                    words.add(i).write_unaligned(v);
                }
                self.unmap_after(*mem, temp);
            }
            Op::Read { mem, offset, len } => {
                let (p, temp) = self.mem_ptr(*mem)?;
                let bytes = std::slice::from_raw_parts(p.add(*offset as usize), *len as usize);
                let h = fnv(bytes);
                self.digest.extend_from_slice(&h.to_le_bytes());
                self.lines.push(format!("r{idx} {len} {h:016x}"));
                self.unmap_after(*mem, temp);
            }
            Op::Set {
                set,
                kernel,
                uab,
                partial,
                vertex,
            } => {
                let kind = match (*uab, *partial) {
                    (true, true) => Kind::UabPartial,
                    (true, false) => Kind::Uab,
                    _ => Kind::Plain,
                };
                let layout = [self.pipe(*kernel, kind, *vertex)?.set_layout];
                let pool = if *uab {
                    self.dpool_uab
                        .ok_or((3, "no update-after-bind".to_string()))?
                } else {
                    self.dpool
                };
                self.c("vkAllocateDescriptorSets");
                let s = dev
                    .allocate_descriptor_sets(
                        &vk::DescriptorSetAllocateInfo::default()
                            .descriptor_pool(pool)
                            .set_layouts(&layout),
                    )
                    .map_err(vkerr("vkAllocateDescriptorSets"))?[0];
                self.sets.insert(*set, (s, *kernel, kind, *vertex));
            }
            Op::WriteSet { set, res, template } => {
                let (s, kernel, kind, gfx) = self.sets[set];
                let (bi, vi) = self.descriptors(res);
                if *template {
                    let t = self.template(kernel, kind, gfx)?;
                    self.c("vkUpdateDescriptorSetWithTemplate");
                    let data = if kernel == Kernel::Texel {
                        vi.as_ptr().cast()
                    } else {
                        bi.as_ptr().cast()
                    };
                    dev.update_descriptor_set_with_template(s, t, data);
                } else {
                    let writes = self.writes(kernel, s, &bi, &vi);
                    self.c("vkUpdateDescriptorSets");
                    dev.update_descriptor_sets(&writes, &[]);
                }
            }
            Op::Record {
                cb,
                cmds,
                secondary,
            } => {
                let c = match self.cbs.get(cb) {
                    Some(c) => *c,
                    None => {
                        self.c("vkAllocateCommandBuffers");
                        let c = dev
                            .allocate_command_buffers(
                                &vk::CommandBufferAllocateInfo::default()
                                    .command_pool(self.pool)
                                    .command_buffer_count(1),
                            )
                            .map_err(vkerr("vkAllocateCommandBuffers"))?[0];
                        self.cbs.insert(*cb, c);
                        c
                    }
                };
                self.c("vkBeginCommandBuffer");
                dev.begin_command_buffer(c, &vk::CommandBufferBeginInfo::default())
                    .map_err(vkerr("vkBeginCommandBuffer"))?;
                self.recording = 0;
                self.recording_query = 0;
                let mut j = 0;
                while j < cmds.len() {
                    let Some(r) = secondary.iter().position(|&[a, _]| a == j) else {
                        self.cmd(c, &cmds[j])?;
                        j += 1;
                        continue;
                    };
                    let end = secondary[r][1];
                    let s = self.secondary(c, r)?;
                    self.c("vkBeginCommandBuffer");
                    let inherit = vk::CommandBufferInheritanceInfo::default();
                    dev.begin_command_buffer(
                        s,
                        &vk::CommandBufferBeginInfo::default().inheritance_info(&inherit),
                    )
                    .map_err(vkerr("vkBeginCommandBuffer"))?;
                    for cmd in &cmds[j..end] {
                        self.cmd(s, cmd)?;
                    }
                    dev.end_command_buffer(s)
                        .map_err(vkerr("vkEndCommandBuffer"))?;
                    self.c("vkCmdExecuteCommands");
                    dev.cmd_execute_commands(c, &[s]);
                    j = end;
                }
                dev.end_command_buffer(c)
                    .map_err(vkerr("vkEndCommandBuffer"))?;
            }
            Op::Submit {
                cbs,
                fence,
                wait,
                signal,
                v2,
            } => self.submit(cbs, *fence, wait, signal, *v2)?,
            Op::Fence { fence } => {
                let f = dev
                    .create_fence(&vk::FenceCreateInfo::default(), None)
                    .map_err(vkerr("vkCreateFence"))?;
                self.fences.insert(*fence, f);
            }
            Op::Semaphore { sem, timeline } => {
                let mut t = vk::SemaphoreTypeCreateInfo::default()
                    .semaphore_type(vk::SemaphoreType::TIMELINE);
                let mut info = vk::SemaphoreCreateInfo::default();
                if *timeline {
                    info = info.push_next(&mut t);
                }
                let s = dev
                    .create_semaphore(&info, None)
                    .map_err(vkerr("vkCreateSemaphore"))?;
                self.sems.insert(*sem, (s, *timeline));
            }
            Op::WaitFence { fence } => {
                dev.wait_for_fences(&[self.fences[fence]], true, TIMEOUT_NS)
                    .map_err(|e| (2, format!("vkWaitForFences (op {idx}): {e}")))?;
            }
            Op::ResetFence { fence } => {
                dev.reset_fences(&[self.fences[fence]])
                    .map_err(vkerr("vkResetFences"))?;
            }
            Op::WaitSem { sem, value } => {
                let s = [self.sems[sem].0];
                let v = [*value];
                dev.wait_semaphores(
                    &vk::SemaphoreWaitInfo::default().semaphores(&s).values(&v),
                    TIMEOUT_NS,
                )
                .map_err(|e| (2, format!("vkWaitSemaphores (op {idx}): {e}")))?;
            }
            Op::QueueIdle => dev
                .queue_wait_idle(self.queue)
                .map_err(vkerr("vkQueueWaitIdle"))?,
            Op::DeviceIdle => dev.device_wait_idle().map_err(vkerr("vkDeviceWaitIdle"))?,
        }
        Ok(())
    }

    fn descriptors(&self, res: &[Res]) -> (Vec<vk::DescriptorBufferInfo>, Vec<vk::BufferView>) {
        let mut bi = vec![];
        let mut vi = vec![];
        for r in res {
            match *r {
                Res::Buf { buf, offset, range } => bi.push(vk::DescriptorBufferInfo {
                    buffer: self.bufs[&buf],
                    offset,
                    range,
                }),
                Res::View { view } => vi.push(self.views[&view]),
            }
        }
        (bi, vi)
    }

    fn writes<'a>(
        &self,
        kernel: Kernel,
        set: vk::DescriptorSet,
        bi: &'a [vk::DescriptorBufferInfo],
        vi: &'a [vk::BufferView],
    ) -> Vec<vk::WriteDescriptorSet<'a>> {
        kernel
            .bindings()
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let w = vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(desc_type(*b));
                if b.texel() {
                    w.texel_buffer_view(std::slice::from_ref(&vi[i]))
                } else {
                    w.buffer_info(std::slice::from_ref(&bi[i]))
                }
            })
            .collect()
    }

    /// The layouts and pipeline of a kernel: compute, or (`gfx`) for draws, its vertex shader in
    /// a monolithic graphics pipeline.
    fn pipe(&mut self, kernel: Kernel, kind: Kind, gfx: bool) -> Res2<&Pipe> {
        if !self.pipes.contains_key(&(kernel, kind, gfx)) {
            let p = unsafe { self.make_pipe(kernel, kind, gfx)? };
            self.pipes.insert((kernel, kind, gfx), p);
        }
        Ok(&self.pipes[&(kernel, kind, gfx)])
    }

    unsafe fn make_pipe(&mut self, kernel: Kernel, kind: Kind, gfx: bool) -> Res2<Pipe> {
        let dev = &self.dev;
        let shader_stage = if gfx {
            vk::ShaderStageFlags::VERTEX
        } else {
            vk::ShaderStageFlags::COMPUTE
        };
        let binds: Vec<vk::DescriptorSetLayoutBinding> = kernel
            .bindings()
            .iter()
            .enumerate()
            .map(|(i, b)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(desc_type(*b))
                    .descriptor_count(1)
                    .stage_flags(shader_stage)
            })
            .collect();
        let flag = if kind == Kind::UabPartial {
            vk::DescriptorBindingFlags::UPDATE_AFTER_BIND
                | vk::DescriptorBindingFlags::PARTIALLY_BOUND
        } else {
            vk::DescriptorBindingFlags::UPDATE_AFTER_BIND
        };
        let flags = vec![flag; binds.len()];
        let mut bf = vk::DescriptorSetLayoutBindingFlagsCreateInfo::default().binding_flags(&flags);
        let mut info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&binds);
        match kind {
            Kind::Push => {
                info = info.flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
            }
            Kind::Uab | Kind::UabPartial => {
                info = info
                    .flags(vk::DescriptorSetLayoutCreateFlags::UPDATE_AFTER_BIND_POOL)
                    .push_next(&mut bf)
            }
            Kind::Plain => {}
        }
        let set_layout = dev
            .create_descriptor_set_layout(&info, None)
            .map_err(vkerr("vkCreateDescriptorSetLayout"))?;
        let sl = [set_layout];
        let pc = [vk::PushConstantRange {
            stage_flags: shader_stage,
            offset: 0,
            size: 24,
        }];
        let mut li = vk::PipelineLayoutCreateInfo::default().push_constant_ranges(&pc);
        if kernel != Kernel::Addr {
            li = li.set_layouts(&sl);
        }
        let layout = dev
            .create_pipeline_layout(&li, None)
            .map_err(vkerr("vkCreatePipelineLayout"))?;
        if gfx {
            let pipeline = self.graphics(kernel, layout, None, false)?;
            return Ok(Pipe {
                set_layout,
                layout,
                pipeline,
                template: None,
                shader: None,
                lib: None,
                linked: None,
            });
        }
        let dev = &self.dev;
        let words = spirv(kernel)?;
        self.cover.insert("vkCreateShaderModule");
        self.cover.insert("vkDestroyShaderModule");
        let module = dev
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
            .map_err(vkerr("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        self.cover.insert("vkCreateComputePipelines");
        let pipeline = dev
            .create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .stage(stage)
                    .layout(layout)
                    .flags(vk::PipelineCreateFlags::DISPATCH_BASE)],
                None,
            )
            .map_err(|(_, e)| (2, format!("vkCreateComputePipelines: {e}")))?[0];
        dev.destroy_shader_module(module, None);
        Ok(Pipe {
            set_layout,
            layout,
            pipeline,
            template: None,
            shader: None,
            lib: None,
            linked: None,
        })
    }

    /// A draw's graphics pipeline over `layout`: `kernel`'s vertex shader and the point
    /// fragment shader, points, rendering without attachments. `library`: the
    /// pre-rasterization library (the vertex shader); `lib`: the pipeline linked from that
    /// library, naming only the fragment shader in its own pStages
    /// (VK_EXT_graphics_pipeline_library); neither: a monolithic pipeline.
    unsafe fn graphics(
        &mut self,
        kernel: Kernel,
        layout: vk::PipelineLayout,
        lib: Option<vk::Pipeline>,
        library: bool,
    ) -> Res2<vk::Pipeline> {
        let dev = self.dev.clone();
        let words = |spv: &[u8]| {
            ash::util::read_spv(&mut std::io::Cursor::new(spv))
                .map_err(|e| (2, format!("spv: {e}")))
        };
        let vs_words = words(match kernel {
            Kernel::Xform => SPV_VXFORM,
            Kernel::Inplace => SPV_VINPLACE,
            _ => return Err((2, format!("no vertex shader of {kernel:?}"))),
        })?;
        let fs_words = words(SPV_POINT)?;
        self.cover.insert("vkCreateShaderModule");
        self.cover.insert("vkDestroyShaderModule");
        let vs = dev
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&vs_words), None)
            .map_err(vkerr("vkCreateShaderModule"))?;
        let fs = dev
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&fs_words), None)
            .map_err(vkerr("vkCreateShaderModule"))?;
        let st = [
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::VERTEX)
                .module(vs)
                .name(c"main"),
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::FRAGMENT)
                .module(fs)
                .name(c"main"),
        ];
        let vi = vk::PipelineVertexInputStateCreateInfo::default();
        let ia = vk::PipelineInputAssemblyStateCreateInfo::default()
            .topology(vk::PrimitiveTopology::POINT_LIST);
        let vp = [vk::Viewport {
            x: 0.0,
            y: 0.0,
            width: 4.0,
            height: 4.0,
            min_depth: 0.0,
            max_depth: 1.0,
        }];
        let sc = [vk::Rect2D {
            offset: vk::Offset2D { x: 0, y: 0 },
            extent: vk::Extent2D {
                width: 4,
                height: 4,
            },
        }];
        let vps = vk::PipelineViewportStateCreateInfo::default()
            .viewports(&vp)
            .scissors(&sc);
        let rs = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
            .line_width(1.0);
        let ms = vk::PipelineMultisampleStateCreateInfo::default()
            .rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let ds = vk::PipelineDepthStencilStateCreateInfo::default();
        let cb = vk::PipelineColorBlendStateCreateInfo::default();
        let mut pri = vk::PipelineRenderingCreateInfo::default();
        self.cover.insert("vkCreateGraphicsPipelines");
        let made = if library {
            // The pre-rasterization library: the vertex shader.
            let mut gl = vk::GraphicsPipelineLibraryCreateInfoEXT::default()
                .flags(vk::GraphicsPipelineLibraryFlagsEXT::PRE_RASTERIZATION_SHADERS);
            let info = vk::GraphicsPipelineCreateInfo::default()
                .push_next(&mut gl)
                .push_next(&mut pri)
                .flags(vk::PipelineCreateFlags::LIBRARY_KHR)
                .stages(&st[..1])
                .viewport_state(&vps)
                .rasterization_state(&rs)
                .layout(layout);
            dev.create_graphics_pipelines(vk::PipelineCache::null(), &[info], None)
        } else if let Some(l) = lib {
            // The link: the library's vertex shader, its own fragment shader and the rest.
            let libs = [l];
            let mut li = vk::PipelineLibraryCreateInfoKHR::default().libraries(&libs);
            let mut gl = vk::GraphicsPipelineLibraryCreateInfoEXT::default().flags(
                vk::GraphicsPipelineLibraryFlagsEXT::VERTEX_INPUT_INTERFACE
                    | vk::GraphicsPipelineLibraryFlagsEXT::FRAGMENT_SHADER
                    | vk::GraphicsPipelineLibraryFlagsEXT::FRAGMENT_OUTPUT_INTERFACE,
            );
            let info = vk::GraphicsPipelineCreateInfo::default()
                .push_next(&mut gl)
                .push_next(&mut li)
                .push_next(&mut pri)
                .stages(&st[1..])
                .vertex_input_state(&vi)
                .input_assembly_state(&ia)
                .multisample_state(&ms)
                .depth_stencil_state(&ds)
                .color_blend_state(&cb)
                .layout(layout);
            dev.create_graphics_pipelines(vk::PipelineCache::null(), &[info], None)
        } else {
            let info = vk::GraphicsPipelineCreateInfo::default()
                .push_next(&mut pri)
                .stages(&st)
                .vertex_input_state(&vi)
                .input_assembly_state(&ia)
                .viewport_state(&vps)
                .rasterization_state(&rs)
                .multisample_state(&ms)
                .depth_stencil_state(&ds)
                .color_blend_state(&cb)
                .layout(layout);
            dev.create_graphics_pipelines(vk::PipelineCache::null(), &[info], None)
        };
        dev.destroy_shader_module(vs, None);
        dev.destroy_shader_module(fs, None);
        made.map(|p| p[0])
            .map_err(|(_, e)| (2, format!("vkCreateGraphicsPipelines: {e}")))
    }

    /// The pipeline of a draw of `kernel`: monolithic, or linked from a library.
    fn draw_pipeline(
        &mut self,
        kernel: Kernel,
        kind: Kind,
        linked: bool,
    ) -> Res2<(vk::Pipeline, vk::PipelineLayout)> {
        let (pipeline, layout) = {
            let p = self.pipe(kernel, kind, true)?;
            (p.pipeline, p.layout)
        };
        if !linked {
            return Ok((pipeline, layout));
        }
        if !self.caps.gpl {
            return Err((3, "no VK_EXT_graphics_pipeline_library".into()));
        }
        if let Some(l) = self.pipes[&(kernel, kind, true)].linked {
            return Ok((l, layout));
        }
        let lib = unsafe { self.graphics(kernel, layout, None, true)? };
        let l = unsafe { self.graphics(kernel, layout, Some(lib), false)? };
        let p = self.pipes.get_mut(&(kernel, kind, true)).unwrap();
        p.lib = Some(lib);
        p.linked = Some(l);
        Ok((l, layout))
    }

    /// The kernel as a shader object (VK_EXT_shader_object; SPIR-V code, the layout's set and
    /// push constants, dispatch base allowed).
    unsafe fn shader(&mut self, kernel: Kernel, kind: Kind) -> Res2<vk::ShaderEXT> {
        self.pipe(kernel, kind, false)?;
        if let Some(s) = self.pipes[&(kernel, kind, false)].shader {
            return Ok(s);
        }
        let so = self
            .shader_object
            .clone()
            .ok_or((3, "no VK_EXT_shader_object".to_string()))?;
        let words = spirv(kernel)?;
        let sl = [self.pipes[&(kernel, kind, false)].set_layout];
        let pc = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::COMPUTE,
            offset: 0,
            size: 24,
        }];
        let mut info = vk::ShaderCreateInfoEXT::default()
            .flags(vk::ShaderCreateFlagsEXT::DISPATCH_BASE)
            .stage(vk::ShaderStageFlags::COMPUTE)
            .code_type(vk::ShaderCodeTypeEXT::SPIRV)
            .code(bytemuck_words(&words))
            .name(c"main")
            .push_constant_ranges(&pc);
        if kernel != Kernel::Addr {
            info = info.set_layouts(&sl);
        }
        self.cover.insert("vkCreateShadersEXT");
        let s = so
            .create_shaders(&[info], None)
            .map_err(|(_, e)| (2, format!("vkCreateShadersEXT: {e}")))?[0];
        self.pipes.get_mut(&(kernel, kind, false)).unwrap().shader = Some(s);
        Ok(s)
    }

    /// The update template of a kernel's layout (push: of its push descriptors).
    fn template(
        &mut self,
        kernel: Kernel,
        kind: Kind,
        gfx: bool,
    ) -> Res2<vk::DescriptorUpdateTemplate> {
        self.pipe(kernel, kind, gfx)?;
        if let Some(t) = self.pipes[&(kernel, kind, gfx)].template {
            return Ok(t);
        }
        let p = &self.pipes[&(kernel, kind, gfx)];
        let texel = kernel == Kernel::Texel;
        let stride = if texel {
            std::mem::size_of::<vk::BufferView>()
        } else {
            std::mem::size_of::<vk::DescriptorBufferInfo>()
        };
        let entries: Vec<vk::DescriptorUpdateTemplateEntry> = kernel
            .bindings()
            .iter()
            .enumerate()
            .map(|(i, b)| vk::DescriptorUpdateTemplateEntry {
                dst_binding: i as u32,
                dst_array_element: 0,
                descriptor_count: 1,
                descriptor_type: desc_type(*b),
                offset: i * stride,
                stride,
            })
            .collect();
        let mut info = vk::DescriptorUpdateTemplateCreateInfo::default()
            .descriptor_update_entries(&entries)
            .template_type(vk::DescriptorUpdateTemplateType::DESCRIPTOR_SET)
            .descriptor_set_layout(p.set_layout);
        if kind == Kind::Push {
            info = info
                .template_type(vk::DescriptorUpdateTemplateType::PUSH_DESCRIPTORS_KHR)
                .pipeline_bind_point(if gfx {
                    vk::PipelineBindPoint::GRAPHICS
                } else {
                    vk::PipelineBindPoint::COMPUTE
                })
                .pipeline_layout(p.layout)
                .set(0);
        }
        self.cover.insert("vkCreateDescriptorUpdateTemplate");
        let t = unsafe { self.dev.create_descriptor_update_template(&info, None) }
            .map_err(vkerr("vkCreateDescriptorUpdateTemplate"))?;
        self.pipes.get_mut(&(kernel, kind, gfx)).unwrap().template = Some(t);
        Ok(t)
    }

    /// The secondary command buffer of run `r` of primary `c` (allocated at its first use).
    unsafe fn secondary(&mut self, c: vk::CommandBuffer, r: usize) -> Res2<vk::CommandBuffer> {
        if let Some(s) = self.secondaries.get(&(c, r)) {
            return Ok(*s);
        }
        let s = self
            .dev
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.pool)
                    .level(vk::CommandBufferLevel::SECONDARY)
                    .command_buffer_count(1),
            )
            .map_err(vkerr("vkAllocateCommandBuffers"))?[0];
        self.secondaries.insert((c, r), s);
        Ok(s)
    }

    unsafe fn submit(
        &mut self,
        cbs: &[u32],
        fence: Option<u32>,
        wait: &[SemRef],
        signal: &[SemRef],
        v2: bool,
    ) -> Res2<()> {
        let dev = self.dev.clone();
        let cb: Vec<vk::CommandBuffer> = cbs.iter().map(|c| self.cbs[c]).collect();
        let f = fence.map_or(vk::Fence::null(), |f| self.fences[&f]);
        let sem = |r: &SemRef| self.sems[&r.sem].0;
        if v2 {
            let ci: Vec<vk::CommandBufferSubmitInfo> = cb
                .iter()
                .map(|c| vk::CommandBufferSubmitInfo::default().command_buffer(*c))
                .collect();
            let wi: Vec<vk::SemaphoreSubmitInfo> = wait
                .iter()
                .map(|r| {
                    vk::SemaphoreSubmitInfo::default()
                        .semaphore(sem(r))
                        .value(r.value)
                        .stage_mask(vk::PipelineStageFlags2::from_raw(r.stage))
                })
                .collect();
            let si: Vec<vk::SemaphoreSubmitInfo> = signal
                .iter()
                .map(|r| {
                    vk::SemaphoreSubmitInfo::default()
                        .semaphore(sem(r))
                        .value(r.value)
                        .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
                })
                .collect();
            let info = [vk::SubmitInfo2::default()
                .command_buffer_infos(&ci)
                .wait_semaphore_infos(&wi)
                .signal_semaphore_infos(&si)];
            self.c("vkQueueSubmit2");
            dev.queue_submit2(self.queue, &info, f)
                .map_err(vkerr("vkQueueSubmit2"))?;
        } else {
            let ws: Vec<vk::Semaphore> = wait.iter().map(sem).collect();
            let wv: Vec<u64> = wait.iter().map(|r| r.value).collect();
            let wst: Vec<vk::PipelineStageFlags> = wait
                .iter()
                .map(|r| vk::PipelineStageFlags::from_raw(r.stage as u32))
                .collect();
            let ss: Vec<vk::Semaphore> = signal.iter().map(sem).collect();
            let sv: Vec<u64> = signal.iter().map(|r| r.value).collect();
            let mut tl = vk::TimelineSemaphoreSubmitInfo::default()
                .wait_semaphore_values(&wv)
                .signal_semaphore_values(&sv);
            let mut info = vk::SubmitInfo::default()
                .command_buffers(&cb)
                .wait_semaphores(&ws)
                .wait_dst_stage_mask(&wst)
                .signal_semaphores(&ss);
            if wait.iter().chain(signal).any(|r| self.sems[&r.sem].1) {
                info = info.push_next(&mut tl);
            }
            self.c("vkQueueSubmit");
            dev.queue_submit(self.queue, &[info], f)
                .map_err(vkerr("vkQueueSubmit"))?;
        }
        Ok(())
    }

    /// The commands [`Exec::finish`] will call that can reach memory (for the coverage).
    pub fn finish_names(&self) -> Vec<&'static str> {
        let mut v = vec![];
        if !self.views.is_empty() {
            v.push("vkDestroyBufferView");
        }
        if self.pipes.values().any(|p| p.template.is_some()) {
            v.push("vkDestroyDescriptorUpdateTemplate");
        }
        if !self.pipes.is_empty() {
            v.push("vkDestroyPipeline");
        }
        if self.queries.is_some() {
            v.push("vkDestroyQueryPool");
        }
        if !self.bufs.is_empty() {
            v.push("vkDestroyBuffer");
        }
        if !self.mems.is_empty() {
            v.push("vkFreeMemory");
        }
        v
    }

    /// Everything destroyed (the layer's end-of-device paths run).
    pub unsafe fn finish(self) {
        let dev = &self.dev;
        let _ = dev.device_wait_idle();
        for (_, p) in self.pipes {
            if let Some(t) = p.template {
                dev.destroy_descriptor_update_template(t, None);
            }
            if let (Some(s), Some(so)) = (p.shader, &self.shader_object) {
                so.destroy_shader(s, None);
            }
            for l in [p.linked, p.lib].into_iter().flatten() {
                dev.destroy_pipeline(l, None);
            }
            dev.destroy_pipeline(p.pipeline, None);
            dev.destroy_pipeline_layout(p.layout, None);
            dev.destroy_descriptor_set_layout(p.set_layout, None);
        }
        dev.destroy_descriptor_pool(self.dpool, None);
        if let Some(p) = self.dpool_uab {
            dev.destroy_descriptor_pool(p, None);
        }
        dev.destroy_command_pool(self.pool, None);
        for (_, v) in self.views {
            dev.destroy_buffer_view(v, None);
        }
        for (_, b) in self.bufs {
            dev.destroy_buffer(b, None);
        }
        for (_, i) in self.imgs {
            dev.destroy_image(i, None);
        }
        for (_, m) in self.mems {
            dev.free_memory(m.mem, None);
        }
        for (_, f) in self.fences {
            dev.destroy_fence(f, None);
        }
        for (_, (s, _)) in self.sems {
            dev.destroy_semaphore(s, None);
        }
        for e in self.cb_events.into_values().flatten() {
            dev.destroy_event(e, None);
        }
        if let Some((q, _)) = self.queries {
            dev.destroy_query_pool(q, None);
        }
        let _ = self.qf;
        dev.destroy_device(None);
        self.instance.destroy_instance(None);
    }
}

/// A kernel's SPIR-V words.
fn spirv(kernel: Kernel) -> Res2<Vec<u32>> {
    let spv = match kernel {
        Kernel::Xform => SPV_XFORM,
        Kernel::Inplace => SPV_INPLACE,
        Kernel::Uniform => SPV_UNIFORM,
        Kernel::Texel => SPV_TEXEL,
        Kernel::Addr => SPV_ADDR,
    };
    ash::util::read_spv(&mut std::io::Cursor::new(spv)).map_err(|e| (2, format!("spv: {e}")))
}

/// SPIR-V words as the bytes VkShaderCreateInfoEXT takes.
fn bytemuck_words(words: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding; the slice covers exactly the words' bytes.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), std::mem::size_of_val(words)) }
}

/// The first physical device's API version and extensions (the coverage's "the driver has").
pub unsafe fn device_info() -> Res2<(u32, Vec<String>)> {
    let entry = ash::Entry::load().map_err(|e| (2, format!("loader: {e}")))?;
    let app = vk::ApplicationInfo::default()
        .application_name(c"echo-fuzzprog")
        .api_version(vk::API_VERSION_1_3);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .map_err(vkerr("vkCreateInstance"))?;
    let pd = *instance
        .enumerate_physical_devices()
        .map_err(vkerr("vkEnumeratePhysicalDevices"))?
        .first()
        .ok_or((3, "no physical device".to_string()))?;
    let api = instance.get_physical_device_properties(pd).api_version;
    let exts = instance
        .enumerate_device_extension_properties(pd)
        .map_err(vkerr("vkEnumerateDeviceExtensionProperties"))?
        .iter()
        .filter_map(|e| e.extension_name_as_c_str().ok())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    instance.destroy_instance(None);
    Ok((api, exts))
}

fn image_info() -> vk::ImageCreateInfo<'static> {
    vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(vk::Format::R32_UINT)
        .extent(vk::Extent3D {
            width: IMAGE_W,
            height: IMAGE_H,
            depth: 1,
        })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST)
        .initial_layout(vk::ImageLayout::UNDEFINED)
}

fn color_range() -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: 1,
    }
}
