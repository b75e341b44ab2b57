#version 450
// echo-fuzzprog (issue 45): dst[i] = src[i] * 7 + k through device addresses, i < n. The
// addresses come as uvec2 (GL_EXT_buffer_reference_uvec2): no Int64 (SwiftShader has none).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(push_constant) uniform P { uvec2 src; uvec2 dst; uint n; uint k; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    Words s = Words(p.src);
    Words d = Words(p.dst);
    d.w[i] = s.w[i] * 7u + p.k;
}
