#version 450
// echo-fuzzprog (issue 45): dst[i] = src[i] + k + 1 through texel buffers (R32_UINT), i < n.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) uniform usamplerBuffer src;
layout(set = 0, binding = 1, r32ui) uniform writeonly uimageBuffer dst;
layout(push_constant) uniform P { uint n; uint k; } p;
void main() {
    int i = int(gl_GlobalInvocationID.x);
    if (uint(i) >= p.n) return;
    imageStore(dst, i, uvec4(texelFetch(src, i).x + p.k + 1u));
}
