#version 450
// Embedding bag: out[d][r] = mean over l of table[ids[l][r]][d].
// Activations are feature-major (index = feature * rows + row), so neighbouring invocations touch
// neighbouring addresses (coalesced on GPUs, vectorised on lavapipe).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 1) readonly buffer Table { float table[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform P { uint rows; uint len; uint dim; } p;

void main() {
    uint total = p.rows * p.dim;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += stride) {
        uint d = i / p.rows;
        uint r = i % p.rows;
        float acc = 0.0;
        for (uint l = 0; l < p.len; ++l) {
            acc += table[ids[l * p.rows + r] * p.dim + d];
        }
        o[i] = acc / float(p.len);
    }
}
