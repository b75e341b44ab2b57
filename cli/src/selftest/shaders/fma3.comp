#version 450
// vkecho selftest, workload `suballoc`: o = a * b + c over 32-bit words (wrapping integer
// arithmetic), grid-stride loop.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer B { uint b[]; };
layout(std430, binding = 2) readonly buffer C { uint c[]; };
layout(std430, binding = 3) writeonly buffer O { uint o[]; };
layout(push_constant) uniform P { uint n; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        o[i] = a[i] * b[i] + c[i];
    }
}
