#version 450
// y = a * x + y, with both buffers reached through buffer device addresses
// passed as push constants (no descriptors).
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Xs { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ys { float v[]; };
layout(push_constant) uniform P { Xs x; Ys y; float a; uint n; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        p.y.v[i] = p.a * p.x.v[i] + p.y.v[i];
    }
}
