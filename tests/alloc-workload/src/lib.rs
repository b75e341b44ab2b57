//! The c_suballoc workload (issue 12) in ash, shared by `echo-gpu-allocator`
//! (tests/gpu-allocator-app) and `echo-vma` (tests/vma-app): each program creates the device
//! through [`Gpu::open`], makes its four buffers with its allocator (usages from [`usages`]) and
//! hands them to [`run`] with a [`Host`] that writes the input and reads the output through its
//! allocator's mappings.
//!
//! Each iteration: copy h -> d (submit, wait), dispatch d -> o and copy o -> r (submit, wait),
//! fold r into the checksum, write the next input into h. `race`: the next input is written while
//! the second submission (which reads d, not h) is in flight — legal as written, wrong once h and
//! d share memory (S2). `zero` is the zero-copy twin (the bound for what echo can recover, as
//! `c_suballoc zero`): h and r are storage buffers too, and one submission per iteration
//! dispatches h -> r; same output. The shader is the C corpus's `c_double.comp` compiled for
//! Vulkan 1.0: SPV, else `$ECHO_C_SPV` (as for tests/c).

use ash::vk;

/// Bytes per buffer: 4 MiB, or `$ECHO_SIZE_MIB` MiB (bench/allocators.sh uses larger buffers than
/// the tests): 1 to 15, as one dispatch of 64-invocation groups covers at most
/// `maxComputeWorkGroupCount[0]` = 65535 groups (lavapipe), just under 16 MiB.
pub fn size() -> u64 {
    static SIZE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        let mib = std::env::var("ECHO_SIZE_MIB").map_or(4, |v| {
            v.parse()
                .ok()
                .filter(|&m| (1..=15).contains(&m))
                .unwrap_or_else(|| {
                    eprintln!("bad ECHO_SIZE_MIB {v}");
                    std::process::exit(1)
                })
        });
        mib << 20
    })
}

/// FNV-1a over 64-bit words, each product rotated so that high bits reach the low ones (not
/// byte by byte: the fold must not dwarf the copies being measured); the same in every mode, so
/// outputs compare byte for byte.
pub fn fnv1a(mut h: u64, data: &[u8]) -> u64 {
    let (pre, words, post) = unsafe { data.align_to::<u64>() };
    assert!(pre.is_empty() && post.is_empty(), "whole, aligned words");
    for &w in words {
        h ^= w;
        h = h.wrapping_mul(0x100000001b3).rotate_left(27);
    }
    h
}

/// Iteration `seed`'s input: word i = seed * 2654435761 + i * 7 (c_suballoc's pattern), written
/// as whole words, not byte by byte.
pub fn fill(words: &mut [u32], seed: u32) {
    let base = seed.wrapping_mul(2654435761);
    for (i, w) in words.iter_mut().enumerate() {
        *w = base.wrapping_add((i as u32).wrapping_mul(7));
    }
}

unsafe fn barrier(
    dev: &ash::Device,
    cmd: vk::CommandBuffer,
    buf: vk::Buffer,
    (src, dst): (vk::AccessFlags, vk::AccessFlags),
    (ss, ds): (vk::PipelineStageFlags, vk::PipelineStageFlags),
) {
    let b = vk::BufferMemoryBarrier::default()
        .src_access_mask(src)
        .dst_access_mask(dst)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .buffer(buf)
        .size(vk::WHOLE_SIZE);
    dev.cmd_pipeline_barrier(cmd, ss, ds, vk::DependencyFlags::empty(), &[], &[b], &[]);
}

#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    Loop,
    Race,
    Zero,
}

/// `PROG loop|race|zero ITERS [SPV]`: the mode, the iteration count and the shader's SPIR-V;
/// exits with a message on bad arguments.
pub fn args(prog: &str) -> (Mode, u32, Vec<u8>) {
    let args: Vec<String> = std::env::args().collect();
    let mode = match args.get(1).map(String::as_str) {
        Some("loop") => Mode::Loop,
        Some("race") => Mode::Race,
        Some("zero") => Mode::Zero,
        _ => {
            eprintln!("usage: {prog} loop|race|zero ITERS [SPV]");
            std::process::exit(1);
        }
    };
    let iters: u32 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .filter(|&n| (1..=1000).contains(&n))
        .unwrap_or_else(|| {
            eprintln!("bad iteration count");
            std::process::exit(1)
        });
    let spv = args
        .get(3)
        .cloned()
        .or_else(|| std::env::var("ECHO_C_SPV").ok())
        .unwrap_or_else(|| {
            eprintln!("usage: pass the SPIR-V path of c_double.comp or set ECHO_C_SPV");
            std::process::exit(1)
        });
    let code = std::fs::read(&spv).unwrap_or_else(|e| {
        eprintln!("cannot read {spv}: {e}");
        std::process::exit(1)
    });
    (mode, iters, code)
}

/// The instance, device and compute queue the workload runs on.
pub struct Gpu {
    // Loaded as long as the instance lives.
    _entry: ash::Entry,
    pub inst: ash::Instance,
    pub phys: vk::PhysicalDevice,
    pub family: u32,
    pub dev: ash::Device,
    pub queue: vk::Queue,
}

impl Gpu {
    /// Loads Vulkan and creates an instance and a device with one compute queue.
    ///
    /// # Safety
    /// As `ash::Entry::load`; panics when there is no Vulkan or no compute queue.
    pub unsafe fn open() -> Gpu {
        let entry = ash::Entry::load().expect("libvulkan");
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let inst = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .expect("vkCreateInstance");
        let phys = inst.enumerate_physical_devices().expect("devices")[0];
        let family = inst
            .get_physical_device_queue_family_properties(phys)
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .expect("a compute queue") as u32;
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let dev = inst
            .create_device(
                phys,
                &vk::DeviceCreateInfo::default().queue_create_infos(&qci),
                None,
            )
            .expect("vkCreateDevice");
        let queue = dev.get_device_queue(family, 0);
        Gpu {
            _entry: entry,
            inst,
            phys,
            family,
            dev,
            queue,
        }
    }

    /// Destroys the device and the instance.
    ///
    /// # Safety
    /// Everything made on the device (the allocator, its buffers) is gone.
    pub unsafe fn close(self) {
        self.dev.destroy_device(None);
        self.inst.destroy_instance(None);
    }
}

/// The usages of h (upload), d (input), o (output) and r (readback): the zero-copy twin's shader
/// reads h and writes r.
pub fn usages(mode: Mode) -> [vk::BufferUsageFlags; 4] {
    use vk::BufferUsageFlags as U;
    let staging = if mode == Mode::Zero {
        U::STORAGE_BUFFER
    } else {
        U::empty()
    };
    [
        U::TRANSFER_SRC | staging,
        U::TRANSFER_DST | U::STORAGE_BUFFER,
        U::TRANSFER_SRC | U::STORAGE_BUFFER,
        U::TRANSFER_DST | staging,
    ]
}

/// The host's side of the staging buffers, through the allocator's mappings: [`run`] calls these
/// only while no submission touches the buffer they touch.
pub trait Host {
    /// Writes iteration `seed`'s input ([`fill`]) into h.
    ///
    /// # Safety
    /// No submission reads h meanwhile.
    unsafe fn write_input(&mut self, seed: u32);
    /// r's first [`size`] bytes, as the GPU left them.
    ///
    /// # Safety
    /// The submission that wrote r has finished, and none writes it meanwhile.
    unsafe fn output(&mut self) -> &[u8];
}

/// The workload over the buffers h, d, o, r (bound, each [`size`] bytes): prints the iteration
/// count and the checksum, and destroys all it made (not the buffers).
///
/// # Safety
/// The buffers are `gpu`'s, bound, each [`size`] bytes, with [`usages`]`(mode)`; `spv` is
/// `c_double.comp`'s SPIR-V.
pub unsafe fn run(
    gpu: &Gpu,
    mode: Mode,
    iters: u32,
    spv: &[u8],
    bufs: [vk::Buffer; 4],
    host: &mut impl Host,
) {
    let (race, zero) = (mode == Mode::Race, mode == Mode::Zero);
    let (dev, family, queue) = (&gpu.dev, gpu.family, gpu.queue);
    let [h, d, o, r] = bufs;

    // Pipeline: c_double.comp, binding 0 = d, binding 1 = o, push constant = iteration.
    let code: Vec<u32> = spv
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let module = dev
        .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
        .expect("shader");
    let bindings: Vec<_> = (0..2)
        .map(|i| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(i)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect();
    let set_layout = dev
        .create_descriptor_set_layout(
            &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
            None,
        )
        .expect("set layout");
    let pcr = [vk::PushConstantRange::default()
        .stage_flags(vk::ShaderStageFlags::COMPUTE)
        .size(4)];
    let layouts = [set_layout];
    let layout = dev
        .create_pipeline_layout(
            &vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&layouts)
                .push_constant_ranges(&pcr),
            None,
        )
        .expect("pipeline layout");
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(c"main");
    let pipe = dev
        .create_compute_pipelines(
            vk::PipelineCache::null(),
            &[vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)],
            None,
        )
        .expect("pipeline")[0];
    let sizes = [vk::DescriptorPoolSize::default()
        .ty(vk::DescriptorType::STORAGE_BUFFER)
        .descriptor_count(2)];
    let pool = dev
        .create_descriptor_pool(
            &vk::DescriptorPoolCreateInfo::default()
                .max_sets(1)
                .pool_sizes(&sizes),
            None,
        )
        .expect("descriptor pool");
    let set = dev
        .allocate_descriptor_sets(
            &vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pool)
                .set_layouts(&layouts),
        )
        .expect("descriptor set")[0];
    let infos = if zero { [h, r] } else { [d, o] }.map(|b| {
        [vk::DescriptorBufferInfo::default()
            .buffer(b)
            .range(vk::WHOLE_SIZE)]
    });
    let writes: Vec<_> = (0..2)
        .map(|i| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(i as u32)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&infos[i])
        })
        .collect();
    dev.update_descriptor_sets(&writes, &[]);

    let cmd_pool = dev
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
                .queue_family_index(family),
            None,
        )
        .expect("command pool");
    let cmds = dev
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(cmd_pool)
                .command_buffer_count(2),
        )
        .expect("command buffers");
    let fence = dev
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .expect("fence");
    let begin = |c: vk::CommandBuffer| {
        dev.reset_command_buffer(c, vk::CommandBufferResetFlags::empty())
            .expect("reset");
        dev.begin_command_buffer(
            c,
            &vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
        )
        .expect("begin");
    };
    let submit = |c: vk::CommandBuffer| {
        let cs = [c];
        dev.reset_fences(&[fence]).expect("reset fence");
        dev.queue_submit(
            queue,
            &[vk::SubmitInfo::default().command_buffers(&cs)],
            fence,
        )
        .expect("submit");
    };
    let wait = || dev.wait_for_fences(&[fence], true, u64::MAX).expect("wait");
    // The shader over the whole buffer, iteration `it` as its push constant.
    let dispatch = |c: vk::CommandBuffer, it: u32| {
        dev.cmd_bind_pipeline(c, vk::PipelineBindPoint::COMPUTE, pipe);
        dev.cmd_bind_descriptor_sets(c, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
        dev.cmd_push_constants(
            c,
            layout,
            vk::ShaderStageFlags::COMPUTE,
            0,
            &it.to_ne_bytes(),
        );
        dev.cmd_dispatch(c, (size() / 4 / 64) as u32, 1, 1);
    };

    use vk::AccessFlags as A;
    use vk::PipelineStageFlags as P;
    let region = [vk::BufferCopy::default().size(size())];
    let mut checksum = 0xcbf29ce484222325u64;
    host.write_input(1);
    for it in 0..iters {
        if zero {
            // One submission: the shader reads h and writes r.
            let c = cmds[1];
            begin(c);
            dispatch(c, it);
            barrier(
                dev,
                c,
                r,
                (A::SHADER_WRITE, A::HOST_READ),
                (P::COMPUTE_SHADER, P::HOST),
            );
            dev.end_command_buffer(c).expect("end");
            submit(c);
            wait();
            host.write_input(it + 2);
            checksum = fnv1a(checksum, host.output());
            continue;
        }
        begin(cmds[0]);
        barrier(
            dev,
            cmds[0],
            d,
            (A::SHADER_READ, A::TRANSFER_WRITE),
            (P::COMPUTE_SHADER, P::TRANSFER),
        );
        dev.cmd_copy_buffer(cmds[0], h, d, &region);
        dev.end_command_buffer(cmds[0]).expect("end");
        submit(cmds[0]);
        wait();

        let c = cmds[1];
        begin(c);
        barrier(
            dev,
            c,
            d,
            (A::TRANSFER_WRITE, A::SHADER_READ),
            (P::TRANSFER, P::COMPUTE_SHADER),
        );
        barrier(
            dev,
            c,
            o,
            (A::TRANSFER_READ, A::SHADER_WRITE),
            (P::TRANSFER, P::COMPUTE_SHADER),
        );
        dispatch(c, it);
        barrier(
            dev,
            c,
            o,
            (A::SHADER_WRITE, A::TRANSFER_READ),
            (P::COMPUTE_SHADER, P::TRANSFER),
        );
        dev.cmd_copy_buffer(c, o, r, &region);
        barrier(
            dev,
            c,
            r,
            (A::TRANSFER_WRITE, A::HOST_READ),
            (P::TRANSFER, P::HOST),
        );
        dev.end_command_buffer(c).expect("end");
        submit(c);
        if race {
            host.write_input(it + 2); // the GPU reads d now, not h: legal as written
        }
        wait();
        if !race {
            host.write_input(it + 2);
        }
        checksum = fnv1a(checksum, host.output());
    }
    println!("iterations {iters}\nchecksum {checksum:016x}");

    dev.destroy_fence(fence, None);
    dev.destroy_command_pool(cmd_pool, None);
    dev.destroy_descriptor_pool(pool, None);
    dev.destroy_pipeline(pipe, None);
    dev.destroy_pipeline_layout(layout, None);
    dev.destroy_descriptor_set_layout(set_layout, None);
    dev.destroy_shader_module(module, None);
}
