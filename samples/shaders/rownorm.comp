#version 450
// Per-row normalisation (layer norm without affine): out = (x - mean) / sqrt(var + eps).
// Feature-major layout: element (row r, feature d) is at d * rows + r.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint rows; uint dim; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += stride) {
        float mean = 0.0;
        for (uint d = 0; d < p.dim; ++d) mean += src[d * p.rows + r];
        mean /= float(p.dim);
        float var = 0.0;
        for (uint d = 0; d < p.dim; ++d) {
            float t = src[d * p.rows + r] - mean;
            var += t * t;
        }
        float inv = inversesqrt(var / float(p.dim) + 1e-5);
        for (uint d = 0; d < p.dim; ++d) dst[d * p.rows + r] = (src[d * p.rows + r] - mean) * inv;
    }
}
