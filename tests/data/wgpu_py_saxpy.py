# A wgpu-py compute program in the usual style: upload with queue.write_buffer (wgpu stages it),
# dispatch, read back with copy_buffer_to_buffer into a MAP_READ buffer. Prints a checksum.
import sys, hashlib, numpy as np, wgpu
n = int(sys.argv[1]) if len(sys.argv) > 1 else (4 << 20) // 4
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 4
adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
dev = adapter.request_device_sync()
shader = dev.create_shader_module(code="""
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
  if (i.x < arrayLength(&y)) { y[i.x] = 2.0 * x[i.x] + y[i.x]; }
}""")
U = wgpu.BufferUsage
bx = dev.create_buffer(size=n*4, usage=U.STORAGE | U.COPY_DST)
by = dev.create_buffer(size=n*4, usage=U.STORAGE | U.COPY_DST | U.COPY_SRC)
rb = dev.create_buffer(size=n*4, usage=U.MAP_READ | U.COPY_DST)
pipe = dev.create_compute_pipeline(layout="auto", compute={"module": shader, "entry_point": "main"})
bg = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
    {"binding": 0, "resource": {"buffer": bx}}, {"binding": 1, "resource": {"buffer": by}}])
h = hashlib.sha256()
for it in range(iters):
    rng = np.random.default_rng(it)
    dev.queue.write_buffer(bx, 0, rng.random(n, dtype=np.float32))
    dev.queue.write_buffer(by, 0, rng.random(n, dtype=np.float32))
    enc = dev.create_command_encoder()
    p = enc.begin_compute_pass(); p.set_pipeline(pipe); p.set_bind_group(0, bg); p.dispatch_workgroups((n + 63) // 64); p.end()
    enc.copy_buffer_to_buffer(by, 0, rb, 0, n*4)
    dev.queue.submit([enc.finish()])
    rb.map_sync(wgpu.MapMode.READ); h.update(rb.read_mapped()); rb.unmap()
print("checksum", h.hexdigest()[:16], "adapter", adapter.info["device"])
