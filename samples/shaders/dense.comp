#version 450
// Fully connected layer: out[c][r] = act(bias[c] + sum_j in[j][r] * w[j][c]).
// Activations are feature-major (index = feature * rows + row); w is k x m row-major.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint rows; uint k; uint m; uint relu; } p;

void main() {
    uint total = p.rows * p.m;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += stride) {
        uint c = i / p.rows;
        uint r = i % p.rows;
        float acc = bias[c];
        for (uint j = 0; j < p.k; ++j) {
            acc += src[j * p.rows + r] * w[j * p.m + c];
        }
        dst[i] = (p.relu != 0u) ? max(acc, 0.0) : acc;
    }
}
