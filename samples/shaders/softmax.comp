#version 450
// Per-row softmax over `dim` logits.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint rows; uint dim; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += stride) {
        uint base = r * p.dim;
        float mx = src[base];
        for (uint d = 1; d < p.dim; ++d) mx = max(mx, src[base + d]);
        float sum = 0.0;
        for (uint d = 0; d < p.dim; ++d) sum += exp(src[base + d] - mx);
        for (uint d = 0; d < p.dim; ++d) dst[base + d] = exp(src[base + d] - mx) / sum;
    }
}
