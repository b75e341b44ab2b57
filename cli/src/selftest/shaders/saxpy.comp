#version 450
// vkecho selftest, workload `upload`: y = a * x + y over 32-bit words (wrapping integer
// arithmetic: the output is exact on every device), grid-stride loop.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint a; uint n; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        y[i] = p.a * x[i] + y[i];
    }
}
