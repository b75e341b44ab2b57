#version 450
// echo-fuzzprog (issue 45): dst[i] ^= u[i % 16].x + u[i % 16].w + k, for i < n (u: 256 bytes).
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) uniform U { uvec4 u[16]; };
layout(set = 0, binding = 1) buffer Dst { uint dst[]; };
layout(push_constant) uniform P { uint n; uint k; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    uvec4 v = u[i % 16u];
    dst[i] = dst[i] ^ (v.x + v.w + p.k);
}
