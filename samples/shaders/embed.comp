#version 450
// Embedding bag: out[r][d] = mean over l of table[ids[r][l]][d].
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 1) readonly buffer Table { float table[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform P { uint rows; uint len; uint dim; } p;

void main() {
    uint total = p.rows * p.dim;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += stride) {
        uint r = i / p.dim;
        uint d = i % p.dim;
        float acc = 0.0;
        for (uint l = 0; l < p.len; ++l) {
            acc += table[ids[r * p.len + l] * p.dim + d];
        }
        o[i] = acc / float(p.len);
    }
}
