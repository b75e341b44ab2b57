#version 450
// out = in * a + b, element-wise, grid-stride loop.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { float a; float b; uint n; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        dst[i] = src[i] * p.a + p.b;
    }
}
