#version 450
// echo-fuzzprog (issue 45): dst[i] = src[i] * 3 + k + i, for i < n.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform P { uint n; uint k; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    dst[i] = src[i] * 3u + p.k + i;
}
