#version 450
// vkecho selftest, workload `race`: dst = src * a + b over 32-bit words (wrapping integer
// arithmetic), grid-stride loop.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) writeonly buffer D { uint dst[]; };
layout(push_constant) uniform P { uint a; uint b; uint n; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        dst[i] = src[i] * p.a + p.b;
    }
}
