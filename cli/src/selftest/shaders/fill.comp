#version 450
// vkecho selftest, workload `early-read`: d[i] = a hash of (seed, i), grid-stride loop.
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer D { uint d[]; };
layout(push_constant) uniform P { uint seed; uint n; } p;

uint hash(uint x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        d[i] = hash(i ^ p.seed);
    }
}
