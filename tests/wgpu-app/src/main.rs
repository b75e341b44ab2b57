//! `echo-wgpu-app`: issue 6's third-party program. A small compute program written against wgpu
//! (crates.io), not against Vulkan: nothing in it knows about VK_LAYER_echo. Its Vulkan calls are
//! whatever wgpu-core/wgpu-hal and gpu-allocator make of it (staging buffers for
//! `Queue::write_buffer`, suballocated memory blocks, a pending-writes command buffer).
//!
//! Per iteration:
//! - `Queue::write_buffer` uploads `x`, `y` (seeded, different every iteration) and a small
//!   uniform (`a`, `n`, iteration);
//! - one compute pass: `out[i] = a * x[i] + y[i]`, then a little integer mixing of the result's
//!   bits with `i` and the iteration, so a stale or misplaced byte shows in the checksum;
//! - `copy_buffer_to_buffer(out → readback)` (`MAP_READ | COPY_DST`), `map_async` + `poll(Wait)`,
//!   every byte folded into an FNV-1a 64 checksum, unmap.
//!
//! stdout: one JSON line `{"app":"wgpu","size_bytes","iters","checksum","iter_ms_median"}`;
//! diagnostics go to stderr. Exits 2 when there is no Vulkan adapter, 1 on any other failure.

use std::time::Instant;

const SHADER: &str = r#"
struct Params {
    a: f32,
    n: u32,
    iter: u32,
    row: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row;
    if (i >= p.n) {
        return;
    }
    let v = p.a * x[i] + y[i];
    var h = bitcast<u32>(v) ^ (i * 0x9e3779b9u) ^ (p.iter * 0x85ebca6bu);
    h = (h ^ (h >> 15u)) * 0x2c1b3c6du;
    out[i] = h ^ (h >> 12u);
}
"#;

const WORKGROUP: u64 = 256;
const MAX_GROUPS_X: u64 = 65535;

struct Args {
    size_bytes: u64,
    iters: u32,
    seed: u64,
    /// The negative twin: a readback buffer of two slots, the result copied into the other
    /// slot every iteration (double-buffered readback); same output.
    ring: bool,
    /// The zero-copy twin: the shader's output buffer is mapped and read directly (wgpu's
    /// `MAPPABLE_PRIMARY_BUFFERS`), no copy into a readback buffer; same output.
    zero: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: echo-wgpu-app [--size-mib N | --size-kib N] [--iters N] [--seed N] [--ring | --zero]\n\
         \x20 --size-mib N   bytes of x, y and the output each (default 4)\n\
         \x20 --size-kib N   the same in KiB (multiple of 4)\n\
         \x20 --iters N      iterations (default 5)\n\
         \x20 --seed N       input seed (default 1)\n\
         \x20 --ring         read back through two alternating slots of one buffer (a pair\n\
         \x20                echo must refuse: no single overlap keeps both slots)\n\
         \x20 --zero         the zero-copy twin: map and read the output buffer itself\n\
         \x20                (needs MAPPABLE_PRIMARY_BUFFERS), no readback copy"
    );
    std::process::exit(64);
}

fn parse_args() -> Args {
    let mut a = Args {
        size_bytes: 4 << 20,
        iters: 5,
        seed: 1,
        ring: false,
        zero: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage())
        };
        match flag.as_str() {
            "--size-mib" => a.size_bytes = num() << 20,
            "--size-kib" => a.size_bytes = num() << 10,
            "--iters" => a.iters = num() as u32,
            "--seed" => a.seed = num(),
            "--ring" => a.ring = true,
            "--zero" => a.zero = true,
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("echo-wgpu-app: unknown argument {flag:?}");
                usage()
            }
        }
    }
    if a.ring && a.zero {
        eprintln!("echo-wgpu-app: --ring and --zero exclude each other");
        usage();
    }
    if a.size_bytes == 0 || !a.size_bytes.is_multiple_of(4) || a.iters == 0 {
        eprintln!("echo-wgpu-app: size must be a positive multiple of 4 bytes, iters positive");
        usage();
    }
    a
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` floats in [-1, 1), a function of (seed, iteration, stream) only.
fn inputs(seed: u64, iter: u32, stream: u64, n: usize) -> Vec<u8> {
    let base = splitmix64(seed ^ (u64::from(iter) << 32) ^ (stream << 60));
    let mut bytes = Vec::with_capacity(n * 4);
    for i in 0..n as u64 {
        let r = splitmix64(base.wrapping_add(i));
        let f = (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        bytes.extend_from_slice(&f.to_le_bytes());
    }
    bytes
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn fold(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn run(args: &Args) -> Result<(), (i32, String)> {
    let fail = |e: String| (1, e);
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::VULKAN,
        // No wgpu-requested validation or debug labels: the environment decides the layers.
        flags: wgpu::InstanceFlags::empty(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        ..Default::default()
    }))
    .map_err(|e| {
        (
            2,
            format!(
                "no Vulkan adapter ({e}); is a Vulkan driver (e.g. mesa-vulkan-drivers) installed?"
            ),
        )
    })?;
    let info = adapter.get_info();
    eprintln!(
        "echo-wgpu-app: wgpu adapter {:?} ({:?}, {:?}, driver {:?} {:?})",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    );
    let limits = adapter.limits();
    if args.size_bytes > limits.max_storage_buffer_binding_size as u64
        || args.size_bytes > limits.max_buffer_size
    {
        return Err(fail(format!(
            "size {} exceeds the adapter's storage binding limit {} / buffer limit {}",
            args.size_bytes, limits.max_storage_buffer_binding_size, limits.max_buffer_size
        )));
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("echo-wgpu-app"),
        required_features: if args.zero {
            wgpu::Features::MAPPABLE_PRIMARY_BUFFERS
        } else {
            wgpu::Features::empty()
        },
        required_limits: limits,
        ..Default::default()
    }))
    .map_err(|e| fail(format!("request_device: {e}")))?;
    device.on_uncaptured_error(std::sync::Arc::new(|e| {
        eprintln!("echo-wgpu-app: wgpu error: {e}");
        std::process::exit(1);
    }));

    let size = args.size_bytes;
    let n = (size / 4) as usize;
    let storage = |label, usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let in_usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
    let x = storage("x", in_usage);
    let y = storage("y", in_usage);
    let out = storage(
        "out",
        if args.zero {
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::MAP_READ
        } else {
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC
        },
    );
    let slots = if args.ring { 2 } else { 1 };
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: size * slots,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let params = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("params"),
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("saxpy-mix"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("bgl"),
        entries: &[
            storage_entry(0, true),
            storage_entry(1, true),
            storage_entry(2, false),
            wgpu::BindGroupLayoutEntry {
                binding: 3,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
        ],
    });
    let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("layout"),
        bind_group_layouts: &[Some(&bgl)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("saxpy-mix"),
        layout: Some(&layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("bg"),
        layout: &bgl,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: x.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: y.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: out.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: params.as_entire_binding(),
            },
        ],
    });

    let groups = (n as u64).div_ceil(WORKGROUP);
    let (gx, gy) = if groups <= MAX_GROUPS_X {
        (groups as u32, 1u32)
    } else {
        (MAX_GROUPS_X as u32, groups.div_ceil(MAX_GROUPS_X) as u32)
    };
    let row = gx * WORKGROUP as u32;

    let mut fnv = Fnv::new();
    let mut times = Vec::with_capacity(args.iters as usize);
    for iter in 0..args.iters {
        let xs = inputs(args.seed, iter, 1, n);
        let ys = inputs(args.seed, iter, 2, n);
        let a = 0.5f32 + iter as f32 * 0.25;
        let mut p = Vec::with_capacity(16);
        p.extend_from_slice(&a.to_le_bytes());
        p.extend_from_slice(&(n as u32).to_le_bytes());
        p.extend_from_slice(&iter.to_le_bytes());
        p.extend_from_slice(&row.to_le_bytes());

        let t0 = Instant::now();
        queue.write_buffer(&x, 0, &xs);
        queue.write_buffer(&y, 0, &ys);
        queue.write_buffer(&params, 0, &p);
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("iteration"),
        });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("saxpy-mix"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        let slot = (u64::from(iter) % slots) * size;
        if !args.zero {
            enc.copy_buffer_to_buffer(&out, 0, &readback, slot, size);
        }
        // What the host reads: the readback buffer, or in the twin the output itself.
        let (read, slot) = if args.zero {
            (&out, 0)
        } else {
            (&readback, slot)
        };
        queue.submit([enc.finish()]);

        let (tx, rx) = std::sync::mpsc::channel();
        read.map_async(wgpu::MapMode::Read, slot..slot + size, move |r| {
            let _ = tx.send(r);
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| fail(format!("poll: {e}")))?;
        rx.recv()
            .map_err(|_| fail("map_async callback never ran".into()))?
            .map_err(|e| fail(format!("map_async: {e}")))?;
        let elapsed = {
            let view = read
                .get_mapped_range(slot..slot + size)
                .map_err(|e| fail(format!("get_mapped_range: {e}")))?;
            // The host's read of the result is part of the iteration; folding is not.
            let mut sink = 0u32;
            for c in view.chunks_exact(4096) {
                sink = sink.wrapping_add(u32::from(c[0]));
            }
            std::hint::black_box(sink);
            let elapsed = t0.elapsed();
            fnv.fold(&view);
            elapsed
        };
        read.unmap();
        times.push(elapsed.as_secs_f64() * 1e3);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = if times.len() % 2 == 1 {
        times[times.len() / 2]
    } else {
        (times[times.len() / 2 - 1] + times[times.len() / 2]) / 2.0
    };
    println!(
        "{{\"app\":\"wgpu\",\"size_bytes\":{},\"iters\":{},\"checksum\":\"{:016x}\",\"iter_ms_median\":{:.4}}}",
        size, args.iters, fnv.0, median
    );
    Ok(())
}

fn main() {
    let args = parse_args();
    if let Err((code, msg)) = run(&args) {
        eprintln!("echo-wgpu-app: error: {msg}");
        std::process::exit(code);
    }
}
