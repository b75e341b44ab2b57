#version 450
// Per-row softmax over `dim` logits. Feature-major layout: (row r, class c) is at c * rows + r.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint rows; uint dim; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += stride) {
        float mx = src[r];
        for (uint d = 1; d < p.dim; ++d) mx = max(mx, src[d * p.rows + r]);
        float sum = 0.0;
        for (uint d = 0; d < p.dim; ++d) sum += exp(src[d * p.rows + r] - mx);
        for (uint d = 0; d < p.dim; ++d) dst[d * p.rows + r] = exp(src[d * p.rows + r] - mx) / sum;
    }
}
