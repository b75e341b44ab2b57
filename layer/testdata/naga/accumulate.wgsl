// Reads and writes its result binding (`+=`); writes a third through a helper's return value
// (naga's WGSL has no pointer parameters into storage: `unrestricted_pointer_parameters` is
// not supported in naga 30); asks a fourth only its length; an atomic counter.
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> acc: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> sized: array<f32>;
@group(1) @binding(0) var<storage, read_write> counter: atomic<u32>;

fn scaled(v: f32) -> f32 {
    return v * 0.5;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&sized);
    acc[id.x] += src[id.x];
    out[id.x] = scaled(f32(n));
    atomicAdd(&counter, 1u);
}
