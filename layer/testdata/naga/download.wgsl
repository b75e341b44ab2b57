// A download kernel as a generated framework writes it: the result binding is never read and
// never says so (`read_write`, no NonReadable).
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    dst[id.x] = src[id.x] * 2.0;
}
