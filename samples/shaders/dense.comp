#version 450
// Fully connected layer: out[r][m] = act(bias[m] + sum_k in[r][k] * w[k][m]).
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
        uint r = i / p.m;
        uint c = i % p.m;
        float acc = bias[c];
        for (uint j = 0; j < p.k; ++j) {
            acc += src[r * p.k + j] * w[j * p.m + c];
        }
        dst[i] = (p.relu != 0u) ? max(acc, 0.0) : acc;
    }
}
